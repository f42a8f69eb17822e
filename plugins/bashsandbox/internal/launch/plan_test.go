package launch

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden plans in testdata/plans")

// The plans of a few Setups (and Starts), exactly: testdata/plans/<name>.golden holds
// each, one operation a line (go test -run TestPlans -update rewrites them).
func TestPlans(t *testing.T) {
	const (
		ws    = "/home/u/proj"
		tmp   = "/tmp/dsh-sandbox-7-ab/s1/tmp"
		stage = "/tmp/dsh-sandbox-7-ab/s1/stage"
		spill = "/var/spill/dsh-spill-7-cd/s-1"
	)
	base := Setup{Namespaces: true, Network: NetworkDeny, Workspace: ws, TempDir: tmp, Stage: stage}
	with := func(edit func(*Setup)) *Setup {
		s := base
		edit(&s)
		return &s
	}
	cases := []struct {
		name string
		plan plan
	}{
		{"landlock-only", setupPlan(with(func(s *Setup) {
			s.Namespaces = false
			s.Protect = []string{ws + "/.git"}
		}))},
		{"workspace", setupPlan(&base)},
		{"network-allowed", setupPlan(with(func(s *Setup) { s.Network = NetworkAllow }))},
		{"no-workspace", setupPlan(with(func(s *Setup) { s.Workspace = "" }))},
		// A bounded private /tmp and /dev/shm: tmpfs mounts of TmpSize, no host
		// directory behind /tmp.
		{"tmp-size", setupPlan(with(func(s *Setup) { s.TmpSize = 1 << 30 }))},
		// Writable roots inside the workspace and beside it; the spill root and the temp
		// dir masked, the session's spill directory shown through the first; protected
		// paths at a root, deep in one (their directories anchored), in the innermost of
		// two, and outside every root; masked files.
		{"full", setupPlan(with(func(s *Setup) {
			s.WritableRoots = []string{"/data", ws + "/build"}
			s.MaskDirs = []string{"/var/spill", "/tmp"}
			s.Spill = spill
			s.Protect = []string{ws + "/.git", ws + "/.dsh", ws + "/cfg/profiles/dsh.yaml", ws + "/build/.git", "/home/u/.dsh"}
			s.MaskFiles = []string{"/home/u/.dsh/serve-token", ws + "/secrets/token"}
		}))},
		// The spill root inside the workspace: masked with its directories anchored,
		// the spill directory shown through it.
		{"spill-root-in-workspace", setupPlan(with(func(s *Setup) {
			s.MaskDirs = []string{ws + "/.cache/spill"}
			s.Spill = ws + "/.cache/spill/dsh-spill-7-cd/s-1"
		}))},
		// The session logs' directory masked, the session's own log shown through it.
		{"session-log", setupPlan(with(func(s *Setup) {
			s.MaskDirs = []string{"/home/u/.dsh/sessions"}
			s.ShowFiles = []string{"/home/u/.dsh/sessions/s-1.jsonl"}
			s.Protect = []string{"/home/u/.dsh"}
		}))},
		// Before a command: what appeared since (a .git, a profile deep in a root) and
		// the masked files, whatever the roots.
		{"update", updatePlan([]string{ws, "/data"}, nil, []string{ws + "/.git", "/data/a/b/profile.yaml", "/etc/dsh.yaml"}, []string{"/home/u/.dsh/serve-token"})},
		{"update-nothing", updatePlan([]string{ws}, nil, nil, nil)},
		// Another dsh's directories, one beside the roots and one in the workspace
		// (anchored), masked and sealed before the rest.
		{"update-other-dsh", updatePlan([]string{ws, "/data"}, []string{"/var/tmp/other", ws + "/t/dsh-spill-9-ef"}, []string{ws + "/.git"}, nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.plan.text()
			path := filepath.Join("testdata", "plans", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestPlans -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("plan %s:\n%s\nwant (%s):\n%s", tc.name, got, path, want)
			}
			checkPlan(t, tc.plan)
		})
	}
}

// checkPlan checks what apply relies on: the host's trees are copied before the pivot
// and none after it; every tree is made once and mounted once, after it is made.
func checkPlan(t *testing.T, p plan) {
	t.Helper()
	made, mounted := map[int]bool{}, map[int]bool{}
	pivoted := false
	mount := func(n int) {
		if !made[n] || mounted[n] {
			t.Errorf("tree #%d mounted before it is made, or twice", n)
		}
		mounted[n] = true
	}
	for _, o := range p {
		switch o.kind {
		case opClone, opClonePinned, opCloneFile:
			if pivoted || made[o.tree] {
				t.Errorf("clone of %s as #%d after the pivot, or into a tree made already", o.path, o.tree)
			}
			made[o.tree] = true
		case opPivot:
			pivoted = true
		case opAttach, opShowSpill, opShowFile:
			mount(o.tree)
		case opDev:
			for _, n := range o.trees {
				mount(n)
			}
		}
	}
	for n := range made {
		if !mounted[n] {
			t.Errorf("tree #%d is never mounted", n)
		}
	}
}

// text is the plan, one operation a line.
func (p plan) text() string {
	var b strings.Builder
	for _, o := range p {
		b.WriteString(strings.TrimRight(o.text(), " ") + "\n")
	}
	return b.String()
}

func (o op) text() string {
	name := map[opKind]string{
		opPrivate: "private", opClone: "clone", opClonePinned: "clone", opAttach: "attach", opPivot: "pivot",
		opBlank: "blank", opDev: "dev", opProc: "proc", opLoopback: "loopback", opMaskDir: "mask-dir", opMaskCgroups: "mask-cgroups",
		opShowSpill: "show-spill", opSeal: "seal", opProtect: "protect", opMaskFile: "mask-file",
		opCloneFile: "clone-file", opShowFile: "show-file", opTmpfs: "tmpfs",
	}[o.kind]
	line := fmt.Sprintf("%-10s %s", name, o.path)
	switch o.kind {
	case opClone, opClonePinned, opCloneFile:
		line += fmt.Sprintf(" -> #%d %s", o.tree, attrsText(o.attrs))
		if o.pinned != 0 {
			line += " " + map[pinnedDir]string{pinnedWorkspace: "(pinned workspace)", pinnedSpill: "(pinned spill directory)"}[o.pinned]
		}
		if o.optional {
			line += " (if present)"
		}
	case opAttach, opShowSpill, opShowFile:
		line += fmt.Sprintf(" <- #%d", o.tree)
		if o.mkdir {
			line += " (mkdir)"
		}
	case opDev:
		for _, n := range o.trees {
			line += fmt.Sprintf(" #%d", n)
		}
		if o.size > 0 {
			line += fmt.Sprintf(" (shm size %d)", o.size)
		}
	case opTmpfs:
		line += fmt.Sprintf(" size %d", o.size)
	case opProtect, opMaskDir:
		if o.root == "" {
			line += " (in no writable root)"
		} else {
			line += " in " + o.root
		}
		if len(o.anchor) > 0 {
			line += " anchor " + strings.Join(o.anchor, " ")
		}
	}
	return line
}

func attrsText(a uint64) string {
	var out []string
	for _, f := range []struct {
		bit  uint64
		name string
	}{{mountAttrRdonly, "ro"}, {mountAttrNosuid, "nosuid"}, {mountAttrNodev, "nodev"}, {mountAttrNoexec, "noexec"}} {
		if a&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	if len(out) == 0 {
		return "rw"
	}
	return strings.Join(out, ",")
}
