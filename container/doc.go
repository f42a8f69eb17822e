// Package container is dsh's plugin runtime. A profile (YAML) lists rows; each row mounts
// one plugin; plugins provide and inject named services; the runtime keeps every row's
// activation consistent with the services that exist, and hot-reloads the profile.
//
// # Words
//
//   - A plugin is a declaration (Plugin): a name, the services it injects and provides,
//     a config type with defaults, and an Apply function. Each plugin package exports
//     one, and registers it with Declare in a `Module` — an fx.Module, which is the only
//     thing "module" means in dsh's Go API (container.Module wires the runtime itself
//     into an fx application). The profile error "module not found: <name>" names a
//     plugin that is not compiled into the binary.
//   - A service is a value published under a name ("shell", "tools", "jobs"). A plugin
//     injects the services it cannot work without (Plugin.Inject; it gets them with
//     Injected) and looks up the ones it uses only sometimes, at call time (Lookup).
//   - A fiber is one mounted row: the runtime's record of that row's plugin, config and
//     state — pending, loading, active, failed, unloading, disposed. (The word comes from
//     Cordis, the TypeScript plugin framework whose semantics dsh keeps.)
//   - An activation (Activation) is one period during which a fiber is active. Apply
//     receives it and registers everything through it; when the activation ends it is
//     undone, in reverse order. It is not a context.Context; its Context method returns
//     the one cancelled when it ends.
//   - A session (Session) is one harness session — an MCP session, or the single
//     session of `dsh call` — with its id, workspace and channels to its user.
//
// # What the runtime guarantees (Cordis semantics)
//
//   - A fiber is pending while any service it injects is missing; Status names the
//     missing services and the catalog plugins that could provide them, and
//     CheckActivation names rows that can never activate.
//   - When a provider appears, its dependents activate; when it goes away or is
//     replaced, they unload, dependents first, and return to pending — and come back
//     by themselves.
//   - A second provider of one service fails that fiber, leaving the first untouched; a
//     profile with two enabled providers of an exclusive service (`shell`) is refused
//     before anything starts. A cycle in inject/provide declarations is reported with
//     its path.
//   - A failing Apply (error or panic) fails only its fiber, keeping the error; a hung
//     one is reported. Failed fibers leave that state only by a config change or a
//     restart.
//   - An activation's context is cancelled when it ends; its goroutines (Go) are awaited
//     before its disposers (Defer, and everything registered with it as owner) run.
//   - One lock, never held while plugin code runs, guards fiber state.
//   - Compose validates a whole profile first (unknown keys, unknown plugins, bad config
//     values, duplicate ids, exclusive services, cycles; every error names the file, the
//     row and the key) and changes nothing when it fails; otherwise it diffs by row id
//     and restarts only what changed. A Reloader does that on every edit of the profile
//     file (or a base it extends) and keeps the last good composition when an edit is
//     invalid.
//
// fx owns what is static — the catalog (one Declare per plugin package), logging and the
// process lifecycle (Module); the dynamic part lives here: the Runtime, profiles
// (ProfileLoader) and hot reload (Reloader).
package container
