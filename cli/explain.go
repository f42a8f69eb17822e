package cli

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/roles"
	"github.com/dsh-dev/dsh/plugins/rules"
)

// explainCmd is `dsh explain`: how the profile's rules rows and the role judge a bash
// command, without composing anything or running it.
func explainCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain [--profile P] [--role R] COMMAND",
		Short: "Print how the profile's rules and roles judge a bash command, without running it",
		Long: "Judge COMMAND as the bash tool's gates would: print the decision (allow, ask or deny), its\n" +
			"source, and, for each rules row and the session's role, every simple command with the rule\n" +
			"that matched. Nothing is composed and nothing runs (hooks are not run either). The role is\n" +
			"--role, else the roles plugin's default role.",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			policies, err := g.loadPolicies(cmd)
			if err != nil {
				return err
			}
			return policies.explain(g.stdout, args[0])
		},
	}
	addRoleFlag(cmd, g)
	return cmd
}

// policies are the rules and roles rows of a profile, decoded and compiled, and the role
// a session of --role (or the default role) has.
type policies struct {
	judges []judge // in profile order
	role   string  // "" when the session has none
	hidden bool    // the role may not call bash
}

// judge is one policy that judges bash: a rules row's, or the role's.
type judge struct {
	label  string // `row "rules"`, `role "reader" (row "roles")`
	source string // the source of its decisions, as the gate's; "" = the judgement's
	policy *rules.Policy
}

// loadPolicies loads g.profile, validates it as dsh check does, and compiles its
// policies for g.role.
func (g *globalFlags) loadPolicies(cmd *cobra.Command) (*policies, error) {
	log, err := g.logger(slog.LevelWarn)
	if err != nil {
		return nil, err
	}
	h, err := startHarness(cmd.Context(), harnessOptions{log: log, extra: g.extra})
	if err != nil {
		return nil, err
	}
	defer h.stop()
	p, err := h.loader.Load(g.profile)
	if err != nil {
		return nil, err
	}
	if err := h.rt.Validate(p.Rows); err != nil {
		return nil, err
	}
	out := &policies{}
	var rs *roles.Roles
	for _, row := range p.Rows {
		if row.Disabled {
			continue
		}
		cfg, err := h.catalog.DecodeConfig(row)
		if err != nil {
			return nil, err
		}
		switch c := cfg.(type) {
		case *rules.Config:
			out.judges = append(out.judges, judge{label: fmt.Sprintf("row %q", row.ID), policy: c.Policy()})
		case *roles.Config:
			rs = roles.New(c)
			j, ok, err := g.roleJudge(out, rs, row)
			if err != nil {
				return nil, err
			}
			if ok {
				out.judges = append(out.judges, j)
			}
		}
	}
	if g.role != "" && rs == nil {
		return nil, usageError{fmt.Errorf("--role %s: profile %q has no roles row", g.role, g.profile)}
	}
	return out, nil
}

// roleJudge sets out's role from rs and returns the role's judge, when it has rules.
func (g *globalFlags) roleJudge(out *policies, rs *roles.Roles, row container.Row) (judge, bool, error) {
	name, role, ok := rs.Of(&container.Session{Role: g.role})
	if !ok {
		return judge{}, false, nil
	}
	if role == nil {
		return judge{}, false, usageError{fmt.Errorf("--role %s: the profile defines no such role (it has: %s)", name, strings.Join(rs.Names(), ", "))}
	}
	out.role, out.hidden = name, !role.Sees("bash")
	if role.Policy() == nil {
		return judge{}, false, nil
	}
	return judge{label: fmt.Sprintf("role %q (row %q)", name, row.ID), source: fmt.Sprintf("role %q", name), policy: role.Policy()}, true, nil
}

// explain writes the decision on command, its source, and each judge's judgement.
func (ps *policies) explain(w io.Writer, command string) error {
	if ps.hidden {
		fmt.Fprintf(w, "decision: deny\nsource: tool \"bash\" is not available to this session (role %q)\n", ps.role)
		return nil
	}
	judgements := make([]rules.Judgement, len(ps.judges))
	decision, source, reason := rules.Allow, "", ""
	for i, j := range ps.judges {
		judgements[i] = j.policy.Judge(command)
		if jm := judgements[i]; i == 0 || jm.Decision > decision {
			decision, source, reason = jm.Decision, cmp.Or(j.source, jm.Source), jm.Reason
		}
	}
	if len(ps.judges) == 0 {
		source = "no rules judge bash in this profile"
	}
	fmt.Fprintf(w, "decision: %s\nsource: %s", decision, source)
	if reason != "" {
		fmt.Fprintf(w, " (%s)", reason)
	}
	fmt.Fprintln(w)
	if ps.role != "" {
		fmt.Fprintf(w, "role: %s\n", ps.role)
	}
	for i, j := range ps.judges {
		fmt.Fprintf(w, "\n%s: %d rules, default %s\n%s", j.label, j.policy.Len(), j.policy.Default(), judgements[i].Explain())
	}
	return nil
}

// policyNotes are what dsh check says about a valid profile's policies: each rules
// row's summary and import warnings, and the roles.
func policyNotes(cat *container.Catalog, rows []container.Row) []string {
	var notes []string
	for _, row := range rows {
		if row.Disabled {
			continue
		}
		cfg, err := cat.DecodeConfig(row)
		if err != nil {
			continue // Validate reported it
		}
		switch c := cfg.(type) {
		case *rules.Config:
			notes = append(notes, fmt.Sprintf("row %q: %s", row.ID, rules.Summary(c.Policy(), c)))
			for _, w := range c.Policy().Warnings() {
				notes = append(notes, "  warning: "+w)
			}
		case *roles.Config:
			notes = append(notes, fmt.Sprintf("row %q: %s", row.ID, roles.New(c).Summary()))
		}
	}
	return notes
}
