package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dsh-dev/dsh/container"
)

func statusCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--profile P] [--json]",
		Short: "Compose the profile, report each row's state, and dispose it (exit 1 when a row failed or can never activate)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, _, err := g.start(cmd.Context(), slog.LevelWarn, false)
			if err != nil {
				return err
			}
			st := h.rt.Status()
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
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
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
	if st.LastReloadError != "" {
		fmt.Fprintf(w, "last reload error: %s\n", st.LastReloadError)
	}
}
