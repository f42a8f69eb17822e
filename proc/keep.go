package proc

import (
	"errors"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// KeptSpill is one spill file Keep took out of the spool: From is the path the capture
// reported, To where the file is now ("" when it could be neither moved nor copied).
type KeptSpill struct{ From, To string }

// Keep takes the complete spill files of owner's closed streams out of the spool into
// dir (created 0700 when missing), each under the name rename(its name), so that they
// outlive the spool (`dsh call` keeps the files of its one call this way). It acts only
// on files this spool created and still holds: the source is reached through the owner
// directory's descriptor, never by a path, and the destination is created exclusively,
// without following a symlink. A file that cannot be moved (another file system) is
// copied, then deleted. Kept files leave the spool: their paths are not reported again
// and the budget no longer counts them. The kept files' modification time is now.
func (sp *Spool) Keep(owner, dir string, rename func(name string) string) []KeptSpill {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	o := sp.owners[owner]
	if o == nil || sp.closed || o.fd < 0 {
		return nil
	}
	var mine []*spillFile
	for _, f := range sp.retired {
		if f.owner == o {
			mine = append(mine, f)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	dstFD, dirErr := openKeepDir(dir)
	if dirErr == nil {
		defer unix.Close(dstFD)
	}
	kept := make([]KeptSpill, 0, len(mine))
	for _, f := range mine {
		k := KeptSpill{From: f.path}
		if dirErr == nil {
			if name := rename(f.name); sp.keepLocked(f, dstFD, name) == nil {
				k.To = dir + "/" + name
			}
		}
		kept = append(kept, k)
	}
	return kept
}

// openKeepDir opens dir (made 0700 when missing) without following a final symlink.
func openKeepDir(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return -1, err
	}
	return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// keepLocked moves (or copies) the retired file f to name in the directory dstFD and
// withdraws it from the spool.
func (sp *Spool) keepLocked(f *spillFile, dstFD int, name string) error {
	o := f.owner
	moved := unix.Renameat2(o.fd, f.name, dstFD, name, unix.RENAME_NOREPLACE)
	if moved != nil {
		if err := copyAt(o.fd, f.name, dstFD, name); err != nil {
			return err
		}
	}
	_ = unix.UtimesNanoAt(dstFD, name, nil, unix.AT_SYMLINK_NOFOLLOW)
	if i := slices.Index(sp.retired, f); i >= 0 {
		sp.retired = slices.Delete(sp.retired, i, i+1)
		sp.reclaimable -= f.size
	}
	if moved != nil {
		sp.deleteLocked(f) // the copy is kept: remove the original
		return nil
	}
	// Renamed: the file is no longer the spool's. It is marked gone before anything
	// else, as deleteLocked does, so its old path is never reported again.
	f.gone.Store(true)
	delete(sp.files, f)
	sp.release(f.size)
	o.files--
	sp.forgetOwnerLocked(o)
	return nil
}

// copyAt copies the file name in srcDir to a new file name in dstDir (mode 0600),
// neither followed through a symlink; a partial copy is removed.
func copyAt(srcDir int, srcName string, dstDir int, dstName string) error {
	in, err := unix.Openat(srcDir, srcName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(in), srcName)
	defer src.Close()
	out, err := unix.Openat(dstDir, dstName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(out), dstName)
	_, err = io.Copy(dst, src)
	err = errors.Join(err, dst.Close())
	if err != nil {
		_ = unix.Unlinkat(dstDir, dstName, 0)
	}
	return err
}
