package cli

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/proc"
)

// keptSpillAge is how long `dsh call` keeps the spill files it preserved, and
// keptSpillCap how many bytes of them at most (the oldest go first), as much as a
// subprocess spool's default budget.
const (
	keptSpillAge       = 7 * 24 * time.Hour
	keptSpillCap int64 = proc.DefaultSpillBudgetBytes
)

// keptSpillName is the shape of the names keptName gives; pruning touches nothing else.
var keptSpillName = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}-[0-9a-f]{16}-[0-9A-Za-z._-]+$`)

// spoolHolder is a service that captures output through a Spool of its own.
type spoolHolder interface{ Spool() *proc.Spool }

// preserveSpills keeps the spill files of the call session ran, which its end would
// delete, in dir and rewrites the result's references to them, so that the path printed
// is a file that exists. It acts only on the files the capture of this session reported,
// through the spools that hold them — never on a path found in the result text, which
// the command wrote. A reported file that cannot be kept is shown as (unavailable).
// Files that earlier calls kept in dir are pruned: those older than keptSpillAge, then
// the oldest until all of them fit in keptSpillCap.
func preserveSpills(res *tools.Result, rt *container.Runtime, session, dir string) {
	kept := keepSessionSpills(rt, session, dir)
	if len(kept) == 0 {
		return
	}
	pruneKept(dir, keptSpillAge, keptSpillCap, kept)
	rewriteSpillPaths(res, kept)
}

// keepSessionSpills moves the session's spill files out of every spool that holds them.
func keepSessionSpills(rt *container.Runtime, session, dir string) []proc.KeptSpill {
	stamp := time.Now().UTC().Format("20060102T150405") + "-" + newSessionID() + "-"
	var holders []spoolHolder
	if sup, ok := container.Lookup(rt, subprocess.Service); ok {
		holders = append(holders, sup)
	}
	if host, ok := container.Lookup(rt, ssh.Service); ok {
		holders = append(holders, host)
	}
	var kept []proc.KeptSpill
	for _, h := range holders {
		kept = append(kept, h.Spool().Keep(session, dir, func(name string) string { return stamp + name })...)
	}
	return kept
}

// rewriteSpillPaths replaces each kept file's reported path by its new one, in the text
// and in the structured value ("(unavailable)" and "" for a file that was not kept).
func rewriteSpillPaths(res *tools.Result, kept []proc.KeptSpill) {
	for _, k := range kept {
		res.Text = strings.ReplaceAll(res.Text, k.From, cmp.Or(k.To, "(unavailable)"))
	}
	if res.Value == nil {
		return
	}
	data, err := json.Marshal(res.Value)
	if err != nil {
		return
	}
	s := string(data)
	for _, k := range kept {
		from, _ := json.Marshal(k.From)
		to, _ := json.Marshal(k.To)
		s = strings.ReplaceAll(s, string(from), string(to))
	}
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		res.Value = v
	}
}

// pruneKept removes the files earlier calls kept in dir (named as keptSpillName says):
// those older than age, then the oldest until the kept files, these included, total at
// most capBytes. The files this call just kept (fresh) stay whatever their size: their
// paths are in the result. Nothing else in dir is touched.
func pruneKept(dir string, age time.Duration, capBytes int64, fresh []proc.KeptSpill) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type keptFile struct {
		name string
		info os.FileInfo
	}
	var old []keptFile
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() || !keptSpillName.MatchString(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		switch {
		case slices.ContainsFunc(fresh, func(k proc.KeptSpill) bool { return k.To == path }):
			total += info.Size()
		case time.Since(info.ModTime()) > age:
			os.Remove(path)
		default:
			old = append(old, keptFile{e.Name(), info})
			total += info.Size()
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].info.ModTime().Before(old[j].info.ModTime()) })
	for _, f := range old {
		if total <= capBytes {
			return
		}
		if os.Remove(filepath.Join(dir, f.name)) == nil {
			total -= f.info.Size()
		}
	}
}
