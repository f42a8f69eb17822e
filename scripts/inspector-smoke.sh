#!/usr/bin/env bash
# Smoke test with the MCP Inspector CLI in modern mode (protocol era 2026-07-28): it
# lists dsh's tools and calls bash over streamable HTTP with a bearer token. Uses the
# Inspector that .ci/run installs into $DSH_E2E_NPM (default ~/.cache/dsh-e2e-npm);
# without it (npm unreachable) it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

npm_dir="${DSH_E2E_NPM:-$HOME/.cache/dsh-e2e-npm}"
bin="$npm_dir/node_modules/.bin"
if [ ! -x "$bin/mcp-inspector" ]; then
  echo "inspector-smoke: skipped: the MCP Inspector is not installed in $npm_dir (.ci/run installs it; npm may have been unreachable)"
  exit 0
fi
export PATH="$bin:$PATH" # its Node 22 first

work=$(mktemp -d)
dsh_pid=""
cleanup() {
  if [ -n "$dsh_pid" ]; then kill "$dsh_pid" 2>/dev/null || true; wait "$dsh_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/dsh" ./cmd/dsh
token="inspector-smoke-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
echo "$token" > "$work/token"
"$work/dsh" serve --http 127.0.0.1:0 --token-file "$work/token" --workspace "$work" 2> "$work/serve.log" &
dsh_pid=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*/mcp' "$work/serve.log" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
if [ -z "$url" ]; then echo "inspector-smoke: dsh did not start:"; cat "$work/serve.log"; exit 1; fi

inspect() {
  HOME="$work/home" MCP_INSPECTOR_SECRET_STORE=memory \
    mcp-inspector --cli --server-url "$url" --protocol-era modern --format json \
    --header "Authorization: Bearer $token" "$@"
}
fail() { echo "inspector-smoke: FAIL: $*"; exit 1; }

tools=$(inspect --method tools/list)
for t in bash job_output job_list job_kill; do
  grep -q "\"name\":\"$t\"" <<<"$tools" || fail "tools/list lacks $t: $tools"
done
result=$(inspect --method tools/call --tool-name bash \
  --tool-args-json '{"command":"echo hello from the inspector","description":"Say hello"}')
grep -q '"text":"hello from the inspector\\n"' <<<"$result" || fail "tools/call bash: $result"
# Only a 2026-07-28 (modern) response carries serverInfo in its _meta.
grep -q '"io.modelcontextprotocol/serverInfo":{"name":"dsh"' <<<"$result" || fail "not a 2026-07-28 response: $result"
echo "inspector-smoke: ok (modern mode: tools/list, tools/call bash)"
