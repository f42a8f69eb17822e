package bashsandbox_test

// Spill files under the sandbox: a session's commands read its own (the bash tool tells
// the model to), read-only, at the very path a result names; nobody else's — another
// session's, another dsh's — is there at all, and nothing a command does makes the
// dsh write elsewhere.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/shell"
)

// fullOutput finds the spill path a result names.
var fullOutput = regexp.MustCompile(`full output: ([^\]\n]+)\]`)

// seqText is the output of `seq 1 n`.
func seqText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	return b.String()
}

// spillSetup keeps 1000 bytes of a stream in memory: longer output spills.
var spillSetup = stackSetup{bashConfig: map[string]any{"maxOutputBytes": 1000}}

// A session's own spill files — of a foreground call and of a background job, the first
// one made after the session's sandbox started — are readable at the path the result
// names, whole; they, their directory and the spill directory cannot be written,
// removed, renamed or replaced, and dsh goes on spilling where it did.
func TestConfinedOwnSpillFilesReadOnly(t *testing.T) {
	forConfinedModes(t, spillSetup, func(t *testing.T, st *stack, s *container.Session, ws string) {
		expect(t, st.bash(t, s, "true"), "(no output)", false) // the sandbox starts: no spill yet
		res := st.bash(t, s, "seq 1 3000")
		spill := res.Value.(toolbash.ForegroundValue).Stdout.SpillPath
		if spill == "" || !strings.HasSuffix(res.Text, "\n[output truncated; full output: "+spill+"]") {
			t.Fatalf("no spill file: %q", res.Text)
		}
		expect(t, st.bash(t, s, "seq 1 3000 | cmp - "+spill+" && wc -l < "+spill), "3000\n", false)

		res = st.bash(t, s, "seq 1 4000", "run_in_background", true)
		id := strings.TrimPrefix(res.Text, "started background job ")
		out := st.call(t, s, "job_output", `{"job_id":"`+id+`","wait":true,"timeout_ms":20000}`).Text
		m := fullOutput.FindStringSubmatch(out)
		if m == nil || filepath.Dir(m[1]) != filepath.Dir(spill) {
			t.Fatalf("the job's spill file %q (%q)", m, out[max(0, len(out)-200):])
		}
		jobSpill := m[1]
		expect(t, st.bash(t, s, "seq 1 4000 | cmp - "+jobSpill+" && echo same"), "same\n", false)

		dir := filepath.Dir(spill)
		spillDir := filepath.Dir(dir)
		for _, a := range [][]string{
			{"write", spill}, {"unlink", spill}, {"rename", spill, spill + ".moved"}, {"chmod", spill}, {"utimes", spill},
			{"write", dir + "/planted"}, {"rmdir", dir}, {"rename", dir, dir + ".moved"},
			{"write", spillDir + "/planted"}, {"rmdir", spillDir}, {"rename", spillDir, spillDir + ".moved"},
		} {
			switch got := attackLine(t, st, s, a[0], a[1:]...); got {
			case "read-only file system", "permission denied", "device or resource busy":
			default:
				t.Errorf("%s %q: %q", a[0], a[1:], got)
			}
		}
		// Replacing what dsh writes through, with a shell's tools.
		st.bash(t, s, "rm -rf "+spillDir+"; mv "+spillDir+" "+spillDir+".old; ln -s /etc "+spillDir)
		for path, want := range map[string]string{spill: seqText(3000), jobSpill: seqText(4000)} {
			if b, err := os.ReadFile(path); err != nil || string(b) != want {
				t.Fatalf("%s after the attacks: %d bytes, %v", path, len(b), err)
			}
		}
		if fi, err := os.Lstat(spillDir); err != nil || !fi.IsDir() {
			t.Fatalf("the spill directory on the host: %v", err)
		}
		next := st.bash(t, s, "seq 1 2000").Value.(toolbash.ForegroundValue).Stdout.SpillPath
		if filepath.Dir(next) != dir {
			t.Fatalf("the next spill file %q is not in %q", next, dir)
		}
		expect(t, st.bash(t, s, "seq 1 2000 | cmp - "+next+" && echo same"), "same\n", false)
	})
}

// Another session's spill files, and another dsh's, are not there at all: neither the
// files nor their directories; a session sees in the spill directory nothing but its
// own directory. The spill directory cannot be replaced either (dsh would
// follow it).
func TestConfinedSpillFilesMasked(t *testing.T) {
	forConfinedModes(t, spillSetup, func(t *testing.T, st *stack, s *container.Session, ws string) {
		res := st.bash(t, s, "head -c 5000 /dev/zero | tr '\\0' x")
		spill := res.Value.(toolbash.ForegroundValue).Stdout.SpillPath
		if spill == "" || !exists(spill) {
			t.Fatalf("no spill file: %q", res.Text)
		}
		mode := st.defaultMode()
		other := session("spill-other-"+mode, ws)
		for _, path := range []string{spill, filepath.Dir(spill)} {
			if got := attackLine(t, st, other, "read", path); got != "no such file or directory" {
				t.Errorf("read %s from another session: %q", path, got)
			}
		}
		spillDir := filepath.Dir(filepath.Dir(spill))
		expect(t, st.bash(t, other, "ls -A "+spillDir), "s-spill-other-"+mode+"\n", false)

		// Another dsh: its own Supervisor and spill directory.
		elsewhere := newStack(t, stackSetup{bashConfig: map[string]any{"maxOutputBytes": 1000, "defaultMode": mode}})
		theirs := elsewhere.bash(t, session("spill-elsewhere", ws), "seq 1 3000").Value.(toolbash.ForegroundValue).Stdout.SpillPath
		if theirs == "" || filepath.Dir(filepath.Dir(theirs)) == spillDir {
			t.Fatalf("the other dsh's spill file %q", theirs)
		}
		for _, path := range []string{theirs, filepath.Dir(theirs), filepath.Dir(filepath.Dir(theirs))} {
			if got := attackLine(t, st, s, "read", path); got != "no such file or directory" {
				t.Errorf("read %s of another dsh: %q", path, got)
			}
		}

		res = st.bash(t, s, "rm -rf "+spillDir+" && ln -s /etc "+spillDir+" && echo replaced")
		if fi, err := os.Lstat(spillDir); err != nil || !fi.IsDir() || strings.Contains(res.Text, "replaced") {
			t.Fatalf("the spill directory was replaced: %v (%q)", err, res.Text)
		}
		if b, err := os.ReadFile(spill); err != nil || len(b) != 5000 {
			t.Fatalf("the spill file: %d bytes, %v", len(b), err)
		}
	})
}

// A spill root inside a protected path inside the workspace (.dsh here): masking the
// spill root pins its ancestors, the protected path among them, over themselves; the
// protected path is still made read-only.
func TestConfinedProtectedPathHoldingTheSpillRoot(t *testing.T) {
	for _, mode := range confinedModes {
		t.Run(mode, func(t *testing.T) {
			ws := workspace(t)
			spill := filepath.Join(ws, ".dsh", "spill")
			if err := os.MkdirAll(spill, 0o755); err != nil {
				t.Fatal(err)
			}
			st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": mode, "maxOutputBytes": 1000}, subprocess: map[string]any{"spillRoot": spill}})
			s := session("protected-spill-"+mode, ws)
			planted := filepath.Join(ws, ".dsh", "planted")
			res := st.bash(t, s, "echo x > "+planted)
			if !strings.Contains(res.Text, deniedMarker(mode)) {
				t.Errorf("writing into .dsh: %q", res.Text)
			}
			if exists(planted) {
				t.Fatal("a file was planted in the protected .dsh")
			}
			// The session's own spill files show through, read-only.
			path := st.bash(t, s, "seq 1 3000").Value.(toolbash.ForegroundValue).Stdout.SpillPath
			if !strings.HasPrefix(path, spill+"/dsh-spill-") {
				t.Fatalf("spill path %q", path)
			}
			expect(t, st.bash(t, s, "wc -l < "+path), "3000\n", false)
			if mode == shell.ModeWorkspaceWrite {
				expect(t, st.bash(t, s, "echo ok > other && cat other"), "ok\n", false)
			}
		})
	}
}
