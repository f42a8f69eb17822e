// Package bashlocal is the bash-local plugin: the default `shell` provider, which runs
// every command as a fresh `bash -c` process through the `subprocess` service, with the
// harness's full authority.
//
// The plugin holds no process state: executions belong to the subprocess service, so
// reloading or removing this plugin never kills a running command, and handles already
// handed out stay usable.
//
// Its behaviour is the executor seam's contract (package shell), checked in both
// process-isolation modes by the seam's conformance kit (package shelltest) and by the
// kit that drives the real bash tool.
package bashlocal
