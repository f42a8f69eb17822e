package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/shell"
)

func statusCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--profile P] [--workspace DIR] [--json]",
		Short: "Compose the profile, report each row's state, and dispose it (exit 1 when a row failed or can never activate, or the executor cannot confine commands in the workspace)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := g.workspaceDir()
			if err != nil {
				return err
			}
			h, _, err := g.start(cmd.Context(), slog.LevelWarn, false)
			if err != nil {
				return err
			}
			st := h.rt.Status()
			cannotConfine := noteConfinement(h.rt, &st, ws)
			if err := h.stop(); err != nil {
				return err
			}
			if asJSON {
				out, err := json.MarshalIndent(st, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s\n", out)
			} else {
				printStatus(g.stdout, st)
			}
			// Composing is synchronous: a row still pending now can never activate (the
			// start logged why at WARN), and one that failed keeps its error. Either way
			// the composition does not work: exit 1, so scripts notice.
			for _, r := range st.Rows {
				if r.State == container.StateFailed || r.State == container.StatePending {
					return exitCodeError(exitError)
				}
			}
			// Likewise an executor that would refuse every confined call.
			if cannotConfine {
				return exitCodeError(exitError)
			}
			return nil
		},
	}
	addWorkspaceFlag(cmd, g)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// confinementChecker is a sandboxPolicy service that can tell, without running
// anything, the error every confined call in a workspace would meet (bash-sandbox's).
type confinementChecker interface {
	CheckConfinement(workspace string) error
}

// noteConfinement adds to the detail of the row providing the sandbox policy why every
// confined call in the workspace ws would fail, if it would, and reports whether.
func noteConfinement(rt *container.Runtime, st *container.Status, ws string) bool {
	policy, ok := container.Lookup(rt, shell.PolicyService)
	if !ok {
		return false
	}
	checker, ok := policy.(confinementChecker)
	if !ok {
		return false
	}
	err := checker.CheckConfinement(ws)
	if err == nil {
		return false
	}
	note := "every confined call in " + ws + " fails: " + err.Error()
	for i, r := range st.Rows {
		if p, ok := rt.Catalog().Plugin(r.Plugin); ok && r.State == container.StateActive && p.Provides(shell.PolicyService) {
			if st.Rows[i].Detail != "" {
				note = st.Rows[i].Detail + "; " + note
			}
			st.Rows[i].Detail = note
		}
	}
	return true
}

func printStatus(w io.Writer, st container.Status) {
	fmt.Fprintf(w, "profile: %s\n", st.Profile)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPLUGIN\tSTATE\tNOTES")
	for _, r := range st.Rows {
		var notes []string
		for _, s := range r.Missing {
			note := "missing " + s
			if c := r.Candidates[s]; len(c) > 0 {
				note += " (provided by: " + strings.Join(c, ", ") + ")"
			} else {
				note += " (no catalog plugin provides it)"
			}
			notes = append(notes, note)
		}
		if r.Error != "" {
			notes = append(notes, "error: "+r.Error)
		}
		if r.Detail != "" {
			notes = append(notes, r.Detail)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Plugin, r.State, strings.Join(notes, "; "))
	}
	tw.Flush()
	if rl := st.LastReload; rl != nil {
		fmt.Fprintf(w, "last reload: %s %s", rl.At.UTC().Format(time.RFC3339), rl.Result)
		if rl.Result == container.ReloadApplied {
			fmt.Fprintf(w, " (mounted: %s; restarted: %s; disposed: %s)", idList(rl.Mounted), idList(rl.Restarted), idList(rl.Disposed))
		}
		fmt.Fprintln(w)
	}
	if st.LastReloadError != "" {
		fmt.Fprintf(w, "last reload error: %s\n", st.LastReloadError)
	}
}

// idList is row ids for the status text: "bash, tool-bash", or "none".
func idList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
