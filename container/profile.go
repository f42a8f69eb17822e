package container

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	goyaml "github.com/goccy/go-yaml"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// Profile is a loaded profile: its own rows patched onto those of every profile it
// extends.
type Profile struct {
	// Name is the spec the profile was loaded from: a built-in name or a file path, as
	// given. Status shows it.
	Name string
	// Path is the absolute path of the profile's own file; empty for a built-in profile.
	Path string
	// Files lists every file on disk that was read (the profile's own file first, then
	// its bases): what a reloader watches. Built-in profiles are not files.
	Files []string
	// Rows are the merged rows, in order. Disabled rows stay (Disabled set) so that a
	// further extension can enable them again; the runtime does not mount them.
	Rows []Row
	// Digest is a hash of the content of every profile read, built-ins included: two
	// loads with the same Digest produced the same rows.
	Digest string
}

// ProfileLoader loads profiles: built-in ones from an fs.FS and others from files.
//
// A profile is YAML with two top-level keys, both optional:
//
//	extends: default          # a built-in name, or a path relative to this file
//	plugins:                  # rows: {id, name, config, disabled}
//	  - id: bash              # defaults to name; unique in the file
//	    name: bash-sandbox    # catalog name or alias
//	    config: {defaultMode: workspace-write}
//	    disabled: false
//
// With extends, the base's rows are patched by id: a given name replaces the plugin
// (and then the config is replaced, not merged: another plugin's keys would not fit), a
// given config is deep-merged into the base row's (mappings merge key by key; lists and
// scalars replace), `disabled: true` disables the row, and rows with new ids are
// appended in order. Chains of extends are allowed; loops are errors.
//
// Each file is parsed into its own fresh koanf instance. Every error names the file,
// and the row and key when there is one.
type ProfileLoader struct {
	// Builtins holds the built-in profiles as "<name>.yaml"; nil means there are none.
	Builtins fs.FS
	// Catalog, when set, makes a patch that names the base row's plugin by another of its
	// names (an alias) count as the same plugin, so its config merges.
	Catalog *Catalog
}

// NewProfileLoader returns a loader over the built-in profiles in builtins (may be nil).
func NewProfileLoader(builtins fs.FS) *ProfileLoader {
	return &ProfileLoader{Builtins: builtins}
}

// maxExtendsDepth bounds a chain of extends (a symlinked directory can make an
// unbounded chain of distinct paths).
const maxExtendsDepth = 32

// builtinPrefix labels rows and errors that come from a built-in profile.
const builtinPrefix = "builtin:"

// Load loads the profile spec: a built-in name (e.g. "default") or a file path. A bare
// name that is a built-in means the built-in; use "./name" for a file of that name.
func (l *ProfileLoader) Load(spec string) (*Profile, error) {
	p, _, err := l.load(spec)
	return p, err
}

// Builtin reports whether spec names a built-in profile.
func (l *ProfileLoader) Builtin(spec string) bool {
	if l.Builtins == nil || spec == "" || strings.ContainsAny(spec, `/\`) ||
		strings.HasSuffix(spec, ".yaml") || strings.HasSuffix(spec, ".yml") || !fs.ValidPath(spec) {
		return false
	}
	st, err := fs.Stat(l.Builtins, spec+".yaml")
	return err == nil && st.Mode().IsRegular()
}

// BuiltinNames lists the built-in profiles, sorted.
func (l *ProfileLoader) BuiltinNames() []string {
	if l.Builtins == nil {
		return nil
	}
	matches, _ := fs.Glob(l.Builtins, "*.yaml")
	names := make([]string, 0, len(matches))
	for _, m := range matches {
		names = append(names, strings.TrimSuffix(m, ".yaml"))
	}
	sort.Strings(names)
	return names
}

// profileRef identifies one profile file: on disk (abs path) or built-in (a path in
// Builtins).
type profileRef struct {
	builtin bool
	path    string
}

func (r profileRef) label() string {
	if r.builtin {
		return builtinPrefix + strings.TrimSuffix(r.path, ".yaml")
	}
	return r.path
}

// loadState is one Load: the files read, the digest, the chain for loop detection.
type loadState struct {
	files  []string
	digest hash.Hash
	chain  []string // identities of the files being extended, root first
	labels []string // their labels, for the loop message
}

// load is Load that also returns the disk files it read or tried to read (for the
// reloader to watch even when the load fails).
func (l *ProfileLoader) load(spec string) (*Profile, []string, error) {
	if spec == "" {
		return nil, nil, errors.New("profile: no profile given (a built-in name or a file path)")
	}
	st := &loadState{digest: sha256.New()}
	var ref profileRef
	if l.Builtin(spec) {
		ref = profileRef{builtin: true, path: spec + ".yaml"}
	} else {
		abs, err := filepath.Abs(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("profile %q: %w", spec, err)
		}
		if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
			st.files = append(st.files, abs)
			if !strings.ContainsAny(spec, `/\`) && !strings.Contains(spec, ".") {
				return nil, st.files, fmt.Errorf("profile %q: not a built-in profile (%s) and no file of that name exists",
					spec, strings.Join(l.BuiltinNames(), ", "))
			}
			return nil, st.files, fmt.Errorf("profile %q: file %s does not exist", spec, abs)
		}
		ref = profileRef{path: abs}
	}
	rows, err := l.loadRef(st, ref)
	if err != nil {
		return nil, st.files, err
	}
	p := &Profile{Name: spec, Files: st.files, Rows: rows, Digest: hex.EncodeToString(st.digest.Sum(nil))}
	if !ref.builtin {
		p.Path = ref.path
	}
	return p, st.files, nil
}

// loadRef reads, parses and merges one profile file and, first, its bases.
func (l *ProfileLoader) loadRef(st *loadState, ref profileRef) ([]Row, error) {
	label := ref.label()
	id := label
	if !ref.builtin {
		st.files = appendUnique(st.files, ref.path)
		if real, err := filepath.EvalSymlinks(ref.path); err == nil {
			id = real
		}
	}
	for i, seen := range st.chain {
		if seen == id {
			loop := append(append([]string(nil), st.labels[i:]...), label)
			return nil, fmt.Errorf("%s: extends loop: %s", st.labels[0], strings.Join(loop, " → "))
		}
	}
	if len(st.chain) >= maxExtendsDepth {
		return nil, fmt.Errorf("%s: extends chain deeper than %d profiles", st.labels[0], maxExtendsDepth)
	}
	st.chain = append(st.chain, id)
	st.labels = append(st.labels, label)
	defer func() {
		st.chain = st.chain[:len(st.chain)-1]
		st.labels = st.labels[:len(st.labels)-1]
	}()

	var provider koanf.Provider
	if ref.builtin {
		data, err := fs.ReadFile(l.Builtins, ref.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		provider = rawbytes.Provider(data)
	} else {
		provider = file.Provider(ref.path)
	}
	pf, err := parseProfile(label, &digesting{Provider: provider, label: label, h: st.digest})
	if err != nil {
		return nil, err
	}
	if pf.extends == "" {
		rows := make([]Row, 0, len(pf.rows))
		var errs []error
		for _, fr := range pf.rows {
			if !fr.hasName {
				errs = append(errs, &RowError{Source: label, Row: fr.label, Err: errors.New(`missing key "name"`)})
				continue
			}
			rows = append(rows, fr.row(label))
		}
		return rows, errors.Join(errs...)
	}
	baseRef, err := l.resolveExtends(ref, pf.extends)
	if err != nil {
		if !baseRef.builtin && baseRef.path != "" {
			st.files = appendUnique(st.files, baseRef.path) // watch for it to appear
		}
		return nil, fmt.Errorf("%s: key \"extends\": %w", label, err)
	}
	base, err := l.loadRef(st, baseRef)
	if err != nil {
		return nil, err
	}
	return l.patch(label, base, pf.rows)
}

// resolveExtends turns an extends value into a file: a built-in name, else a path
// relative to the extending file's directory (inside Builtins for a built-in).
func (l *ProfileLoader) resolveExtends(from profileRef, spec string) (profileRef, error) {
	if l.Builtin(spec) {
		return profileRef{builtin: true, path: spec + ".yaml"}, nil
	}
	if from.builtin {
		p := path.Join(path.Dir(from.path), spec)
		if !fs.ValidPath(p) {
			return profileRef{}, fmt.Errorf("%q is not a built-in profile", spec)
		}
		if st, err := fs.Stat(l.Builtins, p); err != nil || !st.Mode().IsRegular() {
			return profileRef{}, fmt.Errorf("%q is not a built-in profile", spec)
		}
		return profileRef{builtin: true, path: p}, nil
	}
	p := spec
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(from.path), p)
	}
	p = filepath.Clean(p)
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return profileRef{path: p}, fmt.Errorf("%q is neither a built-in profile (%s) nor an existing file (%s)",
				spec, strings.Join(l.BuiltinNames(), ", "), p)
		}
		return profileRef{path: p}, err
	}
	return profileRef{path: p}, nil
}

// patch applies an extending file's rows onto its base's rows, by id.
func (l *ProfileLoader) patch(label string, base []Row, rows []fileRow) ([]Row, error) {
	out := make([]Row, len(base), len(base)+len(rows))
	copy(out, base)
	index := make(map[string]int, len(base))
	for i, r := range out {
		index[r.ID] = i
	}
	var errs []error
	for _, fr := range rows {
		i, ok := index[fr.id]
		if !ok {
			if !fr.hasName {
				errs = append(errs, &RowError{Source: label, Row: fr.label,
					Err: fmt.Errorf(`missing key "name" (the base profile has no row %q to patch)`, fr.id)})
				continue
			}
			index[fr.id] = len(out)
			out = append(out, fr.row(label))
			continue
		}
		row := &out[i]
		switch {
		case fr.hasName && !l.samePlugin(fr.name, row.Plugin):
			// Another plugin: the base's config was written for the old one.
			row.Plugin = fr.name
			row.Config = fr.config
		case fr.hasConfig:
			if fr.hasName {
				row.Plugin = fr.name
			}
			row.Config = mergeConfig(row.Config, fr.config)
		case fr.hasName:
			row.Plugin = fr.name
		}
		if fr.disabled != nil {
			row.Disabled = *fr.disabled
		}
		row.Source = label
	}
	return out, errors.Join(errs...)
}

func (l *ProfileLoader) samePlugin(a, b string) bool {
	if a == b {
		return true
	}
	if l.Catalog == nil {
		return false
	}
	pa, oka := l.Catalog.byName[a]
	pb, okb := l.Catalog.byName[b]
	return oka && okb && pa == pb
}

// mergeConfig deep-merges patch into a copy of base: mappings merge key by key, any
// other value replaces. Neither input is modified.
func mergeConfig(base, patch map[string]any) map[string]any {
	if len(patch) == 0 {
		return cloneMap(base)
	}
	out := cloneMap(base)
	if out == nil {
		out = make(map[string]any, len(patch))
	}
	for k, v := range patch {
		if pm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = mergeConfig(bm, pm)
				continue
			}
		}
		out[k] = cloneValue(v)
	}
	return out
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

func appendUnique(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}

// digesting is a koanf.Provider that feeds every byte it reads into the load's digest,
// so the digest covers exactly what was parsed.
type digesting struct {
	koanf.Provider
	label string
	h     hash.Hash
}

func (d *digesting) ReadBytes() ([]byte, error) {
	b, err := d.Provider.ReadBytes()
	if err != nil {
		return nil, err
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(d.label)))
	d.h.Write(n[:])
	d.h.Write([]byte(d.label))
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	d.h.Write(n[:])
	d.h.Write(b)
	return b, nil
}

// profileFile is one parsed profile file.
type profileFile struct {
	extends string
	rows    []fileRow
}

// fileRow is one row as written in a file: what it sets and what it leaves to the base.
type fileRow struct {
	label     string // for errors: the id, else the name, else "#<n>"
	id        string
	name      string
	hasName   bool
	config    map[string]any
	hasConfig bool
	disabled  *bool
}

// row is fr as a new row of the file source (one that patches no base row).
func (fr fileRow) row(source string) Row {
	return Row{ID: fr.id, Plugin: fr.name, Config: fr.config, Disabled: fr.disabled != nil && *fr.disabled, Source: source}
}

// parseProfile parses one profile file into a fresh koanf instance and checks its shape.
func parseProfile(label string, provider koanf.Provider) (*profileFile, error) {
	data, err := provider.ReadBytes()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: profile file does not exist", label)
		}
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
		return nil, yamlError(label, data, err)
	}
	raw := k.Raw()
	if len(raw) == 0 {
		// Also what a reload sees between an editor's truncate and its write: composing
		// nothing would dispose every row.
		return nil, fmt.Errorf("%s: empty profile (write \"plugins: []\" to compose nothing)", label)
	}
	pf := &profileFile{}
	var errs []error
	for _, key := range sortedKeys(raw) {
		switch key {
		case "extends":
			s, ok := raw[key].(string)
			if !ok || s == "" {
				errs = append(errs, fmt.Errorf("%s: key \"extends\": expected a profile name or path, got %s", label, describe(raw[key])))
				continue
			}
			pf.extends = s
		case "plugins":
			if raw[key] == nil {
				continue
			}
			items, ok := raw[key].([]any)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: key \"plugins\": expected a list of rows, got %s", label, describe(raw[key])))
				continue
			}
			rows, err := parseRows(label, items)
			if err != nil {
				errs = append(errs, err)
			}
			pf.rows = rows
		default:
			errs = append(errs, fmt.Errorf("%s: unknown key %q (a profile has \"extends\" and \"plugins\")", label, key))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return pf, nil
}

func parseRows(label string, items []any) ([]fileRow, error) {
	var errs []error
	rows := make([]fileRow, 0, len(items))
	seen := map[string]string{}
	for i, item := range items {
		fr := fileRow{label: fmt.Sprintf("#%d", i+1)}
		m, ok := normalize(item).(map[string]any)
		if !ok {
			errs = append(errs, &RowError{Source: label, Row: fr.label, Err: fmt.Errorf("expected a mapping {id, name, config, disabled}, got %s", describe(item))})
			continue
		}
		// Label the row first, so that every error below names it.
		if s, ok := m["id"].(string); ok && s != "" {
			fr.label = s
		} else if s, ok := m["name"].(string); ok && s != "" {
			fr.label = s
		}
		valid := true
		bad := func(err error) {
			errs = append(errs, &RowError{Source: label, Row: fr.label, Err: err})
			valid = false
		}
		for _, key := range sortedKeys(m) {
			v := m[key]
			switch key {
			case "id":
				s, ok := v.(string)
				if !ok || s == "" {
					bad(fmt.Errorf("key \"id\": expected a non-empty string, got %s", describe(v)))
					continue
				}
				fr.id = s
			case "name":
				s, ok := v.(string)
				if !ok || s == "" {
					bad(fmt.Errorf("key \"name\": expected a plugin name, got %s", describe(v)))
					continue
				}
				fr.name, fr.hasName = s, true
			case "config":
				if v == nil {
					continue
				}
				c, ok := v.(map[string]any)
				if !ok {
					bad(fmt.Errorf("key \"config\": expected a mapping, got %s", describe(v)))
					continue
				}
				fr.config, fr.hasConfig = c, true
			case "disabled":
				b, ok := v.(bool)
				if !ok {
					bad(fmt.Errorf("key \"disabled\": expected true or false, got %s", describe(v)))
					continue
				}
				fr.disabled = &b
			default:
				bad(fmt.Errorf("unknown key %q (a row has id, name, config, disabled)", key))
			}
		}
		if !valid {
			continue
		}
		if fr.id == "" {
			if !fr.hasName {
				bad(errors.New(`a row needs an "id" or a "name"`))
				continue
			}
			fr.id = fr.name
		}
		if prev, dup := seen[fr.id]; dup {
			bad(fmt.Errorf("duplicate id %q (also row %s)", fr.id, prev))
			continue
		}
		seen[fr.id] = fmt.Sprintf("#%d", i+1)
		rows = append(rows, fr)
	}
	return rows, errors.Join(errs...)
}

// yamlError explains why a profile is not valid YAML: the line and column of the
// problem, what it is, and the lines around it. The parser that loads profiles
// (yaml.v3, through koanf) names only the line where the enclosing structure starts,
// counted from zero, so a second parser is asked where the problem is; when it finds
// none, the first one's message stands.
func yamlError(label string, data []byte, err error) (out error) {
	defer func() {
		if recover() != nil { // the second parser is a diagnostic; it must never fail a load
			out = fmt.Errorf("%s: %w", label, err)
		}
	}()
	var v any
	var ye goyaml.Error
	if perr := goyaml.Unmarshal(data, &v); perr == nil || !errors.As(perr, &ye) || ye.GetToken() == nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	pos := ye.GetToken().Position
	msg := fmt.Sprintf("%s: line %d, column %d: invalid YAML: %s", label, pos.Line, pos.Column, ye.GetMessage())
	if _, source, ok := strings.Cut(ye.FormatError(false, true), "\n"); ok && strings.TrimSpace(source) != "" {
		msg += "\n" + strings.TrimRight(source, "\n")
	}
	return errors.New(msg)
}

// normalize turns YAML's map[any]any (non-string keys) into map[string]any, at any depth.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}
