// Package shellenv provides the `bashEnv` service: the registry of the managed DSH_*
// environment that every model-run command receives.
//
// The registry owns three reserved built-ins (DSH_HOME, DSH_SHELL=1 and, for a call
// with a session, DSH_SESSION_ID). Other plugins contribute more DSH_* variables by
// registering a Contributor that declares and describes its keys; a key has exactly one
// owner. Collect resolves everything for one call into an immutable, sorted Snapshot,
// which executors merge last into the child environment (ExecRequest.DshEnv), so nothing
// ambient can spoof it.
//
// (The plugin is named shell-env and the service bashEnv, the names the reference
// harness uses; the Go package is shellenv.)
package shellenv
