// Package launch is the sandbox launcher: the code that runs inside the re-executed dsh
// binary, restricts that fresh process with Landlock (and a seccomp filter) and execs
// the command. Package bashsandbox documents the contract and re-exports what executors
// need.
//
// # Why a package of its own, with so few imports
//
// Its init function dispatches the launcher. Go initialises packages one at a time,
// always taking the first package in import-path order whose imports are all
// initialised. This package imports only errors, os, runtime, strconv, sync, syscall,
// unicode/utf8, unicode/utf16 and unsafe — packages initialised before package os, or
// without initialisation of their own — so it is initialised right after package os,
// and a launcher process execs its command before the rest of the binary (dsh's MCP,
// HTTP, YAML, fx and crypto packages) is initialised at all. Every confined command pays the launcher's start-up,
// so the imports are restricted on purpose (imports_test.go enforces the list): that is
// why this package speaks Landlock and seccomp through raw system calls and parses its
// policy JSON itself, instead of using go-landlock, x/sys/unix and encoding/json, each
// of which would postpone the dispatch behind dozens of other packages' initialisation.
package launch

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Arg is the hidden first argument that turns a binary linking this package into the
// sandbox launcher.
const Arg = "__dsh_sandbox_launch"

// RunnerFailureExitCode is the exit status of a launcher that failed before the
// command ran.
const RunnerFailureExitCode = 125

// RunnerFailurePrefix starts the one stderr line a failed launcher writes.
const RunnerFailurePrefix = "dsh-sandbox: "

// The modes (the values of shell.ModeReadOnly, shell.ModeWorkspaceWrite and
// shell.ModeDangerFullAccess; this package does not import the seam, which would pull
// the container runtime into the launcher's initialisation).
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

// Policy is what one launcher run confines its command to. It travels as JSON (the
// field tags are the keys; the harness encodes it with encoding/json, the launcher
// decodes it with DecodePolicy).
type Policy struct {
	// Mode is ModeReadOnly or ModeWorkspaceWrite.
	Mode string `json:"mode"`
	// WorkspaceRoot is the canonical directory workspace-write may modify. Empty in
	// read-only.
	WorkspaceRoot string `json:"workspaceRoot,omitempty"`
	// WritableRoots are further directories workspace-write may modify (the temp
	// dirs). Empty in read-only.
	WritableRoots []string `json:"writableRoots,omitempty"`
	// Network is NetworkDeny or NetworkAllow.
	Network string `json:"network"`
}

// Validate checks that p is a policy the launcher accepts.
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
		return errors.New("mode " + strconv.Quote(p.Mode) + " runs unconfined and needs no launcher")
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

// init dispatches the launcher as early as the binary's initialisation allows (see the
// package documentation). Main, called by bashsandbox.MaybeRunLauncher at the top of
// main, does the same, for the record.
func init() { Main() }

// Main runs the launcher when this process was started as one (os.Args[1] == Arg) and
// never returns in that case: it either becomes the confined command or exits 125 with
// one "dsh-sandbox: …" line on stderr. Otherwise it returns immediately.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	err := launch(os.Args[2:])
	// launch only returns on failure.
	os.Stderr.WriteString(RunnerFailurePrefix + oneLine(err.Error()) + "\n")
	os.Exit(RunnerFailureExitCode)
}

// launch applies the policy in args[0] to this process and execs args[1:]; it returns
// only on failure.
func launch(args []string) error {
	if len(args) < 2 {
		return errors.New("launcher usage: <policy JSON> <program> [args...]")
	}
	p, err := DecodePolicy(args[0])
	if err != nil {
		return errors.New("invalid launch policy: " + err.Error())
	}
	if err := p.Validate(); err != nil {
		return errors.New("invalid launch policy: " + err.Error())
	}
	argv := args[1:]
	if argv[0] == "" {
		return errors.New("expected a non-empty program name")
	}
	// Resolve the program before confinement so errors name it plainly.
	prog, err := lookPath(argv[0])
	if err != nil {
		return errors.New("exec " + argv[0] + ": " + err.Error())
	}
	// Check the roots first so a vanished directory is named plainly.
	for i, root := range append([]string{p.WorkspaceRoot}, p.WritableRoots...) {
		if root == "" {
			continue
		}
		fi, err := os.Stat(root)
		if err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			kind := "writable root"
			if i == 0 {
				kind = "workspace root"
			}
			return errors.New(kind + " " + root + ": " + unwrapPathError(err).Error())
		}
	}
	if err := confine(p); err != nil {
		return err
	}
	err = syscall.Exec(prog, argv, os.Environ())
	return errors.New("exec " + prog + ": " + err.Error())
}

// errNotFound is exec.ErrNotFound's text.
var errNotFound = errors.New("executable file not found in $PATH")

// lookPath finds name the way os/exec.LookPath does on Unix: a name with a slash is
// used as is; otherwise the directories of $PATH are searched (an empty entry meaning
// the current directory, which — as in os/exec — is refused). The file must be a
// non-directory with an execute bit.
func lookPath(name string) (string, error) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			if err := findExecutable(name); err != nil {
				return "", err
			}
			return name, nil
		}
	}
	path := os.Getenv("PATH")
	start := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != ':' {
			continue
		}
		dir := path[start:i]
		start = i + 1
		if dir == "" {
			dir = "."
		}
		candidate := dir + "/" + name
		if findExecutable(candidate) == nil {
			if dir[0] != '/' {
				return "", errors.New("cannot run executable found relative to current directory")
			}
			return candidate, nil
		}
	}
	return "", errNotFound
}

func findExecutable(file string) error {
	fi, err := os.Stat(file)
	if err != nil {
		return unwrapPathError(err)
	}
	if m := fi.Mode(); m.IsDir() || m&0o111 == 0 {
		return os.ErrPermission
	}
	return nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// oneLine folds a message onto one line so the runner-failure contract (exactly one
// stderr line) holds whatever the error text: runs of whitespace become one space.
func oneLine(s string) string {
	out := make([]byte, 0, len(s))
	space := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r':
			space = len(out) > 0
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, s[i])
	}
	return string(out)
}
