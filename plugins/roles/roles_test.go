package roles_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/roles"
	"github.com/dsh-dev/dsh/plugins/rules"
	"github.com/dsh-dev/dsh/plugins/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeTools registers bash, job_output and job_kill, each answering "<name> ran".
var fakeTools = container.Define(container.Declaration[container.NoConfig]{
	Name:   "fake-tools",
	Inject: container.Keys{tools.Service},
	Apply: func(a *container.Activation, _ container.NoConfig) error {
		reg, err := container.Injected(a, tools.Service)
		if err != nil {
			return err
		}
		for _, name := range []string{"bash", "job_output", "job_kill"} {
			err := reg.Register(a, tools.Tool{Name: name,
				InputSchema: &tools.Schema{Type: "object", Properties: tools.Properties{{Name: "command", Schema: &tools.Schema{Type: "string"}}}},
				Execute: func(context.Context, tools.Call) (tools.Result, error) {
					return tools.Result{Text: name + " ran"}, nil
				}})
			if err != nil {
				return err
			}
		}
		return nil
	},
})

func compose(t *testing.T, rows ...container.Row) (*container.Runtime, error) {
	t.Helper()
	cat, err := container.NewCatalog(tools.Plugin, fakeTools, roles.Plugin, rules.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	t.Cleanup(rt.Close)
	return rt, rt.Compose("test", append([]container.Row{{ID: "tools", Plugin: "tools"}, {ID: "tools-fake", Plugin: "fake-tools"}}, rows...))
}

var readerConfig = map[string]any{
	"default": "reader",
	"roles": map[string]any{
		"reader": map[string]any{"tools": []any{"bash", "job_output"}, "maxMode": "read-only",
			"rules": []any{map[string]any{"deny": "git push *", "reason": "readers do not publish"}}},
		"writer": nil,
		"nobody": map[string]any{"tools": []any{}},
	},
}

func names(ts []tools.Tool) (out []string) {
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func call(reg *tools.Registry, s *container.Session, tool, command string) tools.Result {
	args, _ := json.Marshal(map[string]any{"command": command})
	return reg.Call(context.Background(), tool, args, s)
}

// A session sees only its role's tools, and calling another is refused; the default
// role applies to a session without one, and a role the config lacks sees nothing.
func TestToolsOfARole(t *testing.T) {
	rt, err := compose(t, container.Row{ID: "roles", Plugin: "roles", Config: readerConfig})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := container.Lookup(rt, tools.Service)
	for _, c := range []struct {
		role string
		sees []string
	}{
		{"reader", []string{"bash", "job_output"}},
		{"", []string{"bash", "job_output"}}, // the default role
		{"writer", []string{"bash", "job_kill", "job_output"}},
		{"nobody", nil},
		{"intruder", nil},
	} {
		s := &container.Session{ID: "s-" + c.role, Role: c.role}
		if got := names(reg.ToolsFor(s)); !slices.Equal(got, c.sees) {
			t.Errorf("role %q sees %q, want %q", c.role, got, c.sees)
		}
	}
	reader := &container.Session{ID: "r", Role: "reader"}
	if res := call(reg, reader, "job_kill", "x"); res.Text != `Error: tool "job_kill" is not available to this session (role "reader")` || !res.IsError {
		t.Fatalf("hidden tool: %q", res.Text)
	}
	if res := call(reg, &container.Session{ID: "i", Role: "intruder"}, "bash", "ls"); res.Text != `Error: tool "bash" is not available to this session (role "intruder")` {
		t.Fatalf("unknown role: %q", res.Text)
	}
	if res := call(reg, &container.Session{ID: "w", Role: "writer"}, "job_kill", "x"); res.Text != "job_kill ran" {
		t.Fatalf("writer: %q", res.Text)
	}
	rs, _ := container.Lookup(rt, roles.Service)
	if m, role := rs.Ceiling(reader); m != "read-only" || role != "reader" {
		t.Fatalf("ceiling %q %q", m, role)
	}
	if m, _ := rs.Ceiling(&container.Session{Role: "writer"}); m != "" {
		t.Fatalf("writer's ceiling %q", m)
	}
	wantDetail := "roles nobody (no tool), reader (tools bash job_output; maxMode read-only; 1 rules, default allow), writer (every tool); default role reader"
	for _, r := range rt.Status().Rows {
		if r.ID == "roles" && r.Detail != wantDetail {
			t.Fatalf("detail %q\nwant   %q", r.Detail, wantDetail)
		}
	}

	// Without a default role, a session without a role is not restricted.
	rt, err = compose(t, container.Row{ID: "roles", Plugin: "roles", Config: map[string]any{"roles": map[string]any{"reader": map[string]any{"tools": []any{"bash"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ = container.Lookup(rt, tools.Service)
	if got := names(reg.ToolsFor(&container.Session{ID: "x"})); len(got) != 3 {
		t.Fatalf("a session without a role sees %q", got)
	}
	if err := rt.Unmount("roles"); err != nil {
		t.Fatal(err)
	}
	// Its sessions are then refused every tool, not left unrestricted.
	if got := names(reg.ToolsFor(&container.Session{ID: "x", Role: "reader"})); len(got) != 0 {
		t.Fatalf("after the roles row left, reader sees %q", got)
	}
	if got := names(reg.ToolsFor(&container.Session{ID: "x"})); len(got) != 3 {
		t.Fatalf("after the roles row left, a session without a role sees %q", got)
	}
}

// A role's rules are judged with every rules row's: the strictest wins.
func TestRoleRulesAndRulesRows(t *testing.T) {
	rt, err := compose(t,
		container.Row{ID: "rules", Plugin: "rules", Config: map[string]any{"default": "ask", "rules": []any{map[string]any{"allow": "git *"}}}},
		container.Row{ID: "roles", Plugin: "roles", Config: readerConfig},
	)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := container.Lookup(rt, tools.Service)
	reader := &container.Session{ID: "r", Role: "reader"}
	writer := &container.Session{ID: "w", Role: "writer"}
	for _, c := range []struct {
		s       *container.Session
		command string
		text    string
	}{
		{reader, "git status", "bash ran"},
		{reader, "git push origin main", `Error: command denied by policy: role "reader" (readers do not publish)`},
		{writer, "git push origin main", "bash ran"},
		// The rules row asks (no approval service here: unavailable), whatever the role allows.
		{reader, "make", `Error: this command needs approval (default for "make"), but no approval channel is available`},
		{writer, "git status && git push -f", "bash ran"},
		{reader, "git status && git push -f", `Error: command denied by policy: role "reader" (readers do not publish)`},
	} {
		if res := call(reg, c.s, "bash", c.command); res.Text != c.text {
			t.Errorf("%s: %q: got %q, want %q", c.s.Role, c.command, res.Text, c.text)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		config map[string]any
		want   string
	}{
		{map[string]any{}, "roles: roles must define at least one role"},
		{map[string]any{"roles": map[string]any{"a": map[string]any{"maxMode": "full"}}},
			`roles: roles.a.maxMode must be one of "read-only", "workspace-write" or "danger-full-access", got "full"`},
		{map[string]any{"default": "admin", "roles": map[string]any{"a": nil, "b": nil}},
			`roles: default names the role "admin", which roles does not define (it has: a, b)`},
		{map[string]any{"roles": map[string]any{"two words": nil}}, `roles: roles.two words: a role's name is one word (letters, digits, - _ . :), got "two words"`},
		{map[string]any{"roles": map[string]any{"a": map[string]any{"rules": []any{map[string]any{"allow": "ls"}, map[string]any{"deny": "git $X"}}}}},
			`roles: roles.a.rules[1]: pattern "git $X": word 2 ($X): is not literal`},
		{map[string]any{"roles": map[string]any{"a": map[string]any{"default": "never"}}},
			`roles: roles.a.default must be one of "allow", "ask" or "deny", got "never"`},
	} {
		_, err := compose(t, container.Row{ID: "roles", Plugin: "roles", Config: c.config})
		if err == nil || !strings.Contains(err.Error(), `row "roles": `+c.want) {
			t.Errorf("config %v: error %v\nwant it to hold %s", c.config, err, c.want)
		}
	}
	_, err := compose(t, container.Row{ID: "a", Plugin: "roles", Config: readerConfig}, container.Row{ID: "b", Plugin: "roles", Config: readerConfig})
	if err == nil || !strings.Contains(err.Error(), `service "roles" has more than one enabled provider`) {
		t.Fatalf("two roles rows: %v", err)
	}
}

// A role's policy answers as the role (docs/policy.md: the source is `role "<role>"`): its
// rules' reasons follow, the rule and the unmatched command are not named.
func TestRoleDecisionSourceIsTheRole(t *testing.T) {
	rt, err := compose(t, container.Row{ID: "roles", Plugin: "roles", Config: map[string]any{
		"roles": map[string]any{"strict": map[string]any{"default": "deny", "rules": []any{
			map[string]any{"allow": "echo *"},
			map[string]any{"id": "no-ls", "deny": "ls *", "reason": "no listing"},
			map[string]any{"ask": "touch *"},
		}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := container.Lookup(rt, tools.Service)
	strict := &container.Session{ID: "s", Role: "strict"}
	for command, want := range map[string]string{
		"echo hi":  "bash ran",
		"ls -l":    `Error: command denied by policy: role "strict" (no listing)`,
		"make":     `Error: command denied by policy: role "strict"`,
		"touch x":  `Error: this command needs approval (role "strict"), but no approval channel is available`,
		"$X hello": `Error: command denied by policy: role "strict"`,
	} {
		if res := call(reg, strict, "bash", command); res.Text != want {
			t.Errorf("%q: got %q, want %q", command, res.Text, want)
		}
	}
}
