// Package hooks is the `hooks` plugin: integrators' own commands run on every tool
// call, compatible with Claude Code's command hooks (docs/hooks.md).
//
// A PreToolUse hook is a gate of the waterfall (tools.OrderRewrite): it sees the call's
// JSON on stdin and answers by its exit (2 denies, with its stderr as the reason) or a
// JSON decision on stdout (allow, ask, deny, an updatedInput that replaces the
// arguments); anything else it does — another exit, a timeout, a failed spawn — is
// its onError (deny unless it says pass). A PostToolUse hook runs after a call that
// ran and may append a line to the result's text. Hooks run as `bash -c` through the
// subprocess service, unconfined (they are the integrator's code), in the session's
// workspace, with bounded output, a timeout and their whole tree ended when they are.
//
// The package does not judge commands itself (rules does), and a hook's allow never
// overrides another gate's ask or deny: the strictest answer wins.
package hooks
