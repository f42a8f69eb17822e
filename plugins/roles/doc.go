// Package roles provides the roles plugin: per-session restrictions by role — which
// tools a session sees and may call, the widest sandbox mode its commands may run in,
// and rules of its own for the bash tool — and the `roles` service that tells the rest
// of the harness a session's role (toolbash reads its ceiling from it).
//
// A session's role is container.Session.Role (from its bearer token's line or --role),
// else the config's default; a session with neither is not restricted. A role the
// config does not define sees no tool. Restrictions are the tools registry's (hidden
// tools are missing from the session's tool list and refused when called); the role's
// rules are a gate of the pre-execute waterfall, judged like the rules plugin's
// (strictest of both). Prompt sections are not filtered. docs/policy.md has the whole
// picture.
package roles
