package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/tools"
)

func toolsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools [--profile P] [--role R]",
		Short: "Print the composed tool definitions as JSON",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, _, err := g.start(cmd.Context(), slog.LevelWarn, false)
			if err != nil {
				return err
			}
			defer h.stop()
			type def struct {
				Name         string          `json:"name"`
				Description  string          `json:"description"`
				InputSchema  *tools.Schema   `json:"inputSchema"`
				OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
			}
			defs := []def{}
			if reg, ok := container.Lookup(h.rt, tools.Service); ok {
				// As a session of --role (else of the default role, if any) sees them.
				for _, t := range reg.ToolsFor(&container.Session{Role: g.role}) {
					defs = append(defs, def{t.Name, t.Description, t.InputSchema, t.OutputSchema})
				}
			}
			out, err := json.MarshalIndent(defs, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s\n", out)
			return nil
		},
	}
	addRoleFlag(cmd, g)
	return cmd
}

func promptCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prompt [--profile P] [--workspace DIR]",
		Short: "Print the composed system prompt",
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
			defer h.stop()
			text := ""
			if reg, ok := container.Lookup(h.rt, prompt.Service); ok {
				session, err := g.session(ws)
				if err != nil {
					return err
				}
				text = reg.Compose(session)
			}
			fmt.Fprintln(g.stdout, text)
			return nil
		},
	}
	addWorkspaceFlag(cmd, g)
	addSandboxModeFlag(cmd, g)
	return cmd
}

func checkCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "check [--profile P]",
		Short: "Validate the profile without running anything",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(slog.LevelWarn)
			if err != nil {
				return err
			}
			h, err := startHarness(cmd.Context(), harnessOptions{log: log, extra: g.extra})
			if err != nil {
				return err
			}
			defer h.stop()
			p, err := h.loader.Load(g.profile)
			if err != nil {
				return err
			}
			// The errors name the file (and row and key) themselves.
			if err := h.rt.Validate(p.Rows); err != nil {
				return err
			}
			if err := h.rt.CheckActivation(p.Rows); err != nil {
				return err
			}
			enabled := 0
			for _, r := range p.Rows {
				if !r.Disabled {
					enabled++
				}
			}
			fmt.Fprintf(g.stdout, "profile %s: ok (%d rows)\n", p.Name, enabled)
			for _, note := range policyNotes(h.catalog, p.Rows) {
				fmt.Fprintln(g.stdout, note)
			}
			return nil
		},
	}
}
