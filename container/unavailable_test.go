package container_test

import (
	"testing"

	"github.com/dsh-dev/dsh/container"
)

// ToolUnavailable follows a declared tool's row down what it waits for to the cause.
func TestToolUnavailableSaysWhy(t *testing.T) {
	j := &journal{}
	withTools := func(p container.Plugin, names ...string) container.Plugin {
		p.Tools = names
		return p
	}
	rt := newRuntime(t,
		plug(j, "conn", nil, []string{"conn"}, nil),
		plug(j, "exec", []string{"conn"}, []string{"shell"}, nil),
		withTools(plug(j, "tool", []string{"shell"}, nil, nil), "bash"),
		withTools(plug(j, "lonely", []string{"nothing"}, nil, nil), "lonely_tool"),
		withTools(plug(j, "ok", nil, nil, nil), "fine"),
	)
	mustNil(t, rt.Compose("t", []container.Row{
		{ID: "conn", Plugin: "conn", Config: map[string]any{"fail": true}},
		{ID: "bash", Plugin: "exec"},
		{ID: "tool-bash", Plugin: "tool"},
		{ID: "lonely", Plugin: "lonely"},
		{ID: "ok", Plugin: "ok"},
	}))
	for tool, want := range map[string]string{
		"bash":        "row tool-bash is pending (missing shell ← row bash is pending (missing conn ← row conn failed: conn refuses to start))",
		"lonely_tool": "row lonely is pending (missing nothing, which no row provides)",
	} {
		if why, ok := rt.ToolUnavailable(tool); !ok || why != want {
			t.Errorf("ToolUnavailable(%q) = %q, %v; want %q", tool, why, ok, want)
		}
	}
	for _, tool := range []string{"fine", "nope"} {
		if why, ok := rt.ToolUnavailable(tool); ok {
			t.Errorf("ToolUnavailable(%q) = %q: an active row's tool, or one no row declares, is not unavailable", tool, why)
		}
	}
	// The failed row itself.
	mustNil(t, rt.Compose("t", []container.Row{
		{ID: "conn", Plugin: "conn"},
		{ID: "bash", Plugin: "exec", Config: map[string]any{"fail": true}},
		{ID: "tool-bash", Plugin: "tool"},
	}))
	if why, _ := rt.ToolUnavailable("bash"); why != "row tool-bash is pending (missing shell ← row bash failed: bash refuses to start)" {
		t.Errorf("ToolUnavailable(bash) = %q", why)
	}
}
