package ssh

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The exec script makes the command lead its own session even when sshd did not: run
// locally as a process-group leader (setsid must fork: `setsid -w` waits and passes the
// exit code on) and as a plain group member (setsid execs in place).
func TestExecScriptSession(t *testing.T) {
	for _, c := range []struct {
		name string
		attr *syscall.SysProcAttr
	}{
		{"group leader", &syscall.SysProcAttr{Setpgid: true}},
		{"group member", nil},
		{"session leader", &syscall.SysProcAttr{Setsid: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := newMarker()
			dir, registry := t.TempDir(), t.TempDir()
			cmd := exec.Command("bash", "--norc", "-c", execScript, "dsh-ssh", marker, registry, "700", dir,
				`read -r l </proc/$$/stat; l=${l##*) }; set -- $l; echo "$$ $3 $4 $(pwd) $DSH_A"; exit 5`, "DSH_A=x y")
			cmd.SysProcAttr = c.attr
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 5 {
				t.Fatalf("exit: %v (stderr %q)", err, stderr.String())
			}
			if stderr.String() != marker+"\n" {
				t.Errorf("stderr %q", stderr.String())
			}
			sc := startScanner{marker: []byte(marker)}
			line, rest, found, serr := sc.feed(stdout.Bytes())
			if !found || serr != nil {
				t.Fatalf("no start line in %q", stdout.String())
			}
			st, perr := parseStart(line, dir)
			if perr != nil || st.failed != nil || st.birth == "" {
				t.Fatalf("start line %q: %+v %v", line, st, perr)
			}
			p := strconv.Itoa(st.pid)
			if want := p + " " + p + " " + p + " " + dir + " x y\n"; string(rest) != want {
				t.Errorf("command saw %q, want %q (pid = pgid = sid = the start line's pid)", rest, want)
			}
			// It registered itself for its connection's control shell.
			if reg, err := os.ReadFile(filepath.Join(registry, p)); err != nil || string(reg) != st.birth+" 700\n" {
				t.Errorf("registration %q, %v; want %q", reg, err, st.birth+" 700\n")
			}
		})
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "'", `'\''`, "a b", "$(id)", "`id`", "\n", "\\", "!", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			t.Skip("NUL cannot be in an argument")
		}
		for _, shell := range []string{"sh", "bash"} {
			out, err := exec.Command(shell, "-c", "printf %s "+quote(s)).Output()
			if err != nil || string(out) != s {
				t.Fatalf("%s: quote(%q) = %s → %q, %v", shell, s, quote(s), out, err)
			}
		}
	})
}

func FuzzStartScanner(f *testing.F) {
	f.Add([]byte("motd\n"), []byte(" 123 456"), []byte("out\n"), uint8(1))
	f.Add([]byte(""), []byte("! chdir ENOENT"), []byte(""), uint8(7))
	f.Add([]byte("dsh-ssh-"), []byte(" 2 "), []byte("x"), uint8(3))
	f.Fuzz(func(t *testing.T, junk, line, rest []byte, chunk uint8) {
		marker := []byte("dsh-ssh-0123456789abcdef01234567")
		if bytes.Contains(append(append([]byte{}, junk...), marker[:1]...), marker) || bytes.IndexByte(line, '\n') >= 0 || len(line) > maxStartLine {
			t.Skip()
		}
		stream := append(append(append(append([]byte{}, junk...), marker...), line...), '\n')
		stream = append(stream, rest...)
		size := int(chunk%64) + 1
		sc := startScanner{marker: marker}
		var got, after []byte
		found := false
		for i := 0; i < len(stream); i += size {
			end := min(i+size, len(stream))
			if found {
				after = append(after, stream[i:end]...)
				continue
			}
			l, r, ok, err := sc.feed(stream[i:end])
			if err != nil {
				t.Fatalf("feed: %v", err)
			}
			if ok {
				found, got, after = true, append([]byte{}, l...), append([]byte{}, r...)
			}
		}
		if !found || !bytes.Equal(got, line) || !bytes.Equal(after, rest) {
			t.Fatalf("found %v line %q rest %q; want %q %q", found, got, after, line, rest)
		}
		if !bytes.HasSuffix(junk, sc.junk) || len(sc.junk) > maxJunk {
			t.Fatalf("junk tail %q of %q", sc.junk, junk)
		}
	})
}

func FuzzParseStart(f *testing.F) {
	for _, s := range []string{" 123 456", " 123 ", "! chdir ENOENT", "! chdir EPERM", " 0 1", " -1 2", " +5 1", " 12 x", "", " 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		st, err := parseStart(line, "/d")
		if err != nil {
			return
		}
		if st.failed != nil {
			return
		}
		if st.pid <= 1 || strings.Trim(st.birth, "0123456789") != "" {
			t.Fatalf("accepted %q as %+v", line, st)
		}
		if again := " " + strconv.Itoa(st.pid) + " " + st.birth; again != string(line) {
			t.Fatalf("%q parsed as %+v, which prints as %q", line, st, again)
		}
	})
}

func FuzzParseKillReply(f *testing.F) {
	for _, s := range []string{"k 1 done", "k 2 none", "k 3 killed", "k x done", "k 1 maybe", "k 1", "", "k 18446744073709551616 done"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rep, err := parseKillReply(line)
		if err != nil {
			return
		}
		switch rep.outcome {
		case "none", "done", "killed":
		default:
			t.Fatalf("accepted %q as %+v", line, rep)
		}
	})
}
