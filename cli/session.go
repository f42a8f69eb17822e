package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/shell"
)

// session returns a new harness session for the workspace, with the --sandbox-mode
// override.
func (g *globalFlags) session(ws string) (*container.Session, error) {
	if g.sandboxMode != "" && shell.ModeRank(g.sandboxMode) < 0 {
		return nil, usageError{fmt.Errorf("--sandbox-mode %q: want read-only, workspace-write or danger-full-access", g.sandboxMode)}
	}
	return &container.Session{ID: newSessionID(), Cwd: ws, SandboxMode: g.sandboxMode, Role: g.role}, nil
}

// workspaceDir returns the absolute, existing workspace directory.
func (g *globalFlags) workspaceDir() (string, error) {
	dir := g.workspace
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--workspace %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--workspace %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("--workspace %q: not a directory", dir)
	}
	return abs, nil
}

// start composes g.profile, logging at level (unless --log-level says otherwise).
func (g *globalFlags) start(ctx context.Context, level slog.Level, watch bool) (*harness, *slog.Logger, error) {
	log, err := g.logger(level)
	if err != nil {
		return nil, nil, err
	}
	h, err := startHarness(ctx, harnessOptions{profile: g.profile, watch: watch, log: log, extra: g.extra})
	if err != nil {
		return nil, nil, err
	}
	if err := g.checkSandboxMode(h.rt); err != nil {
		_ = h.stop()
		return nil, nil, err
	}
	if err := g.checkRole(h.rt); err != nil {
		_ = h.stop()
		return nil, nil, err
	}
	return h, log, nil
}

// checkSandboxMode refuses --sandbox-mode when the composition's executor does not
// confine: the mode would be silently ignored and every command would run unconfined.
func (g *globalFlags) checkSandboxMode(rt *container.Runtime) error {
	if g.sandboxMode == "" {
		return nil
	}
	if ex, ok := container.Lookup(rt, shell.Service); ok && ex.SandboxMode() != "" {
		return nil
	}
	executor := "no executor is active"
	for _, r := range rt.Status().Rows {
		if p, ok := rt.Catalog().Plugin(r.Plugin); ok && p.Provides(shell.Service) {
			executor = "its executor, " + r.Plugin + ", does not confine commands"
		}
	}
	return usageError{fmt.Errorf("--sandbox-mode %s: profile %q cannot apply it: %s (use a profile with bash-sandbox, e.g. --profile sandbox)",
		g.sandboxMode, g.profile, executor)}
}

func newSessionID() string {
	var buf [8]byte
	_, _ = rand.Read(buf[:])
	return hex.EncodeToString(buf[:])
}
