package container

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/dsh-dev/dsh/container/internal/yamlval"
)

// ProfileRelative is implemented by a config that names files by paths relative to its
// profile (the rules plugin's imports): before the config's Validate runs, the container
// calls SetProfileDir with the directory of the profile file the row comes from
// (Row.Source), or "" for a row of a built-in profile, whose relative paths are then the
// working directory's.
type ProfileRelative interface {
	SetProfileDir(dir string)
}

// DecodeConfig returns row's config as Compose gives it to Apply: decoded onto the
// plugin's config type and validated (nil for a plugin that takes no config). It runs
// no plugin code but the config's Validate; its errors name the file and row as
// Validate's do. Tools that read a policy without composing (dsh explain) use it.
func (c *Catalog) DecodeConfig(row Row) (any, error) {
	p, err := c.lookup(row.Plugin)
	if err == nil {
		var cfg any
		if cfg, err = decodeConfig(p, row); err == nil {
			return cfg, nil
		}
	}
	return nil, &RowError{Source: row.Source, Row: row.ID, Err: err}
}

// profileDir is the directory of the profile file a row comes from: "" for a built-in
// profile ("builtin:<name>") or a row without a source.
func profileDir(source string) string {
	if source == "" || strings.HasPrefix(source, "builtin:") {
		return ""
	}
	return filepath.Dir(source)
}

// decodeConfig builds p's config value from a row's config map: fresh defaults from
// p's Config, each key decoded onto the struct field whose `yaml` tag names it, then the
// config's Validate (after SetProfileDir, for a ProfileRelative config). Errors name the
// key; those the plugin words (Validate, `valid` tags) are prefixed with its name.
func decodeConfig(p *Plugin, row Row) (any, error) {
	raw := row.Config
	if p.newConfig == nil {
		if len(raw) > 0 {
			keys := yamlval.SortedKeys(raw)
			return nil, fmt.Errorf("config: unknown key %q (%s takes no config)", keys[0], p.Name)
		}
		return nil, nil
	}
	cfg := p.newConfig()
	v := reflect.ValueOf(cfg)
	if v.IsNil() {
		return nil, fmt.Errorf("config: %s's Config returned nil", p.Name)
	}
	if err := decodeStruct(v.Elem(), raw, ""); err != nil {
		if ve := (*valueError)(nil); errors.As(err, &ve) && ve.valid != "" {
			return nil, fmt.Errorf("%s: %s must be %s, got %s", p.Name, ve.key, ve.valid, ve.got)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if rel, ok := cfg.(ProfileRelative); ok {
		rel.SetProfileDir(profileDir(row.Source))
	}
	if val, ok := cfg.(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return cfg, nil
}

// valueError is a value of the wrong type for key.
type valueError struct {
	key   string
	got   string // describe(value)
	want  string // "a number", "a list"…
	valid string // the field's `valid` tag: what the plugin says the key must be
}

func (e *valueError) Error() string {
	return fmt.Sprintf("key %q: expected %s, got %s", e.key, e.want, e.got)
}

// field is a settable config field and its `valid` tag.
type field struct {
	v     reflect.Value
	valid string
}

func fieldKey(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

func decodeStruct(dst reflect.Value, raw map[string]any, prefix string) error {
	fields := map[string]field{}
	collectFields(dst, fields)
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	for _, k := range yamlval.SortedKeys(raw) {
		f, ok := fields[k]
		if !ok {
			return fmt.Errorf("unknown key %q (known keys: %s)", prefix+k, strings.Join(known, ", "))
		}
		err := decodeValue(f.v, raw[k], prefix+k)
		if ve := (*valueError)(nil); errors.As(err, &ve) && ve.key == prefix+k {
			ve.valid = f.valid // the field itself has the wrong type, not an element of it
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// collectFields maps keys to settable fields; embedded structs tagged `yaml:",inline"`
// contribute their fields at the same level (so one plugin's config can extend another's).
func collectFields(v reflect.Value, fields map[string]field) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct && strings.Contains(f.Tag.Get("yaml"), ",inline") {
			collectFields(v.Field(i), fields)
			continue
		}
		if k := fieldKey(f); k != "" {
			fields[k] = field{v: v.Field(i), valid: f.Tag.Get("valid")}
		}
	}
}

// decodeValue sets dst from the YAML value v (key names it in errors): null resets dst,
// scalars are checked and converted, lists, mappings and pointers recurse.
func decodeValue(dst reflect.Value, v any, key string) error {
	if v == nil {
		dst.Set(reflect.Zero(dst.Type()))
		return nil
	}
	switch dst.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Struct:
		return decodeComposite(dst, v, key)
	}
	return decodeScalar(dst, v, key)
}

func mismatch(key string, v any, want string) error {
	return &valueError{key: key, got: yamlval.Describe(v), want: want}
}

// decodeScalar sets an interface, string, boolean or number field.
func decodeScalar(dst reflect.Value, v any, key string) error {
	switch dst.Kind() {
	case reflect.Interface:
		rv := reflect.ValueOf(v)
		if !rv.Type().AssignableTo(dst.Type()) {
			return mismatch(key, v, dst.Type().String())
		}
		dst.Set(rv)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return mismatch(key, v, "a string")
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return mismatch(key, v, "a boolean")
		}
		dst.SetBool(b)
	case reflect.Float32, reflect.Float64:
		f, ok := toFloat(v)
		if !ok {
			return mismatch(key, v, "a number")
		}
		dst.SetFloat(f)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok, inRange := toInt64(v)
		if !ok {
			return mismatch(key, v, "an integer")
		}
		if !inRange || dst.OverflowInt(n) {
			return fmt.Errorf("key %q: %v is out of range", key, v)
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok, inRange := toUint64(v)
		if !ok {
			return mismatch(key, v, "a non-negative integer")
		}
		if !inRange || dst.OverflowUint(n) {
			return fmt.Errorf("key %q: %v is out of range", key, v)
		}
		dst.SetUint(n)
	default:
		return fmt.Errorf("key %q: unsupported config field type %s", key, dst.Type())
	}
	return nil
}

// decodeComposite sets a pointer, list, mapping or struct field, element by element.
func decodeComposite(dst reflect.Value, v any, key string) error {
	switch dst.Kind() {
	case reflect.Pointer:
		elem := reflect.New(dst.Type().Elem())
		if err := decodeValue(elem.Elem(), v, key); err != nil {
			return err
		}
		dst.Set(elem)
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return mismatch(key, v, "a list")
		}
		out := reflect.MakeSlice(dst.Type(), len(items), len(items))
		for i, it := range items {
			if err := decodeValue(out.Index(i), it, fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
		dst.Set(out)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || dst.Type().Key().Kind() != reflect.String {
			return mismatch(key, v, "a mapping")
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for _, k := range yamlval.SortedKeys(m) {
			ev := reflect.New(dst.Type().Elem()).Elem()
			if err := decodeValue(ev, m[k], key+"."+k); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), ev)
		}
		dst.Set(out)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch(key, v, "a mapping")
		}
		return decodeStruct(dst, m, key+".")
	}
	return nil
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint:
		return float64(n), true
	}
	return 0, false
}

// toInt64 converts an integral number exactly: ok is false for non-numbers and
// fractions, inRange false for integers outside int64.
func toInt64(v any) (n int64, ok, inRange bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true, true
	case int64:
		return x, true, true
	case int32:
		return int64(x), true, true
	case uint:
		return int64(x), true, uint64(x) <= math.MaxInt64
	case uint64:
		return int64(x), true, x <= math.MaxInt64
	}
	f, isNum := toFloat(v)
	if !isNum || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, false, false
	}
	// ±2^63 converts to int64 inexactly: check the float range before converting.
	if f >= 1<<63 || f < -(1<<63) {
		return 0, true, false
	}
	return int64(f), true, true
}

// toUint64 is toInt64 for unsigned fields; negative integers are out of range.
func toUint64(v any) (n uint64, ok, inRange bool) {
	switch x := v.(type) {
	case uint:
		return uint64(x), true, true
	case uint64:
		return x, true, true
	}
	if i, isInt, in := toInt64(v); isInt && in {
		return uint64(i), true, i >= 0
	}
	f, isNum := toFloat(v)
	if !isNum || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, false, false
	}
	if f < 0 || f >= 1<<64 {
		return 0, true, false
	}
	return uint64(f), true, true
}
