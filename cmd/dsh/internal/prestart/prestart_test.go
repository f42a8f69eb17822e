package prestart

import "testing"

func TestSpawns(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"serve"}, true},
		{[]string{"call", "bash", "{}"}, true},
		{[]string{"--log-level", "debug", "serve", "--http", ":0"}, true},
		{[]string{"-p", "sandbox", "call"}, true},
		{[]string{"--profile=sandbox", "serve"}, true},
		{[]string{"-p", "serve", "status"}, false}, // a profile named serve
		{[]string{"status"}, false},
		{[]string{"tools", "serve"}, false},
		{[]string{"--version"}, false},
		{nil, false},
	} {
		if got := spawns(c.args); got != c.want {
			t.Errorf("spawns(%q) = %v; want %v", c.args, got, c.want)
		}
	}
}
