package subprocess

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// groupAlive reports whether process group pgid still has a member that is not a
// zombie. kill(-pgid, 0) alone is not enough: it succeeds for a group whose only members
// are unreaped zombies (an init that does not reap leaves those forever), so a positive
// probe is confirmed by a scan of /proc.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return liveGroups()[pgid]
}

// liveGroups returns the process groups that have at least one non-zombie member.
func liveGroups() map[int]bool {
	out := map[int]bool{}
	d, err := os.Open("/proc")
	if err != nil {
		return out
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var buf [512]byte
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		_, pgrp, state, ok := readStat(name, buf[:])
		if ok && state != 'Z' && state != 'X' {
			out[pgrp] = true
		}
	}
	return out
}

// readStat parses /proc/<pid>/stat: ppid, process group and state letter.
func readStat(pid string, buf []byte) (ppid, pgrp int, state byte, ok bool) {
	f, err := os.Open("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	n, _ := f.Read(buf)
	f.Close()
	data := buf[:n]
	// The command name may contain spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0, 0, 0, false
	}
	fields := bytes.Fields(data[i+2:])
	if len(fields) < 3 {
		return 0, 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(fields[1]))
	pgrp, err2 := strconv.Atoi(string(fields[2]))
	if err1 != nil || err2 != nil || len(fields[0]) != 1 {
		return 0, 0, 0, false
	}
	return ppid, pgrp, fields[0][0], true
}
