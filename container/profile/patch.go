package profile

import (
	"errors"
	"fmt"

	"github.com/dsh-dev/dsh/container"
)

// patch applies an extending file's rows onto its base's rows, by id.
func (l *Loader) patch(label string, base []container.Row, rows []fileRow) ([]container.Row, error) {
	out := make([]container.Row, len(base), len(base)+len(rows))
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
				errs = append(errs, &container.RowError{Source: label, Row: fr.label,
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

func (l *Loader) samePlugin(a, b string) bool {
	if a == b {
		return true
	}
	if l.Catalog == nil {
		return false
	}
	pa, oka := l.Catalog.Plugin(a)
	pb, okb := l.Catalog.Plugin(b)
	return oka && okb && pa.Name == pb.Name
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
