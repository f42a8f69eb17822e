package subprocess

import (
	"errors"
	"syscall"

	"github.com/dsh-dev/dsh/proc"
)

// cgroupFault reports whether an error of a spawn into a cgroup, or of making the
// cgroup, may mean that the cgroup cannot be used at all (no clone3, a cgroup that
// refuses new members, no permission, a read-only or vanished hierarchy). A shortage
// (EAGAIN, ENOMEM, EMFILE…) is transient and says nothing about the cgroup; errors
// that can equally be the program's or the directory's (ENOENT, EACCES…) are told
// apart by a retry without the cgroup.
func cgroupFault(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EACCES, syscall.EPERM, syscall.ENOENT, syscall.EROFS, syscall.EBADF, syscall.EINVAL,
		syscall.ENOSYS, syscall.EOPNOTSUPP, syscall.EBUSY, syscall.ENODEV:
		return true
	}
	return false
}

// maxCgroupFailures is how many spawns in a row the cgroup must fail, with a cgroup
// fault, before the Supervisor stops using cgroups: one failure may be a passing state
// of the hierarchy, and each failed command still runs (under its process group).
const maxCgroupFailures = 3

// cgroupFailed counts a spawn the cgroup failed with a cgroup fault; after
// maxCgroupFailures in a row the Supervisor falls back to process groups.
func (s *Supervisor) cgroupFailed(what string, err error) {
	s.mu.Lock()
	s.cgFailures++
	n := s.cgFailures
	s.mu.Unlock()
	reason := what + ": " + proc.ErrnoText(err)
	if n < maxCgroupFailures {
		s.log.Warn("subprocess: no cgroup for this command; it runs under its process group only", "err", reason)
		return
	}
	s.disableCgroups(reason)
}

// cgroupWorked ends a run of cgroup failures.
func (s *Supervisor) cgroupWorked() {
	s.mu.Lock()
	s.cgFailures = 0
	s.mu.Unlock()
}

// usesCgroups reports whether new trees get a cgroup v2 directory of their own.
func (s *Supervisor) usesCgroups() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cgRoot != nil
}

// newCgroup is a cgroup v2 directory for command id (see cgroupRoot.get), or nil when
// commands get none.
func (s *Supervisor) newCgroup(id uint64, counted bool) (*cgroup, *cgroupRoot) {
	s.mu.Lock()
	root := s.cgRoot
	s.mu.Unlock()
	if root == nil {
		return nil, nil
	}
	cg, err := root.get(id, counted)
	if err != nil {
		if cgroupFault(err) {
			s.cgroupFailed("cannot make a cgroup", err)
		} else {
			s.log.Warn("subprocess: no cgroup for this command; it runs under its process group only", "err", err)
		}
		return nil, nil
	}
	return cg, root
}

func (s *Supervisor) disableCgroups(reason string) {
	s.mu.Lock()
	if s.cgRoot == nil {
		s.mu.Unlock()
		return
	}
	s.isolation = "process group only (" + reason + ")"
	iso := s.isolation
	// The root directory stays until Close: trees spawned before keep their cgroups.
	s.cgRoot = nil
	s.cgFailures = 0
	s.mu.Unlock()
	s.log.Warn("subprocess: falling back to process-group isolation", "reason", reason)
	if s.opts.OnIsolationChange != nil {
		s.opts.OnIsolationChange(iso)
	}
}
