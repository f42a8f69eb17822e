package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
)

// The text status shows the last reload: when, its result, and the rows it changed.
func TestPrintStatusLastReload(t *testing.T) {
	at := time.Date(2026, 12, 1, 11, 25, 7, 0, time.UTC)
	var b strings.Builder
	printStatus(&b, container.Status{Profile: "p.yaml", LastReload: &container.Reload{At: at, Result: container.ReloadApplied,
		Changes: container.Changes{Mounted: []string{}, Restarted: []string{"bash", "tool-bash"}, Disposed: []string{"approval"}}}})
	if want := "last reload: 2026-12-01T11:25:07Z applied (mounted: none; restarted: bash, tool-bash; disposed: approval)\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("status:\n%s\nwant it to end with\n%s", b.String(), want)
	}
	b.Reset()
	printStatus(&b, container.Status{Profile: "p.yaml", LastReloadError: "p.yaml: invalid YAML",
		LastReload: &container.Reload{At: at, Result: container.ReloadFailed, Error: "p.yaml: invalid YAML"}})
	if want := "last reload: 2026-12-01T11:25:07Z failed\nlast reload error: p.yaml: invalid YAML\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("status:\n%s\nwant it to end with\n%s", b.String(), want)
	}
	b.Reset()
	printStatus(&b, container.Status{Profile: "p.yaml"})
	if strings.Contains(b.String(), "last reload") {
		t.Errorf("status without a reload:\n%s", b.String())
	}
}
