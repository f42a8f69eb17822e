package container_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
)

// importsConfig names a file relative to its profile, and refuses one that is missing
// next to it.
type importsConfig struct {
	File string `yaml:"file"`
	dir  string
	seen *[]string
}

func (c *importsConfig) SetProfileDir(dir string) { c.dir = dir }

func (c *importsConfig) Validate() error {
	*c.seen = append(*c.seen, c.dir)
	if c.File == "missing" {
		return errors.New("file " + filepath.Join(c.dir, c.File) + " does not exist")
	}
	return nil
}

// A ProfileRelative config learns the directory of the profile file its row comes from
// before Validate runs — when a profile is validated and when the row activates — and
// DecodeConfig gives a tool the config as Apply would get it.
func TestProfileRelativeConfigs(t *testing.T) {
	var seen []string
	p := container.Define(container.Declaration[*importsConfig]{
		Name:   "imports",
		Config: func() *importsConfig { return &importsConfig{seen: &seen} },
		Apply:  func(*container.Activation, *importsConfig) error { return nil },
	})
	cat, err := container.NewCatalog(p)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	defer rt.Close()
	rows := []container.Row{
		{ID: "a", Plugin: "imports", Source: "/etc/dsh/team.yaml"},
		{ID: "b", Plugin: "imports", Source: "builtin:default"},
	}
	if err := rt.Compose("p", rows); err != nil {
		t.Fatal(err)
	}
	// Validated, then activated: each row twice.
	if strings.Join(seen, ",") != "/etc/dsh,,/etc/dsh," {
		t.Fatalf("dirs %q", seen)
	}
	cfg, err := cat.DecodeConfig(container.Row{ID: "c", Plugin: "imports", Source: "/srv/p.yaml", Config: map[string]any{"file": "x.json"}})
	if c, ok := cfg.(*importsConfig); err != nil || !ok || c.dir != "/srv" || c.File != "x.json" {
		t.Fatalf("DecodeConfig = %+v, %v", cfg, err)
	}
	_, err = cat.DecodeConfig(container.Row{ID: "c", Plugin: "imports", Source: "/srv/p.yaml", Config: map[string]any{"file": "missing"}})
	if err == nil || err.Error() != `/srv/p.yaml: row "c": imports: file /srv/missing does not exist` {
		t.Fatalf("DecodeConfig error: %v", err)
	}
	if _, err := cat.DecodeConfig(container.Row{ID: "d", Plugin: "nope"}); err == nil || !strings.Contains(err.Error(), `row "d": module not found: nope`) {
		t.Fatalf("unknown plugin: %v", err)
	}
}
