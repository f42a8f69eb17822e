package toolbash

import (
	"time"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// runFacts is what a foreground value knows of its command run beyond its JSON: for
// observers (the audit log, traces), never for the model.
type runFacts struct {
	executor                 string
	stdoutBytes, stderrBytes int64
	start, end               time.Time
}

// CommandRun reports how the command ended to the registry's observers
// (tools.RanCommand): exit, signal, timeout, the resource limit it reached, output
// sizes, spill files, the executor and when it ran.
func (v ForegroundValue) CommandRun() tools.CommandRun {
	r := tools.CommandRun{
		Executor:    v.run.executor,
		TimedOut:    v.TimedOut,
		Limit:       v.Limit,
		StdoutBytes: v.run.stdoutBytes,
		StderrBytes: v.run.stderrBytes,
		Start:       v.run.start,
		End:         v.run.end,
	}
	if v.ExitCode != nil {
		code := *v.ExitCode
		r.ExitCode = &code
	}
	if v.Signal != nil {
		r.Signal = *v.Signal
	}
	if v.Sandbox != nil {
		r.SandboxMode = v.Sandbox.Mode
	}
	for _, p := range [...]string{v.Stdout.SpillPath, v.Stderr.SpillPath} {
		if p != "" {
			r.Spill = append(r.Spill, p)
		}
	}
	return r
}

// executorName names the executor for a trace's command span: its catalog name
// ("bash-local") when it tells one.
func (t *bashTool) executorName() string {
	if n, ok := t.exec.(interface{ Name() string }); ok {
		return n.Name()
	}
	return "shell"
}
