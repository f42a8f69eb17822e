// Package profiles embeds dsh's built-in profiles: default, sandbox and minimal. They are
// what `--profile <name>` and `extends: <name>` refer to.
//
// In each, a row's id is its plugin's name, except the executor row, whose id is `bash`
// in all three: a profile that extends one and patches `{id: bash, name: bash-sandbox}`
// swaps the executor and nothing else. The package holds data only (FS); loading,
// patching and validation are the container's.
package profiles
