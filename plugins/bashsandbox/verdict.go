package bashsandbox

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/shell"
)

// A server's first confined call need not wait for the probe: on the namespace
// backend it opens its session's box anyway, and that box can give the same verdict —
// that it runs, and that a thread it confines as it confines a command is refused a
// write the box itself may make. Only that refusal is a verdict (confirmed); a box that
// does not start or does not confirm leaves the call waiting for the probe, as before.

// confirmFirst has the call's own box give the backend's verdict when this process has
// none yet: it opens the session's box for a call in mode (the namespace backend, which
// the probe finds wherever the host has user namespaces) and asks it to confirm that it
// confines. Nothing runs in the box before that. Errors are not the call's: it goes on
// to wait for the probe, and meets its own errors there.
func (s *confiner) confirmFirst(spec shell.ExecSpec, mode, root string) {
	if s.namespaces == NamespacesOff || probed(s.namespaces) || !boxVerdicts() {
		return
	}
	sess, pin, err := s.pinnedSession(spec.SessionID, root)
	if err != nil {
		return
	}
	c, err := s.confinementOf(backend{usable: true, kind: BackendNamespaces}, mode, pin.path, spec.DshEnv)
	if err != nil {
		return
	}
	b, err := s.boxFor(sess, c, spec.SessionID, false)
	if err != nil {
		return
	}
	if err := b.confirm(); err != nil {
		// A box that does not confine must not run the call either, whatever the
		// probe finds: the next box is a new one.
		s.log.Warn("bash-sandbox: the session sandbox did not confirm its confinement; waiting for the probe", "err", err)
		b.kill()
		return
	}
	confirmed()
}

// checkPolicy is the policy a box's confirmation is asked under (a variable for tests):
// read-only, under which the box's private /tmp — writable to the box — must be
// refused.
var checkPolicy = func(network string) launch.Policy {
	return launch.Policy{Mode: shell.ModeReadOnly, Network: network}
}

// checkDir is where a box's confirmation tries its write: the private /tmp of a box in
// the namespaces.
const checkDir = "/tmp"

// confirm asks the box to confirm that it confines (launch.Check): nil only when the
// confined thread's write was refused with EACCES.
func (b *box) confirm() error {
	id, reply, _, err := b.register()
	if err != nil {
		return err
	}
	defer b.forget(id)
	stop := b.watchAnswer(time.Now().Add(probeTimeout), nil, 0)
	defer stop()
	m := launch.Check{ID: id, Policy: checkPolicy(b.conf.network), Dir: checkDir}
	if err := b.conn.Send(m.Encode()); err != nil {
		return fmt.Errorf("send the check: %w", err)
	}
	rep, ok := <-reply
	closeAll(rep.fds)
	switch {
	case !ok:
		return b.failure()
	case rep.r.Type != launch.MsgChecked:
		return fmt.Errorf("unexpected answer %d to the check", rep.r.Type)
	case rep.r.Message != "":
		return fmt.Errorf("%s: %s", rep.r.Op, rep.r.Message)
	case rep.r.Errno == 0:
		return errors.New("a confined thread of the box created a file in its " + checkDir)
	case syscall.Errno(rep.r.Errno) != syscall.EACCES:
		return fmt.Errorf("a confined thread's write in %s failed with %v, not with the confinement's refusal", checkDir, syscall.Errno(rep.r.Errno))
	}
	return nil
}
