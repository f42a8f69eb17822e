package bashsandbox_test

// The session logs under the sandbox: a session's commands read their own log
// (DSH_SESSION_JSONL), never write it, and see nothing of another session's — wherever
// the logs' directory is: outside the temp dir (masked, the own file shown through the
// mask) or under it (hidden by the private /tmp, the own file shown there).

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/sessionlog"
)

func TestConfinedSessionLogs(t *testing.T) {
	for _, where := range []string{"outside-tmp", "under-tmp"} {
		t.Run(where, func(t *testing.T) {
			dir := filepath.Join(outsideTempDir(t, "dsh-sessions-"), "sessions")
			if where == "under-tmp" {
				dir = filepath.Join(canonTempDir(t), "sessions")
			}
			forConfinedModes(t, stackSetup{
				extra:     []container.Plugin{sessionlog.Plugin},
				extraRows: []container.Row{{ID: "session-log", Plugin: "session-log", Config: map[string]any{"dir": dir}}},
			}, func(t *testing.T, st *stack, s *container.Session, ws string) {
				mine := filepath.Join(dir, s.ID+".jsonl")
				expect(t, st.bash(t, s, `printf '%s\n' "$DSH_SESSION_JSONL"`), mine+"\n", false)
				other := session(s.ID+"-other", ws)
				st.bash(t, other, "true") // the other session's file exists on the host from now on
				theirs := filepath.Join(dir, other.ID+".jsonl")

				res := st.bash(t, s, `head -c 200 "$DSH_SESSION_JSONL" | grep -o '"type":"session"'; ls `+dir)
				expect(t, res, `"type":"session"`+"\n"+s.ID+".jsonl\n", false)
				if got := attackLine(t, st, s, "write", mine); got != "read-only file system" && got != "permission denied" {
					t.Errorf("writing the own log: %q", got)
				}
				for _, a := range [][]string{{"unlink", mine}, {"rename", mine, mine + ".moved"}, {"write", dir + "/planted"}} {
					switch got := attackLine(t, st, s, a[0], a[1:]...); got {
					case "read-only file system", "permission denied", "device or resource busy":
					default:
						t.Errorf("%s %q: %q", a[0], a[1:], got)
					}
				}
				res = st.bash(t, s, "cat "+theirs)
				if !strings.Contains(res.Text, "No such file or directory") {
					t.Errorf("another session's log from this one: %q", res.Text)
				}
				res = st.bash(t, other, "cat "+mine+"; ls "+dir)
				if !strings.Contains(res.Text, "No such file or directory") || strings.Contains(res.Text, s.ID+".jsonl\n") {
					t.Errorf("this session's log from another: %q", res.Text)
				}
			})
		})
	}
}
