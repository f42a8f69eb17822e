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
//	func (c *Config) Validate() error { return c.Config.Check() }
//
// Numbers are float64 so that NaN, infinities and fractions reach Check and are
// reported with the executor's own message rather than a decoder's; their `valid` tags
// word a value of another type the same way (the container reads them).
type Config struct {
	// Cwd is the default working directory; "" means the harness's working directory.
	// A relative Cwd is resolved against the harness's working directory.
	Cwd string `yaml:"cwd"`
	// TimeoutMs is the default timeout of a call.
	TimeoutMs float64 `yaml:"timeoutMs" valid:"a positive finite number"`
	// MaxTimeoutMs caps requested timeouts (a larger request is clamped).
	MaxTimeoutMs float64 `yaml:"maxTimeoutMs" valid:"a positive finite number"`
	// MaxOutputBytes is the in-memory tail kept per stream.
	MaxOutputBytes float64 `yaml:"maxOutputBytes" valid:"a positive finite number"`
	// MaxSpillBytes caps each stream's spill file.
	MaxSpillBytes float64 `yaml:"maxSpillBytes" valid:"a positive finite number"`
	// GraceMs is the time between SIGTERM and SIGKILL, and the drain bound after the
	// leader exits.
	GraceMs float64 `yaml:"graceMs" valid:"a positive finite number"`
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

// Check validates c: a key that is not a positive finite number is "<key> must be a
// positive finite number"; graceMs above 2147483647 is "graceMs must be no greater
// than 2147483647"; a default timeoutMs above maxTimeoutMs (it would be clamped on every
// call) is "timeoutMs (<t>) must be no greater than maxTimeoutMs (<m>)". The container
// prefixes a plugin's config errors with its name ("bash-local: …"); New prefixes them
// with Options.Name.
func (c Config) Check() error {
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
			return fmt.Errorf("%s must be a positive finite number", f.key)
		}
	}
	if c.GraceMs > maxGraceMs {
		return fmt.Errorf("graceMs must be no greater than %d", maxGraceMs)
	}
	if c.TimeoutMs > c.MaxTimeoutMs {
		return fmt.Errorf("timeoutMs (%v) must be no greater than maxTimeoutMs (%v)", c.TimeoutMs, c.MaxTimeoutMs)
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
