package suggest

import "testing"

func TestClosest(t *testing.T) {
	tools := []string{"bash", "job_kill", "job_list", "job_output"}
	for _, c := range []struct{ name, want string }{
		{"bsh", "bash"},
		{"bahs", "bash"}, // an adjacent swap is one edit
		{"Bash", "bash"},
		{"job_outptu", "job_output"},
		{"job_lst", "job_list"},
		{"joboutput", "job_output"},
		{"bash", ""}, // not a typo
		{"git", ""},  // another name, not a typo
		{"b", ""},    // too far from everything
		{"python", ""},
	} {
		if got := Closest(c.name, tools); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	profiles := []string{"default", "minimal", "sandbox"}
	for _, c := range []struct{ name, want string }{
		{"sandbx", "sandbox"}, {"defualt", "default"}, {"minimall", "minimal"}, {"my-profile", ""},
	} {
		if got := Closest(c.name, profiles); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got := DidYouMean("bsh", tools); got != ` (did you mean "bash"?)` {
		t.Errorf("DidYouMean = %q", got)
	}
	if got := DidYouMean("git", tools); got != "" {
		t.Errorf("DidYouMean(git) = %q", got)
	}
}
