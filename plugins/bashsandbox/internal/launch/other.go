//go:build !linux

package launch

import "errors"

// The box exists only on Linux.

// KernelABI is 0: Landlock exists only on Linux.
func KernelABI() int { return 0 }

// RunBox fails: the box needs Linux.
func RunBox(int) error { return errors.New("the session sandbox needs Linux") }

// SetDumpable does nothing.
func SetDumpable(bool) error { return nil }
