// Package textstats is a worked example of a dsh plugin that adds a model-facing tool:
// `text_stats` counts the lines, words and characters of a text.
//
// A tool plugin injects the `tools` registry and registers its tool with its
// activation: the tool exists while the row is active and disappears when the row is
// disabled, removed or restarted by a reload. The registry validates the arguments
// against InputSchema before Execute runs, so Execute reads them without checking
// their types; its Result is the text the model reads and a typed Value for programs
// (MCP structured content), which OutputSchema describes.
package textstats

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Config is the plugin's profile config.
type Config struct {
	// MaxChars is the longest text the tool accepts, in characters (default 100000).
	MaxChars int `yaml:"maxChars" valid:"a positive integer"`
}

// Validate rejects a limit that is not positive: "text-stats: maxChars must be a
// positive integer, got 0" (the container names the plugin in front).
func (c *Config) Validate() error {
	if c.MaxChars <= 0 {
		return fmt.Errorf("maxChars must be a positive integer, got %d", c.MaxChars)
	}
	return nil
}

// Stats is the tool's typed result.
type Stats struct {
	Lines      int `json:"lines"`
	Words      int `json:"words"`
	Characters int `json:"characters"`
}

// Plugin is the declaration a profile row mounts with `name: text-stats`.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:   "text-stats",
	Inject: container.Keys{tools.Service},
	Config: func() *Config { return &Config{MaxChars: 100000} },
	Apply: func(a *container.Activation, cfg *Config) error {
		reg, err := container.Injected(a, tools.Service)
		if err != nil {
			return err
		}
		return reg.Register(a, tool(cfg.MaxChars))
	},
})

// Module adds Plugin to a dsh binary's catalog.
var Module = container.ModuleOf(Plugin)

var outputSchema = tools.EncodeSchema(tools.SchemaFor[Stats]())

// tool is text_stats for texts of at most maxChars characters.
func tool(maxChars int) tools.Tool {
	return tools.Tool{
		Name:        "text_stats",
		Description: "Count the lines, words and characters of a text.",
		InputSchema: &tools.Schema{Type: "object", Required: []string{"text"}, Properties: tools.Properties{
			{Name: "text", Schema: &tools.Schema{Type: "string", Description: "The text to count."}},
		}},
		OutputSchema: outputSchema,
		Execute: func(_ context.Context, call tools.Call) (tools.Result, error) {
			text := call.Args["text"].(string) // the registry checked it is a string
			if n := utf8.RuneCountInString(text); n > maxChars {
				return tools.Errorf("text is %d characters long; the limit is %d", n, maxChars), nil
			}
			s := count(text)
			return tools.Result{
				Text:  fmt.Sprintf("lines: %d, words: %d, characters: %d", s.Lines, s.Words, s.Characters),
				Value: s,
			}, nil
		},
	}
}

// count counts like `wc -l -w -m`, except that a last line without a newline counts.
func count(text string) Stats {
	s := Stats{Words: len(strings.Fields(text)), Characters: utf8.RuneCountInString(text)}
	if text != "" {
		s.Lines = strings.Count(text, "\n")
		if !strings.HasSuffix(text, "\n") {
			s.Lines++
		}
	}
	return s
}
