// Package watchdog is the subprocess Supervisor's crash cleanup: a small process,
// started with each Supervisor, that outlives the harness only to end what the harness
// started when the harness itself dies without cleaning up (SIGKILL, a crash).
//
// The Supervisor starts it as the harness binary re-executed with the hidden argument
// Arg, in two stages: the first ("detach") starts the watchdog proper ("run"), reports
// its pid on stdout and exits, so that the watchdog is no child of the harness (it is
// reparented to init or the nearest subreaper: nothing that waits for the harness's
// children sees it, and the harness never has to reap it). The watchdog's stdin is the
// read end of a pipe whose only write end the harness holds; its stdout and stderr are
// /dev/null (it never holds the harness's stdio, so a client waiting for the harness's
// EOF gets it), it leads a session of its own (a terminal's or a process group's
// signals for the harness do not reach it) and it lives in the harness's own cgroup,
// not the one it guards. The harness writes "c<dir>\n" to name the cgroup directory it
// guards when that was not known at the start (a watchdog started by Prestart), "+<pgid>\n" for each command it tracks by
// process group only, "-<pgid>\n" before that group's id may be reused, and
// "d<dir>\n" for each cgroup v1 directory it makes (those of resource limits); a
// watchdog that replaces a dead one is first told every group and directory the dead
// one knew. When the pipe reaches EOF — the harness closed the Supervisor, exited or
// died — the watchdog writes cgroup.kill on the cgroup directory, SIGKILLs the groups
// it was told about and every process listed in the v1 directories (again, until none
// is left), waits (up to 5 s) for the cgroups to empty, removes them and exits. After
// a normal Close there is nothing left to kill, and it exits at once.
//
// # Why a package of its own, with so few imports
//
// Its init function dispatches the watchdog, like the sandbox launcher: Go initialises
// a package as soon as its imports are, and this package imports only os, sync, syscall
// and unsafe, so it runs right after package os, before the rest of the binary (MCP, HTTP,
// YAML, fx…) is initialised at all. Every binary that links the subprocess package
// links this one, so re-executing such a binary with Arg always reaches the watchdog.
package watchdog

import (
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Arg is the hidden first argument that turns a binary linking this package into the
// watchdog.
const Arg = "__dsh_subprocess_watchdog"

// init dispatches the watchdog as early as the binary's initialisation allows (see the
// package documentation).
func init() { Main() }

// MaxDir bounds the length of a directory the harness names ("d<dir>\n", "c<dir>\n").
const MaxDir = 3000

// Stages, the argument after Arg.
const (
	StageDetach = "detach"
	StageRun    = "run"
)

// Main runs the watchdog when this process was started as one (os.Args[1] == Arg;
// then os.Args[2] is the stage and os.Args[3] the cgroup directory, or "") and never
// returns in that case. Otherwise it returns immediately.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	if len(os.Args) != 4 {
		syscall.Exit(2)
	}
	stage, cgroup := os.Args[2], os.Args[3]
	switch stage {
	case StageDetach:
		// The watchdog proper gets this process's stdin (the harness's pipe) and its
		// stderr (/dev/null) for stdout and stderr; its pid goes to this stdout.
		pid, err := syscall.ForkExec("/proc/self/exe", []string{os.Args[0], Arg, StageRun, cgroup}, &syscall.ProcAttr{
			Dir:   "/",
			Env:   []string{},
			Files: []uintptr{0, 2, 2},
			Sys:   &syscall.SysProcAttr{Setsid: true},
		})
		if err != nil {
			syscall.Exit(1)
		}
		syscall.Write(1, append(itoa(pid), '\n'))
		syscall.Exit(0)
	case StageRun:
		// Nothing else may read this process's memory or environment (a same-user
		// command reading /proc/<pid>/mem, say): it runs as the harness.
		const prSetDumpable = 4
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
		groups, dirs, told := watch(os.Stdin)
		if told != "" {
			cgroup = told
		}
		cleanup(cgroup, groups, dirs)
		// Straight out: nothing to flush, and a race-enabled build's os.Exit would
		// first sleep a second (the race detector's atexit_sleep_ms).
		syscall.Exit(0)
	}
	syscall.Exit(2)
}

// Early is a watchdog Prestart started, for a Supervisor to take over: In is the write
// end of its pipe (close-on-exec, blocking), Stage the pid of its first stage (a child
// of the harness: the taker reaps it), Out the read end (close-on-exec) on which the
// first stage reports the watchdog's pid.
type Early struct{ In, Stage, Out int }

var early struct {
	sync.Mutex
	w     Early
	ready bool
}

// Prestart starts a watchdog now, guarding nothing until the harness names its
// cgroup directory ("c<dir>\n"), for the first Supervisor to take (Take). Called
// first thing in a process that will spawn commands, the watchdog's two
// re-executions run beside the rest of the binary's initialisation instead of beside
// its first command. Untaken, it guards nothing and exits with the harness (its first
// stage stays an unreaped zombie until then). A failure leaves nothing to take.
func Prestart() {
	var in [2]int
	if syscall.Pipe2(in[:], syscall.O_CLOEXEC) != nil {
		return
	}
	stage, out, err := ForkStage(in[0], "")
	syscall.Close(in[0])
	if err != nil {
		syscall.Close(in[1])
		return
	}
	early.Lock()
	defer early.Unlock()
	early.w, early.ready = Early{In: in[1], Stage: stage, Out: out}, true
}

// ForkStage starts the watchdog's first stage — this binary re-executed with Arg
// StageDetach and cgroupDir — with stdin as its standard input (the pipe the watchdog
// guards), and returns its pid and the read end (close-on-exec, blocking) of the pipe
// on which it reports the watchdog's pid. Once it returns the first stage runs and
// holds stdin: it starts the watchdog with it even if the harness dies now.
func ForkStage(stdin int, cgroupDir string) (stage, out int, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return 0, -1, err
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return 0, -1, err
	}
	// /proc/self/exe is this very binary even if its file was replaced or deleted since.
	stage, err = syscall.ForkExec("/proc/self/exe", []string{os.Args[0], Arg, StageDetach, cgroupDir}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{uintptr(stdin), uintptr(p[1]), uintptr(null)},
	})
	syscall.Close(null)
	syscall.Close(p[1])
	if err != nil {
		syscall.Close(p[0])
		return 0, -1, err
	}
	return stage, p[0], nil
}

// Take returns the watchdog Prestart started, once; false if there is none.
func Take() (Early, bool) {
	early.Lock()
	defer early.Unlock()
	w, ok := early.w, early.ready
	early.ready = false
	return w, ok
}

func itoa(n int) []byte {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return b[i:]
		}
	}
}

// watch reads the Supervisor's messages until EOF (or a read error) and returns the
// process groups it was told about and not told to forget, the cgroup v1 directories
// it was told of and the cgroup directory it was told to guard ("" if none).
func watch(in *os.File) (groups map[int]bool, dirs []string, cgroup string) {
	groups = map[int]bool{}
	var buf [4096]byte
	var line []byte
	long := false // the line is longer than any message: dropped whole
	for {
		n, err := in.Read(buf[:])
		for _, c := range buf[:n] {
			if c != '\n' {
				if len(line) < 32 || (line[0] == 'd' || line[0] == 'c') && len(line) < MaxDir {
					line = append(line, c)
				} else {
					long = true
				}
				continue
			}
			if long {
				long, line = false, line[:0]
				continue
			}
			switch {
			case len(line) > 1 && line[0] == 'd' && line[1] == '/':
				dirs = append(dirs, string(line[1:]))
			case len(line) > 1 && line[0] == 'c' && line[1] == '/':
				cgroup = string(line[1:])
			case len(line) > 1:
				if pgid, ok := atoi(line[1:]); ok && pgid > 1 {
					switch line[0] {
					case '+':
						groups[pgid] = true
					case '-':
						delete(groups, pgid)
					}
				}
			}
			line = line[:0]
		}
		if err != nil {
			return groups, dirs, cgroup
		}
	}
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// cleanup ends every process of the cgroup directory (and below), of the groups and
// of the v1 directories, then removes the directories.
func cleanup(cgroup string, groups map[int]bool, dirs []string) {
	if cgroup != "" {
		writeFile(cgroup+"/cgroup.kill", "1")
	}
	for pgid := range groups {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for i := 0; i < 500 && (cgroup != "" && populated(cgroup) || killListed(dirs)); i++ {
		ts := syscall.Timespec{Nsec: 10_000_000}
		syscall.Nanosleep(&ts, nil)
	}
	if cgroup != "" {
		removeTree(cgroup)
	}
	for _, d := range dirs {
		removeTree(d)
	}
}

// killListed SIGKILLs every process listed in the cgroup v1 directories (and below)
// and reports whether it found any.
func killListed(dirs []string) bool {
	found := false
	for _, d := range dirs {
		if killProcs(d) {
			found = true
		}
	}
	return found
}

func killProcs(dir string) bool {
	found := false
	if fd, err := syscall.Open(dir+"/cgroup.procs", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
		var buf [8192]byte
		n, _ := syscall.Read(fd, buf[:])
		syscall.Close(fd)
		pid := 0
		for _, c := range buf[:max(n, 0)] {
			if c >= '0' && c <= '9' {
				pid = pid*10 + int(c-'0')
				continue
			}
			if pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
				found = true
			}
			pid = 0
		}
	}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if e.IsDir() && killProcs(dir+"/"+e.Name()) {
				found = true
			}
		}
	}
	return found
}

func writeFile(path, content string) {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	syscall.Write(fd, []byte(content))
	syscall.Close(fd)
}

// populated reports whether the cgroup has a live process (false once it is gone).
func populated(dir string) bool {
	fd, err := syscall.Open(dir+"/cgroup.events", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var buf [256]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return false
	}
	const key = "populated 1"
	s := unsafe.String(&buf[0], n)
	for i := 0; i+len(key) <= len(s); i++ {
		if s[i:i+len(key)] == key {
			return true
		}
	}
	return false
}

// removeTree removes the cgroup directory dir and the cgroups below it.
func removeTree(dir string) {
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				removeTree(dir + "/" + e.Name())
			}
		}
	}
	syscall.Rmdir(dir)
}
