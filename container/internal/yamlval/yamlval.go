// Package yamlval describes the values a YAML document decodes to (nil, strings,
// booleans, numbers, []any, map[string]any), in the words the container's errors use.
package yamlval

import (
	"fmt"
	"sort"
)

// Describe words v for an error: `the string "5000"`, `the number 1.5`, `a list`,
// `a mapping`, `null`.
func Describe(v any) string {
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
	case float64, float32, int, int64, int32, uint64, uint:
		return fmt.Sprintf("the number %v", v)
	}
	return fmt.Sprintf("%T", v)
}

// SortedKeys returns m's keys, sorted: errors about a mapping name its keys in a
// stable order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
