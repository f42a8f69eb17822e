package ssh

import (
	"fmt"
	"sync"
	"time"
)

// What a remote command leaves running when it ends by itself (`cmd &`, `nohup cmd &`,
// `( cmd & )`: processes that stay in its process group) ends with its session. The
// control shell keeps the registration of a command whose group still has members when
// it ends (the `u` order), so it is killed with the connection at the latest; the
// session's end orders it killed (`x`) on each connection that is still up. Processes
// that left the group (setsid, daemons) are out of reach: there is no remote cgroup.

// Bounds of a session's end on the remote host: SIGKILL at most leftoverGraceMs after
// SIGTERM, and the end waits at most leftoverWait for the kill orders' outcomes.
const (
	leftoverGraceMs = 500
	leftoverWait    = 2 * time.Second
)

// leftLocked records that the command pid of owner ended by itself (h.mu held): its
// group ends with its session. The oldest records of an owner go past maxRemnants.
func (c *conn) leftLocked(owner string, pid int) {
	if owner == "" {
		return
	}
	if c.left == nil {
		c.left = map[string][]int{}
	}
	pids := append(c.left[owner], pid)
	if len(pids) > maxRemnants {
		pids = pids[len(pids)-maxRemnants:]
	}
	c.left[owner] = pids
}

// endLeftovers orders killed, on every connection up, what owner's finished commands
// left in their process groups, and waits (bounded) for the outcomes.
func (h *Host) endLeftovers(owner string) {
	if owner == "" {
		return
	}
	type leftover struct {
		c   *conn
		pid int
	}
	var all []leftover
	h.mu.Lock()
	for _, c := range h.conns {
		for _, pid := range c.left[owner] {
			all = append(all, leftover{c, pid})
		}
		delete(c.left, owner)
	}
	h.mu.Unlock()
	if len(all) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, l := range all {
		wg.Go(func() {
			id := h.nextID()
			_, _ = l.c.order(id, fmt.Sprintf("x %d %d - %d\n", id, l.pid, leftoverGraceMs))
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(leftoverWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		h.log.Warn("ssh: the remote leftovers of an ended session are not all gone yet", "address", h.set.address, "session", owner)
	}
}
