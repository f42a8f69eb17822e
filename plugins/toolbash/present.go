package toolbash

import (
	"strings"

	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

// presentCall is the bash tool's call presenter (pure; safe on replay). A foreground
// call is a terminal card titled with the exact command, carrying the description and
// the requested workdir; a background start or malformed arguments get a generic card.
func presentCall(args map[string]any) tools.Card {
	cmd, ok := args[argCommand].(string)
	if !ok {
		return tools.Card{Card: "generic", Title: toolName, Kind: "execute"}
	}
	desc, _ := args[argDescription].(string)
	if bg, _ := args[argRunInBackground].(bool); bg {
		return genericCard(cmd, desc)
	}
	cwd, _ := args[argWorkdir].(string)
	return tools.Card{Card: "terminal", Title: cmd, Description: desc, Cwd: cwd}
}

// presentResult is the bash tool's result presenter (pure; safe on replay). A
// foreground result is a terminal card whose output is the text without its final exit
// marker, which becomes exitCode/signal; background starts and error results are
// generic cards.
func presentResult(args map[string]any, result tools.Result) tools.Card {
	cmd, _ := args[argCommand].(string)
	bg, _ := args[argRunInBackground].(bool)
	if result.IsError || bg || isBackgroundValue(result.Value) {
		title := cmd
		if title == "" {
			title = toolName
		}
		return tools.Card{Card: "generic", Title: title, Kind: "execute", RawInput: cmd, Content: []string{result.Text}}
	}
	body, code, signal := shell.ParseExitStatus(result.Text)
	return tools.Card{Card: "terminal", Title: cmd, Output: body, ExitCode: code, Signal: signal}
}

func genericCard(cmd, desc string) tools.Card {
	c := tools.Card{Card: "generic", Title: cmd, Kind: "execute", RawInput: cmd}
	if strings.TrimSpace(desc) != "" {
		c.Content = []string{desc}
	}
	return c
}

func isBackgroundValue(v any) bool {
	switch v := v.(type) {
	case BackgroundValue:
		return true
	case *BackgroundValue:
		return v != nil
	case map[string]any: // a replayed, JSON-decoded value
		return v["kind"] == KindBackground
	}
	return false
}
