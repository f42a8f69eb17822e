package bashexec

import (
	"fmt"
	"math"
)

// maxGraceMs is the largest accepted graceMs (SPEC §4; subprocess.MaxGraceMs).
const maxGraceMs = 2147483647

// Config is the configuration every bash executor shares (SPEC §4). Executor plugins
// embed it inline in their own config struct, so the YAML keys are the same:
//
//	type Config struct {
//		bashexec.Config `yaml:",inline"`
//	}
//	func (c *Config) Validate() error { return c.Config.Check("bash-local") }
//
// Numbers are float64 so that NaN, infinities and fractions reach Check and are
// reported with the SPEC's message rather than a decoder's.
type Config struct {
	// Cwd is the default working directory; "" means the harness's working directory.
	// A relative Cwd is resolved against the harness's working directory.
	Cwd string `yaml:"cwd"`
	// TimeoutMs is the default timeout of a call.
	TimeoutMs float64 `yaml:"timeoutMs"`
	// MaxTimeoutMs caps requested timeouts (a larger request is clamped).
	MaxTimeoutMs float64 `yaml:"maxTimeoutMs"`
	// MaxOutputBytes is the in-memory tail kept per stream.
	MaxOutputBytes float64 `yaml:"maxOutputBytes"`
	// MaxSpillBytes caps each stream's spill file.
	MaxSpillBytes float64 `yaml:"maxSpillBytes"`
	// GraceMs is the time between SIGTERM and SIGKILL, and the drain bound after the
	// leader exits.
	GraceMs float64 `yaml:"graceMs"`
}

// DefaultConfig returns the SPEC §4 defaults.
func DefaultConfig() Config {
	return Config{
		TimeoutMs:      120000,
		MaxTimeoutMs:   600000,
		MaxOutputBytes: 64000,
		MaxSpillBytes:  67108864,
		GraceMs:        3000,
	}
}

// Check validates c; name prefixes every message ("bash-local: timeoutMs must be a
// positive finite number").
func (c Config) Check(name string) error {
	for _, f := range [...]struct {
		key string
		v   float64
	}{
		{"timeoutMs", c.TimeoutMs},
		{"maxTimeoutMs", c.MaxTimeoutMs},
		{"maxOutputBytes", c.MaxOutputBytes},
		{"maxSpillBytes", c.MaxSpillBytes},
		{"graceMs", c.GraceMs},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v <= 0 {
			return fmt.Errorf("%s: %s must be a positive finite number", name, f.key)
		}
	}
	if c.GraceMs > maxGraceMs {
		return fmt.Errorf("%s: graceMs must be no greater than %d", name, maxGraceMs)
	}
	return nil
}

// InvalidValue words the error for a key given a value of the wrong type (a string
// where a number belongs) like any other bad value of that key; nil for other keys.
func (c Config) InvalidValue(name, key string) error {
	switch key {
	case "timeoutMs", "maxTimeoutMs", "maxOutputBytes", "maxSpillBytes", "graceMs":
		return fmt.Errorf("%s: %s must be a positive finite number", name, key)
	}
	return nil
}

// maxMs is the largest millisecond count a time.Duration can hold.
const maxMs = math.MaxInt64 / 1e6

// toInt rounds a positive number up to an integer, saturating at limit.
func toInt(v, limit float64) int64 {
	v = math.Ceil(v)
	if v >= limit {
		return int64(limit)
	}
	return int64(v)
}
