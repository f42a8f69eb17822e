package subprocess

import (
	"bytes"
	"encoding/binary"
	"errors"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// groupAlive reports whether process group pgid still has a member that is not a
// zombie. kill(-pgid, 0) alone is not enough: it succeeds for a group whose only members
// are unreaped zombies (an init that does not reap leaves those forever), so a positive
// probe is confirmed by a scan of /proc. (A tree's own leader is such a zombie until the
// Supervisor releases it.)
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return liveGroups()[pgid]
}

// liveGroups returns the process groups that have at least one non-zombie member. It
// reads /proc through raw descriptors and fixed buffers: the sweep runs it for every
// batch of settled process-group commands, and it must cost little per process.
func liveGroups() map[int]bool {
	out := map[int]bool{}
	dir, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out
	}
	defer unix.Close(dir)
	var dents [8 << 10]byte
	var path [32]byte
	var stat [512]byte
	for {
		n, err := unix.Getdents(dir, dents[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return out
		}
		for off := 0; off+19 < n; {
			// struct linux_dirent64: d_ino, d_off (8 bytes each), d_reclen (2), d_type (1), d_name.
			reclen := int(binary.NativeEndian.Uint16(dents[off+16:]))
			if reclen <= 19 || off+reclen > n {
				break
			}
			name := dents[off+19 : off+reclen]
			off += reclen
			if len(name) == 0 || name[0] < '1' || name[0] > '9' {
				continue
			}
			if end := bytes.IndexByte(name, 0); end >= 0 {
				name = name[:end]
			}
			if len(name)+len("/stat\x00") > len(path) {
				continue
			}
			p := append(append(path[:0], name...), "/stat\x00"...)
			fd, err := openat(dir, &p[0])
			if err != nil {
				continue // exited meanwhile
			}
			m, _ := unix.Read(fd, stat[:])
			unix.Close(fd)
			if m <= 0 {
				continue
			}
			if _, pgrp, state, ok := parseStat(stat[:m]); ok && state != 'Z' && state != 'X' {
				out[pgrp] = true
			}
		}
	}
}

// openat opens the NUL-terminated relative path at p below dir, read-only, without the
// string conversion (and allocation) of unix.Openat.
func openat(dir int, p *byte) (int, error) {
	fd, _, e := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dir), uintptr(unsafe.Pointer(p)), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// parseStat parses the contents of /proc/<pid>/stat: ppid, process group and state letter.
func parseStat(data []byte) (ppid, pgrp int, state byte, ok bool) {
	// The command name may contain spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0, 0, 0, false
	}
	fields := data[i+2:]
	var f [3][]byte
	for k := range f {
		fields = bytes.TrimLeft(fields, " ")
		end := bytes.IndexByte(fields, ' ')
		if end < 0 {
			end = len(fields)
		}
		f[k], fields = fields[:end], fields[end:]
	}
	ppid, ok1 := atoi(f[1])
	pgrp, ok2 := atoi(f[2])
	if !ok1 || !ok2 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	return ppid, pgrp, f[0][0], true
}

// atoi parses a non-negative decimal number.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
