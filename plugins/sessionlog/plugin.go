package sessionlog

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/buildinfo"
	"github.com/dsh-dev/dsh/plugins/jobs"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Key is the managed variable that names the session's audit file.
const Key = "DSH_SESSION_JSONL"

// Config is the session-log row's config.
type Config struct {
	// Dir holds the sessions' files (default $DSH_HOME/sessions, shell-env's home).
	Dir string `yaml:"dir"`
	// MaxBytes is the size past which a session's file is rotated to <file>.1
	// (default 64 MiB).
	MaxBytes int64 `yaml:"maxBytes" valid:"a positive integer"`
	// RetainDays is how long files nobody wrote to are kept (default 30).
	RetainDays int `yaml:"retainDays" valid:"a positive integer"`
}

// DefaultConfig returns the config with its defaults applied.
func DefaultConfig() *Config { return &Config{MaxBytes: 64 << 20, RetainDays: 30} }

// Validate checks the directory and the bounds.
func (c *Config) Validate() error {
	switch {
	case c.Dir != "" && !filepath.IsAbs(c.Dir):
		return fmt.Errorf("dir must be an absolute path, got %q", c.Dir)
	case strings.ContainsRune(c.Dir, 0):
		return errors.New("dir must not contain a NUL byte")
	case c.MaxBytes <= 0:
		return fmt.Errorf("maxBytes must be a positive integer, got %d", c.MaxBytes)
	case c.RetainDays <= 0:
		return fmt.Errorf("retainDays must be a positive integer, got %d", c.RetainDays)
	}
	return nil
}

// Plugin declares the session-log plugin.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:   "session-log",
	Inject: container.Keys{tools.Service, shellenv.Service},
	Config: DefaultConfig,
	Apply:  apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

func apply(a *container.Activation, cfg *Config) error {
	reg, err := container.Injected(a, tools.Service)
	if err != nil {
		return err
	}
	env, err := container.Injected(a, shellenv.Service)
	if err != nil {
		return err
	}
	dir := cfg.Dir
	if dir == "" {
		dir = filepath.Join(env.Home(), "sessions")
	}
	l, err := open(a, dir, cfg, buildinfo.Version())
	if err != nil {
		return err
	}
	a.OnSessionEnd(l.end)
	l.watchJobs()
	if err := env.Register(a, shellenv.Contributor{
		Name:      a.ID(),
		Variables: map[string]string{Key: "this session's audit log: one JSON record per tool call and job event (read-only)"},
		Resolve:   l.resolve,
	}); err != nil {
		return err
	}
	return reg.Observe(a, tools.Observer{Name: a.ID(), Order: tools.OrderRecord, Observe: l.observe})
}

// watchJobs records the job events of the jobs service of the moment, once per
// runtime (a reload of the jobs row makes a new one).
func (l *Log) watchJobs() {
	rt, ok := container.Lookup(l.act, jobs.Service)
	if !ok {
		return
	}
	l.jobsMu.Lock()
	defer l.jobsMu.Unlock()
	if l.jobs == rt {
		return
	}
	if err := rt.Watch(l.act, l.job); err != nil {
		l.log.Warn("session-log: cannot watch jobs", "err", err)
		return
	}
	l.jobs = rt
}
