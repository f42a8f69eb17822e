package proc

import "testing"

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int64
		err  bool
	}{
		{uint64(1048576), 1 << 20, false},
		{int64(4096), 4096, false},
		{float64(1.5 * (1 << 30)), 3 << 29, false},
		{"512MiB", 512 << 20, false},
		{"1.5 GiB", 3 << 29, false},
		{"64KiB", 64 << 10, false},
		{"2TiB", 2 << 40, false},
		{"1000", 1000, false},
		{" 1GiB ", 1 << 30, false},
		{"1GB", 0, true}, // decimal units are not binary ones: refused, not guessed
		{"1 MB", 0, true},
		{"MiB", 0, true},
		{"", 0, true},
		{"-1MiB", 0, true},
		{"0x10", 0, true},
		{"1e3", 0, true},
		{"NaN", 0, true},
		{float64(0.5), 0, true},
		{int64(-5), 0, true},
		{true, 0, true},
		{"8EiB", 0, true},
	} {
		got, err := ParseBytes(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBytes(%#v) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		512 << 20:       "512 MiB",
		2 << 30:         "2 GiB",
		3 << 29:         "1.5 GiB",
		64 << 20:        "64 MiB",
		1000:            "1000 B",
		1536:            "1.5 KiB",
		100000000:       "95.37 MiB",
		(1 << 30) + 1:   "1 GiB",
		5 << 40:         "5 TiB",
		1<<30 + 1<<28:   "1.25 GiB",
		1<<20 - 1<<10:   "1023 KiB",
		1<<40 + 1<<30:   "1 TiB",
		1<<30 - 1<<20:   "1023 MiB",
		1<<30*3 + 1<<20: "3 GiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// The words of each limit, as the bash tool's markers and a job's outcome carry them.
func TestLimitHitWords(t *testing.T) {
	for h, want := range map[LimitHit]string{
		{LimitMemory, 64 << 20}:       "killed: memory limit of 64 MiB reached",
		{LimitSessionMemory, 3 << 29}: "killed: session memory limit of 1.5 GiB reached",
		{LimitProcesses, 50}:          "process limit of 50 reached: new processes were refused",
		{LimitSessionProcesses, 4096}: "session process limit of 4096 reached: new processes were refused",
	} {
		if got := h.Words(); got != want {
			t.Errorf("%+v: %q, want %q", h, got, want)
		}
		if h.Killed() != (h.Limit == LimitMemory || h.Limit == LimitSessionMemory) {
			t.Errorf("%+v: Killed %v", h, h.Killed())
		}
	}
}
