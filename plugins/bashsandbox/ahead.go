package bashsandbox

import (
	"sync"
	"sync/atomic"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// A server's first session need not wait for its box's process to start (a clone into
// new namespaces and a re-execution of dsh, 3–5 ms): a server's executor starts one
// box process ahead, for no session yet, in the namespaces with its network policy, as
// soon as a first client shows up (OpenBoxAhead: after the answer to its first
// request is on its way, which the start must not delay — it holds dsh's processor
// while the kernel makes the namespaces and runs the exec); the first box of that
// configuration a session opens takes it, and sets it up like any box. One is started
// per Supervisor, once: the cold start is what it is for. One not taken ends with its
// executor's activation.
//
// Its process stays in the cgroups it was started in — the Supervisor's, not the
// session's limits: moving a running process between cgroups waits for an RCU grace
// period (10 ms here), more than the start it saves. What it starts is placed in the
// session's cgroups like the commands of any box.

// boxAhead is set by StartBoxAhead.
var boxAhead atomic.Bool

// StartBoxAhead makes the rows applied from now on (a server's) ready one box process
// for the first session, started by OpenBoxAhead.
func StartBoxAhead() { boxAhead.Store(true) }

// OpenBoxAhead starts the box processes readied for a first session (in the
// background; once per Supervisor). A server calls it when its first client's first
// answer is ready.
func OpenBoxAhead() {
	ahead.mu.Lock()
	var start []*aheadBox
	for _, a := range ahead.boxes {
		if !a.spawning {
			a.spawning = true
			start = append(start, a)
		}
	}
	ahead.mu.Unlock()
	for _, a := range start {
		go a.spawn()
	}
}

// aheadBox is a box process started ahead, waiting for its setup.
type aheadBox struct {
	sup      *subprocess.Supervisor
	network  string
	spawning bool          // OpenBoxAhead started it (under ahead.mu)
	ready    chan struct{} // closed once the spawn returned
	proc     *subprocess.Process
	conn     *launch.Conn
	err      error
}

var ahead = struct {
	mu      sync.Mutex
	boxes   map[*subprocess.Supervisor]*aheadBox // not taken yet
	started map[*subprocess.Supervisor]bool
}{boxes: map[*subprocess.Supervisor]*aheadBox{}, started: map[*subprocess.Supervisor]bool{}}

// readyAhead readies sup's box ahead, with network policy network, for OpenBoxAhead,
// unless one was readied already.
func readyAhead(sup *subprocess.Supervisor, network string) {
	a := &aheadBox{sup: sup, network: network, ready: make(chan struct{})}
	ahead.mu.Lock()
	if ahead.started[sup] {
		ahead.mu.Unlock()
		return
	}
	ahead.started[sup], ahead.boxes[sup] = true, a
	ahead.mu.Unlock()
	sup.OnClose(func() {
		dropAhead(sup)
		ahead.mu.Lock()
		delete(ahead.started, sup)
		ahead.mu.Unlock()
	})
}

// spawn starts the box process.
func (a *aheadBox) spawn() {
	defer close(a.ready)
	a.proc, a.conn, a.err = spawnBox(a.sup, boxConfig{namespaces: true, network: a.network}, "", proc.ResourceLimits{})
}

// takeAhead hands sup's box process started ahead to a box of conf; false when there
// is none of that configuration (or it did not start).
func takeAhead(sup *subprocess.Supervisor, conf boxConfig) (*subprocess.Process, *launch.Conn, bool) {
	ahead.mu.Lock()
	a := ahead.boxes[sup]
	if a == nil || !a.spawning || !conf.namespaces || a.network != conf.network {
		ahead.mu.Unlock()
		return nil, nil, false
	}
	delete(ahead.boxes, sup)
	ahead.mu.Unlock()
	<-a.ready
	if a.err != nil {
		return nil, nil, false
	}
	return a.proc, a.conn, true
}

// dropAhead ends sup's box process started ahead, if it was not taken.
func dropAhead(sup *subprocess.Supervisor) {
	ahead.mu.Lock()
	a := ahead.boxes[sup]
	delete(ahead.boxes, sup)
	ahead.mu.Unlock()
	if a != nil && a.spawning {
		go func() {
			<-a.ready
			a.end()
		}()
	}
}

// end ends the box process: closing its control socket ends it (and the kill, one that
// lingers).
func (a *aheadBox) end() {
	if a.err != nil {
		return
	}
	a.conn.Close()
	a.proc.Kill()
}
