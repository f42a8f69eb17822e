package subprocess_test

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// BenchmarkSpawnTruePaired alternates one Supervisor spawn of `bash -c true` (waited
// for until Done) with one raw os/exec run of the same, and reports the median of each
// and their ratio, so that load from other processes affects both alike:
//
//	go test -run '^$' -bench SpawnTrue -benchmem ./plugins/subprocess/
func BenchmarkSpawnTruePaired(b *testing.B) {
	for _, mode := range []struct {
		name    string
		disable bool
	}{{"cgroup", false}, {"process-group", true}} {
		b.Run(mode.name, func(b *testing.B) {
			sup := subprocess.New(subprocess.Options{DisableCgroups: mode.disable, SpillRoot: b.TempDir()})
			defer sup.Close()
			if !mode.disable && !sup.UsesCgroups() {
				b.Skipf("no cgroups: %s", sup.Isolation())
			}
			spec := bashSpec("true")
			ctx := context.Background()
			var dsh, raw []time.Duration
			for b.Loop() {
				t0 := time.Now()
				p, err := sup.Spawn(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				<-p.Done()
				t1 := time.Now()
				var stdout, stderr bytes.Buffer
				cmd := exec.Command("bash", "-c", "true")
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				dsh = append(dsh, t1.Sub(t0))
				raw = append(raw, t2.Sub(t1))
			}
			d, r := medianOf(dsh), medianOf(raw)
			b.ReportMetric(float64(d.Nanoseconds()), "spawn-median-ns")
			b.ReportMetric(float64(r.Nanoseconds()), "raw-median-ns")
			b.ReportMetric(float64(d)/float64(r), "spawn/raw")
		})
	}
}

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
