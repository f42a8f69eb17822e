package shellenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/container"
)

// Service is the key the registry is provided under.
var Service = container.NewKey[*Registry]("bashEnv")

// The reserved built-in keys, set by the registry itself. No contributor may declare
// them.
const (
	// KeyHome is the harness home (Config.DshHome).
	KeyHome = "DSH_HOME"
	// KeyShell is "1" in every model-run command.
	KeyShell = "DSH_SHELL"
	// KeySessionID is the calling session's id; absent for session-less calls.
	KeySessionID = "DSH_SESSION_ID"
)

// Plugin declares the bashEnv registry.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:    "shell-env",
	Aliases: []string{"@deepseek-ai/dsh-shell-env"},
	Provide: container.Keys{Service},
	Config:  DefaultConfig,
	Apply: func(a *container.Activation, cfg *Config) error {
		reg := NewRegistry(cfg.DshHome)
		// The descriptions contributors must write are for the user: the row's status
		// detail lists them, as contributors come and go.
		reg.changed = func() { a.SetDetail(reg.detail()) }
		return Service.Provide(a, reg)
	},
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Config is the shell-env row's config.
type Config struct {
	// DshHome is the harness home exported as DSH_HOME: an absolute path. Default:
	// $DSH_HOME (made absolute), else ~/.dsh.
	DshHome string `yaml:"dshHome"`
}

// DefaultConfig returns the config with its defaults applied.
func DefaultConfig() *Config {
	return &Config{DshHome: defaultHome()}
}

func defaultHome() string {
	if h := os.Getenv(KeyHome); h != "" {
		if abs, err := filepath.Abs(h); err == nil {
			return abs
		}
		return h
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".dsh")
	}
	return ""
}

// Validate checks that dshHome is an absolute path.
func (c *Config) Validate() error {
	if c.DshHome == "" {
		return errors.New("dshHome is not set and neither $DSH_HOME nor a home directory is available")
	}
	if !filepath.IsAbs(c.DshHome) {
		return fmt.Errorf("dshHome must be an absolute path, got %q", c.DshHome)
	}
	if strings.ContainsRune(c.DshHome, 0) {
		return errors.New("dshHome must not contain a NUL byte")
	}
	return nil
}

// Call is what one collection is for: a tool call of one session.
type Call struct {
	// Session is the calling session, or nil for session-less callers (no
	// DSH_SESSION_ID then).
	Session *container.Session
}

// Contributor adds managed variables. Every key it may return must be declared in
// Variables with a non-empty description; Resolve may return a subset (a variable it
// cannot locate for this call is simply left out).
type Contributor struct {
	// Name identifies the contributor in errors; unique in the registry.
	Name string
	// Variables maps each key (DSH_ + [A-Z][A-Z0-9_]*) to what it means.
	Variables map[string]string
	// Resolve returns the values for one call. An error fails the whole collection
	// (the command does not run with a partial managed environment).
	Resolve func(ctx context.Context, call Call) (map[string]string, error)
}

// Registry is the bashEnv service. It is safe for concurrent use.
type Registry struct {
	home    string
	changed func() // after a contributor came or went; nil: nobody listens

	mu           sync.RWMutex
	contributors map[string]*Contributor
	owners       map[string]string // key -> contributor name
}

// NewRegistry returns a registry whose DSH_HOME is home.
func NewRegistry(home string) *Registry {
	return &Registry{home: home, contributors: map[string]*Contributor{}, owners: map[string]string{}}
}

// Home is the value of DSH_HOME.
func (r *Registry) Home() string { return r.home }

// reserved reports whether key is one of the built-ins no contributor may own.
func reserved(key string) bool {
	return key == KeyHome || key == KeyShell || key == KeySessionID
}

// validKey reports whether key has the managed form DSH_ + [A-Z][A-Z0-9_]*.
func validKey(key string) bool {
	rest, ok := strings.CutPrefix(key, "DSH_")
	if !ok || rest == "" || rest[0] < 'A' || rest[0] > 'Z' {
		return false
	}
	for i := 1; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Register adds c for as long as scope's activation lasts; its keys disappear with it.
// Keys are checked in sorted order; the first problem is returned and nothing is
// registered.
func (r *Registry) Register(scope container.Scope, c Contributor) error {
	if c.Name == "" {
		return errors.New("bash env contributor name must be non-empty")
	}
	keys := sortedKeys(c.Variables)
	vars := make(map[string]string, len(keys))
	for _, k := range keys {
		vars[k] = c.Variables[k]
	}
	c.Variables = vars

	r.mu.Lock()
	if _, dup := r.contributors[c.Name]; dup {
		r.mu.Unlock()
		return fmt.Errorf("bash env contributor %q is already registered", c.Name)
	}
	for _, k := range keys {
		if err := r.checkKeyLocked(c.Name, k, vars[k]); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	if c.Resolve == nil {
		r.mu.Unlock()
		return fmt.Errorf("bash env contributor %q has no resolve function", c.Name)
	}
	cp := &c
	r.contributors[c.Name] = cp
	for _, k := range keys {
		r.owners[k] = c.Name
	}
	r.mu.Unlock()
	r.notify()

	scope.Defer(func() {
		r.mu.Lock()
		if r.contributors[cp.Name] != cp {
			r.mu.Unlock()
			return
		}
		delete(r.contributors, cp.Name)
		for k := range cp.Variables {
			if r.owners[k] == cp.Name {
				delete(r.owners, k)
			}
		}
		r.mu.Unlock()
		r.notify()
	})
	return nil
}

func (r *Registry) notify() {
	if r.changed != nil {
		r.changed()
	}
}

// detail is the registry's status line: every contributed variable, its contributor
// and its description, by key ("" when there is none); the built-ins are not listed.
func (r *Registry) detail() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.owners) == 0 {
		return ""
	}
	parts := make([]string, 0, len(r.owners))
	for _, k := range sortedKeys(r.owners) {
		owner := r.owners[k]
		parts = append(parts, fmt.Sprintf("%s (%s) — %s", k, owner, r.contributors[owner].Variables[k]))
	}
	return "contributed variables: " + strings.Join(parts, "; ")
}

func (r *Registry) checkKeyLocked(name, key, description string) error {
	switch {
	case !validKey(key):
		return fmt.Errorf("bash env contributor %q declared invalid key %q", name, key)
	case reserved(key):
		return fmt.Errorf("bash env contributor %q cannot own reserved key %q", name, key)
	case strings.TrimSpace(description) == "":
		return fmt.Errorf("bash env contributor %q must describe %q", name, key)
	}
	if owner, taken := r.owners[key]; taken {
		return fmt.Errorf("bash env key %q is already owned by contributor %q; contributor %q cannot also own it", key, owner, name)
	}
	return nil
}

// List returns the keys declared by the registered contributors, sorted. The built-ins
// are not included.
func (r *Registry) List() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.owners))
	for k := range r.owners {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Describe returns the description a contributor declared for key.
func (r *Registry) Describe(key string) (description string, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	owner, ok := r.owners[key]
	if !ok {
		return "", false
	}
	return r.contributors[owner].Variables[key], true
}

// Collect resolves the managed environment for one call: the built-ins, then every
// contributor in name order. A contributor that fails, panics, or returns a key it did
// not declare fails the collection.
func (r *Registry) Collect(ctx context.Context, call Call) (Snapshot, error) {
	vars := map[string]string{KeyHome: r.home, KeyShell: "1"}
	if call.Session != nil && call.Session.ID != "" {
		vars[KeySessionID] = call.Session.ID
	}

	r.mu.RLock()
	contributors := make([]*Contributor, 0, len(r.contributors))
	for _, c := range r.contributors {
		contributors = append(contributors, c)
	}
	r.mu.RUnlock()
	sort.Slice(contributors, func(i, j int) bool { return contributors[i].Name < contributors[j].Name })

	for _, c := range contributors {
		if err := ctx.Err(); err != nil {
			return Snapshot{}, fmt.Errorf("bash env: collection aborted: %w", err)
		}
		got, err := resolve(ctx, c, call)
		if err != nil {
			return Snapshot{}, err
		}
		for _, k := range sortedKeys(got) {
			if _, declared := c.Variables[k]; !declared {
				return Snapshot{}, fmt.Errorf("bash env contributor %q returned undeclared key %q", c.Name, k)
			}
			if strings.ContainsRune(got[k], 0) {
				return Snapshot{}, fmt.Errorf("bash env contributor %q returned a value with a NUL byte for %q", c.Name, k)
			}
			vars[k] = got[k]
		}
	}
	return newSnapshot(vars), nil
}

func resolve(ctx context.Context, c *Contributor, call Call) (vars map[string]string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bash env contributor %q panicked: %v", c.Name, p)
		}
	}()
	vars, err = c.Resolve(ctx, call)
	if err != nil {
		return nil, fmt.Errorf("bash env contributor %q: %w", c.Name, err)
	}
	return vars, nil
}

// Var is one managed variable.
type Var struct {
	// Key is the variable's name (DSH_…).
	Key string `json:"key"`
	// Value is its value for this call.
	Value string `json:"value"`
}

// Snapshot is a collected managed environment: sorted by key and immutable (every
// accessor returns a copy). The zero value is empty.
type Snapshot struct {
	vars []Var
}

// newSnapshot builds a snapshot from vars (copied).
func newSnapshot(vars map[string]string) Snapshot {
	out := make([]Var, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		out = append(out, Var{Key: k, Value: vars[k]})
	}
	return Snapshot{vars: out}
}

// Len is the number of variables.
func (s Snapshot) Len() int { return len(s.vars) }

// Get returns the value of key.
func (s Snapshot) Get(key string) (string, bool) {
	i := sort.Search(len(s.vars), func(i int) bool { return s.vars[i].Key >= key })
	if i < len(s.vars) && s.vars[i].Key == key {
		return s.vars[i].Value, true
	}
	return "", false
}

// Keys returns the keys, sorted.
func (s Snapshot) Keys() []string {
	out := make([]string, len(s.vars))
	for i, v := range s.vars {
		out[i] = v.Key
	}
	return out
}

// Vars returns the variables, sorted by key.
func (s Snapshot) Vars() []Var { return append([]Var(nil), s.vars...) }

// Env returns the variables as KEY=value strings, sorted.
func (s Snapshot) Env() []string {
	out := make([]string, len(s.vars))
	for i, v := range s.vars {
		out[i] = v.Key + "=" + v.Value
	}
	return out
}

// Map returns a fresh map of the variables: the value for shell.ExecRequest.DshEnv.
func (s Snapshot) Map() map[string]string {
	out := make(map[string]string, len(s.vars))
	for _, v := range s.vars {
		out[v.Key] = v.Value
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
