package bashsandbox

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// pluginName is the plugin's catalog name, also the prefix of its error messages.
const pluginName = "bash-sandbox"

// Config is bash-sandbox's configuration: bash-local's keys (cwd, timeoutMs,
// maxTimeoutMs, maxOutputBytes, maxSpillBytes, graceMs, with the same defaults),
// defaultMode, network, writableRoots and namespaces (SandboxConfig), and
// workspaceRoot.
type Config struct {
	bashexec.Config `yaml:",inline"`
	SandboxConfig   `yaml:",inline"`
	// WorkspaceRoot is the directory workspace-write may modify for calls whose session
	// has no cwd (and for callers that pass no policy). Empty means cwd, else the
	// harness's working directory. Absolute; it must exist when the plugin starts.
	WorkspaceRoot string `yaml:"workspaceRoot"`
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() *Config {
	return &Config{Config: bashexec.DefaultConfig(), SandboxConfig: defaultSandboxConfig()}
}

// Validate checks every key; each message starts with the key (the container prefixes
// it with "bash-sandbox: ").
func (c *Config) Validate() error {
	if err := c.Config.Check(); err != nil {
		return err
	}
	if err := c.SandboxConfig.Validate(); err != nil {
		return err
	}
	if c.WorkspaceRoot != "" && !filepath.IsAbs(c.WorkspaceRoot) {
		return fmt.Errorf("workspaceRoot must be an absolute path, got %q", c.WorkspaceRoot)
	}
	return nil
}

// root is the configured workspace root before canonicalisation: workspaceRoot, else
// cwd (absolute), else "" for the harness's working directory.
func (c *Config) root() (string, error) {
	if c.WorkspaceRoot != "" {
		return c.WorkspaceRoot, nil
	}
	if c.Cwd == "" {
		return "", nil
	}
	abs, err := filepath.Abs(c.Cwd)
	if err != nil {
		return "", fmt.Errorf("%s: cwd: %w", pluginName, err)
	}
	return abs, nil
}

// Plugin declares bash-sandbox: the confining `shell` provider and the `sandboxPolicy`
// service. It also contributes the `sandbox:policy` prompt section.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:      pluginName,
	Aliases:   []string{"@deepseek-ai/dsh-bash-sandbox"},
	Inject:    container.Keys{subprocess.Service, prompt.Service},
	Provide:   container.Keys{shell.Service, shell.PolicyService},
	Exclusive: container.Keys{shell.Service},
	Config:    DefaultConfig,
	Apply:     apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

func apply(a *container.Activation, cfg *Config) error {
	sup, err := container.Injected(a, subprocess.Service)
	if err != nil {
		return err
	}
	prompts, err := container.Injected(a, prompt.Service)
	if err != nil {
		return err
	}
	log := a.Logger()
	ex, resolver, sb, err := newExecutor(sup, cfg, log, a.ProfileFiles)
	if err != nil {
		return err
	}
	// Probe the backend now (once per process; cached), so that status tells what the
	// calls will meet rather than the first confined call finding out.
	be := sb.backend()
	if err := sb.checkStatic(be); err != nil {
		return err
	}
	detail := backendDetail(cfg, be)
	a.SetDetail(detail)
	if be.usable {
		log.Info("bash-sandbox: " + detail)
	} else {
		log.Warn("bash-sandbox: " + detail)
	}
	if prev, ok := container.ReplacedConfig[*Config](a); ok && prev != nil {
		for _, w := range widenings(prev, cfg) {
			log.Warn("profile reload widens confinement: " + w)
		}
	}
	a.OnSessionEnd(func(id string) { endSession(sup, id) })
	if err := shell.PolicyService.Provide(a, resolver); err != nil {
		return err
	}
	if err := shell.Service.Provide(a, ex); err != nil {
		return err
	}
	return prompts.Add(a, promptSection(resolver))
}

// backendDetail is the status line of the row: the backend and what it enforces, or why
// confined calls fail closed.
func backendDetail(cfg *Config, be backend) string {
	if !be.usable {
		return fmt.Sprintf("sandbox backend unavailable: calls in %s or %s mode fail closed (%s)",
			shell.ModeReadOnly, shell.ModeWorkspaceWrite, be.reason)
	}
	what := fmt.Sprintf("user namespaces + Landlock ABI %d", be.abi)
	if be.kind != BackendNamespaces {
		what = fmt.Sprintf("Landlock ABI %d only (%s)", be.abi, be.why)
	}
	if launch.SeccompSupported {
		what += " + seccomp"
	}
	missing := be.missing(cfg.Network)
	detail := fmt.Sprintf("sandbox: %s, default mode %s, network %s, enforcement %s",
		what, cfg.DefaultMode, cfg.Network, enforcementOf(missing))
	if len(missing) > 0 {
		detail += "; missing: " + missingText(missing)
	}
	return detail
}

// New returns the confining executor for cfg (as a shell.Executor) and its policy
// resolver (the `sandboxPolicy` service), over the processes of sup. It is what the
// plugin provides; embedders may use it directly. cfg must have passed Validate.
// profileFiles, when not nil, lists the files of the running profile (protected paths).
func New(sup *subprocess.Supervisor, cfg *Config, log *slog.Logger, profileFiles func() []string) (shell.Executor, *Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", pluginName, err)
	}
	ex, r, _, err := newExecutor(sup, cfg, log, profileFiles)
	return ex, r, err
}

func newExecutor(sup *subprocess.Supervisor, cfg *Config, log *slog.Logger, profileFiles func() []string) (shell.Executor, *Resolver, *sandbox, error) {
	if log == nil {
		log = slog.Default()
	}
	if profileFiles == nil {
		profileFiles = func() []string { return nil }
	}
	root, err := cfg.root()
	if err != nil {
		return nil, nil, nil, err
	}
	if root != "" {
		canon, err := canonicalDir(root)
		if err != nil {
			key := "workspaceRoot"
			if cfg.WorkspaceRoot == "" {
				key = "cwd"
			}
			return nil, nil, nil, fmt.Errorf("%s: %s: %w", pluginName, key, err)
		}
		root = canon
	}
	var roots []string
	for i, r := range cfg.WritableRoots {
		canon, err := canonicalDir(r)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: writableRoots[%d]: %w", pluginName, i, err)
		}
		if !slices.Contains(roots, canon) {
			roots = append(roots, canon)
		}
	}
	resolver, err := newResolver(cfg.DefaultMode, root)
	if err != nil {
		return nil, nil, nil, err
	}
	resolver.owner = sup
	s := &sandbox{sup: sup, resolver: resolver, cfg: cfg, roots: roots, log: log, profileFiles: profileFiles}
	ex, err := bashexec.New(bashexec.Local(sup), cfg.Config, bashexec.Options{
		Name:        pluginName,
		SandboxMode: cfg.DefaultMode,
		Prepare:     s.prepare,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return ex, resolver, s, nil
}

// sandbox confines the commands of one executor.
type sandbox struct {
	sup          *subprocess.Supervisor
	resolver     *Resolver
	cfg          *Config
	roots        []string // canonical writableRoots
	log          *slog.Logger
	profileFiles func() []string
}

// backend is what confines this executor's commands on this host.
type backend struct {
	usable bool
	reason string // why nothing is usable
	kind   string // BackendNamespaces or BackendLandlock
	why    string // why Landlock only
	abi    int
	userns bool // the host allows user namespaces
}

func (b backend) missing(network string) []string {
	return Missing(b.kind, b.abi, network, b.userns)
}

// backend chooses the backend: the namespaces where the host has them and the
// configuration does not turn them off, else Landlock only.
func (s *sandbox) backend() backend {
	r := Probe()
	be := backend{abi: r.ABI, userns: r.Namespaces}
	switch {
	case !r.Usable:
		be.reason = r.Reason
	case s.cfg.Namespaces == NamespacesOff:
		if ok, why := landlockOnly(); !ok {
			be.reason = "namespaces are off and the Landlock-only backend does not work: " + why
		} else {
			be.usable, be.kind, be.why = true, BackendLandlock, "namespaces are off in the configuration"
		}
	case r.Namespaces:
		be.usable, be.kind = true, BackendNamespaces
	default:
		be.usable, be.kind, be.why = true, BackendLandlock, "user namespaces unavailable: "+r.NamespacesReason
	}
	return be
}

// UnprotectableError refuses a configuration, or a workspace-write call, that would put
// a protected path inside a writable root on a backend that cannot keep it read-only
// (Landlock alone cannot make part of a writable directory read-only).
type UnprotectableError struct {
	Path, Root string
}

func (e *UnprotectableError) Error() string {
	return fmt.Sprintf("bash-sandbox: cannot protect %q inside the writable root %q: this host's sandbox is Landlock-only (no mount namespace), which cannot make part of a writable root read-only; refusing to run workspace-write commands while it is there", e.Path, e.Root)
}

// checkStatic refuses, on a backend without namespaces, a configuration whose writable
// roots (writableRoots, and the configured workspace root) hold a file of the running
// profile or $DSH_HOME.
func (s *sandbox) checkStatic(be backend) error {
	if !be.usable || be.kind == BackendNamespaces {
		return nil
	}
	roots := append([]string{s.resolver.root}, s.roots...)
	return unprotectable(s.protected("", nil), roots)
}

// unprotectable returns an *UnprotectableError for the first existing protected path
// inside one of roots.
func unprotectable(protected, roots []string) error {
	for _, p := range protected {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		for _, r := range roots {
			if r != "" && within(p, r) {
				return &UnprotectableError{Path: p, Root: r}
			}
		}
	}
	return nil
}

// visibleInSandbox reports whether a confined command could see the host path p
// (canonical): outside /tmp, which the private /tmp covers, or inside one of the
// writable roots, which are bound over it.
func visibleInSandbox(p string, writable []string) bool {
	if !within(p, "/tmp") {
		return true
	}
	return slices.ContainsFunc(writable, func(w string) bool { return within(p, w) })
}

func within(path, root string) bool {
	return path == root || root == "/" || strings.HasPrefix(path, root+"/")
}

// protected lists the protected paths of a call in workspace ws (the protected paths: .git and .dsh at
// the workspace root, every file of the running profile — the path read and, for a
// symlink, its target — and $DSH_HOME), whether they exist or not.
func (s *sandbox) protected(ws string, dshEnv map[string]string) []string {
	var out []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if ws != "" {
		add(filepath.Join(ws, ".git"))
		add(filepath.Join(ws, ".dsh"))
	}
	for _, f := range s.profileFiles() {
		add(f)
		if real, err := filepath.EvalSymlinks(f); err == nil {
			add(real)
		}
	}
	for _, h := range homes(dshEnv) {
		add(h)
	}
	return out
}

// homes are the dsh homes a call may use: the call's $DSH_HOME (shell-env's), and this
// process's ($DSH_HOME, else ~/.dsh).
func homes(dshEnv map[string]string) []string {
	out := []string{dshEnv["DSH_HOME"]}
	if h := os.Getenv("DSH_HOME"); h != "" {
		out = append(out, h)
	} else if home, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(home, ".dsh"))
	}
	return out
}

// ServeTokenName is the file in the dsh home where `dsh serve --http` writes the bearer
// token it generates.
const ServeTokenName = "serve-token"

// secrets are the files of this process that confined commands must not read (HideFile).
var secrets struct {
	mu    sync.Mutex
	paths []string
}

// HideFile keeps the file at path — a secret of this process, such as the bearer-token
// file of `dsh serve --http` — from the confined commands of this process's session
// sandboxes (namespace backend): wherever a command could read it, the sandbox covers
// it with an empty read-only file before each command starts (so a file that appears,
// or is replaced, later is covered from the next command on). $DSH_HOME/serve-token (and
// ~/.dsh/serve-token) is always hidden. The Landlock-only fallback cannot hide a file
// (MissingSecretFiles).
func HideFile(path string) {
	if abs, err := filepath.Abs(path); err == nil {
		secrets.mu.Lock()
		if !slices.Contains(secrets.paths, abs) {
			secrets.paths = append(secrets.paths, abs)
		}
		secrets.mu.Unlock()
	}
}

// masked lists the secret files a command of a call could read, to be covered: the
// serve-token of every home (the call's, this process's, the default ~/.dsh) and the
// HideFile files, canonical where they exist, except those the private /tmp covers
// anyway (under /tmp and in no writable root).
func masked(dshEnv map[string]string, writable []string) []string {
	hs := homes(dshEnv)
	if home, err := os.UserHomeDir(); err == nil {
		hs = append(hs, filepath.Join(home, ".dsh")) // the default home, another dsh's
	}
	var candidates []string
	for _, h := range hs {
		if h != "" && filepath.IsAbs(h) {
			candidates = append(candidates, filepath.Join(h, ServeTokenName))
		}
	}
	secrets.mu.Lock()
	candidates = append(candidates, secrets.paths...)
	secrets.mu.Unlock()
	var out []string
	for _, p := range candidates {
		p = filepath.Clean(p)
		if canon, err := filepath.EvalSymlinks(p); err == nil {
			p = canon
		}
		if visibleInSandbox(p, writable) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// symlinkBelow returns the first directory strictly between root and path (which lies
// in root) that is a symbolic link, or "".
func symlinkBelow(root, path string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(path, root), "/")
	dir := root
	for {
		elem, more, ok := strings.Cut(rest, "/")
		if !ok {
			return ""
		}
		dir = filepath.Join(dir, elem)
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return dir
		}
		rest = more
	}
}

// hidden are the host directories the namespace backend covers with an empty read-only
// tmpfs, wherever a confined command could otherwise see them — outside /tmp (the
// sandbox shows the host's tree read-only) or inside a writable root (bound over the
// private /tmp): the spill root, which holds every session's spill files, and the temp
// dir, which holds every session's private temp dir (of this dsh and of others). One that holds a writable root cannot be hidden without hiding the root too, and
// a spill root inside a writable root that does not exist, or is reached through a
// symbolic link, could be planted (the server follows it): the call is then refused
// with an *ExposedError.
func (s *sandbox) hidden(ns bool, writable []string) ([]string, error) {
	if !ns {
		return nil, nil
	}
	var out []string
	check := func(what, path string) error {
		if path == "" {
			return nil
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil
		}
		canon, err := filepath.EvalSymlinks(abs)
		for _, w := range writable {
			if !within(abs, w) && (err != nil || !within(canon, w)) {
				continue
			}
			switch {
			case err != nil:
				return &ExposedError{What: what, Path: abs, Root: w, Why: "does not exist, so a confined command could create it"}
			case canon != abs:
				return &ExposedError{What: what, Path: abs, Root: w, Why: "is reached through a symbolic link, which a confined command could change"}
			}
		}
		if err != nil {
			return nil // not there, and out of every writable root: nothing to see
		}
		if !visibleInSandbox(canon, writable) {
			return nil
		}
		for _, w := range writable {
			if within(w, canon) {
				return &ExposedError{What: what, Path: canon, Root: w, Holds: true}
			}
		}
		if !slices.Contains(out, canon) {
			out = append(out, canon)
		}
		return nil
	}
	if err := check("the spill root", s.sup.Spool().Root()); err != nil {
		return nil, err
	}
	// Every dsh's session directories are made by path under its temp dir (this one's
	// under the same parent as base): hide the parent, not only this process's base.
	base, err := sandboxBase()
	if err != nil {
		return nil, err
	}
	if err := check("the temp dir", filepath.Dir(base)); err != nil {
		return nil, err
	}
	return out, nil
}

// ExposedError refuses a confined call whose writable roots would show confined
// commands what the server keeps from them (the spill files, the sessions' private temp
// dirs), or let them redirect where the server writes: nothing runs.
type ExposedError struct {
	// What names the directory ("the spill root", "the temp dir"),
	// Path is it, Root the writable root (the workspace or a writableRoots entry).
	What, Path, Root string
	// Holds: Path is or holds Root. Otherwise it lies in Root, and Why says what is
	// wrong with it.
	Holds bool
	Why   string
}

func (e *ExposedError) Error() string {
	where := fmt.Sprintf("lies in the writable root %q and %s", e.Root, e.Why)
	if e.Holds {
		where = fmt.Sprintf("holds the writable root %q, so it cannot be hidden from confined commands", e.Root)
	}
	return fmt.Sprintf("bash-sandbox: %s %q %s; refusing to run confined commands (keep it out of the workspace and writableRoots, or move it: subprocess spillRoot, TMPDIR)",
		e.What, e.Path, where)
}

// prepare decides how one call runs: its policy is spec.Sandbox (tool-bash resolves it
// for the calling session, with an approved escalation) or, without one, the default
// policy of a call without a session. danger-full-access runs bash directly; the
// confined modes need a usable backend — otherwise Execute fails with the fail-closed
// error and nothing runs — and a workspace that still is the one pinned when the session
// started; bash is then started by the session's sandbox. The returned function adds
// the sandbox facts to the result.
func (s *sandbox) prepare(_ context.Context, spec shell.ExecSpec, cmd *bashexec.Command) (bashexec.FinishFunc, error) {
	var policy shell.SandboxPolicy
	if spec.Sandbox != nil {
		policy = *spec.Sandbox
	} else {
		p, err := s.resolver.Resolve(nil, "")
		if err != nil {
			return nil, err
		}
		policy = p
	}
	mode := policy.Mode
	switch mode {
	case shell.ModeDangerFullAccess:
		return func(res *shell.RunResult) { res.Sandbox = sandboxFacts(mode, "", *res, false) }, nil
	case shell.ModeReadOnly, shell.ModeWorkspaceWrite:
	default:
		return nil, fmt.Errorf("%s: unknown sandbox mode %q", pluginName, mode)
	}
	be := s.backend()
	if !be.usable {
		err := &UnavailableError{Mode: mode, Reason: be.reason}
		s.log.Warn("bash-sandbox: refusing to run a command unconfined", "mode", mode, "err", err)
		return nil, err
	}
	enforcement := enforcementOf(be.missing(s.cfg.Network))
	stubbed := false // the runner-failure stub runs instead of the command (no sandbox)
	starter := &cmdStarter{}
	finish := func(res *shell.RunResult) {
		res.Sandbox = sandboxFacts(mode, enforcement, *res, stubbed || starter.stub.Load())
	}

	sess := sessionFor(s.sup, sessionKeyID(spec.SessionID, policy.WorkspaceRoot))
	pin, err := sess.workspace(policy.WorkspaceRoot)
	if err != nil {
		return nil, err
	}
	if err := pin.check(); err != nil {
		return nil, err
	}
	if policy.WorkspaceRoot != "" && policy.WorkspaceRoot != pin.path {
		return nil, fmt.Errorf("%s: the call's workspace root %q is not its session's, pinned at %q", pluginName, policy.WorkspaceRoot, pin.path)
	}
	protect := s.protected(pin.path, spec.DshEnv)
	writable := append([]string{pin.path}, s.roots...)
	ns := be.kind == BackendNamespaces
	if mode == shell.ModeWorkspaceWrite && !ns {
		if err := unprotectable(protect, writable); err != nil {
			return nil, err
		}
	}
	if ns {
		for _, p := range protect {
			for _, r := range writable {
				if !within(p, r) {
					continue
				}
				if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
					return nil, fmt.Errorf("%s: cannot protect %q inside the writable root %q: it is a symbolic link", pluginName, p, r)
				}
				// A symlinked directory on the way: a command could point it elsewhere.
				if link := symlinkBelow(r, p); link != "" {
					return nil, fmt.Errorf("%s: cannot protect %q inside the writable root %q: it is reached through the symbolic link %q", pluginName, p, r, link)
				}
			}
		}
	}
	hide, err := s.hidden(ns, writable)
	if err != nil {
		return nil, err
	}
	var mask []string
	if ns {
		mask = masked(spec.DshEnv, writable)
	}
	conf := boxConfig{namespaces: ns, network: s.cfg.Network, workspace: pin.path, roots: s.roots, hide: hide}
	b, err := sess.box(s.sup, conf, spec.SessionID, protect, mask)
	if err != nil {
		// The sandbox could not be built: the call is a runner failure (exit 125 and
		// one "dsh-sandbox:" line, from the runner-failure stub), never a denial.
		s.log.Warn("bash-sandbox: the session sandbox did not start", "err", err)
		exe, xerr := self()
		if xerr != nil {
			return nil, err
		}
		cmd.Argv = []string{exe, launch.FailArg, strings.TrimPrefix(err.Error(), "bash-sandbox: ")}
		stubbed = true
		return finish, nil
	}
	tmp, _, err := sess.dirs()
	if err != nil {
		return nil, err
	}
	if ns {
		tmp = "/tmp"
	}
	lp := launch.Policy{Mode: mode, Network: s.cfg.Network}
	if mode == shell.ModeWorkspaceWrite {
		lp.WorkspaceRoot = pin.path
		lp.WritableRoots = []string{tmp}
		if ns {
			lp.WritableRoots = append(lp.WritableRoots, "/dev/shm")
		}
		for _, r := range s.roots {
			if r != pin.path {
				lp.WritableRoots = append(lp.WritableRoots, r)
			}
		}
	}
	starter.box, starter.policy = b, lp
	if ns {
		starter.protect, starter.mask = protect, mask
	}
	cmd.Start = starter
	env := maps.Clone(cmd.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["TMPDIR"] = tmp
	cmd.Env = env
	return finish, nil
}
