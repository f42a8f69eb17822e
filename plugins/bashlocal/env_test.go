package bashlocal_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/shell"
)

// Issue item 6: credentials and stale DSH_* never reach the child; the managed snapshot
// does; PATH and HOME survive; the overrides are set; the harness is unchanged.
func TestEnvironmentIsScrubbed(t *testing.T) {
	proctest.NoLeftovers(t)
	for k, v := range map[string]string{
		"FOO_API_KEY":    "key-value",
		"MY_SECRET":      "secret-value",
		"GH_TOKEN":       "token-value",
		"DB_PASSWORD":    "password-value",
		"DSH_SESSION_ID": "spoof",
	} {
		t.Setenv(k, v)
	}
	before := os.Environ()
	_, ex := compose(t, nil, nil)
	res := run(t, ex, shell.ExecRequest{Command: "env -0", DshEnv: map[string]string{"DSH_SESSION_ID": "managed-session", "DSH_SHELL": "1"}})
	child := map[string]string{}
	for _, kv := range strings.Split(res.Stdout.Text, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			child[k] = v
		}
	}
	for _, k := range []string{"FOO_API_KEY", "MY_SECRET", "GH_TOKEN", "DB_PASSWORD"} {
		if v, ok := child[k]; ok {
			t.Errorf("%s=%q reached the child", k, v)
		}
	}
	for _, v := range child {
		if strings.Contains(v, "spoof") || strings.HasSuffix(v, "-value") {
			t.Errorf("a scrubbed value reached the child: %q", v)
		}
	}
	for k, want := range map[string]string{
		"DSH_SESSION_ID":      "managed-session",
		"DSH_SHELL":           "1",
		"PATH":                os.Getenv("PATH"),
		"HOME":                os.Getenv("HOME"),
		"NO_COLOR":            "1",
		"TERM":                "dumb",
		"PAGER":               "cat",
		"GIT_PAGER":           "cat",
		"GIT_TERMINAL_PROMPT": "0",
	} {
		if got, ok := child[k]; !ok || got != want {
			t.Errorf("child %s = %q (present %v), want %q", k, got, ok, want)
		}
	}
	after := os.Environ()
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(before, after) || os.Getenv("DSH_SESSION_ID") != "spoof" || os.Getenv("FOO_API_KEY") != "key-value" {
		t.Error("the harness's own environment changed")
	}
}
