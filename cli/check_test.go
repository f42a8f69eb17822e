package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/container"
)

// `dsh check` refuses a profile with two enabled providers of a service their plugin
// declares exclusive — any service, not only `shell` — and passes it with one.
func TestCheckRefusesTwoProvidersOfAnExclusiveService(t *testing.T) {
	queue := container.NewKey[*struct{}]("queue")
	broker := func(name string) fx.Option {
		return container.ModuleOf(container.Define(container.Declaration[container.NoConfig]{
			Name:      name,
			Provide:   container.Keys{queue},
			Exclusive: container.Keys{queue},
			Apply: func(a *container.Activation, _ container.NoConfig) error {
				return queue.Provide(a, &struct{}{})
			},
		}))
	}
	dir := t.TempDir()
	check := func(profile string) (string, int) {
		path := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := run([]string{"check", "--profile", path}, strings.NewReader(""), &out, &errOut,
			Options{Plugins: []fx.Option{broker("broker-a"), broker("broker-b")}})
		return out.String() + errOut.String(), code
	}
	out, code := check("plugins:\n  - name: broker-a\n  - name: broker-b\n")
	if code == 0 || !strings.Contains(out, `service "queue" has more than one enabled provider: row "broker-a"`) {
		t.Errorf("two providers of an exclusive service: exit %d\n%s", code, out)
	}
	out, code = check("plugins:\n  - name: broker-a\n  - name: broker-b\n    disabled: true\n")
	if code != 0 || !strings.Contains(out, "ok (1 rows)") {
		t.Errorf("one provider: exit %d\n%s", code, out)
	}
}
