package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// fullOutputRef finds the spill paths a result text points the reader at.
var fullOutputRef = regexp.MustCompile(`full output: ([^\]\n]+)\]`)

// keptSpillAge is how long `dsh call` keeps the spill files it preserved.
const keptSpillAge = 7 * 24 * time.Hour

// preserveSpills moves the spill files res refers to out of the subprocess service's
// private directory — which goes away with the harness when `dsh call` exits — into
// dir, and rewrites the references, so the path printed is a file that exists. Files
// there older than keptSpillAge are pruned first. A file that cannot be kept is reported
// as (unavailable), never as a path that will not exist.
func preserveSpills(res *tools.Result, dir string) {
	refs := fullOutputRef.FindAllStringSubmatch(res.Text, -1)
	if len(refs) == 0 {
		return
	}
	pruneOld(dir, keptSpillAge)
	moved := map[string]string{}
	for _, m := range refs {
		for _, p := range strings.Split(m[1], ", ") {
			if p == "(unavailable)" || moved[p] != "" {
				continue
			}
			moved[p] = "(unavailable)"
			if kept, err := keep(p, dir); err == nil {
				moved[p] = kept
			}
		}
	}
	for from, to := range moved {
		res.Text = strings.ReplaceAll(res.Text, from, to)
	}
	if res.Value != nil {
		if data, err := json.Marshal(res.Value); err == nil {
			s := string(data)
			for from, to := range moved {
				if to == "(unavailable)" {
					to = ""
				}
				f, _ := json.Marshal(from)
				t, _ := json.Marshal(to)
				s = strings.ReplaceAll(s, string(f), string(t))
			}
			var v any
			if json.Unmarshal([]byte(s), &v) == nil {
				res.Value = v
			}
		}
	}
}

// keep moves (or, across file systems, copies) path into dir under a unique name.
func keep(path, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", time.Now().UTC().Format("20060102T150405"), newSessionID(), filepath.Base(path)))
	if err := os.Rename(path, dst); err == nil {
		return dst, nil
	}
	in, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return "", err
	}
	return dst, out.Close()
}

func pruneOld(dir string, age time.Duration) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.Type().IsRegular() && time.Since(info.ModTime()) > age {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
