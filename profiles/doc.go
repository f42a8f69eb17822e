// Package profiles embeds dsh's built-in profiles: default, sandbox and minimal. They are
// what `--profile <name>` and `extends: <name>` refer to.
package profiles
