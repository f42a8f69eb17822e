package launch

import (
	"os"
	"runtime"
)

// init dispatches the hidden modes as early as the binary's initialisation allows (see
// the package documentation). Main, called by bashsandbox.MaybeRunLauncher at the top
// of main, does the same, for the record.
func init() { Main() }

// Main runs the box or the launcher's failure mode when this process was started
// as one (os.Args[1] is BoxArg or FailArg) and never returns in that case.
// Otherwise it returns immediately.
func Main() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case BoxArg:
		// The main goroutine keeps the main thread: confined commands are started from
		// threads of their own, which die with them, never from this one.
		runtime.LockOSThread()
		err := RunBox(3)
		if err == nil {
			os.Exit(0)
		}
		fail(err.Error())
	case FailArg:
		msg := "the sandbox runner failed"
		if len(os.Args) > 2 {
			msg = os.Args[2]
		}
		fail(msg)
	}
}

// fail writes the one launcher-failure line and exits 125.
func fail(msg string) {
	os.Stderr.WriteString(LauncherFailurePrefix + oneLine(msg) + "\n")
	os.Exit(LauncherFailureExitCode)
}

// oneLine folds a message onto one line so the launcher-failure contract (exactly one
// stderr line) holds whatever the error text: runs of whitespace become one space.
func oneLine(s string) string {
	out := make([]byte, 0, len(s))
	space := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r':
			space = len(out) > 0
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, s[i])
	}
	return string(out)
}
