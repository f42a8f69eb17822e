// Package bashssh is the bash-ssh plugin: a `shell` provider that runs every command as
// a fresh `bash -c` on a remote host, through the `ssh` service.
//
// It is the shared executor core (package bashexec) over a Spawner that starts
// commands with the ssh service: the same config keys as bash-local — cwd is a
// directory on the remote host, by default the remote user's home — the same
// defaults, caps, results and renderings. The remote command runs in its own session
// and process group; timeouts, aborts and kills send SIGTERM to that group and SIGKILL
// after graceMs; output is captured locally with the same bounds and spill files;
// the managed DSH_* snapshot is exported inside the remote command (after removing the
// remote login's own DSH_* values), and nothing of the local environment is sent.
// It does not confine: SandboxMode is "". Nor does it enforce resource limits: the
// cgroups that enforce bash-local's and bash-sandbox's `limits:` are this host's, and
// the commands run on another, so a `limits` key is refused rather than ignored (bound
// the remote account there instead).
//
// The plugin holds no process state: remote commands belong to the ssh service, so
// reloading or swapping this plugin never kills one, and handles already handed out
// stay usable. Because the session's working directory is a local path, the executor
// implements shell.Remote: the bash tool then leaves the workdir to it.
package bashssh
