package hooks_test

import (
	"testing"

	"github.com/dsh-dev/dsh/container"
)

// One PreToolUse hook costs about one process spawn per call.
func BenchmarkPreHook(b *testing.B) {
	for _, c := range []struct {
		name   string
		config map[string]any
	}{
		{"none", nil},
		{"exit-0", pre(map[string]any{"command": "exit 0"})},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b, c.config)
			s := h.session(container.Accepted)
			for b.Loop() {
				if res := h.call(s, "bash", "true"); res.Text != "ran true" {
					b.Fatal(res.Text)
				}
			}
		})
	}
}
