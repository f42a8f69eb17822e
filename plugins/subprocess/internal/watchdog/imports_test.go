package watchdog

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The watchdog is dispatched from init, right after package os is initialised; any
// other import (fmt, strings, x/sys/unix…) would postpone it behind other packages'
// initialisation. (Package sync is one of os's own imports.)
func TestImportsStayMinimal(t *testing.T) {
	allowed := map[string]bool{"os": true, "sync": true, "syscall": true, "unsafe": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !allowed[path] {
				t.Errorf("%s imports %q; the watchdog may import only os, sync, syscall and unsafe", name, path)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source files")
	}
}

func TestWatchParsesMessages(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.WriteString("+12\n+13\n-12\n+x\n+1\n+0\n-99\n+1234567890123\n+" + strings.Repeat("7", 40) + "\n+14")
		w.WriteString("\nd/sys/fs/cgroup/pids/dsh-1-ab\ndrelative\nd" + strings.Repeat("/x", MaxDir) + "\n")
		w.WriteString("crelative\nc/sys/fs/cgroup/unified/dsh-1-ab\nc" + strings.Repeat("/y", MaxDir) + "\n")
		w.WriteString("\n+15") // no newline: ignored at EOF
		w.Close()
	}()
	got, dirs, cgroup := watch(r)
	if len(got) != 2 || !got[13] || !got[14] {
		t.Errorf("groups %v; want 13 and 14", got)
	}
	// A line too long is dropped whole: a cut path could name another directory.
	if len(dirs) != 1 || dirs[0] != "/sys/fs/cgroup/pids/dsh-1-ab" {
		t.Errorf("dirs %q; want the pids directory alone", dirs)
	}
	if cgroup != "/sys/fs/cgroup/unified/dsh-1-ab" {
		t.Errorf("cgroup %q; want the one absolute path that fits", cgroup)
	}
}
