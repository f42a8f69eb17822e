package prompt

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/container"
)

// Service is the key the registry is provided under.
var Service = container.NewKey[*Registry]("systemPrompt")

// Plugin declares the prompt registry.
var Plugin = container.Define(container.Declaration[container.NoConfig]{
	Name:    "prompt",
	Aliases: []string{"@deepseek-ai/dsh-prompt"},
	Provide: container.Keys{Service},
	Apply: func(a *container.Activation, _ container.NoConfig) error {
		return Service.Provide(a, NewRegistry())
	},
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Section is one part of the system prompt.
type Section struct {
	Name  string
	Order int
	// Text is the section's text. When Render is set it is used instead, so a section can
	// depend on the session (its workspace, its sandbox mode).
	Text   string
	Render func(session *container.Session) string
}

// Registry holds prompt sections. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	sections map[string]*Section
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{sections: map[string]*Section{}} }

// Add registers s for as long as scope's activation lasts. Names are unique.
func (r *Registry) Add(scope container.Scope, s Section) error {
	if s.Name == "" {
		return errors.New("prompt: a section needs a name")
	}
	r.mu.Lock()
	if _, dup := r.sections[s.Name]; dup {
		r.mu.Unlock()
		return fmt.Errorf("prompt: section %q is already registered", s.Name)
	}
	sp := &s
	r.sections[s.Name] = sp
	r.mu.Unlock()
	scope.Defer(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.sections[s.Name] == sp {
			delete(r.sections, s.Name)
		}
	})
	return nil
}

// Sections returns the sections sorted by order, then name.
func (r *Registry) Sections() []Section {
	r.mu.RLock()
	out := make([]Section, 0, len(r.sections))
	for _, s := range r.sections {
		out = append(out, *s)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Compose renders every section for session (which may be nil) and joins them, in
// order, with a blank line. Sections that render empty are left out.
func (r *Registry) Compose(session *container.Session) string {
	var parts []string
	for _, s := range r.Sections() {
		text := s.Text
		if s.Render != nil {
			text = s.Render(session)
		}
		if text != "" {
			parts = append(parts, text)
		}
	}
	return strings.Join(parts, "\n\n")
}
