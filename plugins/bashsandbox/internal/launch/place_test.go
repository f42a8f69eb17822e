//go:build linux

package launch

import (
	"os"
	"strings"
	"testing"
)

// The probe of holding a command at its exec: a traced child stops at its exec here,
// unless Yama forbids every ptrace.
func TestHoldAtExec(t *testing.T) {
	b, _ := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	want := strings.TrimSpace(string(b)) != "3"
	if got := HoldAtExec(); got != want {
		t.Fatalf("HoldAtExec() = %v, want %v (Yama ptrace_scope %q; another security module may forbid ptrace here)", got, want, b)
	}
	if HoldAtExec() != want {
		t.Fatal("the probe changed its mind")
	}
}

// The cgroup v2 mounts a box masks are read from mountinfo: the mount point (field 5,
// octal escapes undone) of each line whose file system type, after the optional fields
// and their " - " separator, is cgroup2.
func TestMountinfoFields(t *testing.T) {
	for _, tc := range []struct{ line, point, fstype string }{
		{"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw", "/sys/fs/cgroup/unified", "cgroup2"},
		{"35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate", "/sys/fs/cgroup", "cgroup2"},
		{"50 35 0:30 /user.slice /var/lib/my\\040cgroups rw master:1 - cgroup2 cgroup2 rw", "/var/lib/my cgroups", "cgroup2"},
		{"42 31 0:39 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory", "/sys/fs/cgroup/memory", "cgroup"},
		{"garbage", "", ""},
	} {
		if p, f := mountinfoFields(tc.line); p != tc.point || f != tc.fstype {
			t.Errorf("%q: %q %q, want %q %q", tc.line, p, f, tc.point, tc.fstype)
		}
	}
}
