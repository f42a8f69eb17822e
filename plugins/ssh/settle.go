package ssh

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/dsh-dev/dsh/proc"
)

// run serves the channel's requests (exit-status, exit-signal) until the channel
// closes, then settles the process.
func (p *Process) run(reqs <-chan *xssh.Request) {
	for {
		var r *xssh.Request
		select {
		case r = <-reqs:
		case <-p.abandoned:
			// sshd keeps a channel open while its session's process lives, and this
			// one never started the command: settle now; the channel's requests are
			// still drained (an unserved channel would stall the connection).
			go xssh.DiscardRequests(reqs)
			p.settle()
			return
		}
		if r == nil {
			break
		}
		switch r.Type {
		case "exit-status":
			if code, ok := exitStatus(r); ok {
				p.tear.Exited(proc.Exited(code))
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if xssh.Unmarshal(r.Payload, &m) == nil {
				p.tear.Exited(proc.Exit{Signal: signalName(m.Signal)})
			}
		}
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
	}
	p.io.Wait() // stdout's reader has seen the start line, or EOF without one
	p.settle()
}

// exitStatus decodes an exit-status request.
func exitStatus(r *xssh.Request) (int, bool) {
	var m struct{ Status uint32 }
	if r.Type != "exit-status" || xssh.Unmarshal(r.Payload, &m) != nil {
		return 0, false
	}
	return int(m.Status), true
}

// signalName turns an SSH signal name ("TERM") into the local form ("SIGTERM").
func signalName(s string) string {
	if s == "" || strings.Contains(s, "@") {
		return "SIG" + strings.ToUpper(strings.TrimSuffix(s, "@openssh.com"))
	}
	return "SIG" + s
}

// settle fixes the outcome once the channel closed and the output is complete: it
// waits for a kill order in flight, releases the channel and the command's place on
// its connection, and closes Done.
func (p *Process) settle() {
	from := p.tear.Settling()
	lost := p.awaitVerdict(from)
	cut := p.tear.AwaitKill()
	p.ch.Close()
	remnant := p.unregister(from, cut)
	err := p.failure(from, lost)
	p.closeStreams(err)
	p.forget(remnant, !from.Killing())
	p.tear.Settle(err)
}

// awaitVerdict waits, when the channel closed without an exit status, for the
// connection's verdict: usually it broke (the library closes the channels before it
// reports the loss), and then the loss is reported as such and the remote command is
// remembered for killing. It returns the connection's LostError, or nil.
func (p *Process) awaitVerdict(from proc.Phase) error {
	p.mu.Lock()
	lost, failed := p.lost, p.startErr != nil
	p.mu.Unlock()
	if lost != nil || from.Exited() || failed {
		return lost
	}
	select {
	case <-p.c.dead:
	case <-time.After(time.Second):
	}
	lerr := p.c.lostErr()
	if lerr == nil {
		return nil
	}
	p.mu.Lock()
	p.lost = lerr
	p.mu.Unlock()
	return lerr
}

// unregister tells the control shell that the command ended — unless its output was
// cut after its exit and nothing killed it: then something it left running holds the
// output (`cmd &`), and that remnant stays registered and is ended when the Host
// closes, as locally. It reports such a remnant.
func (p *Process) unregister(from proc.Phase, cut bool) (remnant bool) {
	p.mu.Lock()
	started, pid := p.start == startDone, p.pid
	p.mu.Unlock()
	remnant = cut && !from.Killing() && started
	if started && !remnant {
		p.c.tell("u " + strconv.Itoa(pid) + "\n")
	}
	return remnant
}

// failure is the infrastructure failure that ended the command without an exit
// status: the lost connection, or a channel that closed without one; nil when the
// command exited (or never started).
func (p *Process) failure(from proc.Phase, lost error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case from.Exited():
		return nil
	case lost != nil:
		return lost
	case p.start == startDone:
		return fmt.Errorf("ssh: %s: the command's channel closed without an exit status", p.h.set.address)
	}
	return nil
}

// closeStreams ends the captured output; a failure of a command that started is the
// last line of its stderr, so that a background job shows it.
func (p *Process) closeStreams(failure error) {
	p.mu.Lock()
	note := ""
	if failure != nil && p.start == startDone {
		note = failure.Error() + "\n"
		if p.errLast != 0 && p.errLast != '\n' {
			note = "\n" + note
		}
	}
	p.mu.Unlock()
	if note != "" {
		_, _ = p.stderr.Write([]byte(note))
	}
	p.stdout.Close()
	p.stderr.Close()
}

// forget releases the command's place on its connection, remembering a remnant's
// group to kill when the Host closes and, for a command that ended by itself (not
// killed), its group to end with its session.
func (p *Process) forget(remnant, unkilled bool) {
	p.mu.Lock()
	g := group{pid: p.pid, birth: p.birth, graceMs: p.graceMs}
	started := p.start == startDone
	p.mu.Unlock()
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if started && unkilled {
		p.c.leftLocked(p.owner, g.pid)
	}
	if remnant {
		h.remnants = append(h.remnants, g)
		if len(h.remnants) > maxRemnants {
			h.remnants = h.remnants[len(h.remnants)-maxRemnants:]
		}
	}
	delete(h.live, p)
	delete(p.c.procs, p)
	p.c.used--
	h.notifyLocked()
}

// spawnFailure explains a command that ended before its start line: the login shell
// found no bash, or failed otherwise.
func (p *Process) spawnFailure() error {
	ex, _ := p.tear.Exit()
	if ex.Err != nil {
		return ex.Err
	}
	if ex.Code != nil && *ex.Code == 127 {
		return spawnError("exec", "bash", syscall.ENOENT)
	}
	p.mu.Lock()
	msg := strings.TrimSpace(string(p.preStderr))
	p.mu.Unlock()
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	status := "no exit status"
	switch {
	case ex.Code != nil:
		status = fmt.Sprintf("exit status %d", *ex.Code)
	case ex.Signal != "":
		status = "signal " + ex.Signal
	}
	if msg != "" {
		status += ": " + msg
	}
	return fmt.Errorf("spawn failed: the remote login shell did not start the command (%s)", status)
}

// spawnError is the local form of a remote start failure.
func spawnError(op, path string, errno syscall.Errno) error {
	return &proc.SpawnError{Op: op, Path: path, Err: errno}
}
