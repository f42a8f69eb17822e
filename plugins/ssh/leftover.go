package ssh

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// What a remote command leaves running when it ends by itself (`cmd &`, `nohup cmd &`,
// `( cmd & )`, `setsid cmd &`) ends with its session. Two ways reach it:
//   - its process group: the control shell keeps the registration of a command whose
//     group still has members when it ends (the `u` order), so it is killed with the
//     connection at the latest; the session's end orders it killed (`x`) on each
//     connection that is still up;
//   - its environment, for what left the group (setsid, daemons): every command of a
//     session exports ownerVar, its session's tag, and its descendants inherit it; the
//     session's end orders every process of the remote user whose environment (as
//     /proc/<pid>/environ shows it: what it was started with) holds the tag killed
//     (`e`). A process that was started without it (`env -u`, `env -i`) and left the
//     group is out of reach: there is no remote cgroup.

// ownerVar is the variable that carries a command's session tag (ownerTag) on the
// remote host; commandVar carries the command's own (Process.tag), by which a command
// whose start line a lost connection kept from dsh is found again.
const (
	ownerVar   = "__dsh_owner"
	commandVar = "__dsh_cmd"
)

// ownerTag is owner's tag ("" for no owner): a keyed hash of the session id, so that
// it names the session on this Host only and reveals nothing of the id.
func (h *Host) ownerTag(owner string) string {
	if owner == "" {
		return ""
	}
	m := hmac.New(sha256.New, h.tagKey[:])
	m.Write([]byte(owner))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// ranLocked records that owner started a command (h.mu held): its end sweeps the host.
func (h *Host) ranLocked(owner string) {
	if owner != "" {
		h.owners[owner] = true
	}
}

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
// left in their process groups, and on one of them every process carrying owner's tag;
// it waits (bounded) for the outcomes.
func (h *Host) endLeftovers(owner string) {
	if owner == "" {
		return
	}
	var orders []func()
	h.mu.Lock()
	for _, c := range h.conns {
		for _, pid := range c.left[owner] {
			orders = append(orders, func() {
				id := h.nextID()
				_, _ = c.order(id, fmt.Sprintf("x %d %d - %d\n", id, pid, leftoverGraceMs))
			})
		}
		delete(c.left, owner)
	}
	if h.owners[owner] && len(h.conns) > 0 {
		c, tag := h.conns[0], h.ownerTag(owner)
		orders = append(orders, func() {
			id := h.nextID()
			_, _ = c.killTagged(id, ownerVar, tag, leftoverGraceMs)
		})
	}
	delete(h.owners, owner)
	h.mu.Unlock()
	if len(orders) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, o := range orders {
		wg.Go(o)
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
