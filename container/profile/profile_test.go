package profile_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
)

// builtins mimics the embedded profiles package: default, sandbox (extends default),
// minimal.
var builtins = fstest.MapFS{
	"default.yaml": {Data: []byte(`
plugins:
  - id: tools
    name: tools
  - id: bash
    name: bash-local
    config:
      timeoutMs: 1000
      limits: {a: 1, b: 2}
  - id: tool-bash
    name: tool-bash
`)},
	"sandbox.yaml": {Data: []byte(`
extends: default
plugins:
  - id: bash
    name: bash-sandbox
    config:
      defaultMode: workspace-write
`)},
	"minimal.yaml": {Data: []byte(`
plugins:
  - name: tools
`)},
	"loop.yaml": {Data: []byte("extends: loop\n")},
}

func rowsOf(p *profile.Profile) []string {
	var out []string
	for _, r := range p.Rows {
		s := r.ID + "=" + r.Plugin
		if r.Disabled {
			s += " (disabled)"
		}
		out = append(out, s)
	}
	return out
}

func row(t *testing.T, p *profile.Profile, id string) container.Row {
	t.Helper()
	for _, r := range p.Rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no row %q in %q", id, rowsOf(p))
	return container.Row{}
}

func TestLoadBuiltin(t *testing.T) {
	l := profile.NewLoader(builtins)
	p, err := l.Load("default")
	mustNil(t, err)
	if p.Name != "default" || p.Path != "" || len(p.Files) != 0 {
		t.Fatalf("profile %q path %q files %q", p.Name, p.Path, p.Files)
	}
	if got := rowsOf(p); !slices.Equal(got, []string{"tools=tools", "bash=bash-local", "tool-bash=tool-bash"}) {
		t.Fatalf("rows %q", got)
	}
	if row(t, p, "bash").Source != "builtin:default" {
		t.Fatalf("source %q", row(t, p, "bash").Source)
	}
	// id defaults to name.
	m, err := l.Load("minimal")
	mustNil(t, err)
	if got := rowsOf(m); !slices.Equal(got, []string{"tools=tools"}) {
		t.Fatalf("minimal rows %q", got)
	}
	if !l.Builtin("sandbox") || l.Builtin("nope") || l.Builtin("sandbox.yaml") || l.Builtin("./sandbox") {
		t.Fatal("Builtin misclassifies")
	}
	if got := l.BuiltinNames(); !slices.Equal(got, []string{"default", "loop", "minimal", "sandbox"}) {
		t.Fatalf("names %q", got)
	}
}

// The DESIGN example: extends default + {id: bash, name: bash-sandbox} swaps the
// executor and nothing else; the new plugin's config replaces the old one's.
func TestExtendsSwapsExecutorOnly(t *testing.T) {
	l := profile.NewLoader(builtins)
	p, err := l.Load("sandbox")
	mustNil(t, err)
	if got := rowsOf(p); !slices.Equal(got, []string{"tools=tools", "bash=bash-sandbox", "tool-bash=tool-bash"}) {
		t.Fatalf("rows %q", got)
	}
	bash := row(t, p, "bash")
	if !reflect.DeepEqual(bash.Config, map[string]any{"defaultMode": "workspace-write"}) {
		t.Fatalf("config %v: the plugin changed, so the base's config must not merge in", bash.Config)
	}
	if bash.Source != "builtin:sandbox" || row(t, p, "tools").Source != "builtin:default" {
		t.Fatalf("sources %q %q", bash.Source, row(t, p, "tools").Source)
	}
}

func TestExtendsPatchesByID(t *testing.T) {
	dir := t.TempDir()
	mustNil(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	writeFile(t, filepath.Join(dir, "sub", "base.yaml"), `
extends: default
plugins:
  - id: bash
    config:
      limits: {b: 20, c: 30}
      env: [A, B]
  - id: extra
    name: extra
    config: {x: 1}
  - id: gone
    name: gone
`)
	leaf := filepath.Join(dir, "leaf.yaml")
	writeFile(t, leaf, `
extends: sub/base.yaml
plugins:
  - id: bash
    name: bash-local
    config:
      env: [C]
  - id: gone
    disabled: true
  - id: tools
    disabled: true
  - id: new1
    name: one
  - name: two
`)
	l := profile.NewLoader(builtins)
	p, err := l.Load(leaf)
	mustNil(t, err)
	if got := rowsOf(p); !slices.Equal(got, []string{
		"tools=tools (disabled)", "bash=bash-local", "tool-bash=tool-bash",
		"extra=extra", "gone=gone (disabled)", "new1=one", "two=two",
	}) {
		t.Fatalf("rows %q", got)
	}
	// Deep merge across three files: maps merge key by key, lists replace.
	want := map[string]any{"timeoutMs": 1000, "limits": map[string]any{"a": 1, "b": 20, "c": 30}, "env": []any{"C"}}
	if got := row(t, p, "bash").Config; !reflect.DeepEqual(got, want) {
		t.Fatalf("bash config\n got  %#v\n want %#v", got, want)
	}
	if p.Name != leaf || p.Path != leaf {
		t.Fatalf("name %q path %q", p.Name, p.Path)
	}
	base := filepath.Join(dir, "sub", "base.yaml")
	if !slices.Equal(p.Files, []string{leaf, base}) {
		t.Fatalf("files %q", p.Files)
	}
	if row(t, p, "bash").Source != leaf || row(t, p, "extra").Source != base || row(t, p, "tool-bash").Source != "builtin:default" {
		t.Fatal("sources wrong")
	}
	// The base's own view is untouched by the leaf's patch (no shared maps).
	b, err := l.Load(base)
	mustNil(t, err)
	if got := row(t, b, "bash").Config["env"]; !reflect.DeepEqual(got, []any{"A", "B"}) {
		t.Fatalf("base env %v", got)
	}

	// A further extension can enable a disabled row again, with its config.
	again := filepath.Join(dir, "again.yaml")
	writeFile(t, again, "extends: leaf.yaml\nplugins:\n  - id: gone\n    disabled: false\n")
	a, err := l.Load(again)
	mustNil(t, err)
	if g := row(t, a, "gone"); g.Disabled || g.Plugin != "gone" {
		t.Fatalf("gone: %+v", g)
	}
}

// A patch naming the same plugin by an alias merges (with a catalog to tell).
func TestExtendsAliasIsSamePlugin(t *testing.T) {
	cat, err := container.NewCatalog(container.Define(container.Declaration[container.NoConfig]{Name: "bash-local", Aliases: []string{"@deepseek-ai/dsh-bash-local"},
		Apply: func(*container.Activation, container.NoConfig) error { return nil }}))
	mustNil(t, err)
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, "extends: default\nplugins:\n  - id: bash\n    name: '@deepseek-ai/dsh-bash-local'\n    config: {timeoutMs: 5}\n")
	l := &profile.Loader{Builtins: builtins, Catalog: cat}
	p, err := l.Load(path)
	mustNil(t, err)
	want := map[string]any{"timeoutMs": 5, "limits": map[string]any{"a": 1, "b": 2}}
	if got := row(t, p, "bash").Config; !reflect.DeepEqual(got, want) {
		t.Fatalf("config %v", got)
	}
}

func TestProfileErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	l := profile.NewLoader(builtins)
	cases := []struct {
		name    string
		content string
		want    []string
	}{
		{"toplevel.yaml", "plugins: []\nextend: default\nversion: 2\n",
			[]string{`toplevel.yaml: unknown key "extend" (a profile has "extends" and "plugins")`, `toplevel.yaml: unknown key "version"`}},
		{"rowkey.yaml", "plugins:\n  - id: bash\n    name: bash-local\n    confg: {}\n",
			[]string{`rowkey.yaml: row "bash": unknown key "confg" (a row has id, name, config, disabled)`}},
		{"rowkey2.yaml", "plugins:\n  - name: tools\n    enabled: true\n",
			[]string{`rowkey2.yaml: row "tools": unknown key "enabled"`}},
		{"notmap.yaml", "plugins:\n  - tools\n", []string{`notmap.yaml: row "#1": expected a mapping {id, name, config, disabled}, got the string "tools"`}},
		{"noname.yaml", "plugins:\n  - id: x\n", []string{`noname.yaml: row "x": missing key "name"`}},
		{"empty.yaml", "plugins:\n  - {}\n", []string{`empty.yaml: row "#1": a row needs an "id" or a "name"`}},
		{"types.yaml", "plugins:\n  - id: 7\n    name: a\n  - name: b\n    disabled: yes please\n  - name: c\n    config: [1]\n",
			[]string{`types.yaml: row "a": key "id": expected a non-empty string, got the number 7`,
				`types.yaml: row "b": key "disabled": expected true or false, got the string "yes please"`,
				`types.yaml: row "c": key "config": expected a mapping, got a list`}},
		{"dup.yaml", "plugins:\n  - name: tools\n  - id: tools\n    name: prompt\n",
			[]string{`dup.yaml: row "tools": duplicate id "tools" (also row #1)`}},
		{"plugins.yaml", "plugins: {id: x}\n", []string{`plugins.yaml: key "plugins": expected a list of rows, got a mapping`}},
		{"extends.yaml", "extends: [default]\n", []string{`extends.yaml: key "extends": expected a profile name or path, got a list`}},
		{"nobase.yaml", "extends: ./missing.yaml\n",
			[]string{`nobase.yaml: key "extends": "./missing.yaml" is neither a built-in profile (default, loop, minimal, sandbox) nor an existing file (` + filepath.Join(dir, "missing.yaml") + ")"}},
		{"nopatch.yaml", "extends: default\nplugins:\n  - id: bsah\n    disabled: true\n",
			[]string{`nopatch.yaml: row "bsah": missing key "name" (the base profile has no row "bsah" to patch)`}},
		{"syntax.yaml", "plugins:\n  - id: [\n", []string{"syntax.yaml: line 2, column 9: invalid YAML: sequence end token ']' not found\n   1 | plugins:\n>  2 |   - id: [\n               ^"}},
		// The line of the problem, not of the structure it is in.
		{"brace.yaml", "plugins:\n  - id: a\n    name: tools\n    config: {x: 1\n  - id: b\n", []string{"brace.yaml: line 5, column 3: invalid YAML: ',' or '}' must be specified"}},
		{"scalar.yaml", "just a string\n", []string{"scalar.yaml: yaml:"}},
		{"selfloop.yaml", "extends: selfloop.yaml\n", []string{"selfloop.yaml: extends loop: " + filepath.Join(dir, "selfloop.yaml") + " → " + filepath.Join(dir, "selfloop.yaml")}},
		{"builtinloop.yaml", "extends: loop\n", []string{"builtinloop.yaml: extends loop: builtin:loop → builtin:loop"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := file(c.name, c.content)
			p, err := l.Load(path)
			if err == nil {
				t.Fatalf("loaded %q", rowsOf(p))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}

	// A loop across files names the chain.
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, "extends: b.yaml\n")
	writeFile(t, b, "extends: ./a.yaml\n")
	_, err := l.Load(a)
	wantErrContains(t, err, a+": extends loop: "+a+" → "+b+" → "+a)

	// Missing files, as the profile itself.
	_, err = l.Load(filepath.Join(dir, "nothere.yaml"))
	wantErrContains(t, err, `profile "`+filepath.Join(dir, "nothere.yaml")+`": file `, "does not exist")
	_, err = l.Load("defualt")
	wantErrContains(t, err, `profile "defualt": not a built-in profile (default, loop, minimal, sandbox) and no file of that name exists (did you mean "default"?)`)
	if _, err = l.Load("mine"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name close to no built-in: %v", err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("extends: sandbx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = l.Load(typo)
	wantErrContains(t, err, `"sandbx" is neither a built-in profile (default, loop, minimal, sandbox) nor an existing file (`+filepath.Join(dir, "sandbx")+`) (did you mean "sandbox"?)`)
	_, err = l.Load("")
	wantErrContains(t, err, "no profile given")
	_, err = profile.NewLoader(nil).Load("default")
	wantErrContains(t, err, `profile "default": not a built-in profile () and no file`)
}

// Validation of a loaded profile: module not found, bad config values, duplicate ids,
// two shell providers and cycles, each naming the file, the row and the key.
func TestLoadedProfileValidation(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "tools", nil, []string{"tools"}, nil),
		exclusive(plug(j, "bash-local", []string{"tools"}, []string{"shell"}, nil), "shell"),
		plug(j, "bash-sandbox", nil, []string{"shell"}, nil),
		plug(j, "tool-bash", []string{"shell"}, nil, nil),
	)
	l := profile.NewLoader(builtins)
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	writeFile(t, path, `
extends: default
plugins:
  - id: bash
    config: {timeoutMs: 5, limits: {a: x}}
  - id: web
    name: web-fetch
  - id: second
    name: bash-sandbox
    config: {limit: "lots"}
  - id: third
    name: bash-sandbox
`)
	p, err := l.Load(path)
	mustNil(t, err)
	err = rt.Validate(p.Rows)
	for _, w := range []string{
		path + `: row "bash": config: unknown key "limits"`,
		path + `: row "web": module not found: web-fetch`,
		path + `: row "second": config: key "limit": expected an integer, got the string "lots"`,
		`service "shell" has more than one enabled provider: row "bash" (` + path + `), row "second" (` + path + `), row "third" (` + path + `); disable all but one`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("validation error\n%v\nlacks\n%s", err, w)
		}
	}

	// The default profile as the runtime sees it.
	rt2 := newRuntime(t,
		plug(j, "tools", nil, []string{"tools"}, nil),
		plug(j, "bash-local", nil, []string{"shell"}, nil),
		plug(j, "tool-bash", []string{"shell", "tools"}, nil, nil),
	)
	d, err := l.Load("default")
	mustNil(t, err)
	wantErrContains(t, rt2.Validate(d.Rows), `builtin:default: row "bash": config: unknown key "limits"`)
}

func TestDigest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	writeFile(t, path, "extends: default\n")
	l := profile.NewLoader(builtins)
	a, err := l.Load(path)
	mustNil(t, err)
	b, err := l.Load(path)
	mustNil(t, err)
	if a.Digest == "" || a.Digest != b.Digest {
		t.Fatalf("digests %q %q", a.Digest, b.Digest)
	}
	writeFile(t, path, "extends: default\n# a comment\n")
	c, err := l.Load(path)
	mustNil(t, err)
	if c.Digest == a.Digest {
		t.Fatal("digest did not change with the content")
	}
}

// FuzzLoadProfile: arbitrary bytes as a profile (extending a built-in or not) never
// panic the loader or the validator, and a profile that loads has well-formed rows.
func FuzzLoadProfile(f *testing.F) {
	for _, seed := range []string{
		"", "plugins: []\n", "extends: default\n", "extends: fuzz\n", "extends: loop\n",
		"extends: default\nplugins:\n  - id: bash\n    name: bash-sandbox\n    config: {defaultMode: workspace-write}\n",
		"plugins:\n  - {id: a, name: a, config: {x: {y: [1, 2, {z: null}]}}, disabled: false}\n",
		"plugins:\n  - name: p\n    config: {limit: 9223372036854775808, value: !!binary aGk=, inner: {a: .nan}}\n",
		"plugins:\n  - name: p\n    config: {? [a, b] : 1, 1: 2, ~: 3}\n",
		"a: &a [*a]\n", "plugins: &r [{name: p}]\nextends: *r\n",
		"extends: ../../etc/passwd\n", "extends: sub/../default.yaml\n",
		"plugins:\n- id: x\n  name: tools\n- id: x\n",
		"\xff\xfe", "plugins:\n  - id: \"\\u0000\"\n    name: p\n",
	} {
		f.Add([]byte(seed))
	}
	j := &journal{}
	cat, err := container.NewCatalog(
		plug(j, "p", nil, []string{"x"}, nil),
		plug(j, "q", []string{"x"}, []string{"y"}, nil),
		plug(j, "r", []string{"y"}, []string{"x"}, nil),
		plug(j, "tools", nil, []string{"tools"}, nil),
		plug(j, "bash-local", nil, []string{"shell"}, nil),
		plug(j, "bash-sandbox", nil, []string{"shell"}, nil),
	)
	if err != nil {
		f.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := fstest.MapFS{"fuzz.yaml": {Data: data}}
		for k, v := range builtins {
			fs[k] = v
		}
		l := &profile.Loader{Builtins: fs, Catalog: cat}
		p, err := l.Load("fuzz")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		ids := map[string]bool{}
		for _, r := range p.Rows {
			if r.ID == "" || r.Plugin == "" || r.Source == "" || ids[r.ID] {
				t.Fatalf("malformed row %+v in %q", r, rowsOf(p))
			}
			ids[r.ID] = true
		}
		if err := rt.Validate(p.Rows); err != nil && err.Error() == "" {
			t.Fatal("empty validation error")
		}
		var re *container.RowError
		_ = errors.As(err, &re)
	})
}
