package bashsandbox_test

// A confined command cannot leave its command's cgroup (docs/sandbox.md, "No
// privilege"): clone3 with CLONE_INTO_CGROUP finds no cgroup to go to, or fails with
// ENOSYS, and no cgroup.procs is writable, so the timeout (and the abort, the kill,
// every limit of its cgroup) reaches everything it starts — on both backends.

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

func TestConfinedStaysInItsCgroup(t *testing.T) {
	forBackendsAndModes(t, func(t *testing.T, st *stack, s *container.Session, ws string) {
		// On the namespace backend no cgroup directory is in sight (the cgroup file
		// systems are masked: nothing to open, or an empty tmpfs where the cgroup file
		// system's root was); on the Landlock-only one clone3 is refused and Landlock
		// keeps every cgroup.procs out of the writable set.
		clone3, procs := []string{"no such file or directory", "bad file descriptor"}, []string{"no such file or directory", "read-only file system"}
		if isLandlockOnly(t, st) {
			clone3, procs = []string{"function not implemented"}, []string{"permission denied"}
		}
		if got := attackLine(t, st, s, "clone3-cgroup"); !slices.Contains(clone3, got) {
			t.Errorf("clone3(CLONE_INTO_CGROUP): %q, want one of %q", got, clone3)
		}
		if got := attackLine(t, st, s, "cgroup-procs"); !slices.Contains(procs, got) {
			t.Errorf("writing the parent cgroup's cgroup.procs: %q, want one of %q", got, procs)
		}
		// The command runs in a cgroup of its own, not its box's (where the harness
		// has cgroups: as root here).
		box := onlyBox(t, st)
		own := strings.TrimSpace(st.bash(t, s, "grep ^0:: /proc/self/cgroup").Text)
		boxes, _ := os.ReadFile("/proc/" + strconv.Itoa(box) + "/cgroup")
		if boxCgroup := cgroupLine(string(boxes)); boxCgroup != "0::/" {
			if own == boxCgroup || filepath.Dir(own) != filepath.Dir(boxCgroup) {
				t.Errorf("the command's cgroup %q, its box's %q", own, boxCgroup)
			}
		}
		// What a command starts dies with it at its timeout, whatever it tried.
		res := st.bash(t, s, helper(t)+" clone3-cgroup linger; "+helper(t)+" cgroup-procs; exec sleep 60", "timeoutMs", 1000)
		waitFor(t, "nothing left of the timed-out command", func() bool { return len(descendants(box)) == 0 })
		if !strings.HasPrefix(res.Text, clone3[0]+"\n") && !strings.HasPrefix(res.Text, clone3[len(clone3)-1]+"\n") || !strings.Contains(res.Text, "\n[timed out after 1000ms]\n") {
			t.Fatalf("the timed-out call: %q", res.Text)
		}
	})
}

// isLandlockOnly reports whether the stack's executor runs on the Landlock-only
// backend.
func isLandlockOnly(t *testing.T, st *stack) bool {
	return strings.Contains(bashDetail(t, st), " only (")
}

// onlyBox is the pid of the stack's one box.
func onlyBox(t *testing.T, st *stack) int {
	t.Helper()
	sup, _ := container.Lookup(st.rt, subprocess.Service)
	pids := bashsandbox.BoxPids(sup)
	if len(pids) != 1 {
		t.Fatalf("boxes: %v", pids)
	}
	return pids[0]
}

// cgroupLine is the cgroup v2 line ("0::<path>") of a /proc/<pid>/cgroup text.
func cgroupLine(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "0::") {
			return line
		}
	}
	return ""
}

// descendants are the live descendants of pid (its children's children too).
func descendants(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}
