package bashsandbox_test

// Attacks on what the sandbox shares with the host beyond files and sockets: the host's
// device nodes bound into its /dev, the kernel's keyrings, and dsh's own
// directories (spill files, session directories) where a writable root would show them.

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/container"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/shell"
)

// The sandbox's /dev/null, /dev/zero… are the host's own device nodes, bound in: a
// command (root's too, which owns them) reads and writes them, but cannot chmod, chown
// or touch them — a `chmod 000 /dev/null` would break every program on the host.
func TestConfinedHostDevicesReadOnly(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		for _, dev := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"} {
			if _, err := os.Stat(dev); err != nil {
				continue // the sandbox has none either
			}
			for _, op := range []string{"chmod", "chown", "utimes"} {
				if got := attackLine(t, st, s, op, dev); got != "read-only file system" {
					t.Errorf("%s %s: %q", op, dev, got)
				}
			}
		}
		expect(t, st.bash(t, s, "echo x > /dev/null && head -c 3 /dev/zero | wc -c && head -c 3 /dev/urandom | wc -c"), "3\n3\n", false)
	})
}

// Kernel keyrings are not namespaced: a command inherits the harness's session keyring
// (where a login keeps Kerberos tickets and other secrets) and, without a user
// namespace, reaches the user's own keyring. The command filter makes every keyring
// call fail as on a kernel without keys, so a secret there is neither read nor changed.
func TestConfinedNoKeyring(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		// This goroutine's thread joins a session keyring of its own, holding a secret,
		// and starts the box (the session's first call forks it from here),
		// which inherits the keyring as it would dsh's. The thread is never unlocked: it
		// ends with this test.
		runtime.LockOSThread()
		if _, err := unix.KeyctlJoinSessionKeyring("dsh-sandbox-test"); err != nil {
			t.Skipf("no session keyring: %v", err)
		}
		secret := "dsh-sandbox-secret-" + strconv.Itoa(os.Getpid())
		if _, err := unix.AddKey("user", secret, []byte("s3cret"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
			t.Skipf("no key: %v", err)
		}
		for _, tc := range []struct{ op, arg string }{{"keyring", secret}, {"add-key", secret + "-planted"}} {
			if got := attackLine(t, st, s, tc.op, tc.arg); got != "function not implemented" {
				t.Errorf("%s %s: %q", tc.op, tc.arg, got)
			}
		}
		if _, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", secret+"-planted", 0); err == nil {
			t.Fatal("a key was planted in the harness's session keyring")
		}
	})
}

// The spill root inside the workspace (a configured spillRoot, or TMPDIR there) is
// masked, and its ancestors cannot be moved: otherwise a command could move them away,
// put a symlink to /etc where the spill root was, and dsh — which trusts the
// spill root's path — would create the next spill file in /etc, with the command's
// output in it.
func TestConfinedSpillRootInWorkspace(t *testing.T) {
	for _, mode := range confinedModes {
		t.Run(mode, func(t *testing.T) {
			ws := workspace(t)
			spill := filepath.Join(ws, "a", "spill")
			if err := os.MkdirAll(spill, 0o755); err != nil {
				t.Fatal(err)
			}
			st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": mode, "maxOutputBytes": 1000}, subprocess: map[string]any{"spillRoot": spill}})
			s := session("spill-root-"+mode, ws)
			target := outsideTempDir(t, "dsh-sandbox-redirect-")
			res := st.bash(t, s, "ls -A a/spill; mv a a-moved && mkdir -p a && ln -s "+target+" a/spill && echo redirected")
			why := "Device or resource busy" // a mount point, though the workspace is writable
			if mode == shell.ModeReadOnly {
				why = "Permission denied"
			}
			// The spill root shows the session's own spill directory, nothing else.
			own, rest, _ := strings.Cut(res.Text, "\n")
			if !strings.HasPrefix(own, "dsh-spill-") || !strings.HasPrefix(rest, "[stderr]\nmv: cannot move 'a' to 'a-moved': "+why+"\n") {
				t.Fatalf("moving the spill root's parent: %q", res.Text)
			}
			res = st.bash(t, s, "head -c 3000 /dev/zero | tr '\\0' x")
			path := res.Value.(toolbash.ForegroundValue).Stdout.SpillPath
			if !strings.HasPrefix(path, spill+"/"+own+"/") || !exists(path) {
				t.Fatalf("spill file %q (%q)", path, res.Text)
			}
			expect(t, st.bash(t, s, "wc -c < "+path), "3000\n", false)
			if entries, _ := os.ReadDir(target); len(entries) != 0 {
				t.Fatalf("the server wrote through the planted symlink: %v", entries)
			}
			if got := attackLine(t, st, session("spill-other-"+mode, ws), "read", path); got != "no such file or directory" {
				t.Fatalf("another session reads the spill file: %q", got)
			}
		})
	}
}

// A writable root that would show dsh's directories and cannot have them masked
// is refused before anything runs: a workspace that is (or holds) the spill root — the
// host's /tmp, for one, where the spill files and the session directories live by
// default — and a spill root inside the workspace that does not exist or is reached
// through a symlink (a command could plant it).
func TestConfinedExposingConfigRefused(t *testing.T) {
	ws := workspace(t)
	real := filepath.Join(ws, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	const tail = "; refusing to run confined commands (keep it out of the workspace and writableRoots, or move it: subprocess spillRoot, TMPDIR)"
	// A workspace under /tmp does not show the spill root or the session directories
	// (the private /tmp covers them when they are in /tmp): it runs.
	inTmp, err := os.MkdirTemp("/tmp", "dsh-sandbox-in-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(inTmp) })
	expect(t, newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": shell.ModeWorkspaceWrite}}).bash(t, session("in-tmp", inTmp), "touch ran && echo ran"), "ran\n", false)
	for _, tc := range []struct {
		name, spillRoot, want string
	}{
		{"workspace is the spill root", ws, `the spill root "` + ws + `" holds the writable root "` + ws + `", so it cannot be hidden from confined commands`},
		{"missing", filepath.Join(ws, "missing"), `the spill root "` + ws + `/missing" lies in the writable root "` + ws + `" and does not exist, so a confined command could create it`},
		{"symlink", filepath.Join(ws, "link"), `the spill root "` + ws + `/link" lies in the writable root "` + ws + `" and is reached through a symbolic link, which a confined command could change`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range confinedModes {
				st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": mode}, subprocess: map[string]any{"spillRoot": tc.spillRoot}})
				marker := filepath.Join(ws, "ran-"+mode)
				expect(t, st.bash(t, session("exposed-"+mode, ws), "touch "+marker), "Error: bash-sandbox: "+tc.want+tail, true)
				if exists(marker) {
					t.Fatal("the command ran")
				}
			}
		})
	}
}

// The session directories (every session's private temp dir, of this dsh and of any
// other) live under the host's temp dir: the private /tmp covers it when it is /tmp, an
// empty tmpfs when it is elsewhere (the unprivileged run's TMPDIR), so one session cannot
// read or change another's temp files; a workspace that would show the temp dir (is or
// holds it) is refused, even with the spill root elsewhere.
func TestConfinedSessionDirsMasked(t *testing.T) {
	for _, mode := range confinedModes {
		t.Run(mode, func(t *testing.T) {
			st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": mode},
				subprocess: map[string]any{"spillRoot": outsideTempDir(t, "dsh-sandbox-spill-")}})
			// Another session, and a file in its private temp dir.
			expect(t, st.bash(t, session("dirs-other-"+mode, workspace(t)), "echo $TMPDIR"), "/tmp\n", false)
			tmp, err := filepath.EvalSymlinks(os.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			bases, _ := filepath.Glob(filepath.Join(tmp, "dsh-sandbox-"+strconv.Itoa(os.Getpid())+"-*"))
			if len(bases) != 1 {
				t.Fatalf("session directories' base: %q", bases)
			}
			dirs, _ := filepath.Glob(filepath.Join(bases[0], "s*", "tmp"))
			if len(dirs) == 0 {
				t.Fatal("no session directory on the host")
			}
			file := filepath.Join(dirs[0], "mine")
			if err := os.WriteFile(file, []byte("private\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s := session("dirs-"+mode, workspace(t))
			expect(t, st.bash(t, s, "cat "+file), "[stderr]\ncat: "+file+": No such file or directory\n[exit code: 1]", false)
			expect(t, st.bash(t, session("dirs-tmp-"+mode, tmp), "cat "+file),
				`Error: bash-sandbox: the temp dir "`+tmp+`" holds the writable root "`+tmp+`", so it cannot be hidden from confined commands; refusing to run confined commands (keep it out of the workspace and writableRoots, or move it: subprocess spillRoot, TMPDIR)`, true)
		})
	}
}

// A profile file reached through a symlinked directory inside the workspace cannot be
// kept in place (a command could point the link elsewhere, and the next reload would
// read what it points to): confined calls are refused, naming the link, and nothing
// runs.
func TestConfinedProfileThroughSymlinkRefused(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, _ *container.Session, ws string) {
		real := filepath.Join(ws, "real")
		if err := os.Mkdir(real, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(real, "profile.yaml"), []byte("plugins: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(ws, "link")
		if err := os.Symlink("real", link); err != nil {
			t.Fatal(err)
		}
		mode := st.defaultMode()
		profile := filepath.Join(link, "profile.yaml")
		if err := st.rt.ComposeFiles("linked", []string{profile},
			stackRows(stackSetup{bashConfig: map[string]any{"defaultMode": mode}}, st.root, st.home)); err != nil {
			t.Fatal(err)
		}
		st.lookup(t)
		marker := filepath.Join(ws, "ran")
		expect(t, st.bash(t, session("linked-"+mode, ws), "touch "+marker),
			`Error: bash-sandbox: cannot protect "`+profile+`" inside the writable root "`+ws+`": it is reached through the symbolic link "`+link+`"`, true)
		if exists(marker) {
			t.Fatal("the command ran")
		}
	})
}
