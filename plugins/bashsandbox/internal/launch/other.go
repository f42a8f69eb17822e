//go:build !linux

package launch

import "errors"

// The sandbox exists only on Linux.

// KernelABI is 0: Landlock exists only on Linux.
func KernelABI() int { return 0 }

// Serve fails: the session sandbox needs Linux.
func Serve(int) error { return errors.New("the session sandbox needs Linux") }

// SetDumpable does nothing.
func SetDumpable(bool) error { return nil }
