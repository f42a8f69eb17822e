package profile

import (
	"crypto/sha256"
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

	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/suggest"
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
	Rows []container.Row
	// Digest is a hash of the content of every profile read, built-ins included: two
	// loads with the same Digest produced the same rows.
	Digest string
}

// Loader loads profiles: built-in ones from an fs.FS and others from files.
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
type Loader struct {
	// Builtins holds the built-in profiles as "<name>.yaml"; nil means there are none.
	Builtins fs.FS
	// Catalog, when set, makes a patch that names the base row's plugin by another of its
	// names (an alias) count as the same plugin, so its config merges.
	Catalog *container.Catalog
}

// NewLoader returns a loader over the built-in profiles in builtins (may be nil).
func NewLoader(builtins fs.FS) *Loader {
	return &Loader{Builtins: builtins}
}

// maxExtendsDepth bounds a chain of extends (a symlinked directory can make an
// unbounded chain of distinct paths).
const maxExtendsDepth = 32

// builtinPrefix labels rows and errors that come from a built-in profile.
const builtinPrefix = "builtin:"

// Load loads the profile spec: a built-in name (e.g. "default") or a file path. A bare
// name that is a built-in means the built-in; use "./name" for a file of that name.
func (l *Loader) Load(spec string) (*Profile, error) {
	p, _, err := l.load(spec)
	return p, err
}

// Builtin reports whether spec names a built-in profile.
func (l *Loader) Builtin(spec string) bool {
	if l.Builtins == nil || spec == "" || strings.ContainsAny(spec, `/\`) ||
		strings.HasSuffix(spec, ".yaml") || strings.HasSuffix(spec, ".yml") || !fs.ValidPath(spec) {
		return false
	}
	st, err := fs.Stat(l.Builtins, spec+".yaml")
	return err == nil && st.Mode().IsRegular()
}

// BuiltinNames lists the built-in profiles, sorted.
func (l *Loader) BuiltinNames() []string {
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
func (l *Loader) load(spec string) (*Profile, []string, error) {
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
				return nil, st.files, fmt.Errorf("profile %q: not a built-in profile (%s) and no file of that name exists%s",
					spec, strings.Join(l.BuiltinNames(), ", "), suggest.DidYouMean(spec, l.BuiltinNames()))
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
func (l *Loader) loadRef(st *loadState, ref profileRef) ([]container.Row, error) {
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
		provider = regularFile(ref.path)
	}
	pf, err := parseProfile(label, &digesting{Provider: provider, label: label, h: st.digest})
	if err != nil {
		return nil, err
	}
	if pf.extends == "" {
		rows := make([]container.Row, 0, len(pf.rows))
		var errs []error
		for _, fr := range pf.rows {
			if !fr.hasName {
				errs = append(errs, &container.RowError{Source: label, Row: fr.label, Err: errors.New(`missing key "name"`)})
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
func (l *Loader) resolveExtends(from profileRef, spec string) (profileRef, error) {
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
			return profileRef{path: p}, fmt.Errorf("%q is neither a built-in profile (%s) nor an existing file (%s)%s",
				spec, strings.Join(l.BuiltinNames(), ", "), p, suggest.DidYouMean(spec, l.BuiltinNames()))
		}
		return profileRef{path: p}, err
	}
	return profileRef{path: p}, nil
}

func appendUnique(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}
