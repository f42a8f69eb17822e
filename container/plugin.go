package container

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Plugin is a plugin declaration as the catalog holds it: what a profile row mounts.
// A plugin package writes a Declaration with its config type and exports
// Define(declaration) as its Plugin; the config type is erased here, so that one
// catalog holds plugins of every config type.
type Plugin struct {
	// Name is the catalog name used in profiles (e.g. "bash-local"). It prefixes the
	// errors of the plugin's config.
	Name string
	// Aliases are other names the plugin answers to, e.g. the official
	// "@deepseek-ai/dsh-bash-local" specifier.
	Aliases []string
	// Inject lists the services the plugin needs; all are required. The fiber stays
	// pending until every one exists.
	Inject Keys
	// Provide lists the services Apply must publish (Key.Provide).
	Provide Keys
	// Exclusive lists the services of Provide of which a composition may have only one
	// enabled provider (`shell`: one executor per profile). A profile with two is
	// refused before anything starts, and `dsh check` says so; a service one plugin of
	// the catalog declares exclusive is exclusive for every plugin that provides it.
	Exclusive Keys
	// Tools names the model-facing tools Apply registers (tool-bash: "bash"), so that a
	// call for one while the row is not active says why (Runtime.ToolUnavailable)
	// rather than that no such tool exists.
	Tools []string

	newConfig  func() any   // a fresh config with its defaults; nil: no config
	configType reflect.Type // what newConfig returns
	apply      func(a *Activation, config any) error

	inject, provide []string // the names of Inject and Provide (set by NewCatalog)
}

// Declaration is a plugin as its package writes it, typed by its config C (a pointer
// to a struct):
//
//	var Plugin = container.Define(container.Declaration[*Config]{
//		Name:      "bash-local",
//		Inject:    container.Keys{subprocess.Service},
//		Provide:   container.Keys{shell.Service},
//		Exclusive: container.Keys{shell.Service},
//		Config:    func() *Config { return &Config{Config: bashexec.DefaultConfig()} },
//		Apply: func(a *container.Activation, cfg *Config) error {
//			sup, err := container.Injected(a, subprocess.Service)
//			…
//			return shell.Service.Provide(a, ex)
//		},
//	})
//
// A row's config map is decoded onto a fresh Config() (keys match the fields' `yaml`
// tags; unknown keys are errors), then checked by the config's own Validate method when
// it has one (`func (c *Config) Validate() error`): the one validation hook. The
// container prefixes what Validate returns with the plugin's name, so Validate writes
// "timeoutMs must be a positive finite number" and the user reads "bash-local:
// timeoutMs must be a positive finite number". A value of the wrong type is worded
// from the field's `valid` tag when it has one — `valid:"a positive finite number"`
// makes a string there "<plugin>: timeoutMs must be a positive finite number, got the
// string "5000"" — and by the decoder otherwise (`config: key "timeoutMs": expected a
// number, got …`).
type Declaration[C any] struct {
	// Name, Aliases, Inject, Provide, Exclusive and Tools are Plugin's.
	Name      string
	Aliases   []string
	Inject    Keys
	Provide   Keys
	Exclusive Keys
	Tools     []string
	// Config returns a fresh config value with every default applied. Nil means the
	// plugin takes no config (a row must give none) and Apply receives C's zero value:
	// declare such plugins with C = NoConfig.
	Config func() C
	// Apply activates the plugin. Everything it registers goes through a (Defer, Go,
	// Key.Provide, registries that take a Scope) and is undone, in reverse order, when
	// the activation ends. config is the row's config, decoded and validated.
	Apply func(a *Activation, config C) error
}

// NoConfig is the config type of a plugin that takes none.
type NoConfig struct{}

// Define turns a declaration into the Plugin the catalog holds. NewCatalog reports
// what is wrong with it (no name, no Apply, a config that is not a pointer to a struct).
func Define[C any](d Declaration[C]) Plugin {
	p := Plugin{Name: d.Name, Aliases: d.Aliases, Inject: d.Inject, Provide: d.Provide, Exclusive: d.Exclusive, Tools: d.Tools}
	if d.Apply != nil {
		p.apply = func(a *Activation, config any) error {
			c, _ := config.(C) // nil when the plugin takes no config: C's zero value
			return d.Apply(a, c)
		}
	}
	if d.Config != nil {
		p.newConfig = func() any { return d.Config() }
		p.configType = reflect.TypeFor[C]()
	}
	return p
}

// Config returns a fresh config value of p with every default applied (what a row
// without config runs with), or nil when p takes no config.
func (p Plugin) Config() any {
	if p.newConfig == nil {
		return nil
	}
	return p.newConfig()
}

// Catalog is the set of plugin declarations a runtime can mount, sorted by name.
type Catalog struct {
	plugins   []*Plugin
	byName    map[string]*Plugin
	providers map[string][]string
	exclusive []string // the services some plugin declares exclusive, sorted
}

// NewCatalog builds a catalog. A duplicate name or alias (across all plugins), an empty
// name, a missing Apply, a config that is not a pointer to a struct, or two value types
// under one service name is an error.
func NewCatalog(plugins ...Plugin) (*Catalog, error) {
	c := &Catalog{byName: map[string]*Plugin{}, providers: map[string][]string{}}
	sorted := make([]*Plugin, 0, len(plugins))
	for i := range plugins {
		p := plugins[i]
		sorted = append(sorted, &p)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var errs []error
	for _, p := range sorted {
		if p.Name == "" {
			errs = append(errs, errors.New("catalog: plugin with an empty name"))
			continue
		}
		if p.apply == nil {
			errs = append(errs, fmt.Errorf("catalog: plugin %q has no Apply (declare it with container.Define)", p.Name))
		}
		if t := p.configType; t != nil && (t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct) {
			errs = append(errs, fmt.Errorf("catalog: plugin %q declares a config of type %v, want a pointer to a struct", p.Name, t))
		}
		for _, n := range append([]string{p.Name}, p.Aliases...) {
			if prev, dup := c.byName[n]; dup {
				errs = append(errs, fmt.Errorf("catalog: name %q is declared by both %q and %q", n, prev.Name, p.Name))
				continue
			}
			c.byName[n] = p
		}
		p.inject, p.provide = p.Inject.names(), p.Provide.names()
		for _, s := range p.provide {
			c.providers[s] = append(c.providers[s], p.Name)
		}
		for _, s := range p.Exclusive.names() {
			if !p.provides(s) {
				errs = append(errs, fmt.Errorf("catalog: plugin %q declares service %q exclusive but does not provide it", p.Name, s))
			} else if !slices.Contains(c.exclusive, s) {
				c.exclusive = append(c.exclusive, s)
			}
		}
		c.plugins = append(c.plugins, p)
	}
	sort.Strings(c.exclusive)
	errs = append(errs, checkKeyTypes(c.plugins)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// checkKeyTypes reports services whose declarations disagree on the value's type (two
// packages declaring keys of one name), and keys without a name.
func checkKeyTypes(plugins []*Plugin) []error {
	type decl struct {
		t      reflect.Type
		plugin string
	}
	first := map[string]decl{}
	var errs []error
	for _, p := range plugins {
		for _, k := range slices.Concat(p.Inject, p.Provide) {
			if k == nil || k.Name() == "" {
				errs = append(errs, fmt.Errorf("catalog: plugin %q declares a service key without a name (use container.NewKey)", p.Name))
				continue
			}
			d, seen := first[k.Name()]
			if !seen {
				first[k.Name()] = decl{k.valueType(), p.Name}
			} else if d.t != k.valueType() {
				errs = append(errs, fmt.Errorf("catalog: service %q is declared as %v by %q and as %v by %q",
					k.Name(), d.t, d.plugin, k.valueType(), p.Name))
			}
		}
	}
	return errs
}

// Plugins returns the declarations sorted by name.
func (c *Catalog) Plugins() []Plugin {
	out := make([]Plugin, len(c.plugins))
	for i, p := range c.plugins {
		out[i] = *p
	}
	return out
}

// Plugin finds a plugin by name or alias.
func (c *Catalog) Plugin(name string) (Plugin, bool) {
	p, ok := c.byName[name]
	if !ok {
		return Plugin{}, false
	}
	return *p, true
}

func (c *Catalog) lookup(name string) (*Plugin, error) {
	p, ok := c.byName[name]
	if !ok {
		return nil, &notFoundError{name: name, known: c.names()}
	}
	return p, nil
}

// names lists the catalog's plugin names (not aliases), sorted.
func (c *Catalog) names() []string {
	out := make([]string, len(c.plugins))
	for i, p := range c.plugins {
		out[i] = p.Name
	}
	return out
}

// notFoundError is a row naming a plugin the catalog does not have.
type notFoundError struct {
	name  string
	known []string
}

// Error is "module not found: <name>", then what the binary does have and what to do:
// plugins are compiled in, not loaded at run time.
func (e *notFoundError) Error() string {
	return fmt.Sprintf("module not found: %s (this dsh binary has no plugin of that name; it has: %s. "+
		"A plugin from another Go module is compiled into a dsh binary built with it: see the README, \"Writing a plugin\")",
		e.name, strings.Join(e.known, ", "))
}

// Exclusive reports whether service may have only one enabled provider in a
// composition (a plugin of the catalog declares it exclusive).
func (c *Catalog) Exclusive(service string) bool {
	_, found := slices.BinarySearch(c.exclusive, service)
	return found
}

// Providers returns the names of the catalog plugins that declare they provide service,
// sorted.
func (c *Catalog) Providers(service string) []string {
	return append([]string(nil), c.providers[service]...)
}

// Provides reports whether p declares it provides service.
func (p *Plugin) Provides(service AnyKey) bool { return p.provides(service.Name()) }

func (p *Plugin) provides(service string) bool {
	return slices.Contains(p.provide, service)
}
