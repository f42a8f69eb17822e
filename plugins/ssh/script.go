package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// The remote side of a command is two small bash programs, sent with every exec request
// (sshd runs the request through the user's login shell, which must be POSIX: sh, bash,
// dash, zsh).
//
// execScript runs one command. Its arguments: the marker (a random per-command nonce),
// the connection's registry directory (see controlScript; may be ""), the grace period
// in ms, the working directory, the command, then NAME=VALUE words to export. It makes
// sure it leads a session of its own (OpenSSH already made it one; otherwise it
// re-executes itself under `setsid -w`), changes directory (or reports which errno
// stopped it), replaces every DSH_* variable of the remote login environment, exports
// the fixed overrides and the caller's variables, registers itself (a file named after
// its pid holding `<starttime> <graceMs>`), prints the marker line on stderr (unless
// stderr is a terminal: under one, stdout and stderr are the same stream) and the start
// line `<marker> <pid> <starttime>` on stdout, and execs `bash -c <command>`: the
// command keeps the pid sshd waits for, so sshd's exit-status / exit-signal is the
// command's own, and the pid is the id of the command's process group and session.
// Registering before the start line means that a command that started is always known
// to its connection's control shell.
//
// The start time (field 22 of /proc/<pid>/stat, empty without /proc) identifies the
// process: a kill order checks it, so that a group id reused after the command ended is
// never signalled. The script's own variables are named __dsh_*, so that it cannot
// change a variable the remote environment exports.
const execScript = `__dsh_m=$1 __dsh_r=$2 __dsh_g=$3 __dsh_d=$4 __dsh_c=$5 __dsh_sid= __dsh_birth=
__dsh_st() { local IFS=' '; set -f; set -- $1; set +f; __dsh_sid=$4 __dsh_birth=${20}; }
if IFS= read -r __dsh_s 2>/dev/null </proc/$$/stat; then __dsh_st "${__dsh_s##*) }"; fi
if [ -n "$__dsh_sid" ] && [ "$__dsh_sid" != "$$" ]; then exec setsid -w "$BASH" --norc -c "$BASH_EXECUTION_STRING" "$0" "$@"; fi
shift 5
if ! cd -P -- "$__dsh_d" 2>/dev/null; then
if [ ! -e "$__dsh_d" ]; then __dsh_e=ENOENT; elif [ ! -d "$__dsh_d" ]; then __dsh_e=ENOTDIR; else __dsh_e=EACCES; fi
printf '%s! chdir %s\n' "$__dsh_m" "$__dsh_e"; exit 126
fi
for __dsh_v in $(compgen -e); do case $__dsh_v in DSH_*) unset "$__dsh_v";; esac; done
export NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat GIT_TERMINAL_PROMPT=0
for __dsh_v; do export "$__dsh_v"; done
[ -z "$__dsh_r" ] || printf '%s %s\n' "${__dsh_birth:--}" "$__dsh_g" 2>/dev/null >"$__dsh_r/$$"
[ -t 2 ] || printf '%s\n' "$__dsh_m" >&2
printf '%s %s %s\n' "$__dsh_m" "$$" "$__dsh_birth"
exec "$BASH" --norc -c "$__dsh_c"`

// controlScript serves a connection's control channel. After printing `<marker> ready`
// it reads orders:
//
//   - `k <id> <pid> <starttime|-> <graceMs>` kills a command's process group, in the
//     background: if the process <pid> still exists its start time must match (else the
//     id was reused: nothing is signalled); SIGTERM goes to the group; the group is
//     polled (zombies do not count) until it is empty or graceMs passed, then SIGKILL
//     goes to what is left, and the group is awaited (up to 2 s). The reply is
//     `k <id> none` (nothing was running), `k <id> done` (gone after SIGTERM) or
//     `k <id> killed` (SIGKILL was needed). An order finishes even if the connection
//     drops.
//   - `u <pid>` unregisters a command that has ended — unless its process group still
//     has members (it left `cmd &` running): that registration stays, so what the
//     command left is killed with the rest when the input ends, or by an `x` order.
//   - `x <id> <pid> - <graceMs>` kills what a registered command that has ended left in
//     its process group, as `k` does (its start time from the registration), and
//     unregisters it; the reply is `k <id> none` at once for a command not registered.
//   - `e <id> <name>=<tag> - <graceMs>` kills every process whose environment (as
//     /proc/<pid>/environ shows it) holds `<name>=<tag>` — `__dsh_owner=<tag>`: a
//     session's processes, also those that left their command's group;
//     `__dsh_cmd=<tag>`: one command's — SIGTERM, then after graceMs SIGKILL, awaited
//     (up to 2 s); the reply is as for `k`. The environments are searched by one grep
//     (-z) where the host's has it, else by bash itself (slower: a loop per variable).
//
// Commands register themselves (execScript) in the control shell's registry directory,
// which it creates under $TMPDIR (or /tmp) and names in its ready line. When its input
// ends — the connection is gone: dsh closed it, lost it, or died — it kills every
// command still registered, the same way, removes the directory, and exits. So a
// connection's commands never outlive it, even when dsh cannot come back to kill them.
const controlScript = `export LC_ALL=C
st() { local IFS=' '; set -f; set -- $1; set +f; birth=${20}; }
alive() {
kill -0 -- "-$1" 2>/dev/null || return 1
[ -d /proc/self ] || return 0
local f l
for f in /proc/[0-9]*/stat; do
IFS= read -r l 2>/dev/null <"$f" || continue
l=${l##*) }
[[ $l =~ ^([A-Za-z])\ [0-9-]+\ ([0-9-]+)\  ]] || continue
[ "${BASH_REMATCH[2]}" = "$1" ] && [ "${BASH_REMATCH[1]}" != Z ] && return 0
done
return 1
}
now() { if [ -n "$EPOCHREALTIME" ]; then t=${EPOCHREALTIME/./}; else t=$((n*25000)); fi; }
k() {
local i=$1 p=$2 b=$3 g=$4 s birth= t n=0 end
if [ "$b" != - ] && IFS= read -r s 2>/dev/null <"/proc/$p/stat"; then
st "${s##*) }"; [ "$birth" = "$b" ] || { printf 'k %s none\n' "$i"; return; }
fi
kill -TERM -- "-$p" 2>/dev/null || { printf 'k %s none\n' "$i"; return; }
now; end=$((t + g*1000))
while alive "$p"; do
now; if ((t >= end)); then
kill -KILL -- "-$p" 2>/dev/null; end=$((t + 2000000))
while alive "$p"; do now; ((t >= end)) && break; sleep 0.025; n=$((n+1)); done
printf 'k %s killed\n' "$i"; return
fi
sleep 0.025; n=$((n+1))
done
printf 'k %s done\n' "$i"
}
tagged() {
local f v q=
if [ -n "$zgrep" ]; then
for f in $(grep -lzxsF -- "$1" /proc/[0-9]*/environ); do f=${f#/proc/}; q="$q ${f%/environ}"; done
else
for f in /proc/[0-9]*/environ; do
while IFS= read -r -d '' v; do [ "$v" = "$1" ] && { f=${f#/proc/}; q="$q ${f%/environ}"; break; }; done 2>/dev/null <"$f"
done
fi
ps=${q# }
}
zgrep=; printf 'a\0' | grep -qzxF a 2>/dev/null && zgrep=1
e() {
local i=$1 o=$2 g=$3 ps t n=0 end
tagged "$o"; [ -n "$ps" ] || { printf 'k %s none\n' "$i"; return; }
kill -TERM $ps 2>/dev/null
now; end=$((t + g*1000))
while tagged "$o"; [ -n "$ps" ]; do
now; if ((t >= end)); then
kill -KILL $ps 2>/dev/null; end=$((t + 2000000))
while tagged "$o"; [ -n "$ps" ]; do now; ((t >= end)) && break; sleep 0.025; n=$((n+1)); done
printf 'k %s killed\n' "$i"; return
fi
sleep 0.025; n=$((n+1))
done
printf 'k %s done\n' "$i"
}
trap '' PIPE
reg=${TMPDIR:-/tmp}/$1
mkdir -m 700 "$reg" 2>/dev/null || reg=
printf '%s ready %s\n' "$1" "$reg"
while IFS=' ' read -r op i p b g; do
case $op in
k) k "$i" "$p" "$b" "$g" & ;;
u) kill -0 -- "-$i" 2>/dev/null || [ -z "$reg" ] || rm -f -- "$reg/$i" ;;
e) e "$i" "$p" "$g" & ;;
x) if [ -n "$reg" ] && [ -f "$reg/$p" ] && read -r b _ <"$reg/$p"; then rm -f -- "$reg/$p"; k "$i" "$p" "$b" "$g" & else printf 'k %s none\n' "$i"; fi ;;
esac
done
if [ -n "$reg" ]; then
for f in "$reg"/*; do
[ -f "$f" ] || continue
read -r b g <"$f"
k 0 "${f##*/}" "$b" "$g" >/dev/null 2>&1 &
done
wait
rm -rf -- "$reg"
fi`

// quote makes s one word for a POSIX shell: single quotes, with each ' written as '\”.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b.WriteString(`'\''`)
		} else {
			b.WriteByte(s[i])
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// commandLine is the exec request for script with args: `exec bash --norc -c <script>
// dsh-ssh <args>…`, every word quoted for the login shell. (--norc: Debian's bash
// sources ~/.bashrc in every shell it believes sshd started; the login shell already
// did, and the variables it exported are inherited.)
func commandLine(script string, args ...string) string {
	var b strings.Builder
	b.WriteString("exec bash --norc -c ")
	b.WriteString(quote(script))
	b.WriteString(" dsh-ssh")
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(quote(a))
	}
	return b.String()
}

// validName reports whether name can be exported by a shell.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// startLine is what the remote told us about a command before it ran.
type startLine struct {
	pid   int
	birth string // the leader's start time in clock ticks since boot; "" without /proc
	// failed, when set, is why the command did not start (a chdir failure).
	failed error
}

// errHeader is a start line the remote should never have sent.
var errHeader = errors.New("malformed start line")

// parseStart reads the start line that follows the marker on stdout: " <pid>
// <starttime>" or "! chdir <ERRNO>" (without the trailing newline).
func parseStart(line []byte, dir string) (startLine, error) {
	line = bytes.TrimSuffix(line, []byte("\r")) // a terminal ends its lines with "\r\n"
	if rest, ok := bytes.CutPrefix(line, []byte("! chdir ")); ok {
		var errno syscall.Errno
		switch string(rest) {
		case "ENOENT":
			errno = syscall.ENOENT
		case "ENOTDIR":
			errno = syscall.ENOTDIR
		case "EACCES":
			errno = syscall.EACCES
		default:
			return startLine{}, fmt.Errorf("%w: unknown chdir failure %q", errHeader, rest)
		}
		return startLine{failed: spawnError("chdir", dir, errno)}, nil
	}
	rest, ok := bytes.CutPrefix(line, []byte(" "))
	if !ok {
		return startLine{}, errHeader
	}
	pidText, birth, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return startLine{}, errHeader
	}
	pid, err := strconv.Atoi(string(pidText))
	if err != nil || pid <= 1 || pidText[0] == '+' || pidText[0] == '0' {
		return startLine{}, fmt.Errorf("%w: pid %q", errHeader, pidText)
	}
	for _, c := range birth {
		if c < '0' || c > '9' {
			return startLine{}, fmt.Errorf("%w: start time %q", errHeader, birth)
		}
	}
	return startLine{pid: pid, birth: string(birth)}, nil
}

// killReply is one reply of the control script.
type killReply struct {
	id      uint64
	outcome string // "none", "done" or "killed"
}

// parseKillReply parses a control-channel line "k <id> <outcome>".
func parseKillReply(line []byte) (killReply, error) {
	f := strings.Fields(string(line))
	if len(f) != 3 || f[0] != "k" {
		return killReply{}, fmt.Errorf("unexpected control reply %q", line)
	}
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return killReply{}, fmt.Errorf("unexpected control reply %q", line)
	}
	switch f[2] {
	case "none", "done", "killed":
	default:
		return killReply{}, fmt.Errorf("unexpected control reply %q", line)
	}
	return killReply{id: id, outcome: f[2]}, nil
}
