package toolbash

import (
	"strings"

	"github.com/dsh-dev/dsh/shell"
)

// ttyReader renders a terminal's output read piece by piece (a job's consuming reads):
// each read returns the lines finished since the previous one and the unfinished line
// as it stands — except what a previous read already returned of that line. A prompt
// shown as "Name: " and then answered reads "Ada\n…" next, not "Name: Ada\n…"; a line
// rewritten meanwhile (a "\r" progress bar) is returned whole in its new version. It is
// used under the job's read lock.
type ttyReader struct {
	screen terminalText
	shown  string // the unfinished line as the previous read returned it
}

// render renders one consuming read (final: the command has finished, so the read holds
// the rest), with the lossy notice when output was dropped. A nil reader renders the
// read as it is (no terminal).
func (r *ttyReader) render(read shell.ProcessRead, final bool) string {
	if r == nil {
		return renderRead(read)
	}
	read.Delta = r.read(read.Delta, final)
	return renderRead(read)
}

// read feeds delta and returns what is new of the text.
func (r *ttyReader) read(delta string, final bool) string {
	done := r.screen.Feed([]byte(delta))
	line := r.screen.Line()
	if final {
		line = r.screen.End()
	}
	text := done + line
	if r.shown != "" {
		shown := r.shown
		if !strings.HasPrefix(text, shown) {
			shown = strings.TrimRight(shown, " ") // a finished line has lost its trailing spaces
		}
		if strings.HasPrefix(text, shown) {
			text = text[len(shown):]
		}
	}
	r.shown = line
	if final {
		r.shown = ""
	}
	return text
}

// lastLineBytes is how much of the output's end a progress report looks at for its
// last line.
const lastLineBytes = 4096

// lastLine is the last line of tail that is not blank, as a terminal would show it
// (escape sequences and "\r" rewrites applied; harmless for plain output), trimmed.
func lastLine(tail []byte) string {
	text := plainText(tail)
	for text != "" {
		i := strings.LastIndexByte(text, '\n')
		if line := strings.TrimSpace(text[i+1:]); line != "" {
			return line
		}
		if i < 0 {
			break
		}
		text = text[:i]
	}
	return ""
}
