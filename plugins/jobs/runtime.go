package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/dsh-dev/dsh/container"
)

// Status is a job's lifecycle state.
type Status string

// Job statuses. Running and stopping are live; the other three are terminal.
const (
	StatusRunning   Status = "running"
	StatusStopping  Status = "stopping"
	StatusCompleted Status = "completed"
	StatusKilled    Status = "killed"
	StatusFailed    Status = "failed"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusKilled || s == StatusFailed
}

// Outcome is how a job ended: a terminal status and an optional detail such as
// "exit code: 0" or "signal: SIGTERM".
type Outcome struct {
	// Status is the terminal status: completed, killed or failed.
	Status Status
	// Detail qualifies it for the status line ("" for none).
	Detail string
}

// Hooks adapt a producer's running work to the runtime.
type Hooks struct {
	// Cancel asks the work to stop. It must be idempotent and must not block for long.
	Cancel func()
	// Done is closed when the work has finished and its output is complete. Required.
	Done <-chan struct{}
	// ReadOutput returns the output produced since its previous call (consuming). Nil
	// means the job has no output.
	ReadOutput func() string
	// ReadWithLoss, when set, is ReadOutput that also says what the read lost; the
	// runtime then calls it instead of ReadOutput.
	ReadWithLoss func() (string, Loss)
	// Outcome reports how the work ended; it is called once, after Done is closed.
	// Required. A non-terminal status is recorded as failed.
	Outcome func() Outcome
	// Write sends input to the work (a terminal's keystrokes) and, with end, ends its
	// input after it; it returns an error wrapping ErrInputClosed when the work takes
	// no more input. Nil: the job takes no input (Runtime.Write refuses it).
	Write func(ctx context.Context, input string, end bool) error
	// LastOutput is when the work last produced output (the zero time before it did),
	// so that Runtime.Write can wait for the output to go quiet. Nil: quiet is counted
	// from the write.
	LastOutput func() time.Time
}

// Spec describes a job to start.
type Spec struct {
	// Kind names the producer ("bash"); ids are <kind>-<n>.
	Kind string
	// Label is what the job is, for listings and notices (the command).
	Label string
	// Owner is the session that may see and control the job; nil (or a session with
	// an empty ID) makes it unowned, visible to every caller.
	Owner *container.Session
	// Run starts the work. It is called only after every check passed; if it fails
	// nothing is registered.
	Run func() (Hooks, error)
}

// Snapshot is a job's state at one moment.
type Snapshot struct {
	// ID is the job's id, <kind>-<n> ("bash-1").
	ID string `json:"id"`
	// Kind is the producer (Spec.Kind).
	Kind string `json:"kind"`
	// Label is what the job is (Spec.Label, e.g. the command).
	Label string `json:"label"`
	// Owner is the owning session's id, "" for an unowned job.
	Owner string `json:"owner,omitempty"`
	// Status is the job's status at this moment.
	Status Status `json:"status"`
	// Detail qualifies a terminal status ("exit code: 0"); "" while none is known.
	Detail string `json:"detail,omitempty"`
	// StartedAt is when the job was registered.
	StartedAt time.Time `json:"startedAt"`
	// FinishedAt is when its outcome was recorded; zero (omitted) while it is live.
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// KillReason is the reason given with the first kill request, if any.
	KillReason string `json:"killReason,omitempty"`
}

// statusLine renders the status marker: "[status: <s>, <detail>]" or "[status: <s>]".
func (s Snapshot) statusLine() string {
	if s.Detail != "" {
		return "[status: " + string(s.Status) + ", " + s.Detail + "]"
	}
	return "[status: " + string(s.Status) + "]"
}

// noticeText is the completion notice sent to the owner of a finished job.
func noticeText(s Snapshot) string {
	return fmt.Sprintf("background job %s (%s: %s) finished %s. Read its output with job_output.",
		s.ID, s.Kind, oneLine(s.Label), s.statusLine())
}

// maxLabelRunes bounds a label in a listing or a notice: one line per job, not a
// 100 KB command (80 of those made an 8 MB job_list).
const maxLabelRunes = 200

// oneLine folds a label's line breaks into spaces and cuts it to maxLabelRunes (an
// ellipsis marks the cut) so a listing or notice stays one line per job.
func oneLine(label string) string {
	if strings.ContainsAny(label, "\r\n") {
		label = strings.Join(strings.FieldsFunc(label, func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	}
	if len(label) <= maxLabelRunes {
		return label
	}
	n := 0
	for i := range label {
		if n == maxLabelRunes {
			return label[:i] + "…"
		}
		n++
	}
	return label
}

// KillResult says what a kill request did.
type KillResult string

const (
	// KillAlreadyFinished: the job had already ended; nothing was done.
	KillAlreadyFinished KillResult = "already-finished"
	// KillCancellationRequested: the job was asked to stop; its status is stopping
	// until it ends.
	KillCancellationRequested KillResult = "cancellation-requested"
)

// Loss is what one consuming read lost: part of the new output had been dropped from
// memory before it (Lossy); the spill files, when they exist, hold the complete
// streams. The producer's text says the same in its own words.
type Loss struct {
	Lossy                    bool
	StdoutSpill, StderrSpill string
}

// Output is one consuming read of a job.
type Output struct {
	// Text is the output produced since the previous read ("" when none).
	Text string
	// Loss is what the read lost (Hooks.ReadWithLoss; zero without it).
	Loss Loss
	// Job is the job's state, taken before the output was read: when it is terminal,
	// Text holds everything that was left.
	Job Snapshot
}

// Errors the runtime returns, for errors.Is; the messages carry the job id or limit.
var (
	// ErrUnknownJob: no job has that id (or it was disposed).
	ErrUnknownJob = errors.New("unknown job")
	// ErrNotOwner: the job is owned by another session.
	ErrNotOwner = errors.New("job belongs to another session")
	// ErrLimit: the owner already has Options.MaxConcurrentPerOwner live jobs, or the
	// runtime Options.MaxTotal.
	ErrLimit = errors.New("background job limit reached")
	// ErrInvalid: the Spec is incomplete (empty kind or label, no Run).
	ErrInvalid = errors.New("invalid job")
	// ErrClosed: the runtime was closed; it starts no more jobs.
	ErrClosed = errors.New("jobs runtime is closed")
	// ErrEnded: the owning session has ended; it starts no more jobs.
	ErrEnded = errors.New("the owning session has ended")
	// ErrNoInput: the job takes no input (its producer gave no Write hook).
	ErrNoInput = errors.New("job does not take input")
	// ErrFinished: the job has finished and takes no more input.
	ErrFinished = errors.New("job has finished")
	// ErrInputClosed: the job's input was closed (a Write hook's error wraps it).
	ErrInputClosed = errors.New("the job takes no more input")
)

type jobError struct {
	msg  string
	kind error
}

func (e *jobError) Error() string { return e.msg }
func (e *jobError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &jobError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// Options configure a Runtime.
type Options struct {
	// MaxConcurrentPerOwner bounds the live (running or stopping) jobs of one owner;
	// unowned jobs share one budget. Default 10.
	MaxConcurrentPerOwner int
	// MaxTotal bounds the live jobs of all owners together: each job holds processes,
	// pipes and a watcher however few owners there are. Default 256.
	MaxTotal int
	// MaxFinishedPerOwner bounds the finished jobs kept per owner (unowned jobs count
	// as one owner): past it, the oldest finished ones are forgotten (their ids become
	// unknown), those whose end the owner was told first, so that an owner that never
	// ends — a stateless-lane principal — holds no more records over time. A job a read
	// waits on is kept. Default 100.
	MaxFinishedPerOwner int
	// DisposeTimeout bounds the wait for cancelled jobs when an owner or the runtime is
	// disposed; jobs still running then are recorded as killed and forgotten. Default 30s.
	DisposeTimeout time.Duration
	// Logger receives kill and disposal logs (default slog.Default()).
	Logger *slog.Logger
}

// Runtime is the `jobs` service. It is safe for concurrent use.
type Runtime struct {
	opts Options

	mu       sync.Mutex
	closed   bool
	jobs     map[string]*job
	counters map[string]int // per kind
	seq      uint64
	starting map[string]int // per owner: Run in flight
	// seen are the session objects that started jobs, by id, since that id's last end;
	// ended are the ids whose session ended recently, and its objects: no new jobs for
	// them. A stateless-lane principal's next session has the same id (it comes from
	// its token) in a new object, which may start jobs again.
	seen     map[string]map[sessionRef]bool
	ended    map[string]endedOwner
	watching []*watcher // told about starts and finishes; replaced, never changed in place
	watchers sync.WaitGroup
}

type job struct {
	id, kind, label string
	seq             uint64
	owner           *container.Session
	ownerID         string
	hooks           Hooks
	started         time.Time
	settled         chan struct{} // closed when the first outcome is recorded
	abandon         chan struct{} // closed when the record is deleted
	readMu          sync.Mutex    // serializes consuming reads

	// guarded by Runtime.mu
	status     Status
	detail     string
	finished   time.Time
	killReason string
	reported   bool // the owner has seen the terminal status (notice or read)
	readers    int  // reads waiting for the job to finish
	held       bool // a notice was held back for a waiting read
	disposing  bool // owner or runtime disposal (then deletion): no notice
}

// sessionRef names a session object without keeping it alive: an ended session
// remembered for endedMemory holds none of what its object holds (its client's
// connection, notifier, prompter).
type sessionRef = weak.Pointer[container.Session]

// endedOwner is a session end: when, the session objects of that id it ended, and
// whether its disposal still runs (then every start of the id is refused).
type endedOwner struct {
	at       time.Time
	sessions map[sessionRef]bool
	ending   int // EndOwner calls still disposing
}

// endedLocked reports whether a start by session s, of id owner, must be refused because
// its session ended (r.mu held).
func (r *Runtime) endedLocked(owner string, s *container.Session) bool {
	e, ok := r.ended[owner]
	return ok && (e.ending > 0 || e.sessions[weak.Make(s)])
}

// NewRuntime returns an empty runtime.
func NewRuntime(opts Options) *Runtime {
	if opts.MaxConcurrentPerOwner <= 0 {
		opts.MaxConcurrentPerOwner = 10
	}
	if opts.MaxTotal <= 0 {
		opts.MaxTotal = 256
	}
	if opts.MaxFinishedPerOwner <= 0 {
		opts.MaxFinishedPerOwner = 100
	}
	if opts.DisposeTimeout <= 0 {
		opts.DisposeTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Runtime{opts: opts, jobs: map[string]*job{}, counters: map[string]int{}, starting: map[string]int{}, seen: map[string]map[sessionRef]bool{}, ended: map[string]endedOwner{}}
}

func ownerID(s *container.Session) string {
	if s == nil {
		return ""
	}
	return s.ID
}

// Start checks spec (kind, label, the owner's limit, the harness-wide limit, in that
// order), then calls Run and registers the job it started. If Run fails, nothing is
// registered and no id is used.
func (r *Runtime) Start(spec Spec) (Snapshot, error) {
	if err := checkSpec(spec); err != nil {
		return Snapshot{}, err
	}
	owner := ownerID(spec.Owner)
	if err := r.reserve(owner, spec.Owner); err != nil {
		return Snapshot{}, err
	}
	hooks, err := runWork(spec.Run)
	return r.register(spec, owner, hooks, err)
}

// checkSpec refuses an incomplete spec: an empty kind or label, no Run.
func checkSpec(spec Spec) error {
	switch {
	case strings.TrimSpace(spec.Kind) == "":
		return errorf(ErrInvalid, "invalid job kind: expected a non-empty string")
	case strings.TrimSpace(spec.Label) == "":
		return errorf(ErrInvalid, "invalid job label: expected a non-empty string")
	case spec.Run == nil:
		return errorf(ErrInvalid, "invalid job run: expected a function")
	}
	return nil
}

// reserve counts a start in flight for owner (a session id, "" for none; s its
// session), unless the runtime is closed, the owner's session has ended, or a limit is
// reached: the owner's, then the harness's. Starts in flight count toward both limits.
func (r *Runtime) reserve(owner string, s *container.Session) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.endedLocked(owner, s) {
		return ErrEnded
	}
	if owner != "" {
		if r.seen[owner] == nil {
			r.seen[owner] = map[sessionRef]bool{}
		}
		r.seen[owner][weak.Make(s)] = true
	}
	live, total := r.liveLocked(owner)
	if live >= r.opts.MaxConcurrentPerOwner {
		return errorf(ErrLimit, "background job limit reached for this owner (limit: %d); use job_kill to stop an unneeded job, wait for it to finish, then retry", r.opts.MaxConcurrentPerOwner)
	}
	if total >= r.opts.MaxTotal {
		return errorf(ErrLimit, "background job limit reached: %d jobs are running in this harness", r.opts.MaxTotal)
	}
	r.starting[owner]++
	return nil
}

// liveLocked counts the live jobs (running, stopping or starting) of owner, and of
// every owner.
func (r *Runtime) liveLocked(owner string) (live, total int) {
	live = r.starting[owner]
	for _, n := range r.starting {
		total += n
	}
	for _, j := range r.jobs {
		if j.status.Terminal() {
			continue
		}
		total++
		if j.ownerID == owner {
			live++
		}
	}
	return live, total
}

// runWork calls run (a panic is its error) and checks the hooks it returned: hooks
// without Done or Outcome are cancelled and fail the start.
func runWork(run func() (Hooks, error)) (Hooks, error) {
	hooks, err := runSafely(run)
	if err != nil {
		return hooks, err
	}
	switch {
	case hooks.Done == nil:
		err = errors.New("jobs: producer returned hooks without Done")
	case hooks.Outcome == nil:
		err = errors.New("jobs: producer returned hooks without Outcome")
	}
	if err != nil {
		callSafely(hooks.Cancel)
	}
	return hooks, err
}

// register ends owner's start in flight and, unless it failed (err), registers the job
// it started and watches it. A job whose runtime was closed, or whose owner's session
// ended, while it was starting is cancelled instead: nobody could see or stop it.
func (r *Runtime) register(spec Spec, owner string, hooks Hooks, err error) (Snapshot, error) {
	r.mu.Lock()
	r.starting[owner]--
	if r.starting[owner] == 0 {
		delete(r.starting, owner)
	}
	if err != nil {
		r.mu.Unlock()
		return Snapshot{}, err
	}
	if ended := r.endedLocked(owner, spec.Owner); r.closed || ended {
		closed := r.closed
		r.mu.Unlock()
		r.cancelUnseen(hooks)
		if closed {
			return Snapshot{}, ErrClosed
		}
		return Snapshot{}, ErrEnded
	}
	r.counters[spec.Kind]++
	r.seq++
	j := &job{
		id:      fmt.Sprintf("%s-%d", spec.Kind, r.counters[spec.Kind]),
		kind:    spec.Kind,
		label:   spec.Label,
		seq:     r.seq,
		owner:   spec.Owner,
		ownerID: owner,
		hooks:   hooks,
		started: time.Now(),
		settled: make(chan struct{}),
		abandon: make(chan struct{}),
		status:  StatusRunning,
	}
	r.jobs[j.id] = j
	snap := j.snapshotLocked()
	r.watchers.Add(1)
	watching := r.watching
	r.mu.Unlock()

	r.announce(watching, Started, snap)
	go r.watch(j)
	return snap, nil
}

// cancelUnseen cancels work that started for nobody, and waits (up to
// Options.DisposeTimeout) for it to end, so that it does not outlive its start.
func (r *Runtime) cancelUnseen(hooks Hooks) {
	callSafely(hooks.Cancel)
	wait := time.NewTimer(r.opts.DisposeTimeout)
	defer wait.Stop()
	select {
	case <-hooks.Done:
	case <-wait.C:
	}
}

func runSafely(run func() (Hooks, error)) (h Hooks, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("jobs: producer panicked while starting: %v", p)
		}
	}()
	return run()
}

func callSafely(fn func()) {
	if fn == nil {
		return
	}
	defer func() { _ = recover() }()
	fn()
}

// watch records the job's outcome once its work is done.
func (r *Runtime) watch(j *job) {
	defer r.watchers.Done()
	select {
	case <-j.hooks.Done:
	case <-j.abandon:
		return
	}
	r.settle(j, outcomeSafely(j.hooks.Outcome))
}

func outcomeSafely(fn func() Outcome) (o Outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = Outcome{Status: StatusFailed, Detail: fmt.Sprintf("producer panicked: %v", p)}
		}
	}()
	o = fn()
	if !o.Status.Terminal() {
		return Outcome{Status: StatusFailed, Detail: fmt.Sprintf("producer reported non-terminal status %q", o.Status)}
	}
	return o
}

// settle records o unless an outcome was already recorded (the first one wins), and
// sends the completion notice when one is due.
func (r *Runtime) settle(j *job, o Outcome) {
	r.mu.Lock()
	if j.status.Terminal() {
		r.mu.Unlock()
		return
	}
	j.status, j.detail, j.finished = o.Status, o.Detail, time.Now()
	close(j.settled)
	notify := r.noticeDueLocked(j)
	snap := j.snapshotLocked()
	watching := r.watching
	r.pruneLocked(j.ownerID)
	r.mu.Unlock()
	r.announce(watching, Finished, snap)
	if notify {
		r.deliver(j, snap)
	}
}

// pruneLocked forgets owner's oldest finished jobs past Options.MaxFinishedPerOwner:
// those it was told of (read or noticed) first, then the others; never one a read
// waits on, nor one being disposed (its disposal deletes it).
func (r *Runtime) pruneLocked(owner string) {
	var done []*job
	for _, j := range r.jobs {
		if j.ownerID == owner && j.status.Terminal() {
			done = append(done, j)
		}
	}
	excess := len(done) - r.opts.MaxFinishedPerOwner
	if excess <= 0 {
		return
	}
	slices.SortFunc(done, func(a, b *job) int {
		if a.reported != b.reported {
			if a.reported {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, j := range done {
		if excess == 0 {
			return
		}
		if j.readers > 0 || j.disposing {
			continue
		}
		delete(r.jobs, j.id)
		close(j.abandon)
		excess--
	}
}

// noticeDueLocked decides whether the owner must be told that j finished, and marks it
// reported if so. A read waiting on the job will report it instead.
func (r *Runtime) noticeDueLocked(j *job) bool {
	if j.ownerID == "" || j.reported || j.disposing || !j.status.Terminal() {
		return false
	}
	if j.readers > 0 {
		j.held = true
		return false
	}
	j.reported = true
	return true
}

func (r *Runtime) deliver(j *job, snap Snapshot) {
	n := j.owner.Notifier
	if n == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.opts.Logger.Error("jobs: notifier panicked", "job", snap.ID, "panic", fmt.Sprint(p))
		}
	}()
	n.Notify(noticeText(snap))
}

func (j *job) snapshotLocked() Snapshot {
	return Snapshot{ID: j.id, Kind: j.kind, Label: j.label, Owner: j.ownerID, Status: j.status,
		Detail: j.detail, StartedAt: j.started, FinishedAt: j.finished, KillReason: j.killReason}
}

// lookupLocked finds id as seen by caller: owned jobs are visible to their owner only.
func (r *Runtime) lookupLocked(caller *container.Session, id string) (*job, error) {
	j, ok := r.jobs[id]
	if !ok {
		return nil, errorf(ErrUnknownJob, "unknown job %s", id)
	}
	if j.ownerID != "" && ownerID(caller) != j.ownerID {
		return nil, errorf(ErrNotOwner, "job %s belongs to another session", id)
	}
	return j, nil
}

// Get returns the job's current state.
func (r *Runtime) Get(caller *container.Session, id string) (Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j, err := r.lookupLocked(caller, id)
	if err != nil {
		return Snapshot{}, err
	}
	return j.snapshotLocked(), nil
}

// List returns the jobs caller can see (its own and unowned ones), oldest first.
func (r *Runtime) List(caller *container.Session) []Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var js []*job
	for _, j := range r.jobs {
		if j.ownerID == "" || j.ownerID == ownerID(caller) {
			js = append(js, j)
		}
	}
	sort.Slice(js, func(a, b int) bool { return js[a].seq < js[b].seq })
	out := make([]Snapshot, len(js))
	for i, j := range js {
		out[i] = j.snapshotLocked()
	}
	return out
}

// Wait blocks until the job finishes, timeout passes, or ctx is done, and returns its
// state then. A timeout is not an error: the snapshot simply shows a live status. A
// done ctx returns the snapshot with ctx's error.
func (r *Runtime) Wait(ctx context.Context, caller *container.Session, id string, timeout time.Duration) (Snapshot, error) {
	r.mu.Lock()
	j, err := r.lookupLocked(caller, id)
	r.mu.Unlock()
	if err != nil {
		return Snapshot{}, err
	}
	err = awaitJob(ctx, j, timeout)
	r.mu.Lock()
	defer r.mu.Unlock()
	return j.snapshotLocked(), err
}

func awaitJob(ctx context.Context, j *job, timeout time.Duration) error {
	if timeout <= 0 {
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-j.settled:
	case <-j.abandon:
	case <-t.C:
	case <-ctx.Done():
		select {
		case <-j.settled:
		default:
			return ctx.Err()
		}
	}
	return nil
}

// Read consumes the job's new output. With wait > 0 it first blocks until the job
// finishes, wait passes, or ctx is done — a done ctx consumes nothing and returns its
// error. When the returned status is terminal the job counts as reported: no
// completion notice is sent for it (a notice that fell due while this read waited is
// left to the read, or sent if the read gives up).
func (r *Runtime) Read(ctx context.Context, caller *container.Session, id string, wait time.Duration) (Output, error) {
	return r.readAfter(caller, id, func(j *job) error { return awaitJob(ctx, j, wait) })
}

// readAfter consumes job id's new output once before (the wait, a write) returned
// without an error; meanwhile the job counts a reader, so that a completion notice
// falling due is left to this read.
func (r *Runtime) readAfter(caller *container.Session, id string, before func(*job) error) (Output, error) {
	r.mu.Lock()
	j, err := r.lookupLocked(caller, id)
	if err != nil {
		r.mu.Unlock()
		return Output{}, err
	}
	j.readers++
	r.mu.Unlock()

	err = before(j)
	var out Output
	if err == nil {
		j.readMu.Lock()
		r.mu.Lock()
		out.Job = j.snapshotLocked()
		r.mu.Unlock()
		out.Text, out.Loss = readSafely(j.hooks)
		j.readMu.Unlock()
	}

	r.mu.Lock()
	j.readers--
	if err == nil && out.Job.Status.Terminal() {
		j.reported = true
	}
	var notify bool
	var snap Snapshot
	if j.held && j.readers == 0 {
		j.held = false
		notify = r.noticeDueLocked(j)
		snap = j.snapshotLocked()
	}
	r.mu.Unlock()
	if notify {
		r.deliver(j, snap)
	}
	return out, err
}

func readSafely(h Hooks) (s string, loss Loss) {
	defer func() {
		if p := recover(); p != nil {
			s, loss = fmt.Sprintf("[reading output failed: %v]", p), Loss{}
		}
	}()
	switch {
	case h.ReadWithLoss != nil:
		return h.ReadWithLoss()
	case h.ReadOutput != nil:
		return h.ReadOutput(), Loss{}
	}
	return "", Loss{}
}

// Kill asks the job to stop. A finished job is left alone (KillAlreadyFinished);
// otherwise its Cancel hook runs and its status is stopping until it ends. reason is
// recorded with the first request.
func (r *Runtime) Kill(caller *container.Session, id, reason string) (KillResult, Snapshot, error) {
	r.mu.Lock()
	j, err := r.lookupLocked(caller, id)
	if err != nil {
		r.mu.Unlock()
		return "", Snapshot{}, err
	}
	if j.status.Terminal() {
		snap := j.snapshotLocked()
		r.mu.Unlock()
		return KillAlreadyFinished, snap, nil
	}
	j.status = StatusStopping
	if j.killReason == "" {
		j.killReason = reason
	}
	snap := j.snapshotLocked()
	r.mu.Unlock()
	r.opts.Logger.Info("jobs: cancellation requested", "job", id, "reason", reason)
	callSafely(j.hooks.Cancel)
	return KillCancellationRequested, snap, nil
}

// Withdraw undoes the start of job id for a caller that will never learn of it (the
// call that started it was aborted before its answer was settled): the job is
// cancelled, waited for (up to Options.DisposeTimeout) and deleted, without a notice,
// so that it holds no slot and no listing shows it. Its id is not used again. Unknown
// ids are ignored.
func (r *Runtime) Withdraw(id string) {
	r.mu.Lock()
	_, ok := r.jobs[id]
	r.mu.Unlock()
	if ok {
		r.opts.Logger.Info("jobs: withdrew a job whose start was aborted", "job", id)
		r.dispose(func(j *job) bool { return j.id == id })
	}
}

// endedMemory is how long an ended session is remembered (refusing new jobs for it):
// far longer than any start can take, short enough that a long-running server does not
// accumulate every session it ever had.
const endedMemory = 10 * time.Minute

// EndOwner disposes the jobs of session id: cancels them, waits for them (up to
// Options.DisposeTimeout) and deletes them. No notices are sent for them.
func (r *Runtime) EndOwner(sessionID string) {
	if sessionID == "" {
		return
	}
	r.mu.Lock()
	now := time.Now()
	for id, e := range r.ended {
		if now.Sub(e.at) > endedMemory && e.ending == 0 {
			delete(r.ended, id) // long past any start that could race the end
		}
	}
	e := r.ended[sessionID] // an earlier session of the id (a principal's), if any
	if e.sessions == nil {
		e.sessions = map[sessionRef]bool{}
	}
	for s := range r.seen[sessionID] {
		e.sessions[s] = true
	}
	delete(r.seen, sessionID)
	e.at = now
	e.ending++
	r.ended[sessionID] = e
	r.mu.Unlock()
	r.dispose(func(j *job) bool { return j.ownerID == sessionID })
	r.mu.Lock()
	e = r.ended[sessionID]
	e.ending--
	r.ended[sessionID] = e
	r.mu.Unlock()
}

// Close disposes every job (cancel, wait, delete) and refuses new ones. It is
// idempotent and returns when every watcher goroutine has ended.
func (r *Runtime) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.dispose(func(*job) bool { return true })
	r.watchers.Wait()
}

func (r *Runtime) dispose(match func(*job) bool) {
	r.mu.Lock()
	var js []*job
	for _, j := range r.jobs {
		if !j.disposing && match(j) {
			j.disposing = true
			if !j.status.Terminal() {
				j.status = StatusStopping
			}
			js = append(js, j)
		}
	}
	r.mu.Unlock()
	if len(js) == 0 {
		return
	}
	for _, j := range js {
		select {
		case <-j.settled:
		default:
			callSafely(j.hooks.Cancel)
		}
	}
	deadline := time.NewTimer(r.opts.DisposeTimeout)
	defer deadline.Stop()
	expired := false
	for _, j := range js {
		if !expired {
			select {
			case <-j.settled:
				continue
			case <-deadline.C:
				expired = true
			}
		}
		select {
		case <-j.settled:
		default:
			r.opts.Logger.Error("jobs: job did not stop after cancellation; forgetting it", "job", j.id, "waited", r.opts.DisposeTimeout)
			r.settle(j, Outcome{Status: StatusKilled, Detail: "did not stop after cancellation"})
		}
	}
	r.mu.Lock()
	for _, j := range js {
		delete(r.jobs, j.id)
		close(j.abandon)
	}
	r.mu.Unlock()
}
