package bashsandbox_test

import (
	"strings"
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// FuzzClassify checks the classifier's invariants on arbitrary stderr: a signal death
// or a success is never a denial or a launcher failure, the two verdicts exclude each
// other, a launcher failure needs exit 125 and exactly one dsh-sandbox line, and a denial
// needs one of the three phrases.
func FuzzClassify(f *testing.F) {
	f.Add(1, false, "touch: cannot touch 'x': Permission denied\n")
	f.Add(125, false, "dsh-sandbox: exec bash: Permission denied\n")
	f.Add(125, false, "dsh-sandbox: a\nb\n")
	f.Add(0, true, "Read-only file system")
	f.Add(2, false, "kill: Operation not permitted")
	f.Fuzz(func(t *testing.T, exit int, signalled bool, stderr string) {
		var code *int
		if !signalled {
			code = &exit
		}
		v := bashsandbox.Classify(code, stderr)
		if v.Denied && v.LauncherFailed {
			t.Fatalf("both verdicts: %+v", v)
		}
		if (signalled || exit == 0) && v != (bashsandbox.Verdict{}) {
			t.Fatalf("signal death or success classified %+v", v)
		}
		if v.LauncherFailed && (exit != 125 || !strings.HasPrefix(stderr, "dsh-sandbox: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n")) {
			t.Fatalf("launcher failure without the launcher's exit and line: %d %q", exit, stderr)
		}
		if v.Denied && !strings.Contains(stderr, "Permission denied") && !strings.Contains(stderr, "Read-only file system") && !strings.Contains(stderr, "Operation not permitted") {
			t.Fatalf("denial without a denial phrase: %q", stderr)
		}
	})
}
