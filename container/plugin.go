package container

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Plugin is a plugin declaration: what the catalog holds and a profile row mounts.
// A plugin package exports exactly one.
type Plugin struct {
	// Name is the catalog name used in profiles (e.g. "bash-local").
	Name string
	// Aliases are other names the plugin answers to, e.g. the official
	// "@deepseek-ai/dsh-bash-local" specifier.
	Aliases []string
	// Inject lists the services the plugin needs; all are required. The fiber stays
	// pending until every one exists.
	Inject Keys
	// Provide lists the services Apply must publish (with Provide).
	Provide Keys
	// Config returns a fresh config value (a pointer to a struct) with every default
	// applied. A row's config map is decoded onto it (keys match the fields' `yaml`
	// tags; unknown keys are errors); if it implements Validator, Validate runs next.
	// Nil means the plugin takes no config.
	Config func() any
	// Apply activates the plugin. Everything it registers goes through ctx and is undone,
	// in reverse order, when the activation ends. config is the value Config returned,
	// decoded and validated (nil when Config is nil).
	Apply func(a *Activation, config any) error

	inject, provide []string // the names of Inject and Provide (set by NewCatalog)
}

// Validator is implemented by config values that check themselves after decoding.
type Validator interface {
	Validate() error
}

// Catalog is the set of plugin declarations a runtime can mount, sorted by name.
type Catalog struct {
	plugins   []*Plugin
	byName    map[string]*Plugin
	providers map[string][]string
}

// NewCatalog builds a catalog. A duplicate name or alias (across all plugins), an empty
// name, or a missing Apply is an error.
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
		if p.Apply == nil {
			errs = append(errs, fmt.Errorf("catalog: plugin %q has no Apply", p.Name))
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
		c.plugins = append(c.plugins, p)
	}
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

// Lookup finds a plugin by name or alias.
func (c *Catalog) Lookup(name string) (Plugin, bool) {
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
