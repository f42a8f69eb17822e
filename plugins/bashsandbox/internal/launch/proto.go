package launch

import (
	"errors"
	"strconv"
)

// The control protocol between dsh and a box: frames over a unix stream
// socket, each a 4-byte big-endian length and a payload whose first byte is the message
// type. File descriptors travel as SCM_RIGHTS attached to the frame they belong to.
//
//	dsh → box: Setup (first; fds: the pinned workspace root, if any, then the
//	               session's spill directory, if any), Start (fds:
//	               stdin, stdout, stderr — none under a terminal —, the command's cgroup
//	               when it has one, then the tasks files of its cgroup v1
//	               directories), Release, Check
//	box → dsh: Ready or Failed (the answer to Setup), Started (fds: the leader's
//	               pidfd, then, under a terminal, its master) or Failed (the answer to a
//	               Start), Exited, Checked (the answer to a Check)
const (
	MsgSetup    byte = 1
	MsgReady    byte = 2
	MsgStart    byte = 3
	MsgStarted  byte = 4
	MsgFailed   byte = 5
	MsgExited   byte = 6
	MsgRelease  byte = 7
	MsgCheck    byte = 8
	MsgChecked  byte = 9
	maxFrame         = 64 << 20 // larger than any argv+environment the kernel accepts
	maxFrameFDs      = 8
)

// Setup is the first message: how the box builds its world. It is sent
// once; every command then runs in what it made.
type Setup struct {
	// Namespaces: the box was started in new user, mount, PID, IPC and UTS
	// namespaces (and a network namespace when Network is NetworkDeny) and builds its
	// mount tree; false is the Landlock-only mode.
	Namespaces bool
	// Network is NetworkDeny or NetworkAllow.
	Network string
	// Hold: commands are held at their exec to be put in their cgroup, and clone3 is
	// refused to them (HoldAtExec); false, they are placed by clone3, which they may
	// then use too.
	Hold bool
	// Workspace is the canonical workspace root as pinned at session start (its
	// directory travels as an O_PATH descriptor with the message); "" for none.
	Workspace string
	// WritableRoots are further directories bound read-write (configured roots).
	WritableRoots []string
	// TempDir is the host path of the session's private temp dir: bound at /tmp
	// (namespaces), or used as is (Landlock-only).
	TempDir string
	// Stage is an empty host directory on which the new root is assembled (namespaces
	// only).
	Stage string
	// MaskDirs are directories masked with an empty read-only tmpfs (namespaces only):
	// e.g. the harness's spill directory.
	MaskDirs []string
	// Protect are paths bound read-only over themselves, and kept so (namespaces only).
	Protect []string
	// Spill is the host path of the session's own spill directory (its directory
	// travels as a descriptor with the message, after the workspace's), shown read-only
	// at that same path once the masked directories are covered (namespaces only); ""
	// for none.
	Spill string
	// MaskFiles are files masked with an empty read-only file wherever a command could read
	// them (the harness's secrets, e.g. its HTTP bearer token; namespaces only).
	MaskFiles []string
	// ShowFiles are regular files of the session's own (its audit log) shown read-only
	// at their paths through the masked directory holding them (namespaces only).
	ShowFiles []string
	// TmpSize is the size in bytes of the private /tmp and /dev/shm (namespaces only;
	// 0: the kernel's default, half the memory).
	TmpSize int64
}

// Start asks the box to start one command, confined to Policy.
type Start struct {
	ID     uint64
	Policy Policy
	// Path is the program (absolute), Argv its argv, Dir its working directory, Env its
	// complete environment.
	Path string
	Argv []string
	Dir  string
	Env  []string
	// Protect are protected paths that must be read-only before the command starts
	// (namespaces only; one that appeared since the setup is bound now).
	Protect []string
	// MaskFiles are files that must be masked before the command starts (namespaces only;
	// one that appeared, or was replaced, since it was last masked is masked now).
	MaskFiles []string
	// MaskDirs are directories that must be masked before the command starts, like
	// Setup's (namespaces only; other dsh processes' directories: one that appeared, or
	// was replaced, since it was last masked is masked now).
	MaskDirs []string
	// Cgroup: the fourth descriptor is the command's cgroup directory (the only one,
	// under a terminal).
	Cgroup bool
	// Terminal: the box allocates a terminal of Cols × Rows for the command (see
	// terminal_linux.go) instead of receiving its stdio.
	Terminal   bool
	Cols, Rows int

	master int // the box's: the allocated terminal's master, until the reply carries it
	// CgroupV1 is how many descriptors follow (after the cgroup's): the tasks files of
	// the command's cgroup v1 directories (its resource limits), which the thread that
	// forks it joins first.
	CgroupV1 int
}

// Reply is a message from the box: Ready, Started, Failed, Exited or Checked.
type Reply struct {
	Type byte
	ID   uint64
	// Pid is the leader's pid in the box's PID namespace (Started).
	Pid int
	// Code and Signal: how the leader ended (Exited; Signal 0 for an exit).
	Code, Signal int
	// Errno, Op and Path describe a failed start (Failed): the step ("chdir", "exec")
	// and the file; Message says what failed otherwise (a Setup, the confinement).
	Errno   int
	Op      string
	Path    string
	Message string
	// LaunchFailed (Started): the command could not be confined, and the launcher's failure mode
	// was started in its place — what tells dsh that the command did not run (a
	// command can write the failure line and exit 125 too).
	LaunchFailed bool
}

// Release tells the box to reap the leader of command ID.
type Release struct{ ID uint64 }

// Check asks the box to confirm that it confines: a thread of its own, confined to
// Policy as a command would be, tries to create a file in Dir, a directory writable
// unconfined. The Checked reply's Errno is that creation's error — EACCES when it was
// refused, as it must be; 0 when the file was made (it is removed again) — or, when
// the check could not be made, Op and Message say which step failed.
type Check struct {
	ID     uint64
	Policy Policy
	Dir    string
}

// Encode returns the frame payload of m.
func (m *Setup) Encode() []byte {
	var w wbuf
	w.b = append(w.b, MsgSetup)
	w.bool(m.Namespaces)
	w.str(m.Network)
	w.bool(m.Hold)
	w.str(m.Workspace)
	w.strs(m.WritableRoots)
	w.str(m.TempDir)
	w.str(m.Stage)
	w.strs(m.MaskDirs)
	w.strs(m.Protect)
	w.str(m.Spill)
	w.strs(m.MaskFiles)
	w.strs(m.ShowFiles)
	w.int(int(m.TmpSize))
	return w.b
}

// Encode returns the frame payload of m.
func (m *Start) Encode() []byte {
	var w wbuf
	w.b = append(w.b, MsgStart)
	w.uint(m.ID)
	w.policy(m.Policy)
	w.str(m.Path)
	w.strs(m.Argv)
	w.str(m.Dir)
	w.strs(m.Env)
	w.strs(m.Protect)
	w.strs(m.MaskFiles)
	w.strs(m.MaskDirs)
	w.bool(m.Cgroup)
	w.bool(m.Terminal)
	w.int(m.Cols)
	w.int(m.Rows)
	w.int(m.CgroupV1)
	return w.b
}

// Encode returns the frame payload of m.
func (m Release) Encode() []byte {
	var w wbuf
	w.b = append(w.b, MsgRelease)
	w.uint(m.ID)
	return w.b
}

// Encode returns the frame payload of m.
func (m *Reply) Encode() []byte {
	var w wbuf
	w.b = append(w.b, m.Type)
	w.uint(m.ID)
	w.int(m.Pid)
	w.int(m.Code)
	w.int(m.Signal)
	w.int(m.Errno)
	w.str(m.Op)
	w.str(m.Path)
	w.str(m.Message)
	w.bool(m.LaunchFailed)
	return w.b
}

// Encode returns the frame payload of m.
func (m Check) Encode() []byte {
	var w wbuf
	w.b = append(w.b, MsgCheck)
	w.uint(m.ID)
	w.policy(m.Policy)
	w.str(m.Dir)
	return w.b
}

// DecodeCheck decodes a Check payload.
func DecodeCheck(b []byte) (Check, error) {
	r := rbuf{b: b}
	r.kind(MsgCheck)
	m := Check{ID: r.uint()}
	m.Policy = r.policy()
	m.Dir = r.str()
	return m, r.done("check")
}

// DecodeSetup decodes a Setup payload.
func DecodeSetup(b []byte) (Setup, error) {
	r := rbuf{b: b}
	r.kind(MsgSetup)
	m := Setup{
		Namespaces:    r.bool(),
		Network:       r.str(),
		Hold:          r.bool(),
		Workspace:     r.str(),
		WritableRoots: r.strs(),
		TempDir:       r.str(),
		Stage:         r.str(),
		MaskDirs:      r.strs(),
		Protect:       r.strs(),
		Spill:         r.str(),
		MaskFiles:     r.strs(),
		ShowFiles:     r.strs(),
		TmpSize:       int64(r.int()),
	}
	return m, r.done("setup")
}

// DecodeStart decodes a Start payload.
func DecodeStart(b []byte) (Start, error) {
	r := rbuf{b: b}
	r.kind(MsgStart)
	m := Start{ID: r.uint()}
	m.Policy = r.policy()
	m.Path = r.str()
	m.Argv = r.strs()
	m.Dir = r.str()
	m.Env = r.strs()
	m.Protect = r.strs()
	m.MaskFiles = r.strs()
	m.MaskDirs = r.strs()
	m.Cgroup = r.bool()
	m.Terminal = r.bool()
	m.Cols = r.int()
	m.Rows = r.int()
	m.CgroupV1 = r.int()
	return m, r.done("start")
}

// DecodeRelease decodes a Release payload.
func DecodeRelease(b []byte) (Release, error) {
	r := rbuf{b: b}
	r.kind(MsgRelease)
	m := Release{ID: r.uint()}
	return m, r.done("release")
}

// DecodeReply decodes a Reply payload (Ready, Started, Failed, Exited or Checked).
func DecodeReply(b []byte) (Reply, error) {
	r := rbuf{b: b}
	var m Reply
	if len(b) > 0 {
		m.Type = b[0]
		switch m.Type {
		case MsgReady, MsgStarted, MsgFailed, MsgExited, MsgChecked:
		default:
			return Reply{}, errors.New("reply: unknown message type " + strconv.Itoa(int(m.Type)))
		}
	}
	r.kind(m.Type)
	m.ID = r.uint()
	m.Pid = r.int()
	m.Code = r.int()
	m.Signal = r.int()
	m.Errno = r.int()
	m.Op = r.str()
	m.Path = r.str()
	m.Message = r.str()
	m.LaunchFailed = r.bool()
	return m, r.done("reply")
}

// policy writes p (a Start's or a Check's).
func (w *wbuf) policy(p Policy) {
	w.str(p.Mode)
	w.str(p.WorkspaceRoot)
	w.strs(p.WritableRoots)
	w.str(p.Network)
}

// policy reads what wbuf.policy wrote.
func (r *rbuf) policy() Policy {
	return Policy{Mode: r.str(), WorkspaceRoot: r.str(), WritableRoots: r.strs(), Network: r.str()}
}
