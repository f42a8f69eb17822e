// Package launch is the launcher: the code a box runs — the dsh binary re-executed with
// BoxArg — which builds the session's namespaces and mount tree once, and then starts
// each command it is sent from a thread it confines first (Landlock, capabilities,
// no_new_privs; the seccomp filter is process-wide); the control protocol both sides
// speak (Setup, Start, Reply, Release over Conn); and the launcher's failure mode
// (FailArg). docs/sandbox.md documents the contract.
//
// # Why a package of its own, with so few imports
//
// Its init function dispatches the launcher. Go initialises packages one at a time,
// always taking the first package in import-path order whose imports are all
// initialised. This package imports only errors, os, runtime, strconv, sync, syscall,
// time and unsafe — packages initialised before package os, or without initialisation
// of their own — so it is initialised right after package os, and a box runs
// before the rest of the binary (dsh's MCP, HTTP, YAML, fx and crypto packages) is
// initialised at all: it stays a small Go program, whatever the binary links. The
// imports are restricted on purpose (imports_test.go enforces the list): that is why
// this package speaks Landlock, seccomp, the mount API and its protocol through raw
// system calls and its own encoding, instead of using go-landlock, x/sys/unix and
// encoding/json, each of which would postpone the dispatch behind dozens of other
// packages' initialisation.
package launch

import (
	"errors"
	"strconv"
)

// BoxArg is the hidden first argument that turns a binary linking this package into
// a box (see RunBox).
const BoxArg = "__dsh_sandbox_session"

// FailArg is the hidden first argument of the launcher's failure mode: the process
// writes "dsh-sandbox: <argument 2>" as its only stderr line and exits 125. It stands in
// for a command the box could not start confined (or that no box could be built for),
// so that every launcher failure reaches the caller the same way (one line, exit 125).
const FailArg = "__dsh_sandbox_fail"

// LauncherFailureExitCode is the exit status of a launcher that failed before the
// command ran.
const LauncherFailureExitCode = 125

// LauncherFailurePrefix starts the one stderr line a failed launcher writes.
const LauncherFailurePrefix = "dsh-sandbox: "

// The modes (the values of shell.ModeReadOnly, shell.ModeWorkspaceWrite and
// shell.ModeDangerFullAccess; this package does not import the seam, which would pull
// the container runtime into the box's initialisation).
const (
	ModeReadOnly         = "read-only"
	ModeWorkspaceWrite   = "workspace-write"
	ModeDangerFullAccess = "danger-full-access"
)

// Network policies.
const (
	NetworkDeny  = "deny"
	NetworkAllow = "allow"
)

// Policy is what one command is confined to (its Landlock domain).
type Policy struct {
	// Mode is ModeReadOnly or ModeWorkspaceWrite.
	Mode string
	// WorkspaceRoot is the canonical directory workspace-write may modify. Empty in
	// read-only.
	WorkspaceRoot string
	// WritableRoots are further directories workspace-write may modify (the session's
	// private temp dir, configured roots). Empty in read-only.
	WritableRoots []string
	// Network is NetworkDeny or NetworkAllow.
	Network string
}

// Validate checks that p is a policy the box accepts.
func (p Policy) Validate() error {
	switch p.Network {
	case NetworkDeny, NetworkAllow:
	default:
		return errors.New("invalid network policy " + strconv.Quote(p.Network) + " (want " + strconv.Quote(NetworkDeny) + " or " + strconv.Quote(NetworkAllow) + ")")
	}
	switch p.Mode {
	case ModeReadOnly:
		if p.WorkspaceRoot != "" || len(p.WritableRoots) > 0 {
			return errors.New("a read-only policy cannot name writable roots")
		}
	case ModeWorkspaceWrite:
		if p.WorkspaceRoot == "" {
			return errors.New("a workspace-write policy needs a workspace root")
		}
		for _, root := range append([]string{p.WorkspaceRoot}, p.WritableRoots...) {
			if !isCleanAbs(root) {
				return errors.New("writable root " + strconv.Quote(root) + " is not a clean absolute path")
			}
		}
	case ModeDangerFullAccess:
		return errors.New("mode " + strconv.Quote(p.Mode) + " runs unconfined and needs no sandbox")
	default:
		return errors.New("unknown sandbox mode " + strconv.Quote(p.Mode))
	}
	return nil
}

// isCleanAbs reports whether p is absolute and equal to its lexically cleaned form
// (what filepath.Clean would return): no empty, "." or ".." elements, no trailing
// slash except for the root itself, no NUL.
func isCleanAbs(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	if p == "/" {
		return true
	}
	start := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] == 0 {
			return false
		}
		if i == len(p) || p[i] == '/' {
			elem := p[start:i]
			if elem == "" || elem == "." || elem == ".." {
				return false
			}
			start = i + 1
		}
	}
	return true
}
