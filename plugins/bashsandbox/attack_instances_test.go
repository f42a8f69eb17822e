package bashsandbox_test

// Another dsh of the same user, with a TMPDIR (and so a spill root) of its own: a
// confined command of this one cannot read its session temp dirs or spill files —
// whichever box started first, and also from a command already running when the
// other dsh starts with a temp dir one that ran before used (docs/sandbox.md, "dsh never
// writes for a confined command").

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
)

// otherDshEnv turns this test binary into another dsh (TestHelperOtherDsh).
const otherDshEnv = "DSH_SANDBOX_OTHER_DSH"

// TestHelperOtherDsh is not a test: run by startOtherDsh as a process of its own, it is
// another dsh with the temp dir it was given. It runs a workspace-write session that
// writes a file into its private /tmp and spills a long output, prints both host paths
// on a line of their own ("paths <temp file> <spill file>"), and keeps them until its
// stdin closes.
func TestHelperOtherDsh(t *testing.T) {
	if os.Getenv(otherDshEnv) == "" {
		t.Skip("only run as another dsh by the tests that need one")
	}
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": "workspace-write"}})
	s := session("other-dsh", workspace(t))
	expect(t, st.bash(t, s, "echo other secret > /tmp/other-secret"), "(no output)", false)
	temp := privateTempFile(t, "other-secret")
	spill := st.bash(t, s, "seq 1 30000").Value.(toolbash.ForegroundValue).Stdout.SpillPath
	if temp == "" || spill == "" {
		t.Fatalf("the private temp file %q, the spill file %q", temp, spill)
	}
	os.Stdout.WriteString("paths " + temp + " " + spill + "\n")
	io.Copy(io.Discard, os.Stdin)
}

// privateTempFile is the host path of the file name in the private /tmp of a box of
// this process: in the sandbox directory when /tmp is a directory of the host's, else
// through /proc of the box's process (its /tmp is a tmpfs of its own).
func privateTempFile(t *testing.T, name string) string {
	t.Helper()
	if dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "dsh-sandbox-"+strconv.Itoa(os.Getpid())+"-*", "s*", "tmp", name)); len(dirs) == 1 {
		return dirs[0]
	}
	roots, _ := filepath.Glob("/proc/[0-9]*/root/tmp/" + name)
	for _, p := range roots {
		if b, err := os.ReadFile(p); err == nil && string(b) == "other secret\n" {
			return p
		}
	}
	return ""
}

// startOtherDsh starts another dsh (TestHelperOtherDsh) whose temp dir is tmp and
// returns the paths of its private temp file and its spill file; it ends with the test.
func startOtherDsh(t *testing.T, tmp string) (temp, spill string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperOtherDsh$", "-test.count=1")
	cmd.Env = append(os.Environ(), otherDshEnv+"=1", "TMPDIR="+tmp)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) == 3 && f[0] == "paths" {
			go io.Copy(io.Discard, stdout)
			return f[1], f[2]
		}
	}
	t.Fatal("the other dsh printed no paths")
	return "", ""
}

func TestConfinedOtherDshHidden(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		expect(t, st.bash(t, s, "true"), "(no output)", false) // this session's box is up first
		tmp := outsideTempDir(t, "dsh-sandbox-other-")
		// A command of this session that runs when the next dsh starts, with the same
		// temp dir: it reads what the test names in the workspace's file "target".
		target := filepath.Join(ws, "target")
		job := st.bash(t, s, "while [ ! -s "+target+" ]; do sleep 0.05; done; "+helper(t)+` read "$(cat `+target+`)"`, "run_in_background", true)
		jobID := strings.TrimPrefix(job.Text, "started background job ")

		temp, spill := startOtherDsh(t, tmp)
		for _, p := range []string{temp, spill} {
			if _, err := os.ReadFile(p); err != nil {
				t.Fatalf("the other dsh's file: %v", err)
			}
			if got := attackLine(t, st, s, "read", p); got != "no such file or directory" {
				t.Errorf("reading %s: %q", p, got)
			}
		}
		expect(t, st.bash(t, s, "ls -A "+tmp+" | wc -l"), "0\n", false)
		// Started before this session's box: the same.
		before := session(s.ID+"-later", ws)
		for _, p := range []string{temp, spill} {
			if got := attackLine(t, st, before, "read", p); got != "no such file or directory" {
				t.Errorf("a new box reading %s: %q", p, got)
			}
		}
		// A third dsh with that temp dir, started while the job runs.
		temp3, _ := startOtherDsh(t, tmp)
		if err := os.WriteFile(target, []byte(temp3), 0o644); err != nil {
			t.Fatal(err)
		}
		out := st.call(t, s, "job_output", `{"job_id":"`+jobID+`","wait":true,"timeout_ms":20000}`).Text
		if out != "no such file or directory\n[status: completed, exit code: 0]" {
			t.Fatalf("the running job reading %s: %q", temp3, out)
		}
	})
}

// The registry of dsh processes: a record whose process holds its lock is read; one
// nobody holds (its process died) is removed; a half-written last line is not read.
func TestInstanceRegistry(t *testing.T) {
	// A registry of its own: the host's is swept by every dsh that starts meanwhile
	// (other packages' tests), which removes a record whose lock is not held yet.
	dir := filepath.Join(t.TempDir(), "registry")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	defer bashsandbox.SetInstancesDir(dir)()
	live, dead := filepath.Join(dir, "1-test-live-"+strconv.Itoa(os.Getpid())), filepath.Join(dir, "1-test-dead-"+strconv.Itoa(os.Getpid()))
	for _, p := range []string{live, dead} {
		if err := os.WriteFile(p, []byte(p+"-dir\n"+p+"-partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
	}
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	got := bashsandbox.OtherInstanceDirs()
	if !slices.Contains(got, live+"-dir") || slices.Contains(got, live+"-partial") || slices.Contains(got, dead+"-dir") {
		t.Fatalf("recorded directories: %q", got)
	}
	if exists(dead) || !exists(live) {
		t.Fatalf("the dead record is left (%v) or the live one removed (%v)", exists(dead), !exists(live))
	}
}

// A registry that is not a private directory of the user (another user made it first,
// or it is open to others) is not used: the status and each call's enforcement say
// what is then missing.
func TestInstanceRegistryNotPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registry")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer bashsandbox.SetInstancesDir(dir)()
	st := newStack(t, stackSetup{})
	if detail := bashDetail(t, st); !strings.Contains(detail, "enforcement partial; missing: "+bashsandbox.MissingInstanceRegistry) {
		t.Fatalf("status detail: %q", detail)
	}
	s := session("registry", workspace(t))
	if got := sandboxOf(t, st.bash(t, s, "true")); got != sandboxJSON("read-only", false, "partial", false) {
		t.Fatalf("sandbox value %s", got)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := sandboxOf(t, st.bash(t, s, "true")); got != sandboxJSON("read-only", false, enforcement("deny"), false) {
		t.Fatalf("sandbox value with a private registry %s", got)
	}
}

// A registry of dsh processes inside a writable root is masked: a command can neither
// read it nor plant or remove records (which would change what other dsh processes
// mask).
func TestConfinedRegistryMasked(t *testing.T) {
	for _, mode := range confinedModes {
		t.Run(mode, func(t *testing.T) {
			ws := workspace(t)
			dir := filepath.Join(ws, "registry")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			defer bashsandbox.SetInstancesDir(dir)()
			st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": mode}})
			s := session("registry-"+mode, ws)
			records, _ := os.ReadDir(dir)
			if len(records) == 0 {
				t.Fatal("this process recorded nothing")
			}
			expect(t, st.bash(t, s, "ls -A "+dir+" | wc -l"), "0\n", false)
			for _, a := range []string{"touch " + dir + "/1-planted", "rm -rf " + dir, "mv " + dir + " " + ws + "/moved"} {
				if res := st.bash(t, s, a); !strings.Contains(res.Text, "[exit code: ") {
					t.Errorf("%s: %q", a, res.Text)
				}
			}
			if now, _ := os.ReadDir(dir); len(now) != len(records) {
				t.Fatalf("the registry holds %d records, had %d", len(now), len(records))
			}
		})
	}
}
