package launch

import (
	"runtime"
	"syscall"
	"testing"
)

// BenchmarkStart: what the box adds per command on its side — a fresh
// thread, its confinement (no_new_privs, securebits, capabilities, a Landlock domain;
// the seccomp filter is process-wide, installed once) and the fork and exec from it —
// against the thread and the fork and exec alone, for /bin/true, in the same run.
func BenchmarkStart(b *testing.B) {
	p := Policy{Mode: ModeWorkspaceWrite, WorkspaceRoot: b.TempDir(), Network: NetworkDeny}
	rs, flags, err := newRuleset(p, nil)
	if err != nil {
		b.Skip(err)
	}
	defer syscall.Close(rs)
	// Per session, as the box does at its setup.
	dropCaps, lastCap := holdsCap(capSetpcap), lastCapability()
	run := func(b *testing.B, confine bool) {
		for b.Loop() {
			done := make(chan error, 1)
			go func() {
				var err error
				if confine {
					// What a command's thread goes through: prepared, then restricted.
					if err = prepareThread(dropCaps, lastCap); err == nil {
						err = restrictThread(rs, flags)
					}
				} else {
					runtime.LockOSThread()
				}
				if err == nil {
					var pid int
					pid, err = syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
					if err == nil {
						var ws syscall.WaitStatus
						_, err = syscall.Wait4(pid, &ws, 0, nil)
					}
				}
				done <- err
			}()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("fork-exec", func(b *testing.B) { run(b, false) })
	b.Run("confine-fork-exec", func(b *testing.B) { run(b, true) })
}
