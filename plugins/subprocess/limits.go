package subprocess

import (
	"crypto/rand"
	"encoding/hex"
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

	mu        sync.Mutex
	byCtl     map[string]*hierarchy // controller → the hierarchy that enforces it
	why       map[string]string     // controller → why none can
	enclosing enclosingLimits
	always    []string // controllers every command is placed in (limits around the harness)
	sessions  map[string]*sessionCgroups
	stale     []*budgetCgroups // command directories that were busy when removed
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

// sessionCgroups are one session's cgroups, a directory in each hierarchy used.
type sessionCgroups struct {
	name    string
	dirs    map[*hierarchy]string
	v2root  *cgroupRoot // where its commands' cgroup v2 directories are made
	applied proc.ResourceLimits
	live    int // command cgroups not removed yet
	ended   bool
}

// budgetCgroups are the cgroups of one command.
type budgetCgroups struct {
	b      *budgets
	sess   *sessionCgroups
	limits proc.ResourceLimits
	dirs   []budgetDir
	// tasks are the command's v1 tasks files, homes the harness's own (same order),
	// until the leader started.
	tasks, homes []*os.File
	// v2 is the command's cgroup v2 directory, when a v2 hierarchy enforces one of its
	// controllers (the Supervisor's own otherwise).
	v2 *cgroup
	// base holds the counters that are not the command's own (its session's, the
	// reused cgroup v2 directory's), as they were when it started.
	base    baseline
	removed bool
}

type budgetDir struct {
	h   *hierarchy
	dir cgDir
}

type baseline struct {
	sessMemFailures, sessRefused, instRefused int64
	cpuMs                                     int64
}

// newBudgets probes where limits can be enforced (mounts; v2inst is the Supervisor's
// cgroup v2 directory) and applies the reserve under limits around the harness.
func newBudgets(log *slog.Logger, mounts cgroupMounts, fake bool, v2inst string, notify func(string)) *budgets {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	b := &budgets{
		log: log, mounts: mounts, fake: fake, v2inst: v2inst, notify: notify,
		name:  fmt.Sprintf("dsh-%d-%s", os.Getpid(), hex.EncodeToString(suffix)),
		byCtl: map[string]*hierarchy{}, why: map[string]string{}, sessions: map[string]*sessionCgroups{},
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
			err = cgDir{h.inst, h.v2}.setPids(h.pidsLimit)
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
		if err := (cgDir{base, true}).enable([]string{c}); err != nil {
			return nil, fmt.Sprintf("cgroup v2 at %s offers it but cannot delegate it (%v; a cgroup that holds processes, the harness among them, cannot)", base, err)
		}
	}
	h := b.v2Hierarchy(inst, base)
	if h.inst == "" {
		return nil, "cgroup v2 at " + base + ": cannot make " + inst
	}
	if err := (cgDir{h.inst, true}).enable([]string{c}); err != nil {
		return nil, fmt.Sprintf("cgroup v2 at %s: %v", h.inst, err)
	}
	return h, ""
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
	b, ok := readSmall(path)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range strings.Fields(string(b)) {
		out = append(out, strings.TrimPrefix(f, "+"))
	}
	return out
}

// controllersOf are the controllers a command under r is placed in: those of its
// limits, those every command is placed in, and, for accounting a command with
// limits, memory (its peak) and, without cgroup v2, cpuacct (its CPU time) where the
// host has them.
func (b *budgets) controllersOf(r proc.ResourceLimits, v2cg bool) (need, optional []string) {
	b.mu.Lock()
	need = append(need, b.always...)
	b.mu.Unlock()
	for _, k := range keyControllers {
		if k.set(r) && !slices.Contains(need, k.ctl) {
			need = append(need, k.ctl)
		}
	}
	if r.IsZero() {
		return need, nil
	}
	if !slices.Contains(need, ctlMemory) {
		optional = append(optional, ctlMemory)
	}
	if !v2cg {
		optional = append(optional, ctlCPUAcct)
	}
	return need, optional
}

// place makes the cgroups of command id of owner under r: its session's (with the
// session limits, written when they changed) and its own (with its limits). nil when
// it needs none. v2cg says whether the Supervisor gives the command a cgroup v2
// directory of its own anyway (for its CPU time).
func (b *budgets) place(owner string, r proc.ResourceLimits, id uint64, v2cg bool) (*budgetCgroups, error) {
	need, optional := b.controllersOf(r, v2cg)
	if len(need)+len(optional) == 0 {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.stale) > 0 {
		b.retryStaleLocked()
	}
	var hs []*hierarchy
	ctlsIn := map[*hierarchy][]string{}
	for i, c := range append(need, optional...) {
		h, err := b.hierarchyLocked(c)
		if err != nil {
			if i < len(need) {
				return nil, err
			}
			continue
		}
		if !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
		ctlsIn[h] = append(ctlsIn[h], c)
	}
	if len(hs) == 0 {
		return nil, nil
	}
	sess, err := b.sessionLocked(owner, hs, r)
	if err != nil {
		return nil, err
	}
	bc := &budgetCgroups{b: b, sess: sess, limits: r}
	if err := bc.make(hs, ctlsIn, id); err != nil {
		bc.undoLocked()
		return nil, err
	}
	sess.live++
	bc.readBaseline()
	return bc, nil
}

// sessionLocked returns owner's session cgroups, with a directory in each of hs and
// the session limits of r written where they changed.
func (b *budgets) sessionLocked(owner string, hs []*hierarchy, r proc.ResourceLimits) (*sessionCgroups, error) {
	name := proc.OwnerDirName(owner)
	s := b.sessions[name]
	if s == nil || s.ended {
		s = &sessionCgroups{name: name, dirs: map[*hierarchy]string{}}
		b.sessions[name] = s
	}
	fresh := false
	for _, h := range hs {
		if _, ok := s.dirs[h]; ok {
			continue
		}
		dir := filepath.Join(h.inst, name)
		if err := mkdirCgroup(dir); err != nil && err != unix.EEXIST {
			return nil, &opError{op: "mkdir", path: dir, err: err}
		}
		s.dirs[h] = dir
		fresh = true
		if h.v2 {
			if err := (cgDir{dir, true}).enable(h.ctls); err != nil {
				return nil, err
			}
			s.v2root = &cgroupRoot{dir: dir, lockFD: -1, maxFree: -1}
		}
	}
	want := r.Session()
	if !fresh && want == s.applied {
		return s, nil
	}
	for h, dir := range s.dirs {
		if err := applyLimits(cgDir{dir, h.v2}, h.ctls, want.SessionMemory, want.SessionProcesses, want.SessionCPUs); err != nil {
			return nil, err
		}
	}
	s.applied = want
	return s, nil
}

// applyLimits writes the limits of the controllers ctls to d (a zero limit is none:
// written as such, so that a lifted limit is lifted).
func applyLimits(d cgDir, ctls []string, memory, processes int64, cpus float64) error {
	for _, c := range ctls {
		var err error
		switch c {
		case ctlMemory:
			err = d.setMemoryOrNone(memory)
		case ctlPids:
			err = d.setPidsOrNone(processes)
		case ctlCPU:
			err = d.setCPUsOrNone(cpus)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// make makes the command's directory in each hierarchy, with its limits, and opens
// what its leader starts in.
func (bc *budgetCgroups) make(hs []*hierarchy, ctlsIn map[*hierarchy][]string, id uint64) error {
	r := bc.limits
	for _, h := range hs {
		if h.v2 {
			cg, err := bc.sess.v2root.create(id)
			if err != nil {
				return err
			}
			bc.v2 = cg
			bc.dirs = append(bc.dirs, budgetDir{h, cgDir{cg.path, true}})
		} else {
			path := bc.sess.dirs[h] + "/c" + strconv.FormatUint(id, 10)
			if err := mkdirCgroup(path); err != nil {
				return &opError{op: "mkdir", path: path, err: err}
			}
			bc.dirs = append(bc.dirs, budgetDir{h, cgDir{path, false}})
			tasks, err := os.OpenFile(path+"/tasks", os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			bc.tasks, bc.homes = append(bc.tasks, tasks), append(bc.homes, h.home)
		}
		d := bc.dirs[len(bc.dirs)-1].dir
		if err := applyCommandLimits(d, ctlsIn[h], r); err != nil {
			return err
		}
	}
	return nil
}

// applyCommandLimits writes the command limits of r that ctls enforce to a fresh
// command directory (where nothing needs lifting).
func applyCommandLimits(d cgDir, ctls []string, r proc.ResourceLimits) error {
	for _, c := range ctls {
		var err error
		switch {
		case c == ctlMemory && r.Memory > 0:
			err = d.setMemory(r.Memory)
		case c == ctlPids && r.Processes > 0:
			err = d.setPids(r.Processes)
		case c == ctlCPU && r.CPUs > 0:
			err = d.setCPUs(r.CPUs)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dir is the command's directory in the hierarchy that enforces controller c.
func (bc *budgetCgroups) dir(c string) (budgetDir, bool) {
	for _, d := range bc.dirs {
		if slices.Contains(d.h.ctls, c) {
			return d, true
		}
	}
	return budgetDir{}, false
}

// sessionDir is the session's directory in h.
func (bc *budgetCgroups) sessionDir(h *hierarchy) cgDir {
	return cgDir{bc.sess.dirs[h], h.v2}
}

// readBaseline reads the counters the command does not own, as they are at its start:
// those of its session (and, in cgroup v2, whose pids events count the limit's own
// cgroup, the instance's).
func (bc *budgetCgroups) readBaseline() {
	if d, ok := bc.dir(ctlMemory); ok && bc.limits.SessionMemory > 0 {
		bc.base.sessMemFailures = bc.sessionDir(d.h).memoryStats().failures
	}
	if d, ok := bc.dir(ctlPids); ok && d.h.v2 {
		bc.base.sessRefused = bc.sessionDir(d.h).pidsStats().refused
		bc.base.instRefused = cgDir{d.h.inst, true}.pidsStats().refused
	}
}

// started closes the tasks files: the leader is in its cgroups (nil: none).
func (bc *budgetCgroups) started() {
	if bc == nil {
		return
	}
	for _, f := range bc.tasks {
		f.Close()
	}
	bc.tasks, bc.homes = nil, nil
}

// account is what the command used and the limits it reached. cpu is the cgroup v2
// directory that accounts its CPU time, when it has one.
func (bc *budgetCgroups) account(cpu *cgroup) *proc.Budget {
	out := &proc.Budget{CPUMs: -1, PeakMemoryBytes: -1}
	switch {
	case bc.v2 != nil:
		if ms, ok := (cgDir{bc.v2.path, true}).cpuMs(); ok {
			out.CPUMs = ms
		}
	case cpu != nil:
		if ms, ok := (cgDir{cpu.path, true}).cpuMs(); ok {
			out.CPUMs = max(ms-bc.base.cpuMs, 0)
		}
	default:
		if d, ok := bc.dir(ctlCPUAcct); ok {
			if ms, ok := d.dir.cpuMs(); ok {
				out.CPUMs = ms
			}
		}
	}
	if d, ok := bc.dir(ctlMemory); ok {
		st := d.dir.memoryStats()
		out.PeakMemoryBytes = st.peak
		if st.oomKills > 0 {
			if hit, ok := bc.memoryHit(d, st); ok {
				out.Hits = append(out.Hits, hit)
			}
		}
	}
	if d, ok := bc.dir(ctlPids); ok {
		if hit, ok := bc.pidsHit(d); ok {
			out.Hits = append(out.Hits, hit)
		}
	}
	return out
}

// memoryHit tells which memory limit made the OOM killer kill a process of the
// command: its own (its limit stopped an allocation), its session's (the session's
// did), or the one around the harness. A host-wide OOM kill is no limit's.
func (bc *budgetCgroups) memoryHit(d budgetDir, st memoryStats) (proc.LimitHit, bool) {
	r := bc.limits
	sessionMoved := r.SessionMemory > 0 && bc.sessionDir(d.h).memoryStats().failures > bc.base.sessMemFailures
	switch {
	case r.Memory > 0 && (st.failures > 0 || !sessionMoved):
		return proc.LimitHit{Limit: proc.LimitMemory, Size: r.Memory}, true
	case r.SessionMemory > 0:
		return proc.LimitHit{Limit: proc.LimitSessionMemory, Size: r.SessionMemory}, true
	case bc.b.enclosing.memory > 0:
		return proc.LimitHit{Limit: proc.LimitMemory, Size: bc.b.enclosing.memory}, true
	}
	return proc.LimitHit{}, false
}

// pidsHit tells whether a fork of the command was refused, and which limit refused it:
// the innermost whose cgroup reached it.
func (bc *budgetCgroups) pidsHit(d budgetDir) (proc.LimitHit, bool) {
	r := bc.limits
	st := d.dir.pidsStats()
	sess := bc.sessionDir(d.h).pidsStats()
	refused := st.refused > 0
	if d.h.v2 {
		// cgroup v2 counts a refusal in the cgroup whose limit refused it (and above).
		refused = refused || sess.refused > bc.base.sessRefused ||
			cgDir{d.h.inst, true}.pidsStats().refused > bc.base.instRefused
	}
	if !refused {
		return proc.LimitHit{}, false
	}
	reached := func(peak, limit int64) bool { return limit > 0 && (peak < 0 || peak >= limit) }
	switch {
	case reached(st.peak, r.Processes):
		return proc.LimitHit{Limit: proc.LimitProcesses, Size: r.Processes}, true
	case reached(sess.peak, r.SessionProcesses):
		return proc.LimitHit{Limit: proc.LimitSessionProcesses, Size: r.SessionProcesses}, true
	case d.h.pidsLimit > 0:
		return proc.LimitHit{Limit: proc.LimitProcesses, Size: d.h.pidsLimit}, true
	case r.Processes > 0:
		return proc.LimitHit{Limit: proc.LimitProcesses, Size: r.Processes}, true
	case r.SessionProcesses > 0:
		return proc.LimitHit{Limit: proc.LimitSessionProcesses, Size: r.SessionProcesses}, true
	}
	return proc.LimitHit{}, false
}

// populated reports whether a process is left in the command's v1 cgroups (for a tree
// without a cgroup v2 directory).
func (bc *budgetCgroups) populated() bool {
	for _, d := range bc.dirs {
		if !d.h.v2 {
			return v1Populated(d.dir.path)
		}
	}
	return false
}

// signalDir is a v1 directory of the command whose processes a signal reaches (for a
// tree without a cgroup v2 directory), or "".
func (bc *budgetCgroups) signalDir() string {
	for _, d := range bc.dirs {
		if !d.h.v2 {
			return d.dir.path
		}
	}
	return ""
}

// remove removes the command's v1 directories (its v2 one is the Process's) once its
// tree is gone (nil: nothing). One still busy is tried again later (retryStale).
func (bc *budgetCgroups) remove() {
	if bc == nil {
		return
	}
	bc.b.mu.Lock()
	defer bc.b.mu.Unlock()
	if bc.removeLocked() != nil {
		bc.b.stale = append(bc.b.stale, bc)
	}
}

// retryStaleLocked removes the command directories that were busy before.
func (b *budgets) retryStaleLocked() {
	keep := b.stale[:0]
	for _, bc := range b.stale {
		if bc.removeLocked() != nil {
			keep = append(keep, bc)
		}
	}
	b.stale = keep
}

func (bc *budgetCgroups) removeLocked() error {
	if bc.removed {
		return nil
	}
	bc.started()
	if err := bc.removeV1(); err != nil {
		return err
	}
	bc.removed = true
	bc.sess.live--
	bc.b.removeSessionLocked(bc.sess)
	return nil
}

// undo removes what place made of a command that will not start (nil: nothing).
func (bc *budgetCgroups) undo() {
	if bc == nil {
		return
	}
	bc.b.mu.Lock()
	defer bc.b.mu.Unlock()
	bc.undoLocked()
}

func (bc *budgetCgroups) undoLocked() {
	bc.started()
	_ = bc.removeV1()
	if bc.v2 != nil {
		_ = bc.v2.remove()
	}
	bc.removed = true
	bc.b.removeSessionLocked(bc.sess)
}

func (bc *budgetCgroups) removeV1() error {
	for _, d := range bc.dirs {
		if d.h.v2 {
			continue
		}
		if err := unix.Rmdir(d.dir.path); err != nil && err != unix.ENOENT {
			return &opError{op: "rmdir", path: d.dir.path, err: err}
		}
	}
	return nil
}

// endSession ends owner's session: its directories go once its last command's do.
func (b *budgets) endSession(owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[proc.OwnerDirName(owner)]
	if s == nil {
		return
	}
	s.ended = true
	b.removeSessionLocked(s)
}

func (b *budgets) removeSessionLocked(s *sessionCgroups) {
	if !s.ended || s.live > 0 {
		return
	}
	if cur := b.sessions[s.name]; cur != nil && cur != s {
		return // a session of the same name uses the directories now
	}
	for h, dir := range s.dirs {
		if err := removeCgroupDir(dir); err != nil {
			b.log.Warn("subprocess: cannot remove a session's cgroup", "err", err)
			continue
		}
		delete(s.dirs, h)
	}
	if b.sessions[s.name] == s {
		delete(b.sessions, s.name)
	}
}

// close removes every session's directories and the v1 instance directories (the v2
// one is the Supervisor's): every process has settled.
func (b *budgets) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retryStaleLocked()
	for _, s := range b.sessions {
		s.ended, s.live = true, 0
		b.removeSessionLocked(s)
	}
	seen := map[*hierarchy]bool{}
	for _, h := range b.byCtl {
		if seen[h] || h.v2 {
			continue
		}
		seen[h] = true
		if err := removeCgroupDir(h.inst); err != nil {
			b.log.Warn("subprocess: cannot remove a cgroup directory", "err", err)
		}
		h.lock.Close()
		h.home.Close()
	}
	if b.fake && b.mounts.v2 != "" {
		_ = os.Remove(filepath.Join(b.mounts.v2, b.name))
	}
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
