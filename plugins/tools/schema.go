package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Schema is the subset of JSON Schema that tool inputs use. Properties keep their
// declaration order, which is also the order arguments are validated in.
type Schema struct {
	Type        string     `json:"type,omitempty"`
	Description string     `json:"description,omitempty"`
	Properties  Properties `json:"properties,omitempty"`
	Required    []string   `json:"required,omitempty"`
	Enum        []string   `json:"enum,omitempty"`
	Items       *Schema    `json:"items,omitempty"`
	// AliasOf names the property this one is another spelling of: given, it satisfies
	// that property's place in Required (the tool reads either). Not part of the
	// published schema.
	AliasOf string `json:"-"`
}

// Property is one named property of an object schema.
type Property struct {
	Name   string
	Schema *Schema
}

// Properties is an ordered property list; it marshals as a JSON object in order.
type Properties []Property

// MarshalJSON writes the properties as an object, in declaration order.
func (ps Properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.Name)
		v, err := json.Marshal(p.Schema)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object, keeping the document's key order.
func (ps *Properties) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("properties: expected an object")
	}
	*ps = nil
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		var s Schema
		if err := dec.Decode(&s); err != nil {
			return err
		}
		*ps = append(*ps, Property{Name: name, Schema: &s})
	}
	_, err := dec.Token()
	return err
}

// Lookup returns the schema of the named property.
func (ps Properties) Lookup(name string) (*Schema, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p.Schema, true
		}
	}
	return nil, false
}

// validate checks args against an object schema and returns the declared properties only
// (args) and the rest (extra). Messages are the model-facing contract.
func (s *Schema) validate(raw map[string]any) (args, extra map[string]any, err error) {
	args = map[string]any{}
	extra = map[string]any{}
	for _, name := range s.Required {
		if !s.given(raw, name) {
			return nil, nil, fmt.Errorf("missing required property %q", name)
		}
	}
	for _, p := range s.Properties {
		v, ok := raw[p.Name]
		if !ok {
			continue
		}
		if err := p.Schema.check(p.Name, v); err != nil {
			return nil, nil, err
		}
		args[p.Name] = v
	}
	for k, v := range raw {
		if _, declared := s.Properties.Lookup(k); !declared {
			extra[k] = v
		}
	}
	return args, extra, nil
}

// given says whether raw has the property name or one of its aliases.
func (s *Schema) given(raw map[string]any, name string) bool {
	if _, ok := raw[name]; ok {
		return true
	}
	for _, p := range s.Properties {
		if _, ok := raw[p.Name]; ok && p.Schema.AliasOf == name {
			return true
		}
	}
	return false
}

func (s *Schema) check(name string, v any) error {
	ok := true
	var want string
	switch s.Type {
	case "string":
		_, ok = v.(string)
		want = "a string"
	case "number":
		_, ok = Number(v)
		want = "a number"
	case "integer":
		f, isNum := Number(v)
		ok = isNum && f == math.Trunc(f) && !math.IsInf(f, 0)
		want = "an integer"
	case "boolean":
		_, ok = v.(bool)
		want = "a boolean"
	case "object":
		_, ok = v.(map[string]any)
		want = "an object"
	case "array":
		_, ok = v.([]any)
		want = "an array"
	}
	if !ok {
		return fmt.Errorf("%q must be %s", name, want)
	}
	if len(s.Enum) > 0 {
		str, _ := v.(string)
		for _, e := range s.Enum {
			if str == e {
				return nil
			}
		}
		quoted := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			quoted[i] = fmt.Sprintf("%q", e)
		}
		return fmt.Errorf("%q must be one of %s", name, strings.Join(quoted, ", "))
	}
	return nil
}

// Number reads a numeric argument: JSON numbers (float64), and the Go integer and float
// types or json.Number a programmatic CallMap caller may pass. Tools use it on
// arguments the registry validated as numbers.
func Number(v any) (float64, bool) {
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
	case uint:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
