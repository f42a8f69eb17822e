package subprocess

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// PrepareLimits makes, in the background, the cgroups a command of owner under r will
// start in, unless some are ready: a session's first command otherwise makes them on
// its way (the instance's directories the first time, its session's, its own: a few
// hundred microseconds). A caller about to wait for something else (a sandbox's box)
// calls it first. A failure is left to the spawn, which meets it.
func (s *Supervisor) PrepareLimits(owner string, r proc.ResourceLimits) {
	if r.IsZero() {
		return
	}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return
	}
	v2 := s.usesCgroups()
	s.preparing.Add(1)
	go func() {
		defer s.preparing.Done()
		s.budgets.prepare(owner, r, v2)
	}()
}

// budgets hold the cgroups of resource limits (Spec.Resources). Each controller is
// enforced in one hierarchy: cgroup v2 where the harness's cgroup delegates it, else
// the controller's cgroup v1 hierarchy. In each hierarchy used, the harness has an
// instance directory (in cgroup v2 the one its commands already live in; in v1
// <own cgroup>/dsh-<pid>-<random>, locked while the harness lives), a directory per
// session below it (proc.OwnerDirName) holding the session's limits, and one per
// command below that (c<id>) holding the command's.
//
// Limits around the harness are found when the Supervisor starts: under a pids limit
// of its own cgroup or one above, every command goes to a pids cgroup whose limit
// leaves the harness a reserve (pidsReserve), so that a fork bomb cannot take the
// threads the harness needs to end it; under a memory limit, every command goes to a
// memory cgroup of its own, so that the OOM killer's victim (a command: they have
// oom_score_adj 1000) is told to the model.
type budgets struct {
	log    *slog.Logger
	mounts cgroupMounts
	fake   bool   // mounts come from Options.CgroupRoot
	v2inst string // the Supervisor's cgroup v2 directory ("" without one)
	name   string // the instance directories' name
	notify func(dir string)
	// cpus is how many CPUs a command can run on at most (onlineCPUs; fixed with fake
	// mounts): a CPU quota of that many or more cannot bind (bindingCPUs).
	cpus func() float64

	mu        sync.Mutex
	byCtl     map[string]*hierarchy // controller → the hierarchy that enforces it
	why       map[string]string     // controller → why none can
	enclosing enclosingLimits
	always    []string // controllers every command is placed in (limits around the harness)
	sessions  map[string]*sessionCgroups
	stale     []*budgetCgroups // command directories that were busy when removed
	seq       uint64           // names the command directories (c<seq>)
	// spares are emptied command cgroups kept for reuse (limits written, files open),
	// by what they were made for.
	spares map[spareKind][]*budgetCgroups
	// ends counts the sessions ended: a prepare that saw one end while it ran keeps
	// nothing (it may be its own session's).
	ends   uint64
	closed bool
	// movable are the pids of the harness's own processes besides itself (its watchdog),
	// which leaveOwnCgroup may move (nil: none); it may wait for the watchdog's start.
	movable func() []int
}

// hierarchy is one cgroup hierarchy resource limits use.
type hierarchy struct {
	v2   bool
	own  string   // the harness's own cgroup
	inst string   // the instance directory
	ctls []string // the controllers it enforces for the harness
	// lock is the v1 instance directory, held open and locked while the harness lives;
	// home the harness's own cgroup's tasks file (v1), where the thread that forked a
	// leader returns.
	lock, home *os.File
	// pidsLimit is the instance's pids.max: the harness's reserve under a pids limit
	// around it (0: none).
	pidsLimit int64
}

// newBudgets probes where limits can be enforced (mounts; v2inst is the Supervisor's
// cgroup v2 directory) and applies the reserve under limits around the harness.
// movable lists the pids of the harness's processes besides its own (its watchdog).
func newBudgets(log *slog.Logger, mounts cgroupMounts, fake bool, v2inst string, notify func(string), movable func() []int) *budgets {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	b := &budgets{
		log: log, mounts: mounts, fake: fake, v2inst: v2inst, notify: notify,
		name:  fmt.Sprintf("dsh-%d-%s", os.Getpid(), hex.EncodeToString(suffix)),
		byCtl: map[string]*hierarchy{}, why: map[string]string{}, sessions: map[string]*sessionCgroups{},
		spares: map[spareKind][]*budgetCgroups{}, movable: movable, cpus: onlineCPUs,
	}
	if fake {
		b.cpus = func() float64 { return fakeCPUs }
	}
	b.applyEnclosing()
	return b
}

// applyEnclosing reads the limits around the harness and, under one, places every
// command in the controller's cgroups (with the pids reserve).
func (b *budgets) applyEnclosing() {
	var e enclosingLimits
	for _, m := range []struct {
		dir string
		v2  bool
		ok  bool
	}{{b.mounts.v1[ctlPids], false, b.mounts.v1[ctlPids] != ""}, {b.mounts.v1[ctlMemory], false, b.mounts.v1[ctlMemory] != ""}, {b.mounts.v2, true, b.mounts.v2 != ""}} {
		if !m.ok {
			continue
		}
		got := readEnclosing(m.dir, m.v2)
		if got.pidsLimited && (!e.pidsLimited || got.freePids < e.freePids) {
			e.freePids, e.pidsLimited = got.freePids, true
		}
		if got.memory > 0 && (e.memory == 0 || got.memory < e.memory) {
			e.memory = got.memory
		}
	}
	b.enclosing = e
	if e.pidsLimited {
		h, err := b.hierarchyFor(ctlPids)
		if err == nil {
			h.pidsLimit = max(e.freePids-pidsReserve(e.freePids), 1)
			err = cgDir{path: h.inst, v2: h.v2}.setPids(h.pidsLimit)
		}
		if err != nil {
			b.log.Warn("subprocess: a pids limit around the harness is shared with its commands: a fork bomb may keep the harness from ending it", "err", err)
		} else {
			b.always = append(b.always, ctlPids)
		}
	}
	if e.memory > 0 {
		if _, err := b.hierarchyFor(ctlMemory); err == nil {
			b.always = append(b.always, ctlMemory)
		}
	}
}

// LimitError is a resource limit the host cannot enforce.
type LimitError struct {
	// Key is the limit's configuration key ("memory", "sessionCpus"…).
	Key string
	// Why says what the host lacks.
	Why string
}

// Error is "limits.<key> cannot be enforced on this host: <why>".
func (e *LimitError) Error() string {
	return "limits." + e.Key + " cannot be enforced on this host: " + e.Why
}

// keyControllers maps each limit's key to its controller, in the configuration's order.
var keyControllers = []struct {
	key, ctl string
	set      func(proc.ResourceLimits) bool
}{
	{"memory", ctlMemory, func(r proc.ResourceLimits) bool { return r.Memory > 0 }},
	{"processes", ctlPids, func(r proc.ResourceLimits) bool { return r.Processes > 0 }},
	{"cpus", ctlCPU, func(r proc.ResourceLimits) bool { return r.CPUs > 0 }},
	{"sessionMemory", ctlMemory, func(r proc.ResourceLimits) bool { return r.SessionMemory > 0 }},
	{"sessionProcesses", ctlPids, func(r proc.ResourceLimits) bool { return r.SessionProcesses > 0 }},
	{"sessionCpus", ctlCPU, func(r proc.ResourceLimits) bool { return r.SessionCPUs > 0 }},
}

// check returns a *LimitError for the first limit of r no hierarchy can enforce.
func (b *budgets) check(r proc.ResourceLimits) error {
	for _, k := range keyControllers {
		if !k.set(r) {
			continue
		}
		if _, err := b.hierarchyFor(k.ctl); err != nil {
			return &LimitError{Key: k.key, Why: err.Error()}
		}
	}
	return nil
}

// mechanism names what enforces r: "cgroup v1 (memory, pids, cpu)", "cgroup v2
// (memory, pids), cgroup v1 (cpu)"; "" when r sets no limit.
func (b *budgets) mechanism(r proc.ResourceLimits) string {
	var v1, v2 []string
	for _, c := range []string{ctlMemory, ctlPids, ctlCPU} {
		used := false
		for _, k := range keyControllers {
			used = used || (k.ctl == c && k.set(r))
		}
		if !used {
			continue
		}
		h, err := b.hierarchyFor(c)
		switch {
		case err != nil:
			continue
		case h.v2:
			v2 = append(v2, c)
		default:
			v1 = append(v1, c)
		}
	}
	var parts []string
	if len(v2) > 0 {
		parts = append(parts, "cgroup v2 ("+strings.Join(v2, ", ")+")")
	}
	if len(v1) > 0 {
		parts = append(parts, "cgroup v1 ("+strings.Join(v1, ", ")+")")
	}
	return strings.Join(parts, ", ")
}

// hierarchyFor returns the hierarchy that enforces controller c, readying it on first
// use, or why none can.
func (b *budgets) hierarchyFor(c string) (*hierarchy, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hierarchyLocked(c)
}

func (b *budgets) hierarchyLocked(c string) (*hierarchy, error) {
	if h := b.byCtl[c]; h != nil {
		return h, nil
	}
	if why, ok := b.why[c]; ok {
		return nil, fmt.Errorf("%s", why)
	}
	h, why2 := b.delegatedV2(c)
	if h == nil {
		var why1 string
		h, why1 = b.v1Hierarchy(c)
		if h == nil {
			b.why[c] = "no " + c + " controller: " + why2 + ", and " + why1
			return nil, fmt.Errorf("%s", b.why[c])
		}
	}
	h.ctls = append(h.ctls, c)
	b.byCtl[c] = h
	return h, nil
}

// delegatedV2 is the cgroup v2 hierarchy when the harness's cgroup delegates c to
// its children (its cgroup.subtree_control lists c, or c is in its cgroup.controllers
// and can be enabled there), with c then enabled in the instance directory; else nil
// and why not.
func (b *budgets) delegatedV2(c string) (*hierarchy, string) {
	inst := b.v2inst
	if b.fake && b.mounts.v2 != "" {
		inst = filepath.Join(b.mounts.v2, b.name)
	}
	if inst == "" || b.mounts.v2 == "" {
		return nil, "cgroup v2 is not in use (" + b.v2Absent() + ")"
	}
	base := filepath.Dir(inst)
	enabled := controllerList(base + "/cgroup.subtree_control")
	if !slices.Contains(enabled, c) {
		offered := controllerList(base + "/cgroup.controllers")
		if !slices.Contains(offered, c) {
			return nil, fmt.Sprintf("cgroup v2 at %s does not delegate it (its cgroup.controllers: %q)", base, strings.Join(offered, " "))
		}
		err := enableV2(base, c)
		if errors.Is(err, unix.EBUSY) {
			// A cgroup that holds processes gives its children no controller: the
			// harness moves into a leaf of its own first.
			if err = b.leaveOwnCgroup(base); err == nil {
				err = enableV2(base, c)
			}
		}
		if err != nil {
			return nil, fmt.Sprintf("cgroup v2 at %s offers it but cannot delegate it: %v", base, err)
		}
	}
	h := b.v2Hierarchy(inst, base)
	if h.inst == "" {
		return nil, "cgroup v2 at " + base + ": cannot make " + inst
	}
	if err := (cgDir{path: h.inst, v2: true}).enable([]string{c}); err != nil {
		return nil, fmt.Sprintf("cgroup v2 at %s: %v", h.inst, err)
	}
	return h, ""
}

// enableV2 enables controller c for the children of the cgroup v2 directory dir.
func enableV2(dir, c string) error {
	if v2EnableFault != nil {
		if err := v2EnableFault(dir); err != nil {
			return err
		}
	}
	return cgDir{path: dir, v2: true}.enable([]string{c})
}

// v2EnableFault, when set (by tests), fails enabling a controller in dir the way the
// kernel does for a cgroup that holds processes.
var v2EnableFault func(dir string) error

// leaveOwnCgroup moves the harness's processes (itself and b.movable: its watchdog)
// from its cgroup v2 directory own into a leaf of their own below it
// (<own>/dsh-<pid>-<random>-harness), so that own holds no process and can give
// controllers to its children: what a unit with systemd's Delegate=yes expects of the
// process it starts. It refuses when own holds any other process. The leaf stays
// until the harness is gone; a later start removes it (a dead instance's).
func (b *budgets) leaveOwnCgroup(own string) error {
	var buf [smallFile]byte
	procs, ok := readSmall(own+"/cgroup.procs", buf[:])
	if !ok {
		return errors.New("cannot read " + own + "/cgroup.procs")
	}
	pids := strings.Fields(string(procs))
	movable := []string{strconv.Itoa(os.Getpid())}
	if b.movable != nil {
		for _, pid := range b.movable() {
			movable = append(movable, strconv.Itoa(pid))
		}
	}
	for _, p := range pids {
		if !slices.Contains(movable, p) {
			return fmt.Errorf("its cgroup holds processes other than the harness's (pid %s), and a cgroup that holds processes cannot give controllers to its children", p)
		}
	}
	leaf := filepath.Join(own, b.name+"-harness")
	if err := mkdirCgroup(leaf); err != nil && err != unix.EEXIST {
		return &opError{op: "mkdir", path: leaf, err: err}
	}
	for _, p := range pids {
		if err := writeSmallFile(leaf+"/cgroup.procs", p); err != nil {
			return &opError{op: "move pid " + p + " to", path: leaf, err: err}
		}
	}
	b.log.Info("subprocess: the harness moved into a cgroup v2 leaf of its own, so that its cgroup can give controllers to its commands'", "leaf", leaf)
	return nil
}

func (b *budgets) v2Absent() string {
	if b.mounts.v2 == "" {
		return "no cgroup2 mount"
	}
	return "the Supervisor runs its commands under their process groups only"
}

// v2Hierarchy is the cgroup v2 hierarchy object (one for every controller it
// enforces), its instance directory made when it is a fake one.
func (b *budgets) v2Hierarchy(inst, base string) *hierarchy {
	for _, h := range b.byCtl {
		if h.v2 {
			return h
		}
	}
	h := &hierarchy{v2: true, own: base, inst: inst}
	if b.fake {
		if err := mkdirCgroup(inst); err != nil && err != unix.EEXIST {
			h.inst = ""
		}
	}
	return h
}

// v1Hierarchy readies controller c's cgroup v1 hierarchy: the instance directory made
// and locked below the harness's own cgroup, whose tasks file it opens; or why not.
func (b *budgets) v1Hierarchy(c string) (*hierarchy, string) {
	own := b.mounts.v1[c]
	if own == "" {
		return nil, "no cgroup v1 " + c + " hierarchy is mounted"
	}
	for _, h := range b.byCtl {
		if !h.v2 && h.own == own {
			return h, "" // a co-mounted hierarchy (cpu,cpuacct)
		}
	}
	inst := filepath.Join(own, b.name)
	if err := mkdirCgroup(inst); err != nil {
		return nil, fmt.Sprintf("the cgroup v1 %s hierarchy at %s is not writable: mkdir: %s", c, own, proc.ErrnoText(err))
	}
	lock, err := os.Open(inst)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	var home *os.File
	if err == nil {
		home, err = os.OpenFile(own+"/tasks", os.O_WRONLY, 0)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		_ = unix.Rmdir(inst)
		return nil, fmt.Sprintf("the cgroup v1 %s hierarchy at %s: %v", c, own, err)
	}
	if b.notify != nil {
		b.notify(inst) // the watchdog removes it if the harness dies
	}
	return &hierarchy{own: own, inst: inst, lock: lock, home: home}, ""
}

// controllerList reads a cgroup v2 controller list ("memory pids", or "+memory" in a
// fake tree).
func controllerList(path string) []string {
	var buf [smallFile]byte
	b, ok := readSmall(path, buf[:])
	if !ok {
		return nil
	}
	var out []string
	for _, f := range strings.Fields(string(b)) {
		out = append(out, strings.TrimPrefix(f, "+"))
	}
	return out
}

// mkdirCgroup makes a cgroup directory (the kernel fills it with the controllers'
// files).
func mkdirCgroup(dir string) error {
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if cgroupMkdirHook != nil {
		cgroupMkdirHook(dir)
	}
	return nil
}

// cgroupMkdirHook, when set (by tests of a fake cgroup tree), plays the kernel's part
// after a cgroup directory is made: it creates the controllers' files.
var cgroupMkdirHook func(dir string)
