package launch

// showFiles adds to a Setup's plan, through clone, the copies of the files it shows
// (before the pivot; each only if present) and returns the operations that show them
// (after the masked directories are covered).
func showFiles(m *Setup, clone func(op) int) []op {
	var show []op
	for _, f := range m.ShowFiles {
		t := clone(op{kind: opCloneFile, path: f, attrs: attrsSpillCopy, optional: true})
		show = append(show, op{kind: opShowFile, path: f, tree: t})
	}
	return show
}
