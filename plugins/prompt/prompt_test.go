package prompt_test

import (
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// section declares a plugin that adds the given sections to systemPrompt.
func section(name string, sections ...prompt.Section) container.Plugin {
	return container.Define(container.Declaration[container.NoConfig]{Name: name, Inject: container.Keys{prompt.Service}, Apply: func(a *container.Activation, _ container.NoConfig) error {
		reg, err := container.Injected(a, prompt.Service)
		if err != nil {
			return err
		}
		for _, s := range sections {
			if err := reg.Add(a, s); err != nil {
				return err
			}
		}
		return nil
	}})
}

func compose(t *testing.T, plugins ...container.Plugin) (*container.Runtime, *prompt.Registry) {
	t.Helper()
	cat, err := container.NewCatalog(append([]container.Plugin{prompt.Plugin}, plugins...)...)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	t.Cleanup(rt.Close)
	rows := []container.Row{{ID: "prompt", Plugin: "@deepseek-ai/dsh-prompt"}}
	for _, p := range plugins {
		rows = append(rows, container.Row{ID: p.Name, Plugin: p.Name})
	}
	if err := rt.Compose("test", rows); err != nil {
		t.Fatal(err)
	}
	v, ok := container.Lookup(rt, prompt.Service)
	if !ok {
		t.Fatal("no systemPrompt service")
	}
	return rt, v
}

// Sections sorted by order, then name, joined by a blank line.
func TestComposeOrder(t *testing.T) {
	_, reg := compose(t,
		section("jobs", prompt.Section{Name: "tool:jobs", Order: 106, Text: "jobs habit"}),
		section("bash",
			prompt.Section{Name: "tool:bash", Order: 105, Text: "Check the [exit code: N] marker on every bash result; investigate failures before moving on."},
			prompt.Section{Name: "b-same", Order: 110, Text: "second at 110"}),
		section("sandbox",
			prompt.Section{Name: "sandbox:policy", Order: 110, Render: func(s *container.Session) string {
				if s == nil {
					return "policy for nobody"
				}
				return "policy for " + s.Cwd
			}},
			prompt.Section{Name: "a-same", Order: 110, Text: "first at 110"},
			prompt.Section{Name: "empty", Order: 1, Text: ""},
			prompt.Section{Name: "neg", Order: -5, Text: "negative first"}),
	)
	want := "negative first\n\n" +
		"Check the [exit code: N] marker on every bash result; investigate failures before moving on.\n\n" +
		"jobs habit\n\n" +
		"first at 110\n\n" +
		"second at 110\n\n" +
		"policy for /work/ws"
	if got := reg.Compose(&container.Session{ID: "s", Cwd: "/work/ws"}); got != want {
		t.Fatalf("composed:\n%q\nwant\n%q", got, want)
	}
	var names []string
	for _, s := range reg.Sections() {
		names = append(names, s.Name)
	}
	if got := names; len(got) != 7 || got[0] != "neg" || got[1] != "empty" || got[2] != "tool:bash" || got[6] != "sandbox:policy" {
		t.Fatalf("section order %q", got)
	}
	if got := reg.Compose(nil); got[len(got)-len("policy for nobody"):] != "policy for nobody" {
		t.Fatalf("nil session: %q", got)
	}
}

// Sections are owned like tools: gone when the contributor unloads, back when
// it activates again; duplicates fail the second contributor.
func TestSectionsOwnedAndUnique(t *testing.T) {
	rt, reg := compose(t,
		section("bash", prompt.Section{Name: "tool:bash", Order: 105, Text: "bash"}),
		section("jobs", prompt.Section{Name: "tool:jobs", Order: 106, Text: "jobs"}),
		section("copycat", prompt.Section{Name: "tool:bash", Order: 1, Text: "impostor"}),
	)
	if got := reg.Compose(nil); got != "bash\n\njobs" {
		t.Fatalf("composed %q", got)
	}
	for _, rs := range rt.Status().Rows {
		if rs.ID == "copycat" && (rs.State != container.StateFailed || rs.Error != `prompt: section "tool:bash" is already registered`) {
			t.Fatalf("copycat: %s %q", rs.State, rs.Error)
		}
	}
	if err := rt.Unmount("bash"); err != nil {
		t.Fatal(err)
	}
	if got := reg.Compose(nil); got != "jobs" {
		t.Fatalf("after unload: %q", got)
	}
	if err := rt.Mount(container.Row{ID: "bash", Plugin: "bash"}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Compose(nil); got != "bash\n\njobs" {
		t.Fatalf("after re-mount: %q", got)
	}
	if err := reg.Add(nil, prompt.Section{}); err == nil {
		t.Fatal("a nameless section was added")
	}
}
