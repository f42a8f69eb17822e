package container

import "go.uber.org/fx"

// Declare is the one registration a plugin package makes: an fx.Module that contributes
// p to the catalog (the "plugins" value group).
func Declare(p Plugin) fx.Option {
	return fx.Module(p.Name, fx.Supply(fx.Annotated{Group: "plugins", Target: p}))
}
