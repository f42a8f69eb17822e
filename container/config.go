package container

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// decodeConfig builds p's config value from a row's config map: fresh defaults from
// p.Config, each key decoded onto the struct field whose `yaml` tag names it, then
// Validate. Errors name the key.
func decodeConfig(p *Plugin, raw map[string]any) (any, error) {
	if p.Config == nil {
		if len(raw) > 0 {
			keys := sortedKeys(raw)
			return nil, fmt.Errorf("config: unknown key %q (%s takes no config)", keys[0], p.Name)
		}
		return nil, nil
	}
	cfg := p.Config()
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: %s declares a config of type %T, want a pointer to a struct", p.Name, cfg)
	}
	if err := decodeStruct(v.Elem(), raw, ""); err != nil {
		var ve *valueError
		if iv, ok := cfg.(InvalidValuer); ok && errors.As(err, &ve) {
			if own := iv.InvalidValue(ve.key, ve.got); own != nil {
				return nil, own
			}
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if val, ok := cfg.(Validator); ok {
		if err := val.Validate(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// InvalidValuer is implemented by config values that word the error for a value of the
// wrong type themselves, so that a string where a number belongs reads like the
// plugin's other messages about that key. got describes the value as given (`the
// string "5000"`, `a list`). InvalidValue returns nil to keep the decoder's message.
type InvalidValuer interface {
	InvalidValue(key, got string) error
}

// valueError is a value of the wrong type for key.
type valueError struct {
	key string
	got string // describe(value)
	msg string
}

func (e *valueError) Error() string { return e.msg }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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
	fields := map[string]reflect.Value{}
	collectFields(dst, fields)
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	for _, k := range sortedKeys(raw) {
		field, ok := fields[k]
		if !ok {
			return fmt.Errorf("unknown key %q (known keys: %s)", prefix+k, strings.Join(known, ", "))
		}
		if err := decodeValue(field, raw[k], prefix+k); err != nil {
			return err
		}
	}
	return nil
}

// collectFields maps keys to settable fields; embedded structs tagged `yaml:",inline"`
// contribute their fields at the same level (so one plugin's config can extend another's).
func collectFields(v reflect.Value, fields map[string]reflect.Value) {
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
			fields[k] = v.Field(i)
		}
	}
}

func decodeValue(dst reflect.Value, v any, key string) error {
	if v == nil {
		dst.Set(reflect.Zero(dst.Type()))
		return nil
	}
	mismatch := func(want string) error {
		return &valueError{key: key, got: describe(v), msg: fmt.Sprintf("key %q: expected %s, got %s", key, want, describe(v))}
	}
	switch dst.Kind() {
	case reflect.Interface:
		rv := reflect.ValueOf(v)
		if !rv.Type().AssignableTo(dst.Type()) {
			return mismatch(dst.Type().String())
		}
		dst.Set(rv)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return mismatch("a string")
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return mismatch("a boolean")
		}
		dst.SetBool(b)
	case reflect.Float32, reflect.Float64:
		f, ok := toFloat(v)
		if !ok {
			return mismatch("a number")
		}
		dst.SetFloat(f)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok, inRange := toInt64(v)
		if !ok {
			return mismatch("an integer")
		}
		if !inRange || dst.OverflowInt(n) {
			return fmt.Errorf("key %q: %v is out of range", key, v)
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok, inRange := toUint64(v)
		if !ok {
			return mismatch("a non-negative integer")
		}
		if !inRange || dst.OverflowUint(n) {
			return fmt.Errorf("key %q: %v is out of range", key, v)
		}
		dst.SetUint(n)
	case reflect.Pointer:
		elem := reflect.New(dst.Type().Elem())
		if err := decodeValue(elem.Elem(), v, key); err != nil {
			return err
		}
		dst.Set(elem)
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return mismatch("a list")
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
			return mismatch("a mapping")
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for _, k := range sortedKeys(m) {
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
			return mismatch("a mapping")
		}
		return decodeStruct(dst, m, key+".")
	default:
		return fmt.Errorf("key %q: unsupported config field type %s", key, dst.Type())
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

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	if _, ok := toFloat(v); ok {
		return fmt.Sprintf("the number %v", v)
	}
	return fmt.Sprintf("%T", v)
}
