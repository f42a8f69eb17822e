package bashsandbox

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// confiner confines the commands of one executor: the executor core calls prepare for
// each call, which decides how it runs and, for a confined mode, has the session's box
// start it (cmdStarter).
type confiner struct {
	sup          *subprocess.Supervisor
	resolver     *Resolver
	network      string   // NetworkDeny or NetworkAllow
	namespaces   string   // NamespacesAuto or NamespacesOff
	roots        []string // canonical writableRoots
	rootKeys     []string // the key that set each root ("writableRoots[0]")
	spillRoot    string   // the Supervisor's spill root, masked from confined commands
	log          *slog.Logger
	profileFiles func() []string
	// resources are the commands' resource limits (a box runs under their session
	// part); unenforced names the defaults this host cannot enforce; tmpSize is the
	// size of a box's private /tmp and /dev/shm.
	resources  proc.ResourceLimits
	unenforced string
	tmpSize    int64
	// ended: the executor's activation ended (see boxFor).
	ended atomic.Bool
}

// confinement is what a box must keep from one confined call: the configuration of the
// box it runs in, and the protected paths, masked files and other dsh processes'
// directories (namespaces only) it must apply before the command starts.
type confinement struct {
	box       boxConfig
	protect   []string
	maskFiles []string
	others    []string // other dsh processes' directories to mask
}

// prepare decides how one call runs: its policy is spec.Sandbox (tool-bash resolves it
// for the calling session, with an approved escalation) or, without one, the default
// policy of a call without a session. danger-full-access runs bash directly; the
// confined modes need a usable backend — otherwise Execute fails with the fail-closed
// error and nothing runs — and a workspace that still is the one pinned when the session
// started; bash is then started by the session's box. A call an approved escalation
// allows (policy.Escalated) leaves nothing running when its command exits. The
// returned function adds the sandbox facts to the result.
func (s *confiner) prepare(_ context.Context, spec shell.ExecSpec, cmd *bashexec.Command) (bashexec.FinishFunc, error) {
	policy, err := s.policy(spec)
	if err != nil {
		return nil, err
	}
	mode := policy.Mode
	// Allowed once: what the call leaves running ends when its command does.
	cmd.EndWithLeader = policy.Escalated
	if mode == shell.ModeDangerFullAccess {
		return func(res *shell.RunResult) { res.Sandbox = sandboxFacts(mode, "", *res, false) }, nil
	}
	if !policy.Escalated {
		s.confirmFirst(spec, mode, policy.WorkspaceRoot)
	}
	be, err := s.confiningBackend(mode)
	if err != nil {
		return nil, err
	}
	sess, pin, err := s.pinnedSession(spec.SessionID, policy.WorkspaceRoot)
	if err != nil {
		return nil, err
	}
	c, err := s.confinementOf(be, mode, pin.path, spec.DshEnv)
	if err != nil {
		return nil, err
	}
	enforcement := enforcementOf(be.missing(s.network))
	b, err := s.boxFor(sess, c, spec.SessionID, policy.Escalated)
	if err != nil {
		return s.launchFailure(cmd, mode, enforcement, err)
	}
	tmp, err := sess.tempDir(c.box.namespaces)
	if err != nil {
		return nil, err
	}
	starter := &cmdStarter{box: b, policy: s.launchPolicy(mode, pin.path, tmp, c.box.namespaces)}
	if c.box.namespaces {
		starter.protect, starter.maskFiles, starter.maskDirs = c.protect, c.maskFiles, c.others
	}
	cmd.Start = starter
	cmd.Env = withTempDir(cmd.Env, tmp)
	tty := spec.Terminal != nil
	return func(res *shell.RunResult) {
		failed := starter.launchFailed.Load()
		res.Sandbox = sandboxFacts(mode, enforcement, errorStream(*res, tty && !failed), failed)
	}, nil
}

// boxFor is the box a call of session owner runs in: the session's, or, for an
// escalated call on the namespace backend, one of its own — whose PID namespace dies
// with it once the call's command is released, so that nothing the call started
// outlives it even where the Supervisor has no cgroups.
//
// A call of an executor whose activation has ended (a reload swapped it out while the
// call was on its way) gets a box of its own too, which closes once the call's command
// is released: the session's boxes were retired with the activation, and one opened
// for the session now would outlive every command it will ever run.
func (s *confiner) boxFor(sess *sessionState, c confinement, owner string, escalated bool) (*box, error) {
	if sess.limitsPrepared.CompareAndSwap(false, true) {
		// The session's first command's cgroups are made while its box starts.
		s.sup.PrepareLimits(owner, s.resources)
	}
	if (escalated && c.box.namespaces) || s.ended.Load() {
		return sess.ownBox(s.sup, c.box, owner, s.resources.Session(), c.protect, c.maskFiles)
	}
	b, err := sess.box(s.sup, c.box, owner, s.resources.Session(), c.protect, c.maskFiles)
	if err == nil && s.ended.Load() {
		b.retireLater() // opened (or found) as the activation ended: retired with it
	}
	return b, err
}

// end is the end of the executor's activation: the calls it still serves get boxes of
// their own (boxFor), and the session boxes it opened are retired, as is a box started
// ahead that no session took.
func (s *confiner) end() {
	s.ended.Store(true)
	dropAhead(s.sup)
	retireOwner(s.sup)
}

// policy is the call's sandbox policy, with a mode this executor knows.
func (s *confiner) policy(spec shell.ExecSpec) (shell.SandboxPolicy, error) {
	var policy shell.SandboxPolicy
	if spec.Sandbox != nil {
		policy = *spec.Sandbox
	} else {
		p, err := s.resolver.Resolve(nil, "")
		if err != nil {
			return shell.SandboxPolicy{}, err
		}
		policy = p
	}
	switch policy.Mode {
	case shell.ModeReadOnly, shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess:
		return policy, nil
	}
	return shell.SandboxPolicy{}, fmt.Errorf("bash-sandbox: unknown sandbox mode %q", policy.Mode)
}

// confiningBackend is the backend that confines a call in mode, or the fail-closed error.
func (s *confiner) confiningBackend(mode string) (backend, error) {
	be := chooseBackend(s.namespaces)
	if !be.usable {
		err := &UnavailableError{Mode: mode, Reason: be.reason}
		s.log.Warn("bash-sandbox: refusing to run a command unconfined", "mode", mode, "err", err)
		return backend{}, err
	}
	return be, nil
}

// pinnedSession returns the call's session and its pinned workspace, which must still
// be the directory pinned when the session started, and be the call's.
func (s *confiner) pinnedSession(id, root string) (*sessionState, *pin, error) {
	sess := sessionFor(s.sup, sessionKeyID(id, root))
	pin, err := sess.workspace(root)
	if err != nil {
		return nil, nil, err
	}
	if err := pin.check(); err != nil {
		return nil, nil, err
	}
	if root != "" && root != pin.path {
		return nil, nil, fmt.Errorf("bash-sandbox: the call's workspace root %q is not its session's, pinned at %q", root, pin.path)
	}
	return sess, pin, nil
}

// confinementOf is what the box must keep from a call in mode in workspace ws, or why the
// call is refused: a protected path inside a writable root that the backend cannot
// protect (Landlock only) or that a command could redirect, or a masked directory that
// a writable root exposes.
func (s *confiner) confinementOf(be backend, mode, ws string, dshEnv map[string]string) (confinement, error) {
	writable := append([]string{ws}, s.roots...)
	protect := protectedPaths(writable, s.profileFiles(), dshEnv)
	ns := be.namespaces()
	if mode == shell.ModeWorkspaceWrite && !ns {
		if err := unprotectable(protect, writable); err != nil {
			return confinement{}, err
		}
	}
	c := confinement{
		box:     boxConfig{namespaces: ns, network: s.network, workspace: ws, roots: s.roots, tmpSize: s.tmpSize},
		protect: protect,
	}
	if !ns {
		return c, nil
	}
	if err := redirectable(protect, writable); err != nil {
		return confinement{}, err
	}
	dirs, err := maskedDirs(writable, s.spillRoot)
	if err != nil {
		return confinement{}, s.nameRoot(err, ws)
	}
	c.box.maskDirs = dirs
	if err := withAuditLog(&c.box, dshEnv, writable); err != nil {
		return confinement{}, err
	}
	c.maskFiles = maskedFiles(dshEnv, writable)
	c.others = otherInstanceMasks(writable, dirs)
	return c, nil
}

// launchFailure has the call run the launcher's failure mode instead of bash, for err, the
// reason the session's box could not be built: the call is a launcher failure (exit 125
// and one "dsh-sandbox:" line), never a denial.
func (s *confiner) launchFailure(cmd *bashexec.Command, mode, enforcement string, err error) (bashexec.FinishFunc, error) {
	s.log.Warn("bash-sandbox: the session sandbox did not start", "err", err)
	exe, xerr := self()
	if xerr != nil {
		return nil, err
	}
	cmd.Argv = []string{exe, launch.FailArg, strings.TrimPrefix(err.Error(), "bash-sandbox: ")}
	return func(res *shell.RunResult) { res.Sandbox = sandboxFacts(mode, enforcement, *res, true) }, nil
}

// launchPolicy is the Landlock policy of a command in mode: in workspace-write, the
// workspace ws, the private temp dir tmp (and the private /dev/shm in the namespaces)
// and the other writable roots are writable.
func (s *confiner) launchPolicy(mode, ws, tmp string, ns bool) launch.Policy {
	lp := launch.Policy{Mode: mode, Network: s.network}
	if mode != shell.ModeWorkspaceWrite {
		return lp
	}
	lp.WorkspaceRoot = ws
	lp.WritableRoots = []string{tmp}
	if ns {
		lp.WritableRoots = append(lp.WritableRoots, "/dev/shm")
	}
	for _, r := range s.roots {
		if r != ws {
			lp.WritableRoots = append(lp.WritableRoots, r)
		}
	}
	return lp
}

// withTempDir is env with TMPDIR set to the session's private temp dir.
func withTempDir(env map[string]string, tmp string) map[string]string {
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	env["TMPDIR"] = tmp
	return env
}

// checkStatic refuses, on a backend without namespaces, a configuration whose writable
// roots (writableRoots, and the configured workspace root) hold a file of the running
// profile or $DSH_HOME.
func (s *confiner) checkStatic(be backend) error {
	if !be.usable || be.namespaces() {
		return nil
	}
	roots := append([]string{s.resolver.root}, s.roots...)
	return unprotectable(protectedPaths(nil, s.profileFiles(), nil), roots)
}
