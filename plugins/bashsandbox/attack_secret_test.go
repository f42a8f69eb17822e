package bashsandbox_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// writeReplacing replaces path with text by a rename, as dsh writes its token.
func writeReplacing(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// The bearer token of `dsh serve --http` ($DSH_HOME/serve-token), and any file given to
// MaskFile, reads as an empty read-only file inside the sandbox, while the rest of
// $DSH_HOME stays readable: from the first command, after the host replaces the file
// (a rename detaches a mount in other namespaces), and for a file that appears once
// the sandbox runs — in the workspace too, where it cannot be moved away.
func TestConfinedServeTokenMasked(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, _ *container.Session, ws string) {
		home := outsideTempDir(t, "dsh-sandbox-home-")
		token := filepath.Join(home, "serve-token")
		writeReplacing(t, token, "secret\n")
		if err := os.WriteFile(filepath.Join(home, "notes"), []byte("visible\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mode := st.defaultMode()
		if err := st.rt.Compose("token", stackRows(stackSetup{bashConfig: map[string]any{"defaultMode": mode}}, st.root, home)); err != nil {
			t.Fatal(err)
		}
		st.lookup(t)
		s := session("token-"+mode, ws)
		read := `cat "$DSH_HOME/notes"; wc -c < "$DSH_HOME/serve-token"`
		expect(t, st.bash(t, s, read), "visible\n0\n", false)
		if got := attackLine(t, st, s, "write", token); got != "read-only file system" && got != "permission denied" {
			t.Errorf("writing the token: %q", got)
		}
		writeReplacing(t, token, "secret-2\n")
		expect(t, st.bash(t, s, read), "visible\n0\n", false)

		later := filepath.Join(outsideTempDir(t, "dsh-sandbox-tokens-"), "tokens")
		inWorkspace := filepath.Join(ws, "tokens")
		bashsandbox.MaskFile(later)
		bashsandbox.MaskFile(inWorkspace)
		expect(t, st.bash(t, s, "cat "+later+" "+inWorkspace+" 2>&1 | wc -l"), "2\n", false) // neither exists yet
		for _, p := range []string{later, inWorkspace} {
			writeReplacing(t, p, "token-a\ntoken-b\n")
		}
		expect(t, st.bash(t, s, "cat "+later+" "+inWorkspace+" | wc -c"), "0\n", false)
		for _, a := range [][]string{{"rename", inWorkspace, inWorkspace + ".moved"}, {"unlink", inWorkspace}} {
			switch got := attackLine(t, st, s, a[0], a[1:]...); got {
			case "device or resource busy", "permission denied":
			default:
				t.Errorf("%s %q: %q", a[0], a[1:], got)
			}
		}
		if b, err := os.ReadFile(inWorkspace); err != nil || string(b) != "token-a\ntoken-b\n" {
			t.Fatalf("the token file in the workspace: %q, %v", b, err)
		}
	})
}
