package subprocess

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// The session and command cgroups of the budgets. A command's cgroups keep open what
// its leader starts in (the tasks files) and the counters read when it settles, so
// that a settle only preads them. Once its tree is gone (after Done, off the call's
// path) they are reused for the next command of the same kind (session, limits) —
// their peaks and failure counts reset, their other counters remembered as the next
// command's baseline — unless a limit was reached, memory is still charged to them, or
// enough are kept already; then they are removed.

// maxSpares is how many emptied command cgroups of one kind are kept for reuse.
const maxSpares = 4

// maxLeftover is the most memory still charged to an emptied command cgroup (page
// cache its command left) for the cgroup to be reused: more would count against the
// next command.
const maxLeftover = 1 << 20

// spareKind is what a command cgroup is made for.
type spareKind struct {
	session string              // proc.OwnerDirName of its owner
	limits  proc.ResourceLimits // those that can bind (bindingCPUs)
	// accounted says the command has limits (some may not bind): its usage is
	// accounted.
	accounted bool
	v2cg      bool // the Supervisor gives the command a cgroup v2 directory of its own
}

// sessionCgroups are one session's cgroups, a directory in each hierarchy used. Its
// fields are the budgets' lock's, but for name (fixed).
type sessionCgroups struct {
	name    string
	dirs    map[*hierarchy]string // the directories made (dir names them)
	v2root  *cgroupRoot           // where its commands' cgroup v2 directories are made
	applied proc.ResourceLimits
	live    int // command cgroups (spares included) not removed yet
	ended   bool
}

// budgetCgroups are the cgroups of one command.
type budgetCgroups struct {
	b      *budgets
	sess   *sessionCgroups
	limits proc.ResourceLimits
	dirs   []budgetDir
	// tasks are the command's v1 tasks files, homes the harness's own (same order),
	// until its leader started.
	tasks, homes []*os.File
	// v2 is the command's cgroup v2 directory, when a v2 hierarchy enforces one of its
	// controllers (the Supervisor's own otherwise); the Process removes it.
	v2 *cgroup
	// base holds the counters that are not the command's own (its session's, the
	// reused cgroup v2 directory's, its own from a previous use), as they were when it
	// started.
	base baseline
	// kind is what it was made for; hit says a limit was reached (accounted).
	kind spareKind
	hit  bool
	// final says its settle read its counters once nothing was left of its tree: base
	// holds them, as the next command of the reused cgroups starts from them.
	final bool
	// gone: removed (or discarded), under the budgets' lock; it counts no more.
	gone bool
}

// budgetDir is a command's directory in one hierarchy, with its counters kept open.
type budgetDir struct {
	h   *hierarchy
	dir cgDir
}

type baseline struct {
	sessRefused, instRefused int64
	cpuMs                    int64
	// oomKills and refused are the command cgroup's own counters when it was reused.
	oomKills, refused int64
}

// controllersOf are the controllers a command under r is placed in: those of its
// limits, those every command is placed in, and, for accounting a command with
// limits (accounted), memory (its peak) and, without cgroup v2, cpuacct (its CPU
// time) where the host has them.
func (b *budgets) controllersOf(r proc.ResourceLimits, accounted, v2cg bool) (need, optional []string) {
	b.mu.Lock()
	need = append(need, b.always...)
	b.mu.Unlock()
	for _, k := range keyControllers {
		if k.set(r) && !slices.Contains(need, k.ctl) {
			need = append(need, k.ctl)
		}
	}
	if !accounted {
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

// place returns the cgroups of a new command of owner under r: a spare, or made now.
// nil when it needs none. v2cg says whether the Supervisor gives the command a cgroup
// v2 directory of its own (for its CPU time).
func (b *budgets) place(owner string, r proc.ResourceLimits, v2cg bool) (*budgetCgroups, error) {
	kind := b.kindOf(owner, r, v2cg)
	bc, err := b.spareOrNew(kind)
	if bc == nil && err == nil && kind.limits != r {
		// A CPU quota that cannot bind was all that would have given the command a
		// cgroup: it gets the quota, so that its usage is accounted there.
		kind.limits = r
		bc, err = b.spareOrNew(kind)
	}
	if bc == nil || err != nil {
		return nil, err
	}
	bc.readBaseline()
	return bc, nil
}

// spareOrNew is a spare of kind, or one made now.
func (b *budgets) spareOrNew(kind spareKind) (*budgetCgroups, error) {
	bc, err := b.takeSpare(kind)
	if bc == nil && err == nil {
		bc, err = b.make(kind)
	}
	return bc, err
}

// kindOf is the kind of cgroups a command of owner under r is placed in.
func (b *budgets) kindOf(owner string, r proc.ResourceLimits, v2cg bool) spareKind {
	return spareKind{session: proc.OwnerDirName(owner), limits: bindingCPUs(r, b.cpus()), accounted: !r.IsZero(), v2cg: v2cg}
}

// prepare makes a spare command cgroup of owner under r when none is ready
// (Supervisor.PrepareLimits): the cgroups place finds or makes, kept as a spare unless
// a session ended meanwhile (it may be owner's) or enough are kept already.
func (b *budgets) prepare(owner string, r proc.ResourceLimits, v2cg bool) {
	kind := b.kindOf(owner, r, v2cg)
	b.mu.Lock()
	ready, ends := b.closed || len(b.spares[kind]) > 0, b.ends
	b.mu.Unlock()
	if ready {
		return
	}
	bc, err := b.place(owner, r, v2cg)
	if bc == nil || err != nil {
		return
	}
	b.mu.Lock()
	keep := b.ends == ends && !b.closed && !bc.sess.ended && len(b.spares[bc.kind]) < maxSpares
	if keep {
		b.spares[bc.kind] = append(b.spares[bc.kind], bc)
	}
	b.mu.Unlock()
	if !keep {
		bc.discard()
	}
}

// bindingCPUs is r without the CPU quotas that cannot bind: a tree never runs on more
// CPUs than are online (cpus), so a quota of that many or more never throttles it, and
// CFS bandwidth control costs every scheduling of its threads, at each level that has
// a quota (without a quota at any level, the tree needs no cpu cgroup). A CPU brought
// online while a command runs is not accounted for.
func bindingCPUs(r proc.ResourceLimits, cpus float64) proc.ResourceLimits {
	if r.CPUs >= cpus {
		r.CPUs = 0
	}
	if r.SessionCPUs >= cpus {
		r.SessionCPUs = 0
	}
	return r
}

// fakeCPUs is how many CPUs budgets on fake mounts (tests) count as online.
const fakeCPUs = 1024

// takeSpare takes an emptied command cgroup of kind, its session's limits brought up
// to date.
func (b *budgets) takeSpare(kind spareKind) (*budgetCgroups, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sp := b.spares[kind]
	if len(sp) == 0 {
		return nil, nil
	}
	bc := sp[len(sp)-1]
	b.spares[kind] = sp[:len(sp)-1]
	if bc.sess.applied != kind.limits.Session() {
		if err := bc.sess.applyLocked(kind.limits.Session()); err != nil {
			b.spares[kind] = append(b.spares[kind], bc)
			return nil, err
		}
	}
	return bc, nil
}

// make makes a command cgroup of kind: its hierarchies readied, its session's
// directories made (with the session's limits), then its own.
func (b *budgets) make(kind spareKind) (*budgetCgroups, error) {
	need, optional := b.controllersOf(kind.limits, kind.accounted, kind.v2cg)
	if len(need)+len(optional) == 0 {
		return nil, nil
	}
	b.mu.Lock()
	b.retryStaleLocked()
	hs, ctlsIn, err := b.hierarchiesLocked(need, optional)
	if err != nil || len(hs) == 0 {
		b.mu.Unlock()
		return nil, err
	}
	sess, err := b.sessionLocked(kind.session, hs, kind.limits)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	b.seq++
	id := b.seq
	sess.live++
	b.mu.Unlock()
	bc := &budgetCgroups{b: b, sess: sess, limits: kind.limits, kind: kind}
	if err := bc.makeDirs(hs, ctlsIn, id); err != nil {
		bc.discard()
		return nil, err
	}
	return bc, nil
}

// hierarchiesLocked are the hierarchies of the controllers need (each must have one)
// and optional, with the controllers each enforces.
func (b *budgets) hierarchiesLocked(need, optional []string) ([]*hierarchy, map[*hierarchy][]string, error) {
	var hs []*hierarchy
	ctlsIn := map[*hierarchy][]string{}
	for i, c := range append(need, optional...) {
		h, err := b.hierarchyLocked(c)
		if err != nil {
			if i < len(need) {
				return nil, nil, err
			}
			continue
		}
		if !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
		ctlsIn[h] = append(ctlsIn[h], c)
	}
	return hs, ctlsIn, nil
}

// dir is the session's directory in h. It is read without the budgets' lock (by a
// command's start and settle, while another start of the session may add a
// hierarchy to dirs), so it is derived, not looked up.
func (s *sessionCgroups) dir(h *hierarchy) string { return filepath.Join(h.inst, s.name) }

// sessionLocked returns owner's session cgroups, with a directory in each of hs and
// the session limits of r written where they changed.
func (b *budgets) sessionLocked(name string, hs []*hierarchy, r proc.ResourceLimits) (*sessionCgroups, error) {
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
		dir := s.dir(h)
		if err := mkdirCgroup(dir); err != nil && err != unix.EEXIST {
			return nil, &opError{op: "mkdir", path: dir, err: err}
		}
		s.dirs[h] = dir
		fresh = true
		if h.v2 {
			if err := (cgDir{path: dir, v2: true}).enable(h.ctls); err != nil {
				return nil, err
			}
			s.v2root = &cgroupRoot{dir: dir, lockFD: -1, maxFree: -1}
		}
	}
	if want := r.Session(); fresh || want != s.applied {
		if err := s.applyLocked(want); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// applyLocked writes the session limits of want to each of the session's directories
// (a zero limit is written as none, so that a lifted limit is lifted).
func (s *sessionCgroups) applyLocked(want proc.ResourceLimits) error {
	for h, dir := range s.dirs {
		d := cgDir{path: dir, v2: h.v2}
		for _, c := range h.ctls {
			var err error
			switch c {
			case ctlMemory:
				err = d.setMemoryOrNone(want.SessionMemory)
			case ctlPids:
				err = d.setPidsOrNone(want.SessionProcesses)
			case ctlCPU:
				err = d.setCPUsOrNone(want.SessionCPUs)
			}
			if err != nil {
				return err
			}
		}
	}
	s.applied = want
	return nil
}

// makeDirs makes the command's directory c<id> in each hierarchy, with its limits, and
// opens what its leader starts in and what is read when it settles.
func (bc *budgetCgroups) makeDirs(hs []*hierarchy, ctlsIn map[*hierarchy][]string, id uint64) error {
	for _, h := range hs {
		d := budgetDir{h: h}
		if h.v2 {
			cg, err := bc.sess.v2root.create(id)
			if err != nil {
				return err
			}
			bc.v2, d.dir = cg, cgDir{path: cg.path, v2: true}
		} else {
			d.dir = cgDir{path: bc.sess.dir(h) + "/c" + strconv.FormatUint(id, 10)}
			if err := mkdirCgroup(d.dir.path); err != nil {
				return &opError{op: "mkdir", path: d.dir.path, err: err}
			}
		}
		bc.dirs = append(bc.dirs, d)
		if err := commandLimits(d.dir, ctlsIn[h], bc.limits); err != nil {
			return err
		}
		if !h.v2 {
			tasks, err := os.OpenFile(d.dir.path+"/tasks", os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			bc.tasks, bc.homes = append(bc.tasks, tasks), append(bc.homes, h.home)
		}
		bc.dirs[len(bc.dirs)-1].dir.keep(countersOf(h.v2, ctlsIn[h]))
	}
	return nil
}

// commandLimits writes the command limits of r that ctls enforce to a fresh command
// directory (where nothing needs lifting). A CPU quota no tighter than the session's
// is not written: the session's directory, above it, enforces it already, and each
// level of quota costs the scheduler on every switch. (Memory and process limits are
// written even then: the level that was reached names the limit in the result.)
func commandLimits(d cgDir, ctls []string, r proc.ResourceLimits) error {
	for _, c := range ctls {
		var err error
		switch {
		case c == ctlMemory && r.Memory > 0:
			err = d.setMemory(r.Memory)
		case c == ctlPids && r.Processes > 0:
			err = d.setPids(r.Processes)
		case c == ctlCPU && r.CPUs > 0 && (r.SessionCPUs <= 0 || r.CPUs < r.SessionCPUs):
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
	return cgDir{path: bc.sess.dir(h), v2: h.v2}
}

// readBaseline reads the counters the command does not own, as they are at its start:
// in cgroup v2, whose pids events count at the limit's own cgroup, its session's and
// the instance's.
func (bc *budgetCgroups) readBaseline() {
	if d, ok := bc.dir(ctlPids); ok && d.h.v2 {
		bc.base.sessRefused = bc.sessionDir(d.h).pidsRefused()
		bc.base.instRefused = cgDir{path: d.h.inst, v2: true}.pidsRefused()
	}
}

// closeTasks closes the tasks files.
func (bc *budgetCgroups) closeTasks() {
	for _, f := range bc.tasks {
		f.Close()
	}
	bc.tasks, bc.homes = nil, nil
}

// account is what the command used and the limits it reached. cpu is the cgroup v2
// directory that accounts its CPU time, when it has one. gone says nothing was left
// of the tree before the counters were read: they are final, and the next command of
// the cgroups (cpu's, and these if reused) starts from them without reading them
// again.
func (bc *budgetCgroups) account(cpu *cgroup, gone bool) *proc.Budget {
	out := &proc.Budget{CPUMs: -1, PeakMemoryBytes: -1}
	switch {
	case bc.v2 != nil:
		for _, d := range bc.dirs {
			if ms, ok := d.dir.cpuMs(); ok && d.h.v2 { // cpu.stat, kept open
				out.CPUMs = ms
			}
		}
	case cpu != nil:
		if ms, ok := cpu.cpuMs(); ok {
			out.CPUMs = max(ms-bc.base.cpuMs, 0)
			cpu.usedMs, cpu.usedKnown = ms, gone
		}
	default:
		if d, ok := bc.dir(ctlCPUAcct); ok {
			if ms, ok := d.dir.cpuMs(); ok {
				out.CPUMs = ms
			}
		}
	}
	next := bc.base
	if d, ok := bc.dir(ctlMemory); ok {
		st := d.dir.memoryStats()
		out.PeakMemoryBytes, next.oomKills = st.peak, st.oomKills
		if st.oomKills > bc.base.oomKills {
			bc.hit = true // a kill is a kill, whichever limit made it
			if hit, ok := bc.memoryHit(d); ok {
				out.Hits = append(out.Hits, hit)
			}
		}
	}
	if d, ok := bc.dir(ctlPids); ok {
		refused := d.dir.pidsRefused()
		next.refused = refused
		bc.hit = bc.hit || refused > bc.base.refused
		if hit, ok := bc.pidsHit(d, refused); ok {
			out.Hits = append(out.Hits, hit)
		}
	}
	if gone {
		bc.base, bc.final = next, true
	}
	return out
}

// memoryHit tells which memory limit made the OOM killer kill a process of the
// command: its own (its limit stopped an allocation), its session's (the session's
// ever did: the session's counter is not the command's alone), or the one around the
// harness. A host-wide OOM kill is no limit's.
func (bc *budgetCgroups) memoryHit(d budgetDir) (proc.LimitHit, bool) {
	r := bc.limits
	sessionFailed := r.SessionMemory > 0 && bc.sessionDir(d.h).memoryFailures() > 0
	switch {
	case r.Memory > 0 && (d.dir.memoryFailures() > 0 || !sessionFailed):
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
func (bc *budgetCgroups) pidsHit(d budgetDir, count int64) (proc.LimitHit, bool) {
	r := bc.limits
	refused := count > bc.base.refused
	if !refused && !d.h.v2 {
		return proc.LimitHit{}, false
	}
	sess := bc.sessionDir(d.h)
	if d.h.v2 && !refused {
		// cgroup v2 counts a refusal at the cgroup whose limit refused it (and above).
		refused = sess.pidsRefused() > bc.base.sessRefused ||
			cgDir{path: d.h.inst, v2: true}.pidsRefused() > bc.base.instRefused
	}
	if !refused {
		return proc.LimitHit{}, false
	}
	reached := func(peak, limit int64) bool { return limit > 0 && (peak < 0 || peak >= limit) }
	switch {
	case reached(d.dir.pidsPeak(), r.Processes):
		return proc.LimitHit{Limit: proc.LimitProcesses, Size: r.Processes}, true
	case reached(sess.pidsPeak(), r.SessionProcesses):
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

// awaitReleased waits until no process is charged to the command's pids cgroup any
// more (an exited one is until it is reaped, by whoever is its parent then), or the
// deadline passes; it looks again after 1, 2, 4… up to 50 ms.
func (bc *budgetCgroups) awaitReleased(deadline time.Time) {
	d, ok := bc.dir(ctlPids)
	if !ok {
		return
	}
	for delay := time.Millisecond; ; delay = min(2*delay, maxTreePoll) {
		if n, ok := d.dir.number("pids.current"); !ok || n == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(delay)
	}
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

// closeFiles closes what the command's directories hold open.
func (bc *budgetCgroups) closeFiles() {
	bc.closeTasks()
	for i := range bc.dirs {
		bc.dirs[i].dir.release()
	}
}

// removeV1 removes the command's v1 directories; it fails while one is busy.
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

// remove reuses or removes the command's v1 directories (its v2 one is the
// Process's) once its tree is gone (nil: nothing). One still busy is tried again
// later.
func (bc *budgetCgroups) remove() {
	if bc == nil || bc.b.reuse(bc) {
		return
	}
	bc.closeFiles()
	err := bc.removeV1()
	bc.b.mu.Lock()
	defer bc.b.mu.Unlock()
	if err != nil {
		bc.b.stale = append(bc.b.stale, bc)
		return
	}
	bc.b.forgetLocked(bc)
}

// discard removes a command's cgroups that no process ever used (a spare, a spawn
// that failed): its v2 directory too (nil: nothing).
func (bc *budgetCgroups) discard() {
	if bc == nil {
		return
	}
	bc.closeFiles()
	_ = bc.removeV1()
	if bc.v2 != nil {
		_ = bc.v2.remove()
	}
	bc.b.mu.Lock()
	defer bc.b.mu.Unlock()
	bc.b.forgetLocked(bc)
}

// reuse keeps the emptied cgroups of a command for the next of its kind, when they
// can serve it as new: cgroup v1 only (its own directories, not the Process's), no
// limit reached (their peaks stay), nothing left charged, and fewer than maxSpares
// kept. Their resettable counters are reset and the others remembered.
func (b *budgets) reuse(bc *budgetCgroups) bool {
	if bc.v2 != nil || bc.hit || len(bc.tasks) == 0 {
		return false
	}
	b.mu.Lock()
	full := b.closed || bc.sess.ended || len(b.spares[bc.kind]) >= maxSpares
	b.mu.Unlock()
	if full {
		return false
	}
	for _, d := range bc.dirs {
		if !d.dir.reset(d.h.ctls) {
			return false
		}
		if !bc.final { // else account read them, once they could change no more
			bc.readOwnCounters(d)
		}
	}
	bc.final = false
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || bc.sess.ended || len(b.spares[bc.kind]) >= maxSpares {
		return false
	}
	b.spares[bc.kind] = append(b.spares[bc.kind], bc)
	return true
}

// readOwnCounters reads the counters of d that are the cgroups' own (not reset) into
// the baseline of their next command.
func (bc *budgetCgroups) readOwnCounters(d budgetDir) {
	for _, c := range d.h.ctls {
		switch c {
		case ctlMemory:
			bc.base.oomKills = d.dir.oomKills()
		case ctlPids:
			bc.base.refused = d.dir.pidsRefused()
		}
	}
}

// forgetLocked drops a removed command from its session, which goes with its last
// one once it ended.
func (b *budgets) forgetLocked(bc *budgetCgroups) {
	if bc.gone {
		return
	}
	bc.gone = true
	bc.sess.live--
	b.removeSessionLocked(bc.sess)
}

// retryStaleLocked removes the command directories that were busy before.
func (b *budgets) retryStaleLocked() {
	if len(b.stale) == 0 {
		return
	}
	keep := b.stale[:0]
	for _, bc := range b.stale {
		if bc.removeV1() != nil {
			keep = append(keep, bc)
			continue
		}
		b.forgetLocked(bc)
	}
	b.stale = keep
}

// endSession ends owner's session: its kept cgroups go now, its directories once its
// last command's do.
func (b *budgets) endSession(owner string) {
	name := proc.OwnerDirName(owner)
	b.mu.Lock()
	s := b.sessions[name]
	var spares []*budgetCgroups
	for kind, sp := range b.spares {
		if kind.session == name {
			spares = append(spares, sp...)
			delete(b.spares, kind)
		}
	}
	if s != nil {
		s.ended = true
		b.removeSessionLocked(s)
	}
	b.ends++ // a prepare under way keeps nothing
	b.mu.Unlock()
	for _, bc := range spares {
		bc.discard()
	}
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

// close removes the kept cgroups, every session's directories and the v1 instance
// directories (the v2 one is the Supervisor's): every process has settled.
func (b *budgets) close() {
	b.mu.Lock()
	b.closed = true
	var spares []*budgetCgroups
	for kind, sp := range b.spares {
		spares = append(spares, sp...)
		delete(b.spares, kind)
	}
	b.mu.Unlock()
	for _, bc := range spares {
		bc.discard()
	}
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
