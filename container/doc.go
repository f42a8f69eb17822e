// Package container is dsh's plugin runtime. A profile (YAML) lists rows; each row mounts
// one plugin; plugins provide and inject named services; the runtime keeps every row's
// activation consistent with the services that exist (see Runtime for the guarantees),
// and hot-reloads the profile.
//
//   - A plugin is a declaration (Plugin): name, injected and provided services, a config
//     type with defaults, an Apply function. Each plugin package exports one and
//     registers it with Declare in its `Module`, an fx.Module — the only thing "module"
//     means in this API (container.Module wires the runtime into an fx application;
//     the profile error "module not found" names a plugin not compiled in).
//   - A service is a value published under a name ("shell", "tools"). A plugin gets what
//     it injects with Injected, and what it uses only sometimes with Lookup.
//   - A fiber is the runtime's record of one mounted row: pending, loading, active,
//     failed, unloading, disposed (the word, and the semantics, come from Cordis).
//   - An Activation is one period during which a fiber is active: Apply registers
//     everything through it, and it is all undone, in reverse order, when it ends. It is
//     not a context.Context; its Context method returns the one cancelled at its end.
//   - A Session is one harness session: an MCP session, or the one of `dsh call`.
//
// fx owns what is static (the catalog: Module, Declare); the dynamic part lives here:
// the Runtime. Loading profiles, hot reload and the fx lifecycle are package profile's.
package container
