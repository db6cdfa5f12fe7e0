#!/bin/sh
# space mcp, the Model Context Protocol server, against a real platform
# (space up, two workers): the official TypeScript SDK (tests/js, pinned in
# package-lock.json, installed here by npm ci) starts it over stdio as an
# agent's client does, lists the tools and checks their schemas, calls each
# one, moves the sandbox between two calls, cancels a call; then raw bytes
# on its stdin (tests/tools/mcp_raw.py): bad JSON, messages out of order,
# invalid requests, unknown methods, bad params, a cancellation, each
# answered with its JSON-RPC error, and the server stays up.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_up.sh"

JS="$SPACE_TOP/tests/js"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "1..0 # SKIP node and npm are needed for the MCP SDK client"
	exit 0
fi
js_pinned @modelcontextprotocol/sdk

up_init
up_start || exit

# a second API key whose quota allows one sandbox (added beside the running
# control plane, as an operator does)
QKEY=$(space-control apikey add mcpquota --max-sandboxes 1 --data-dir "$D/control" 2>"$T/err") ||
	diag "apikey add: $(cat "$T/err")"

# the SDK's client: every check prints ok / not ok; numbered here
tap_lines() {
	while IFS= read -r l; do
		case "$l" in
		"ok - "*) ok "${l#ok - }" ;;
		"not ok - "*) not_ok "${l#not ok - }" ;;
		*) echo "$l" ;;
		esac
	done
}
(cd "$JS" && SPACE="$T/bin/space" SPACE_QUOTA_KEY="$QKEY" timeout 240 node mcp_e2e.mjs >"$T/e2e.out" 2>"$T/e2e.err"; echo "rc=$?" >"$T/e2e.rc")
tap_lines <"$T/e2e.out"
is "the SDK client finished" "$(cat "$T/e2e.rc")" "rc=0"
[ -s "$T/e2e.err" ] && sed 's/^/# e2e: /' "$T/e2e.err" | tail -20

# raw bytes on stdin; the cancellation runs a command in a sandbox of its own
SBX=$(space create 2>"$T/err") || diag "$(cat "$T/err")"
timeout 180 python3 "$SPACE_TOP/tests/tools/mcp_raw.py" "$T/bin/space" "$SBX" >"$T/raw.out" 2>"$T/raw.err"
tap_lines <"$T/raw.out"
[ -s "$T/raw.err" ] && sed 's/^/# raw: /' "$T/raw.err" | tail -20
space kill "$SBX" >/dev/null 2>&1

done_testing
