//go:build !linux

package launch

import "errors"

// KernelABI is 0: Landlock exists only on Linux.
func KernelABI() int { return 0 }

func confine(Policy) error {
	return errors.New("Landlock is only available on Linux")
}
