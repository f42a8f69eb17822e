package profile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/knadh/koanf/v2"
)

// maxProfileBytes bounds a profile file: a profile is a page of YAML, and a path that
// names something endless (a log, a growing file) must not take the harness's memory.
const maxProfileBytes = 16 << 20

// regularFile is a koanf.Provider of the bytes of the profile file at path.
type regularFile string

// ReadBytes reads the file without ever waiting: the open is non-blocking (a named pipe
// at the path would otherwise block it until a writer comes, freezing every later reload
// and the shutdown), and anything but a regular file is an error, before any read.
func (path regularFile) ReadBytes() ([]byte, error) {
	f, err := os.OpenFile(string(path), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s): a profile must be a regular file", fileKind(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxProfileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxProfileBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a profile", maxProfileBytes>>20)
	}
	return data, nil
}

// Read is not used: profiles are parsed from bytes.
func (path regularFile) Read() (map[string]any, error) {
	return nil, fmt.Errorf("profile: %s: Read is not supported", string(path))
}

var _ koanf.Provider = regularFile("")

// fileKind names the type of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	}
	return "type " + m.Type().String()
}
