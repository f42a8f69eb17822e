package profile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
)

// BenchmarkReloadLatency: from a profile write (an editor's rename-save) to the new
// config seen by apply, through fsnotify, the debounce, load, validate and compose.
// ns/op includes the debounce; ns-after-debounce subtracts it.
func BenchmarkReloadLatency(b *testing.B) {
	for _, debounce := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("debounce=%s", debounce), func(b *testing.B) {
			seen := make(chan string, 16)
			p := container.Define(container.Declaration[*testConfig]{Name: "p", Config: func() *testConfig { return &testConfig{} }, Apply: func(_ *container.Activation, c *testConfig) error {
				seen <- c.Value
				return nil
			}})
			cat, err := container.NewCatalog(p)
			if err != nil {
				b.Fatal(err)
			}
			rt := container.NewRuntime(cat, container.Options{Logger: quiet})
			defer rt.Close()
			dir := b.TempDir()
			path := filepath.Join(dir, "p.yaml")
			write := func(v string) {
				tmp := filepath.Join(dir, ".p.yaml.tmp")
				if err := os.WriteFile(tmp, []byte("plugins:\n  - name: p\n    config: {value: \""+v+"\"}\n"), 0o644); err != nil {
					b.Fatal(err)
				}
				if err := os.Rename(tmp, path); err != nil {
					b.Fatal(err)
				}
			}
			write("start")
			loader := profile.NewLoader(nil)
			prof, err := loader.Load(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := rt.ComposeFiles(prof.Name, prof.Files, prof.Rows); err != nil {
				b.Fatal(err)
			}
			<-seen
			rl, err := profile.NewReloader(rt, loader, prof, profile.ReloadOptions{Debounce: debounce, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer rl.Close()
			i := 0
			for b.Loop() {
				i++
				want := fmt.Sprint(i)
				write(want)
				for v := range seen {
					if v == want {
						break
					}
				}
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(debounce.Nanoseconds()), "ns-debounce")
			b.ReportMetric(float64((per - debounce).Nanoseconds()), "ns-after-debounce")
		})
	}
}
