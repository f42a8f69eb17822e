#!/usr/bin/env bash
# Smoke test with the MCP Inspector CLI: it runs the README's Inspector commands exactly
# as written (section "Use it from an MCP client": tools/list over stdio, a bash call
# over HTTP with the bearer token from ~/.dsh/serve-token), then the same over the
# 2026-07-28 revision (--protocol-era modern), and checks that a wrong token is refused.
# `npx -y @modelcontextprotocol/inspector@2.12` is the Inspector that .ci/run installs
# into $DSH_E2E_NPM (default ~/.cache/dsh-e2e-npm), `dsh` the checkout's, HOME a fresh
# directory and the port a free one; without the Inspector (npm unreachable) it says so
# and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

npm_dir="${DSH_E2E_NPM:-$HOME/.cache/dsh-e2e-npm}"
bin="$npm_dir/node_modules/.bin"
if [ ! -x "$bin/mcp-inspector" ]; then
  echo "inspector-smoke: skipped: the MCP Inspector is not installed in $npm_dir (.ci/run installs it; npm may have been unreachable)"
  exit 0
fi

work=$(mktemp -d)
dsh_pid=""
cleanup() {
  if [ -n "$dsh_pid" ]; then kill "$dsh_pid" 2>/dev/null || true; wait "$dsh_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "inspector-smoke: FAIL: $*"; exit 1; }

mkdir -p "$work/bin" "$work/home"
go build -o "$work/bin/dsh" ./cmd/dsh
export PATH="$work/bin:$bin:$PATH" # this dsh, then the Inspector's Node 22
export HOME="$work/home" MCP_INSPECTOR_SECRET_STORE=memory
# npx -y @modelcontextprotocol/inspector@2.12 … runs the installed 2.12.
npx() {
  [ "$1 $2" = "-y @modelcontextprotocol/inspector@2.12" ] || fail "npx $*: not the README's Inspector"
  shift 2
  mcp-inspector "$@"
}

# The README's commands: its indented lines that start with the npx invocation, with
# their continuation lines.
readme_commands=$(awk '
  /^    npx -y @modelcontextprotocol\/inspector@2\.12 / { cmd = ""; taking = 1 }
  taking { line = substr($0, 5); sub(/^ +/, "", line); cmd = cmd line
           if (cmd ~ /\\$/) { sub(/\\$/, "", cmd); next }
           print cmd; taking = 0 }' README.md)
[ "$(grep -c . <<<"$readme_commands")" = 2 ] || fail "README.md does not hold the two Inspector commands:
$readme_commands"
stdio_cmd=$(sed -n 1p <<<"$readme_commands")
http_cmd=$(sed -n 2p <<<"$readme_commands")
grep -q -- '--server-url http://127.0.0.1:8765/mcp' <<<"$http_cmd" || fail "the HTTP command is not for 127.0.0.1:8765: $http_cmd"

# 1. stdio: the Inspector starts dsh itself.
tools=$(cd "$work" && eval "$stdio_cmd" 2>"$work/stdio.err") || fail "$stdio_cmd: $(cat "$work/stdio.err")"
for t in bash job_output job_list job_kill; do
  grep -q "\"name\": \"$t\"" <<<"$tools" || fail "tools/list over stdio lacks $t: $tools"
done

# 2. HTTP with the generated token, as the README starts dsh (on a free port here).
dsh serve --http 127.0.0.1:0 --workspace "$work" 2>"$work/serve.log" &
dsh_pid=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*/mcp' "$work/serve.log" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || fail "dsh did not start: $(cat "$work/serve.log")"
[ -s "$HOME/.dsh/serve-token" ] || fail "no token in ~/.dsh/serve-token: $(cat "$work/serve.log")"
result=$(eval "${http_cmd//http:\/\/127.0.0.1:8765\/mcp/$url}" 2>"$work/http.err") || fail "$http_cmd: $(cat "$work/http.err")"
grep -q '"text": "hi\\n"' <<<"$result" || fail "tools/call bash over HTTP: $result"

# 3. The same over the stateless lane: only a 2026-07-28 response carries serverInfo in
# its _meta.
inspect() { mcp-inspector --cli --server-url "$url" --protocol-era modern --format json "$@"; }
token=$(cat "$HOME/.dsh/serve-token")
tools=$(inspect --header "Authorization: Bearer $token" --method tools/list)
for t in bash job_output job_list job_kill; do
  grep -q "\"name\":\"$t\"" <<<"$tools" || fail "stateless-lane tools/list lacks $t: $tools"
done
result=$(inspect --header "Authorization: Bearer $token" --method tools/call --tool-name bash \
  --tool-args-json '{"command":"echo hello from the inspector","description":"Say hello"}')
grep -q '"text":"hello from the inspector\\n"' <<<"$result" || fail "stateless-lane tools/call bash: $result"
grep -q '"io.modelcontextprotocol/serverInfo":{"name":"dsh"' <<<"$result" || fail "not a 2026-07-28 response: $result"

# 4. A wrong token is refused (401: the Inspector reports auth_required; with
# --stored-auth-only it does not try an OAuth login, which dsh does not offer).
if refused=$(inspect --header "Authorization: Bearer wrong-$token" --stored-auth-only --method tools/list 2>&1); then
  fail "a wrong token was accepted: $refused"
fi
grep -q '"code":"auth_required"' <<<"$refused" || fail "a wrong token: $refused"
echo "inspector-smoke: ok (the README's stdio and HTTP commands; the stateless lane (the Inspector's --protocol-era modern): tools/list, tools/call bash; a wrong token refused)"
