package textstats_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/container"
	textstats "github.com/dsh-dev/dsh/examples/text-stats"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// compose runs the plugin in process: a catalog of the tools registry and the plugin,
// a runtime, and a composition of one row each — what a profile with a text-stats row
// does in dsh.
func compose(t *testing.T, config map[string]any) (*container.Runtime, *tools.Registry) {
	t.Helper()
	cat, err := container.NewCatalog(tools.Plugin, textstats.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{})
	t.Cleanup(rt.Close)
	err = rt.Compose("test", []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "text-stats", Plugin: "text-stats", Config: config},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, ok := container.Lookup(rt, tools.Service)
	if !ok {
		t.Fatalf("no tools registry: %+v", rt.Status())
	}
	return rt, reg
}

// The tool is called through the registry, as an MCP client's tools/call is: the
// arguments are validated first, the text is what the model reads, the value what
// programs get.
func TestToolThroughTheRegistry(t *testing.T) {
	_, reg := compose(t, nil)
	call := func(args string) tools.Result {
		return reg.Call(context.Background(), "text_stats", json.RawMessage(args), &container.Session{ID: "s"})
	}
	res := call(`{"text": "one two\nthree\n"}`)
	if res.IsError || res.Text != "lines: 2, words: 3, characters: 14" {
		t.Fatalf("result %+v", res)
	}
	if v, ok := res.Value.(textstats.Stats); !ok || v != (textstats.Stats{Lines: 2, Words: 3, Characters: 14}) {
		t.Fatalf("value %#v", res.Value)
	}
	for args, want := range map[string]string{
		`{}`:            `Error: missing required property "text"`,
		`{"text": 5}`:   `Error: "text" must be a string`,
		`{"text": "é"}`: "lines: 1, words: 1, characters: 1",
	} {
		if got := call(args).Text; got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
}

// The row's config reaches the tool; a bad value is refused before anything starts,
// named by the row and the plugin.
func TestConfig(t *testing.T) {
	_, reg := compose(t, map[string]any{"maxChars": 3})
	res := reg.Call(context.Background(), "text_stats", json.RawMessage(`{"text": "four"}`), nil)
	if !res.IsError || res.Text != "Error: text is 4 characters long; the limit is 3" {
		t.Fatalf("over the limit: %+v", res)
	}

	cat, err := container.NewCatalog(tools.Plugin, textstats.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{})
	defer rt.Close()
	for value, want := range map[any]string{
		0:     `row "stats": text-stats: maxChars must be a positive integer, got 0`,
		"ten": `row "stats": text-stats: maxChars must be a positive integer, got the string "ten"`,
	} {
		err := rt.Validate([]container.Row{{ID: "stats", Plugin: "text-stats", Config: map[string]any{"maxChars": value}}})
		if err == nil || err.Error() != want {
			t.Errorf("maxChars %v: %v, want %q", value, err, want)
		}
	}
}

// The tool belongs to the row's activation: removing the row removes the tool.
func TestToolLeavesWithItsRow(t *testing.T) {
	rt, reg := compose(t, nil)
	if _, ok := reg.Tool("text_stats"); !ok {
		t.Fatal("text_stats is not registered")
	}
	if err := rt.Unmount("text-stats"); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Tool("text_stats"); ok {
		t.Fatal("text_stats outlived its row")
	}
}
