package bashsandbox

import (
	"strings"

	"github.com/dsh-dev/dsh/shell"
)

// denialPhrases are the strerror texts of the errors a confined command sees when the
// sandbox refuses: EACCES (Landlock file and network denials, the socket filter), EROFS (the read-only mounts),
// and EPERM (signals to processes outside the sandbox).
var denialPhrases = []string{"Permission denied", "Read-only file system", "Operation not permitted"}

// Verdict is how a confined command's ending reads.
type Verdict struct {
	// Denied: the command failed because the sandbox refused an operation.
	Denied bool
	// LauncherFailed: the launcher itself failed (the seam reports it as RunnerFailed,
	// "the sandbox runner itself failed"); the command never ran.
	LauncherFailed bool
}

// Classify reads how a command run in the sandbox ended:
//   - a signal death (exitCode nil) is neither a denial nor a launcher failure;
//   - exit 125 with stderr consisting of exactly one "dsh-sandbox: …" line is a
//     launcher failure, never a denial (whatever the line says);
//   - any other nonzero exit with "Permission denied", "Read-only file system" or
//     "Operation not permitted" on stderr is a denial.
//
// stderr is the captured (tail of the) stream.
func Classify(exitCode *int, stderr string) Verdict {
	return classify(exitCode, stderr, true)
}

func classify(exitCode *int, stderr string, launcherFailed bool) Verdict {
	if exitCode == nil || *exitCode == 0 {
		return Verdict{}
	}
	if launcherFailed && *exitCode == LauncherFailureExitCode && isLauncherFailureLine(stderr) {
		return Verdict{LauncherFailed: true}
	}
	for _, p := range denialPhrases {
		if strings.Contains(stderr, p) {
			return Verdict{Denied: true}
		}
	}
	return Verdict{}
}

// isLauncherFailureLine: a failed launcher writes one line and exits before anything
// else can write to stderr, so a launcher failure's stderr is exactly that line.
func isLauncherFailureLine(stderr string) bool {
	line, ok := strings.CutSuffix(stderr, "\n")
	return ok && strings.HasPrefix(line, LauncherFailurePrefix) && !strings.Contains(line, "\n")
}

// sandboxFacts are the sandbox facts of a finished run under mode with the given
// enforcement (Enforcement of its launch policy): danger-full-access reports
// {mode, denied: false} only; the confined modes add the Classify verdict and the
// enforcement. launchFailed says whether the launcher's failure mode ran in place of the
// command: only then can the run be a launcher failure — a command that writes the
// failure line and exits 125 ran, and must not be reported as not having run.
func sandboxFacts(mode, enforcement string, r shell.RunResult, launchFailed bool) *shell.SandboxFacts {
	if mode == shell.ModeDangerFullAccess {
		return &shell.SandboxFacts{Mode: mode}
	}
	// The failure line never overflows a stream: a truncated stream came from the
	// command, so it cannot be a launcher failure.
	v := classify(r.ExitCode, r.Stderr.Text, launchFailed && !r.Stderr.Truncated)
	return &shell.SandboxFacts{Mode: mode, Denied: v.Denied, RunnerFailed: v.LauncherFailed, Enforcement: enforcement}
}

// errorStream is r as Classify reads it: under a terminal the command's stderr is the
// terminal, so what it wrote there is in the one stream (Stdout) and is read as stderr.
func errorStream(r shell.RunResult, terminal bool) shell.RunResult {
	if terminal {
		r.Stderr = r.Stdout
	}
	return r
}
