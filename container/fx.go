package container

import "go.uber.org/fx"

// ModuleOf is the one registration a plugin package makes, exported as its Module:
// `var Module = container.ModuleOf(Plugin)`, an fx option that puts p in the catalog
// of every fx application that includes it (the "plugins" value group). It supplies
// the value, without an fx.Module around it: a module per plugin cost a server's start
// about 0.7 ms in all (fx records a call stack and builds a scope for each).
func ModuleOf(p Plugin) fx.Option {
	return fx.Supply(fx.Annotated{Group: "plugins", Target: p})
}

// Module provides the *Catalog of an fx application: every plugin contributed with
// ModuleOf, sorted by name (a duplicate name or alias fails fx.New). Package profile's
// Module, which composes a profile on start, includes it.
var Module = fx.Module("catalog",
	fx.Provide(newModuleCatalog),
	fx.Invoke(func(*Catalog) {}), // built in fx.New, so that its errors fail it
)

type catalogIn struct {
	fx.In
	Plugins []Plugin `group:"plugins"`
}

func newModuleCatalog(in catalogIn) (*Catalog, error) {
	return NewCatalog(in.Plugins...)
}
