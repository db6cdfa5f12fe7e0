#!/bin/sh
# The web console (docs/console.md) served by space-edge, in Debian's
# Chromium driven by puppeteer-core (tests/js, pinned in
# package-lock.json, installed here by npm ci): sign in, create a sandbox
# and see it listed, a file written through the API found in the browser,
# a command typed in the terminal and its output read from the page, a
# move that grows the timeline and ends the terminal's session with its
# reason, 256 and true colors rendered under the strict policy (computed
# style and pixels), refusals of a stale and a tampered capability counted
# on the sandbox's page, a kill; a wrong key shows an error and nothing
# else. The
# screenshots of each page are kept beside the test logs
# ($B/test-logs/78_console/). Then the console's edge from the attacker's
# side with curl: what it forwards and what it does not, who reads the
# refusals, and made-up sandbox ids counted in the worker's unknown bucket.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_up.sh"

JS="$SPACE_TOP/tests/js"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1 || [ ! -x "$CHROMIUM" ]; then
	echo "1..0 # SKIP node, npm and Debian's chromium are needed"
	exit 0
fi
# puppeteer-core drives the browser, pngjs reads the pixels of a screenshot
js_pinned puppeteer-core
js_pinned pngjs

SHOTS="$(dirname "$SPACE_BIN")/test-logs/78_console"
rm -rf "$SHOTS"
mkdir -p "$SHOTS"

up_init
up_start || exit
E=$SPACE_EDGE_URL

# a sandbox of the same key that lives through the browser run: the
# refusals counted for the browser's sandbox are not counted for it
SBX=$(space create 2>"$T/err") || diag "$(cat "$T/err")"

tap_lines() {
	while IFS= read -r l; do
		case "$l" in
		"ok - "*) ok "${l#ok - }" ;;
		"not ok - "*) not_ok "${l#not ok - }" ;;
		*) echo "$l" ;;
		esac
	done
}
(cd "$JS" && CONSOLE_URL="$E" SPACE="$T/bin/space" SBX_OUT="$T/e2e.sbx" CHROMIUM="$CHROMIUM" SHOTS="$SHOTS" HOME="$T" \
	timeout 170 node console_e2e.mjs >"$T/e2e.out" 2>"$T/e2e.err"; echo "rc=$?" >"$T/e2e.rc")
tap_lines <"$T/e2e.out"
is "the browser run finished" "$(cat "$T/e2e.rc")" "rc=0"
[ -s "$T/e2e.err" ] && sed 's/^/# e2e: /' "$T/e2e.err" | tail -20
n=$(ls "$SHOTS"/*.png 2>/dev/null | wc -l)
check "screenshots kept in $SHOTS ($n)" [ "$n" -ge 10 ]

curl -s --max-time 20 "$E/metrics" >"$T/metrics"
for k in static control node; do
	n=$(sed -n "s/^space_edge_console_requests_total{kind=\"$k\"} //p" "$T/metrics")
	check "the edge counted the console's $k requests ($n)" [ "${n:-0}" -gt 0 ]
done

# ---- the console's edge from the attacker's side
code() { curl -s -o "$T/body" -w '%{http_code}' --max-time 20 "$@"; }
is "a node-api path without a key: 401" "$(code "$E/node/v1/sandboxes/$SBX/fs/list?path=/")" 401
is "with a capability instead of a key: 401 (the console takes API keys only)" \
	"$(code -H "Authorization: Bearer v4.public.AAAA" "$E/node/v1/sandboxes/$SBX/fs/list?path=/")" 401
is "with a wrong key: the control plane's 401" \
	"$(code -H "Authorization: Bearer sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" "$E/node/v1/sandboxes/$SBX/fs/list?path=/")" 401
OKEY=$(space-control apikey add other --data-dir "$D/control" 2>"$T/err") || diag "apikey add: $(cat "$T/err")"
is "another tenant's key: 404, as the API says" \
	"$(code -H "Authorization: Bearer $OKEY" "$E/node/v1/sandboxes/$SBX/fs/list?path=/")" 404
is "nor through the forwarded control API (404)" \
	"$(code -H "Authorization: Bearer $OKEY" "$E/v1/sandboxes/$SBX")" 404
is "the owner's key: 200" \
	"$(code -H "Authorization: Bearer $SPACE_API_KEY" "$E/node/v1/sandboxes/$SBX/fs/list?path=/")" 200
is "a key both as bearer and as subprotocol: 401" \
	"$(code -H "Authorization: Bearer $SPACE_API_KEY" -H "Sec-WebSocket-Protocol: space.v1.json, space-key.$SPACE_API_KEY" "$E/node/v1/sandboxes/$SBX/fs/list?path=/")" 401
OSBX=$(SPACE_API_KEY=$OKEY space create 2>"$T/err") || diag "$(cat "$T/err")"
c=$(code --path-as-is -H "Authorization: Bearer $SPACE_API_KEY" "$E/node/v1/sandboxes/$SBX/../$OSBX/fs/list?path=/")
check "a path that climbs from the owner's sandbox into another tenant's is not served ($c)" [ "$c" != 200 ]
c=$(code --path-as-is -H "Authorization: Bearer $SPACE_API_KEY" "$E/v1/sandboxes/../workers")
check "nor one that climbs out of the forwarded control API ($c)" [ "$c" != 200 ]
is "a malformed sandbox id: 404" "$(code -H "Authorization: Bearer $SPACE_API_KEY" "$E/node/v1/sandboxes/a.b/fs/list")" 404
is "worker endpoints are not forwarded (404)" \
	"$(code -X POST -H "Authorization: Bearer $SPACE_API_KEY" -d '{}' "$E/v1/workers/w1/heartbeat")" 404
is "nor the edge's own route endpoint (404)" \
	"$(code -X POST -H "Authorization: Bearer $SPACE_API_KEY" -d '{}' "$E/v1/edge/routes")" 404
is "the console's files are read only (405)" "$(code -X POST -d x "$E/app.js")" 405
is "the edge still answers" "$(code "$E/healthz")" 200

# ---- refusals per sandbox (docs/console.md "Refused routes"): the
# browser's sandbox had stale and tampered capabilities refused
BSBX=$(cat "$T/e2e.sbx" 2>/dev/null)
refusals() { # key sandbox: "refresh_route deny expired" or the status
	c=$(code -H "Authorization: Bearer $1" "$E/v1/sandboxes/$2")
	[ "$c" = 200 ] || { echo "$c"; return; }
	node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).refusals || {};
		console.log(`${r.refresh_route} ${r.deny} ${r.expired}`)' "$T/body"
}
r=$(refusals "$SPACE_API_KEY" "$BSBX")
set -- $r
check "the owner reads the browser sandbox's refusals through the API ($r)" [ "${1:-0}" -ge 2 -a "${2:-0}" -ge 1 ]
space show "$BSBX" >"$T/show" 2>&1
check "space show prints them" grep -q "^refused  *refresh_route $1, deny $2, expired $3\$" "$T/show"
is "another tenant cannot read them (404)" "$(refusals "$OKEY" "$BSBX")" 404
is "the owner's other sandbox counts none" "$(refusals "$SPACE_API_KEY" "$SBX")" "0 0 0"
is "nor does the other tenant's" "$(refusals "$OKEY" "$OSBX")" "0 0 0"
# requests for sandboxes the worker does not know, with a tampered
# capability: refused, counted in the worker's "unknown" bucket, never
# in a per-sandbox entry (the table does not grow with made-up ids)
RT=$(space route "$SBX" --json 2>"$T/err") || diag "route: $(cat "$T/err")"
EP=$(printf '%s' "$RT" | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).endpoint')
# the capability with one character of its signed payload changed (a
# token not even shaped like one is refused by node-api itself, counted
# in its own metrics only)
CAP=$(printf '%s' "$RT" | node -p 'const c = JSON.parse(require("fs").readFileSync(0, "utf8")).capability;
	const i = "v4.public.".length + 20; c.slice(0, i) + (c[i] === "A" ? "B" : "A") + c.slice(i + 1)')
unknown_deny() {
	curl -s --max-time 10 "$EP/metrics" |
		sed -n 's/^space_sbxmgr_refusals_unknown_sandbox_total{outcome="deny"} //p'
}
pending() { curl -s --max-time 10 "$EP/metrics" | sed -n 's/^space_sbxmgr_refusals_pending //p'; }
u0=$(unknown_deny)
p0=$(pending)
i=0 bad=0
while [ $i -lt 30 ]; do
	c=$(code -H "Authorization: Bearer $CAP" "$EP/v1/sandboxes/made_up_$i/fs/list?path=/")
	[ "$c" = 403 ] || [ "$c" = 401 ] || bad=$((bad + 1))
	i=$((i + 1))
done
is "30 made-up sandbox ids with a tampered capability: all refused" "$bad" 0
u1=$u0
for _ in $(seq 1 20); do
	u1=$(unknown_deny)
	[ "${u1:-0}" -ge $((${u0:-0} + 30)) ] && break
	sleep 1
done
check "counted under the worker's unknown bucket (${u0:-?} -> ${u1:-?})" [ "${u1:-0}" -ge $((${u0:-0} + 30)) ]
p1=$(pending)
check "and not as sandboxes of their own (pending entries ${p0:-?} -> ${p1:-?})" [ -n "$p1" -a "${p1:-99}" -le $((${p0:-0} + 1)) ]

space kill "$SBX" >/dev/null 2>&1
SPACE_API_KEY=$OKEY space kill "$OSBX" >/dev/null 2>&1

done_testing
