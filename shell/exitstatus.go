package shell

import (
	"strconv"
	"strings"
)

// ExitCodeMarker is the line that marks a nonzero exit: "[exit code: N]".
func ExitCodeMarker(code int) string { return "[exit code: " + strconv.Itoa(code) + "]" }

// SignalMarker is the line that marks a signal death: "[killed by signal: SIGTERM]".
func SignalMarker(signal string) string { return "[killed by signal: " + signal + "]" }

// ParseExitStatus splits rendered result text into its body and exit status. If text
// ends with "\n[killed by signal: X]" the signal is X and exitCode is nil; else if it
// ends with "\n[exit code: N]" the code is N; else the code is 0 and body is the whole
// text. The marker needs its leading newline; the body excludes it.
func ParseExitStatus(text string) (body string, exitCode *int, signal string) {
	if !strings.HasSuffix(text, "]") {
		return text, intPtr(0), ""
	}
	i := strings.LastIndex(text, "\n[")
	if i < 0 {
		return text, intPtr(0), ""
	}
	marker := text[i+2 : len(text)-1]
	if sig, ok := strings.CutPrefix(marker, "killed by signal: "); ok && validSignal(sig) {
		return text[:i], nil, sig
	}
	if n, ok := strings.CutPrefix(marker, "exit code: "); ok {
		if code, err := strconv.Atoi(n); err == nil && n == strconv.Itoa(code) {
			return text[:i], &code, ""
		}
	}
	return text, intPtr(0), ""
}

func validSignal(s string) bool {
	return s != "" && !strings.ContainsAny(s, "[]\n")
}

func intPtr(n int) *int { return &n }
