package ssh

import (
	"errors"
	"fmt"
	"time"
)

// remoteTree is the Process as its teardown reaches it (a proc.Tree): through kill
// orders on its connection's control channel, and by closing its channel.
type remoteTree Process

// Terminate orders the remote kill — SIGTERM to the group, SIGKILL after graceMs to
// what is left — once the pid is known (onStart sends the order when the start line
// arrives); a command that did not start has nothing to kill.
func (t *remoteTree) Terminate() {
	p := (*Process)(t)
	p.mu.Lock()
	p.killDone = make(chan struct{})
	start := p.start
	p.mu.Unlock()
	switch start {
	case startDone:
		go p.sendKill()
	case startFailed:
		close(p.killDone)
	default:
		// The start line has not arrived yet: onStart sends the order when it does.
		go p.awaitStart()
	}
}

// Escalate does nothing: the kill order escalates on the remote host by itself.
func (t *remoteTree) Escalate() {}

// AwaitGone waits for the kill order to finish on the remote: the group is gone, or
// got SIGKILL after graceMs.
func (t *remoteTree) AwaitGone(time.Time, <-chan struct{}) bool {
	p := (*Process)(t)
	p.mu.Lock()
	killDone := p.killDone
	p.mu.Unlock()
	<-killDone
	return true
}

// Cut ends the drain: the channel is closed (a `cmd &` left behind may hold the
// output open).
func (t *remoteTree) Cut() { t.ch.Close() }

// errNotStarted: a command killed before its start line did not start in time.
var errNotStarted = errors.New("the command had not started")

// awaitStart gives a command being killed before its start line arrived the grace
// period to start (then onStart kills it); a command that has not started by then —
// a login shell stuck in its start-up files — is abandoned: its channel is closed and
// it settles without having run, so that no call outlives its deadline by more than
// the grace period.
func (p *Process) awaitStart() {
	t := time.NewTimer(time.Duration(p.graceMs) * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.started:
	case <-t.C:
		if p.onStart(nil, fmt.Errorf("ssh: %s: %w %dms after it was killed", p.h.set.address, errNotStarted, p.graceMs)) {
			close(p.abandoned)
		}
	}
}

// sendKill orders the kill on the connection's control channel and waits for it to
// finish on the remote.
func (p *Process) sendKill() {
	defer close(p.killDone)
	_, err := p.c.kill(p.h.nextID(), p.pid, p.birth, p.graceMs)
	if err != nil && !errors.As(err, new(*LostError)) {
		p.h.log.Warn("ssh: cannot kill a remote command", "pid", p.pid, "err", err)
	}
}

// orphaned marks a command of a lost connection. It returns the remote group to kill
// once a connection is up, when the command had started and not exited.
func (p *Process) orphaned(lerr *LostError) (group, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tear.LeaderRuns() {
		return group{}, false
	}
	p.lost = lerr
	if p.start != startDone {
		// Its start line may not have come before the loss: found by its tag.
		return group{tag: p.tag, graceMs: p.graceMs}, true
	}
	return group{pid: p.pid, birth: p.birth, graceMs: p.graceMs}, true
}
