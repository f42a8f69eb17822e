package subprocess_test

import (
	"context"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
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
			proctest.PairedWithTrue(b, "spawn", func() {
				p, err := sup.Spawn(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				<-p.Done()
			})
		})
	}
}
