// Package cli is the dsh command line: serve (MCP), call, status, tools, prompt, check,
// explain (how a profile's rules and roles judge a bash command; docs/policy.md).
// It is a package (not just package main) so that embedders can build their own dsh
// binary with extra plugin modules: see Main and Run.
//
// Each command composes the profile (--profile: a built-in name or a file) through fx,
// does its one thing, and disposes the composition:
//
//   - serve hands the running composition to package mcpserve, on stdio or on
//     streamable HTTP (--http), and owns what is policy rather than protocol: the
//     loopback check (--allow-remote), the bearer tokens (--token-file, or one
//     generated into $DSH_HOME/serve-token), the harness session each client gets (the
//     workspace, --sandbox-mode), and watching the profile for hot reload.
//   - call runs one tool call and prints its rendered text exactly (--json: text,
//     isError and the typed value); the spill files it reports are kept in
//     $DSH_HOME/spill for a week, since the session's end deletes its own.
//   - status, tools, prompt and check report on the composition without serving it.
//
// Exit status: 0; 1 for a failed command or a tool result with isError; 2 for a usage
// error or a refusal (such as a non-loopback address without --allow-remote).
//
// The package does not speak MCP itself, and it never changes GOMAXPROCS: serving's
// tuning is mcpserve.Tuning, and Run takes it as it is given.
package cli
