package container_test

import (
	"slices"
	"testing"

	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/container"
)

// Item 1: plugin declarations arrive through fx (one module per plugin package), the
// catalog is sorted by name whatever the declaration order, and official specifiers
// work as aliases.
func TestCatalogFromFx(t *testing.T) {
	j := &journal{}
	var cat *container.Catalog
	app := fx.New(
		fx.NopLogger,
		container.Module,
		container.ModuleOf(plug(j, "zeta", nil, nil, nil)),
		container.ModuleOf(plugAs(exclusive(plug(j, "x", nil, []string{"shell"}, nil), "shell"), "bash-local", "@deepseek-ai/dsh-bash-local")),
		container.ModuleOf(plug(j, "alpha", nil, nil, nil)),
		fx.Populate(&cat),
	)
	mustNil(t, app.Err())
	var names []string
	for _, p := range cat.Plugins() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"alpha", "bash-local", "zeta"}) {
		t.Fatalf("catalog order %q", names)
	}
	p, ok := cat.Plugin("@deepseek-ai/dsh-bash-local")
	if !ok || p.Name != "bash-local" {
		t.Fatalf("alias lookup: %v %q", ok, p.Name)
	}
	if got := cat.Providers("shell"); !slices.Equal(got, []string{"bash-local"}) {
		t.Fatalf("providers %q", got)
	}
}

// Item 1: a duplicate plugin name or alias fails fx.New.
func TestDuplicateDeclarationFailsFxNew(t *testing.T) {
	j := &journal{}
	a := plug(j, "a", nil, nil, nil)
	for name, second := range map[string]container.Plugin{
		"name":          plug(j, "a", nil, nil, nil),
		"alias":         plugAs(a, "b", "@test/a"),
		"alias as name": plugAs(a, "@test/a"),
	} {
		t.Run(name, func(t *testing.T) {
			app := fx.New(fx.NopLogger, container.Module, container.ModuleOf(a), container.ModuleOf(second))
			wantErrContains(t, app.Err(), "catalog: name", "is declared by both")
		})
	}
}

// plugAs is p under another name and aliases.
func plugAs(p container.Plugin, name string, aliases ...string) container.Plugin {
	p.Name, p.Aliases = name, aliases
	return p
}
