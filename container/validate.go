package container

import (
	"errors"
	"fmt"
	"strings"
)

// Validate checks rows as a whole without changing anything: ids, plugin names, configs,
// exclusive services and inject/provide cycles. Disabled rows are only checked for ids.
// Every error names the row's file (Row.Source) and id.
func (r *Runtime) Validate(rows []Row) error {
	_, err := r.prepare(rows)
	return err
}

// CheckActivation reports the enabled rows of rows that can never activate: a row that
// injects a service no enabled row provides (or only rows that can never activate
// themselves) stays pending for as long as the composition runs. Each error names the
// file, the row, the service, and the catalog plugins that could provide it. Such a
// profile is valid — a later edit may add the provider — so Compose accepts it; `dsh
// check` refuses it, and serving logs it. Rows naming unknown plugins are skipped
// (Validate reports them).
func (r *Runtime) CheckActivation(rows []Row) error {
	var enabled, disabled []preparedRow
	for _, row := range rows {
		p, err := r.catalog.lookup(row.Plugin)
		if err != nil {
			continue
		}
		if row.Disabled {
			disabled = append(disabled, preparedRow{row: row, plugin: p})
		} else {
			enabled = append(enabled, preparedRow{row: row, plugin: p})
		}
	}
	can, provided := activatable(enabled)
	var errs []error
	for i, pr := range enabled {
		if can[i] {
			continue
		}
		for _, s := range pr.plugin.inject {
			if !provided[s] {
				why := r.whyNeverProvided(s, enabled, disabled)
				errs = append(errs, &RowError{Source: pr.row.Source, Row: pr.row.ID, Err: errors.New("can never activate: " + why)})
				break
			}
		}
	}
	return errors.Join(errs...)
}

// activatable computes, as a fixed point, which rows can activate (every service they
// inject is provided by a row that can) and the services those rows provide.
func activatable(rows []preparedRow) (can []bool, provided map[string]bool) {
	provided = map[string]bool{}
	can = make([]bool, len(rows))
	for changed := true; changed; {
		changed = false
		for i, pr := range rows {
			if can[i] || !allProvided(pr.plugin.inject, provided) {
				continue
			}
			can[i], changed = true, true
			for _, s := range pr.plugin.provide {
				provided[s] = true
			}
		}
	}
	return can, provided
}

// whyNeverProvided explains why service s will never exist: no enabled row provides it
// (a disabled one would), or its providers can never activate themselves; and which
// catalog plugins could provide it.
func (r *Runtime) whyNeverProvided(s string, enabled, disabled []preparedRow) string {
	var providers []string
	for _, other := range enabled {
		if other.plugin.provides(s) {
			providers = append(providers, fmt.Sprintf("%q", other.row.ID))
		}
	}
	why := fmt.Sprintf("it injects %q, which no enabled row provides", s)
	if len(providers) > 0 {
		why = fmt.Sprintf("it injects %q, whose provider (row %s) can never activate either", s, strings.Join(providers, ", row "))
	} else {
		for _, off := range disabled {
			if off.plugin.provides(s) {
				why += fmt.Sprintf(" (row %q, which would, is disabled in %s)", off.row.ID, off.row.Source)
				break
			}
		}
	}
	if cands := r.catalog.Providers(s); len(cands) > 0 {
		return why + fmt.Sprintf(" (plugins that provide it: %s)", strings.Join(cands, ", "))
	}
	return why + " (no plugin in this binary provides it)"
}

func allProvided(services []string, provided map[string]bool) bool {
	for _, s := range services {
		if !provided[s] {
			return false
		}
	}
	return true
}

type preparedRow struct {
	row    Row
	plugin *Plugin
}

func (r *Runtime) prepare(rows []Row) ([]preparedRow, error) {
	var errs []error
	seen := make(map[string]bool, len(rows))
	out := make([]preparedRow, 0, len(rows))
	// resolved also holds rows whose config is bad, so that one bad value does not hide
	// an exclusive-service conflict or a cycle.
	resolved := make([]preparedRow, 0, len(rows))
	for _, row := range rows {
		if row.ID == "" {
			errs = append(errs, &RowError{Source: row.Source, Row: row.Plugin, Err: errors.New("missing id")})
			continue
		}
		if seen[row.ID] {
			errs = append(errs, &RowError{Source: row.Source, Row: row.ID, Err: errors.New("duplicate id")})
			continue
		}
		seen[row.ID] = true
		if row.Disabled {
			continue
		}
		p, err := r.catalog.lookup(row.Plugin)
		if err != nil {
			errs = append(errs, &RowError{Source: row.Source, Row: row.ID, Err: err})
			continue
		}
		resolved = append(resolved, preparedRow{row: row, plugin: p})
		if _, err := decodeConfig(p, row); err != nil {
			errs = append(errs, &RowError{Source: row.Source, Row: row.ID, Err: err})
			continue
		}
		out = append(out, preparedRow{row: row, plugin: p})
	}
	for _, s := range r.catalog.exclusive {
		var refs []string
		for _, pr := range resolved {
			if pr.plugin.provides(s) {
				refs = append(refs, rowRef(pr.row))
			}
		}
		if len(refs) > 1 {
			errs = append(errs, fmt.Errorf("service %q has more than one enabled provider: %s; disable all but one", s, strings.Join(refs, ", ")))
		}
	}
	if err := findCycle(resolved); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// rowRef names a row in an error: `row "bash" (profile.yaml)`.
func rowRef(row Row) string {
	if row.Source == "" {
		return fmt.Sprintf("row %q", row.ID)
	}
	return fmt.Sprintf("row %q (%s)", row.ID, row.Source)
}

// cycleStep is one edge of an inject/provide cycle: row injects service, which provider
// declares it provides.
type cycleStep struct {
	row      Row
	service  string
	provider Row
}

func cycleError(steps []cycleStep) error {
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = fmt.Sprintf("%s injects %q provided by row %q", rowRef(st.row), st.service, st.provider.ID)
	}
	return fmt.Errorf("inject/provide cycle: %s", strings.Join(parts, " → "))
}

// findCycle reports an inject/provide cycle among rows with its path. It is an iterative
// depth-first search: O(rows + edges), no recursion however deep the inject chain.
func findCycle(rows []preparedRow) error {
	if steps := findCyclePath(rows); steps != nil {
		return cycleError(steps)
	}
	return nil
}

func findCyclePath(rows []preparedRow) []cycleStep {
	providers := map[string][]int{}
	for i, pr := range rows {
		for _, s := range pr.plugin.provide {
			providers[s] = append(providers[s], i)
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(rows))
	// frame is a row being visited: which inject (si) and which provider of it (pi) is next.
	type frame struct{ row, si, pi int }
	var stack []frame
	for root := range rows {
		if color[root] != white {
			continue
		}
		color[root] = grey
		stack = append(stack[:0], frame{row: root})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			inject := rows[top.row].plugin.inject
			if top.si >= len(inject) {
				color[top.row] = black
				stack = stack[:len(stack)-1]
				continue
			}
			ps := providers[inject[top.si]]
			if top.pi >= len(ps) {
				top.si++
				top.pi = 0
				continue
			}
			j := ps[top.pi]
			top.pi++
			switch color[j] {
			case white:
				color[j] = grey
				stack = append(stack, frame{row: j})
			case grey:
				// The stack from j's frame to the top is the cycle.
				start := len(stack) - 1
				for stack[start].row != j {
					start--
				}
				var steps []cycleStep
				for k := start; k < len(stack); k++ {
					fr := stack[k]
					next := j
					if k+1 < len(stack) {
						next = stack[k+1].row
					}
					steps = append(steps, cycleStep{
						row:      rows[fr.row].row,
						service:  rows[fr.row].plugin.inject[fr.si],
						provider: rows[next].row,
					})
				}
				return steps
			}
		}
	}
	return nil
}
