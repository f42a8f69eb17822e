package launch

import (
	"strconv"
	"syscall"
)

// check answers Check m from a prepared thread, which it confines to m.Policy first,
// like a command's (it dies with the answer).
func (s *box) check(m Check) {
	r := Reply{Type: MsgChecked, ID: m.ID}
	if m.Policy.Network != s.network {
		r.Op, r.Message = "confine", "the check's network policy "+strconv.Quote(m.Policy.Network)+" is not the sandbox's "+strconv.Quote(s.network)
		s.conn.Send(r.Encode())
		return
	}
	if err := m.Policy.Validate(); err != nil {
		r.Op, r.Message = "confine", err.Error()
		s.conn.Send(r.Encode())
		return
	}
	rs, flags, rerr := s.rulesets.get(m.Policy)
	s.threads.run(func(prepared error) {
		err := prepared
		if err == nil {
			err = rerr
		}
		r.Errno, r.Op, r.Message = confinedCreate(m.Dir, rs, flags, err)
		s.conn.Send(r.Encode())
	})
}

// confinedCreate checks that dir is writable, confines the calling thread to ruleset rs,
// and tries to create a file in dir: errno is the creation's error (0: the file was made,
// and is removed again); op and msg name a step that failed before it.
func confinedCreate(dir string, rs int, flags uint32, prepared error) (errno int, op, msg string) {
	if prepared != nil {
		return 0, "confine", prepared.Error()
	}
	// Landlock does not restrict access(2): this says whether the directory is
	// writable unconfined, so that a refusal below is the confinement's.
	if err := syscall.Faccessat(atFdcwd, dir, 2 /* W_OK */, 0); err != nil {
		return 0, "access", dir + ": " + err.Error()
	}
	if err := restrictThread(rs, flags); err != nil {
		return 0, "confine", err.Error()
	}
	name := dir + "/.dsh-check-" + strconv.Itoa(syscall.Gettid())
	fd, err := syscall.Open(name, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		syscall.Close(fd)
		syscall.Unlink(name)
		return 0, "create", ""
	}
	if e, ok := err.(syscall.Errno); ok {
		return int(e), "create", ""
	}
	return 0, "create", err.Error()
}
