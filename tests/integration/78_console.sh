#!/bin/sh
# The web console (docs/console.md) served by space-edge, in Debian's
# Chromium driven by puppeteer-core (tests/js, pinned in
# package-lock.json, installed here by npm ci): sign in, create a sandbox
# and see it listed, a file written through the API found in the browser,
# a command typed in the terminal and its output read from the page, a
# move that grows the timeline and ends the terminal's session with its
# reason, a kill; a wrong key shows an error and nothing else. The
# screenshots of each page are kept beside the test logs
# ($B/test-logs/78_console/). Then the console's edge from the attacker's
# side with curl: what it forwards and what it does not.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_up.sh"

JS="$SPACE_TOP/tests/js"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1 || [ ! -x "$CHROMIUM" ]; then
	echo "1..0 # SKIP node, npm and Debian's chromium are needed"
	exit 0
fi
pkg_version() { node -p "require('$JS/node_modules/puppeteer-core/package.json').version" 2>/dev/null; }
want=$(node -p "require('$JS/package-lock.json').packages['node_modules/puppeteer-core'].version")
(
	flock 9
	[ "$(pkg_version)" = "$want" ] || (cd "$JS" && npm ci --no-audit --no-fund --loglevel=error >&2)
) 9>"$JS/.install.lock"
is "puppeteer-core is installed at its pinned version" "$(pkg_version)" "$want"

SHOTS="$(dirname "$SPACE_BIN")/test-logs/78_console"
rm -rf "$SHOTS"
mkdir -p "$SHOTS"

up_init
up_start || exit
E=$SPACE_EDGE_URL

tap_lines() {
	while IFS= read -r l; do
		case "$l" in
		"ok - "*) ok "${l#ok - }" ;;
		"not ok - "*) not_ok "${l#not ok - }" ;;
		*) echo "$l" ;;
		esac
	done
}
(cd "$JS" && CONSOLE_URL="$E" SPACE="$T/bin/space" CHROMIUM="$CHROMIUM" SHOTS="$SHOTS" HOME="$T" \
	timeout 110 node console_e2e.mjs >"$T/e2e.out" 2>"$T/e2e.err"; echo "rc=$?" >"$T/e2e.rc")
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
SBX=$(space create 2>"$T/err") || diag "$(cat "$T/err")"
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
space kill "$SBX" >/dev/null 2>&1
SPACE_API_KEY=$OKEY space kill "$OSBX" >/dev/null 2>&1

done_testing
