package bashexec

import (
	"fmt"
	"math"

	"github.com/dsh-dev/dsh/proc"
)

// maxGraceMs is the largest accepted graceMs.
const maxGraceMs = proc.MaxGraceMs

// Config is the configuration every bash executor shares. Executor plugins embed it
// inline in their own config struct, so the YAML keys and messages are the same:
//
//	type Config struct {
//		bashexec.Config `yaml:",inline"`
//	}
//	func (c *Config) Validate() error { return c.Config.Check("bash-local") }
//
// Numbers are float64 so that NaN, infinities and fractions reach Check and are
// reported with the executor's own message rather than a decoder's.
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

// DefaultConfig returns the defaults: timeoutMs 120000, maxTimeoutMs 600000,
// maxOutputBytes 64000, maxSpillBytes 67108864, graceMs 3000, cwd "" (the base
// directory: the harness's working directory for a local executor).
func DefaultConfig() Config {
	return Config{
		TimeoutMs:      120000,
		MaxTimeoutMs:   600000,
		MaxOutputBytes: 64000,
		MaxSpillBytes:  67108864,
		GraceMs:        3000,
	}
}

// Check validates c; name prefixes every message: a key that is not a positive finite
// number is "<name>: <key> must be a positive finite number"; graceMs above
// 2147483647 is "<name>: graceMs must be no greater than 2147483647"; a default
// timeoutMs above maxTimeoutMs (it would be clamped on every call) is
// "<name>: timeoutMs (<t>) must be no greater than maxTimeoutMs (<m>)".
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
	if c.TimeoutMs > c.MaxTimeoutMs {
		return fmt.Errorf("%s: timeoutMs (%v) must be no greater than maxTimeoutMs (%v)", name, c.TimeoutMs, c.MaxTimeoutMs)
	}
	return nil
}

// InvalidValue words the error for a numeric key given a value of another type, e.g.
// `bash-local: timeoutMs must be a positive finite number, got the string "5000"`
// (got describes the value as the config decoder does); nil for other keys.
func (c Config) InvalidValue(name, key, got string) error {
	switch key {
	case "timeoutMs", "maxTimeoutMs", "maxOutputBytes", "maxSpillBytes", "graceMs":
		return fmt.Errorf("%s: %s must be a positive finite number, got %s", name, key, got)
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
