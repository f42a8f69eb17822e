package launch

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// allowedImports are packages that the Go runtime's start-up initialises before package
// os anyway (or that have no initialisation at all and are imported by those). Anything
// else — encoding/json, strings, path/filepath, os/exec, fmt, golang.org/x/sys/unix,
// go-landlock — would postpone this package's initialisation, and with it the
// launcher's dispatch, behind dozens of other packages of the binary (see the package
// documentation and bashsandbox's TestBoxDispatchedEarly).
var allowedImports = map[string]bool{
	"errors": true, "os": true, "runtime": true, "strconv": true, "sync": true,
	"syscall": true, "time": true, "unicode/utf8": true, "unicode/utf16": true, "unsafe": true,
}

func TestImportsStayMinimal(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowedImports[path] {
				t.Errorf("%s imports %q: the sandbox must import only %v", name, path, keys(allowedImports))
			}
		}
	}
	if n == 0 {
		wd, _ := os.Getwd()
		t.Fatalf("no source files in %s", wd)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
