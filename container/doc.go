// Package container is dsh's plugin runtime: it mounts the rows of a composition as
// fibers and keeps every fiber's activation consistent with the services that exist
// (Runtime lists the guarantees). It does not read profiles or watch files — package
// profile does, and composes what it loads through Runtime.ComposeFiles — and it runs
// no process of its own: plugins do.
//
// A plugin package writes one Declaration with its config type, exports Define(it) as
// its Plugin and ModuleOf(Plugin) as its Module; services are declared once as typed
// keys (var Service = container.NewKey[*Registry]("tools")).
//
// One word per idea (docs/glossary.md says the same at more length):
//
//   - plugin: a declaration in the catalog: name, aliases, the services it injects and
//     provides, a typed config, Apply (Plugin; written as a Declaration[C]).
//     catalog: the plugins compiled into a binary (Catalog). module: the fx option a
//     plugin package exports to put its plugin in the catalog (ModuleOf), and nothing
//     else; the profile error "module not found" names a plugin the binary lacks.
//   - row: one entry of a profile's plugins list: id, name, config, disabled (Row).
//     profile: the YAML file and the bases it extends. composition: the running set of
//     fibers built from a profile (Compose). reload: applying an edited profile to the
//     running composition.
//   - fiber: the runtime's record of one mounted row, in one State: pending, loading,
//     active, failed, unloading, disposed. activation: one period a fiber is active
//     (Activation); it owns what Apply registered and undoes it, in reverse order, when
//     it ends. scope: what a registry keeps of an activation to tie a registration to
//     it (Scope: Defer, Context).
//   - service: a value a plugin publishes under a key; key: the typed name of a service
//     (Key[T]). provider: the row that publishes a service (Key.Provide); a plugin gets
//     what it injects with Injected and what it uses only sometimes with Lookup.
//     exclusive service: one with at most one enabled provider per composition
//     (Plugin.Exclusive: `shell`). conflict: a second provider of a service; it fails
//     until the first leaves. cascade: when a provider goes, its dependents (the
//     fibers injecting what it provided) unload and return to pending.
//   - config: a row's config map decoded onto the plugin's config type and checked by
//     the config's Validate, the one validation hook; its errors, and those worded from
//     a field's `valid` tag, are prefixed with the plugin's name.
//   - session: one harness session (Session): an MCP session, a stateless-lane
//     principal, or `dsh call`; id, workspace, role. principal: the identity of one
//     bearer token on HTTP. lane: the session lane (Mcp-Session-Id) or the stateless
//     lane. owner: the session id a process, stream, spill file or job belongs to.
//   - executor: a `shell` provider (bash-local, bash-sandbox, bash-ssh); seam: the
//     `shell` contract between the tool and the executors; execution: one command run
//     through the seam.
//   - process: one spawned OS process tree; exit: how a process ended; supervisor: the
//     `subprocess` service, which owns every local process; teardown: kill (SIGTERM) →
//     escalate (SIGKILL after graceMs) → drain (pipes, bounded) → settle.
//   - capture: bounding a stream's output; stream: one captured output stream; spool:
//     the owner of spill files; spill file: the complete stream on disk.
//   - sandbox: the confinement of commands (read-only, workspace-write,
//     danger-full-access); box: the per-session sandbox process that forks each
//     confined command; launcher: the code of dsh's hidden re-exec mode that a box
//     runs; mask, protect, plan: make a path read as empty, keep a path read-only inside
//     a writable root, the list of such operations a box applies.
//   - job: background work tracked by the `jobs` service. managed environment: the
//     DSH_* variables (plugin shell-env, package shellenv, service bashEnv). gate: one
//     check of the pre-execute waterfall; role: what the sessions of its name may do
//     (tools, sandbox ceiling, rules).
package container
