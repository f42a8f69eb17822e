package profile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"strings"

	goyaml "github.com/goccy/go-yaml"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/internal/yamlval"
)

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
func (fr fileRow) row(source string) container.Row {
	return container.Row{ID: fr.id, Plugin: fr.name, Config: fr.config, Disabled: fr.disabled != nil && *fr.disabled, Source: source}
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
	for _, key := range yamlval.SortedKeys(raw) {
		switch key {
		case "extends":
			s, ok := raw[key].(string)
			if !ok || s == "" {
				errs = append(errs, fmt.Errorf("%s: key \"extends\": expected a profile name or path, got %s", label, yamlval.Describe(raw[key])))
				continue
			}
			pf.extends = s
		case "plugins":
			if raw[key] == nil {
				continue
			}
			items, ok := raw[key].([]any)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: key \"plugins\": expected a list of rows, got %s", label, yamlval.Describe(raw[key])))
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

// parseRows parses the items of a file's "plugins" list; every error names the row.
func parseRows(label string, items []any) ([]fileRow, error) {
	var errs []error
	rows := make([]fileRow, 0, len(items))
	seen := map[string]string{}
	for i, item := range items {
		fr, rowErrs := parseRow(item, fmt.Sprintf("#%d", i+1))
		if len(rowErrs) == 0 {
			if prev, dup := seen[fr.id]; dup {
				rowErrs = append(rowErrs, fmt.Errorf("duplicate id %q (also row %s)", fr.id, prev))
			}
		}
		for _, err := range rowErrs {
			errs = append(errs, &container.RowError{Source: label, Row: fr.label, Err: err})
		}
		if len(rowErrs) == 0 {
			seen[fr.id] = fmt.Sprintf("#%d", i+1)
			rows = append(rows, fr)
		}
	}
	return rows, errors.Join(errs...)
}

// parseRow parses one row: {id, name, config, disabled}, its id defaulting to its name.
// fr.label names it in errors (its id, else its name, else its position).
func parseRow(item any, position string) (fr fileRow, errs []error) {
	fr.label = position
	m, ok := normalize(item).(map[string]any)
	if !ok {
		return fr, []error{fmt.Errorf("expected a mapping {id, name, config, disabled}, got %s", yamlval.Describe(item))}
	}
	if s, ok := m["id"].(string); ok && s != "" {
		fr.label = s
	} else if s, ok := m["name"].(string); ok && s != "" {
		fr.label = s
	}
	for _, key := range yamlval.SortedKeys(m) {
		if err := fr.set(key, m[key]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && fr.id == "" {
		if !fr.hasName {
			return fr, []error{errors.New(`a row needs an "id" or a "name"`)}
		}
		fr.id = fr.name
	}
	return fr, errs
}

// set records the row key key (given as v).
func (fr *fileRow) set(key string, v any) error {
	switch key {
	case "id":
		s, ok := v.(string)
		if !ok || s == "" {
			return fmt.Errorf("key \"id\": expected a non-empty string, got %s", yamlval.Describe(v))
		}
		fr.id = s
	case "name":
		s, ok := v.(string)
		if !ok || s == "" {
			return fmt.Errorf("key \"name\": expected a plugin name, got %s", yamlval.Describe(v))
		}
		fr.name, fr.hasName = s, true
	case "config":
		if v == nil {
			return nil
		}
		c, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("key \"config\": expected a mapping, got %s", yamlval.Describe(v))
		}
		fr.config, fr.hasConfig = c, true
	case "disabled":
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("key \"disabled\": expected true or false, got %s", yamlval.Describe(v))
		}
		fr.disabled = &b
	default:
		return fmt.Errorf("unknown key %q (a row has id, name, config, disabled)", key)
	}
	return nil
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
