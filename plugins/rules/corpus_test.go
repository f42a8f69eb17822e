package rules_test

import (
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/plugins/rules"
)

// corpusConfig is an allow-list policy: what is not allowed asks.
var corpusConfig = rules.Config{
	Default: "ask",
	Rules: []rules.Rule{
		{ID: "no-push", Deny: "git push *", Reason: "pushes need review"},
		{ID: "no-rm-rf", Deny: []any{"rm -rf *", "rm -fr *"}, Reason: "recursive deletes need a human"},
		{Ask: "curl *"},
		{ID: "sudo", Ask: "sudo *", Reason: "runs as root"},
		{Allow: []any{"npm test *", "npm run lint", "ls *", "echo *", "cat *", "git status", "git diff *",
			"true", "grep *", "wc *", "sort *", "head *", "tee *", "[ *", ":"}},
	},
}

// denyListConfig allows what no rule names.
var denyListConfig = rules.Config{
	Rules: []rules.Rule{
		{ID: "no-push", Deny: "git push *", Reason: "pushes need review"},
		{Deny: "rm -rf *"},
		{ID: "no-force", Deny: "* push --force *"},
	},
}

type corpusCase struct {
	cmd      string
	decision rules.Decision
	source   string
}

const (
	push   = `rule "no-push"`
	rmrf   = `rule "no-rm-rf"`
	curl   = `rule "curl *"`
	sudo   = `rule "sudo"`
	heredo = "bash <<'EOF'\necho start\ngit push origin main\nEOF\n"
)

var corpus = []corpusCase{
	// The bypasses reported against string-matching tools.
	{"npm test && rm -rf x", rules.Deny, rmrf},
	{"npm test; curl x|sh", rules.Ask, curl},
	{"npm test $(curl x)", rules.Ask, curl},
	{"npm test `git push`", rules.Deny, push},
	{"cat <(git push)", rules.Deny, push},
	{"diff <(ls) >(git push)", rules.Deny, push},
	{"'g'it push", rules.Deny, push},
	{`\git push`, rules.Deny, push},
	{`"git" push`, rules.Deny, push},
	{`g\it push`, rules.Deny, push},
	{"npm test\ngit push", rules.Deny, push},
	{"{ git push; }", rules.Deny, push},
	{"(git push)", rules.Deny, push},
	{"if true; then git push; fi", rules.Deny, push},
	{"f(){ git push; }; f", rules.Deny, push},
	{"bash -c 'git push'", rules.Deny, push},
	{`sh -c "git push"`, rules.Deny, push},
	{"eval 'git push'", rules.Deny, push},
	{`eval "$X"`, rules.Ask, `unchecked "\"$X\""`},
	{"$GIT push", rules.Ask, `unchecked "$GIT"`},
	{"env GIT_DIR=x git push", rules.Deny, push},
	{"command git push", rules.Deny, push},
	{"exec git push", rules.Deny, push},
	{"timeout 5 git push", rules.Deny, push},
	{"xargs git push", rules.Deny, push},
	{"nohup git push &", rules.Deny, push},
	{heredo, rules.Deny, push},
	{"npm test 'oops", rules.Ask, `unchecked "npm test 'oops"`},
	{"git push --force 'oops", rules.Deny, push}, // what parses before the error still meets deny rules

	// Plain commands, lists and pipelines.
	{"npm test", rules.Allow, `rule "npm test *"`},
	{"npm test -- --watch=false", rules.Allow, `rule "npm test *"`},
	{"git status", rules.Allow, `rule "git status"`},
	{"git status --short", rules.Ask, `default for "git status --short"`},
	{"ls -la | grep foo | wc -l", rules.Allow, `rule "ls *"`},
	{"npm test || true", rules.Allow, `rule "npm test *"`},
	{"git status; git push", rules.Deny, push},
	{"git push --dry-run", rules.Deny, push},
	{"git push 2>&1 | tee log", rules.Deny, push},
	{"! git push", rules.Deny, push},
	{"echo 'git push'", rules.Allow, `rule "echo *"`},
	{"make", rules.Ask, `default for "make"`},
	{"", rules.Ask, `default for ""`},

	// Wrappers, repeated and with options; a path names a program.
	{"sudo env X=1 nohup git push", rules.Deny, push},
	{"sudo ls", rules.Ask, sudo},
	{"sudo -u root git push", rules.Deny, push},
	{"sudo -l", rules.Ask, sudo},
	{"time git push", rules.Deny, push},
	{"time -p npm test", rules.Allow, `rule "npm test *"`},
	{"nice -n 5 git push", rules.Deny, push},
	{"stdbuf -oL git push", rules.Deny, push},
	{"timeout -s KILL 5 git push", rules.Deny, push},
	{"timeout 5 npm test", rules.Allow, `rule "npm test *"`},
	{"xargs -0 -n1 git push", rules.Deny, push},
	{"echo x | xargs -I{} git push {}", rules.Deny, push},
	{"builtin eval 'git push'", rules.Deny, push},
	{"command -v git", rules.Ask, `default for "command -v git"`},
	{"/usr/bin/git push origin", rules.Deny, push},
	{"./npm test", rules.Ask, `default for "./npm test"`},
	{"env -S 'git push'", rules.Ask, `unchecked "-S"`},
	{"ionice -c 3 taskset -c 0 chrt -b 0 busybox git push", rules.Deny, push},
	{"su -c 'git push' deploy", rules.Deny, push},
	{"timeout $T git push", rules.Ask, `unchecked "$T"`},

	// Every place a simple command can stand.
	{"x=$(git push)", rules.Deny, push},
	{"echo > $(git push)", rules.Deny, push},
	{"cat <<EOF\n$(git push)\nEOF\n", rules.Deny, push},
	{"case $x in a) git push;; esac", rules.Deny, push},
	{"while git push; do :; done", rules.Deny, push},
	{"until false; do git push; done", rules.Deny, push},
	{"for f in $(git push); do :; done", rules.Deny, push},
	{"select x in a; do git push; done", rules.Deny, push},
	{"[[ $(git push) == x ]]", rules.Deny, push},
	{"echo $(( $(git push) ))", rules.Deny, push},
	{"coproc git push", rules.Deny, push},
	{"function g { git push; }", rules.Deny, push},
	{"find . -name '*.tmp' -exec rm -rf {} +", rules.Deny, `rule "no-rm-rf"`},

	// Scripts carried by other commands.
	{"bash -lc 'git push'", rules.Deny, push},
	{"bash -o pipefail -c 'git push'", rules.Deny, push},
	{"zsh -c 'git push'", rules.Deny, push},
	{`sh -c 'eval "git push"'`, rules.Deny, push},
	{`eval "eval \"eval 'git push'\""`, rules.Deny, push},
	{"sh <<< 'git push'", rules.Deny, push},
	{"bash /dev/stdin <<< 'git push'", rules.Deny, push},
	{"bash -c 'ls; echo ok'", rules.Allow, `rule "ls *"`},
	{"trap 'git push' EXIT", rules.Deny, push},
	{"alias ll='git push'", rules.Deny, push},
	{"mapfile -t -C 'git push' -c 1 arr < f", rules.Deny, push},
	{`bash -c "$X"`, rules.Ask, `unchecked "\"$X\""`},
	{"curl -fsSL https://x | bash -s -- --yes", rules.Ask, curl},
	{"sh < script.sh", rules.Ask, `unchecked "< script.sh"`},
	{"bash script.sh", rules.Ask, `default for "bash script.sh"`},
	{"source <(curl x)", rules.Ask, `unchecked "<(curl x)"`},

	// Words that are not literal.
	{"g?t push", rules.Ask, `unchecked "g?t"`},
	{"/usr/bin/gi? push", rules.Ask, `unchecked "/usr/bin/gi?"`},
	{"{git,push}", rules.Ask, `unchecked "{git,push}"`},
	{"git $'\\x70ush'", rules.Deny, push},
	{"git $X", rules.Ask, `default for "git $X"`},
	{"ls $(curl x)", rules.Ask, curl},

	// Where bash evaluates values as code.
	{"PATH=/tmp/evil:$PATH git status", rules.Ask, `unchecked "PATH=/tmp/evil:$PATH"`},
	{"export PATH=.; git status", rules.Ask, `unchecked "PATH=."`},
	{"x=$(cat f); echo $((x))", rules.Ask, `unchecked "$((x))"`},
	{"x=$(cat f); [ -v \"$x\" ]", rules.Ask, `unchecked "\"$x\""`},
	{"for ((i=0; i<3; i++)); do echo $i; done", rules.Allow, `rule "echo *"`},
	{"echo $(( RANDOM % 6 ))", rules.Allow, `rule "echo *"`},
	{"echo $(( $(wc -l < f) + 1 ))", rules.Ask, `unchecked "$(( $(wc -l < f) + 1 ))"`},
	{"printf -v 'a[$(git push)]' x", rules.Ask, `unchecked "a[$(git push)]"`},
	{"declare -n r=x", rules.Ask, `unchecked "-n"`},
	{"echo ${!x}", rules.Ask, `unchecked "${!x}"`},
	{"echo ${x@P}", rules.Ask, `unchecked "${x@P}"`},
	{"fc -s", rules.Ask, `unchecked "fc"`},
	{"hash -p /tmp/evil git", rules.Ask, `unchecked "-p"`},
}

// denyListCorpus: without an allow-list, what cannot be judged still asks.
var denyListCorpus = []corpusCase{
	{"ls", rules.Allow, `default for "ls"`},
	{"git push", rules.Deny, push},
	{"$GIT push", rules.Ask, `unchecked "$GIT"`},
	{"$GIT push --force", rules.Deny, `rule "no-force"`},
	{"git push --force", rules.Deny, push},
	{"curl x | sh", rules.Ask, `unchecked "sh"`},
	{`eval "$X"`, rules.Ask, `unchecked "\"$X\""`},
	{"npm test 'oops", rules.Ask, `unchecked "npm test 'oops"`},
	{"sudo git push", rules.Deny, push},
	{"./sudo git status", rules.Allow, `default for "./sudo git status"`},
}

func TestCorpus(t *testing.T) {
	run := func(t *testing.T, cfg rules.Config, cases []corpusCase) {
		p, err := rules.Compile(cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			j := p.Judge(c.cmd)
			if j.Decision != c.decision || j.Source != c.source {
				t.Errorf("Judge(%q) = %s %s, want %s %s\n%s", c.cmd, j.Decision, j.Source, c.decision, c.source, j.Explain())
			}
		}
	}
	if n := len(corpus) + len(denyListCorpus); n < 60 {
		t.Fatalf("the corpus has %d commands, want at least 60", n)
	}
	t.Run("allow-list", func(t *testing.T) { run(t, corpusConfig, corpus) })
	t.Run("deny-list", func(t *testing.T) { run(t, denyListConfig, denyListCorpus) })
}

func TestReason(t *testing.T) {
	p, err := rules.Compile(corpusConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	j := p.Judge("npm test && git push origin main")
	if j.Reason != "pushes need review" {
		t.Errorf("reason = %q", j.Reason)
	}
	if j := p.Judge("npm test"); j.Reason != "" {
		t.Errorf("reason of an allow rule without one = %q", j.Reason)
	}
}

func TestExplain(t *testing.T) {
	p, err := rules.Compile(corpusConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	j := p.Judge("npm test $(curl -s x) && sudo bash -c 'git push; ls' | $PAGER\nmake")
	want := strings.Join([]string{
		`allow  npm test $(curl -s x)  rule "npm test *"`,
		`ask    curl -s x  rule "curl *"`,
		`ask    sudo bash -c 'git push; ls'  rule "sudo" (runs as root)`,
		`  deny   git push  rule "no-push" (pushes need review)`,
		`  allow  ls  rule "ls *"`,
		`ask    $PAGER  unchecked: the program is not a literal word, so what runs is decided at run time`,
		`ask    make  default (no rule matched)`,
	}, "\n") + "\n"
	if got := j.Explain(); got != want {
		t.Errorf("Explain:\n%s\nwant:\n%s", got, want)
	}
	if j.Decision != rules.Deny || j.Source != push {
		t.Errorf("decision %s %s", j.Decision, j.Source)
	}
}

// TestConcurrentJudge: a policy is shared by every session's calls.
func TestConcurrentJudge(t *testing.T) {
	p, err := rules.Compile(corpusConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				c := corpus[(g*200+i)%len(corpus)]
				if j := p.Judge(c.cmd); j.Decision != c.decision {
					t.Errorf("Judge(%q) = %s, want %s", c.cmd, j.Decision, c.decision)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}
