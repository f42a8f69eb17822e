package subprocess

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
)

// overrides are set in every child after the scrub: no colours, no pagers, no terminal
// prompts — a command must never wait for a human.
var overrides = [...]string{
	"NO_COLOR=1",
	"TERM=dumb",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
}

// scrubbed reports whether an inherited variable must not reach a child: names that look
// like credentials (KEY, PASSWORD, SECRET, TOKEN, case-insensitive substring) and every
// managed DSH_* name (only the per-call snapshot may set those).
func scrubbed(name string) bool {
	if strings.HasPrefix(name, "DSH_") {
		return true
	}
	return containsFold(name, "KEY") || containsFold(name, "PASSWORD") ||
		containsFold(name, "SECRET") || containsFold(name, "TOKEN")
}

// containsFold is an ASCII case-insensitive strings.Contains for an upper-case needle,
// without allocating.
func containsFold(s, upper string) bool {
	n := len(upper)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for ; j < n; j++ {
			c := s[i+j]
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			if c != upper[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

// checkEnv rejects names and values the kernel cannot carry or that would be parsed as
// something else; dsh additionally requires managed names to be DSH_*.
func checkEnv(env, dshEnv map[string]string) error {
	for k, v := range env {
		if err := checkVar(k, v); err != nil {
			return fmt.Errorf("invalid env: %w", err)
		}
	}
	for k, v := range dshEnv {
		if err := checkVar(k, v); err != nil {
			return fmt.Errorf("invalid dshEnv: %w", err)
		}
		if !strings.HasPrefix(k, "DSH_") {
			return fmt.Errorf("invalid dshEnv: key %q is not a DSH_* name", k)
		}
	}
	return nil
}

func checkVar(k, v string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("invalid variable name %q", k)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("variable %q contains a NUL byte", k)
	}
	return nil
}

// buildEnv merges a child's environment in this order: the harness environment minus
// scrubbed names; the fixed overrides; the caller's env; the managed DSH_* snapshot last.
// A later layer replaces an earlier value in place. os.Environ is only read.
func buildEnv(env, dshEnv map[string]string) []string {
	vars, index := harnessEnv()
	out := make([]string, len(vars), len(vars)+len(env)+len(dshEnv))
	copy(out, vars)
	var added map[string]int // names the layers appended, and where
	for _, layer := range [...]map[string]string{env, dshEnv} {
		keys := make([]string, 0, len(layer))
		for k := range layer {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			kv := k + "=" + layer[k]
			if i, ok := index[k]; ok {
				out[i] = kv
			} else if i, ok := added[k]; ok {
				out[i] = kv
			} else {
				if added == nil {
					added = map[string]int{}
				}
				added[k] = len(out)
				out = append(out, kv)
			}
		}
	}
	return out
}

// harness is the harness environment minus scrubbed names, plus the overrides, as of
// the os.Environ it was built from: rebuilt only when that changes, not per spawn.
var harness struct {
	mu     sync.Mutex
	source []string
	vars   []string
	index  map[string]int // name → position in vars; never changed once built
}

// harnessEnv returns the base layers of every child's environment and where each name
// is in it. Callers must not modify either.
func harnessEnv() ([]string, map[string]int) {
	source := os.Environ()
	harness.mu.Lock()
	defer harness.mu.Unlock()
	if harness.index != nil && slices.Equal(source, harness.source) {
		return harness.vars, harness.index
	}
	vars := make([]string, 0, len(source)+len(overrides))
	index := make(map[string]int, cap(vars))
	set := func(kv string, nameLen int) {
		name := kv[:nameLen]
		if i, ok := index[name]; ok {
			vars[i] = kv
			return
		}
		index[name] = len(vars)
		vars = append(vars, kv)
	}
	for _, kv := range source {
		eq := strings.IndexByte(kv, '=')
		if eq <= 0 || scrubbed(kv[:eq]) {
			continue
		}
		set(kv, eq)
	}
	for _, kv := range overrides {
		set(kv, strings.IndexByte(kv, '='))
	}
	harness.source, harness.vars, harness.index = source, vars, index
	return vars, index
}
