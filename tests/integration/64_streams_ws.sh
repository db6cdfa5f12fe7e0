#!/bin/sh
# WebSocket streams at node-api, driven by an independent client
# (python3-websockets, and raw frames no library sends): everything that is
# refused is refused before the upgrade with the HTTP status a client repairs
# its route by (401, 403, 400, 426), node-api and sbx-manager survive, and
# the stream routes of a sandbox whose guest serves them open (101) and
# carry typed messages; malformed, oversized and out-of-order frames get a
# clear close code.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"
# the memory check below: ASan keeps freed memory in a quarantine (256 MiB
# by default), which RSS would count
[ "${SPACE_SAN:-0}" = 1 ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"

PY=/usr/bin/python3
PROBE="$PY $SPACE_TOP/tests/tools/ws_probe.py"
platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
WU=ws://127.0.0.1:$NP

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "sandbox running" wait_state "$S" running 30
CAP=$(route "$S" '"exec","pty","watch","fs:r"')
FSCAP=$(route "$S" '"fs:r"')
ARGS=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/sh","-c","echo hi"]}')

# ---- refused before the upgrade ----
is "no bearer: 401" "$($PROBE status "$NU/v1/sandboxes/$S/processes/stream?args=$ARGS")" "401 unauthenticated"
is "a bearer that is no capability: 403" "$($PROBE status "$NU/v1/sandboxes/$S/processes/stream?args=$ARGS" junk)" "403 deny"
is "a capability without exec: 403 at admission (sbx-manager)" \
	"$($PROBE status "$NU/v1/sandboxes/$S/processes/1/stream" "$FSCAP")" "403 deny"
is "a capability without watch: 403" \
	"$($PROBE status "$NU/v1/sandboxes/$S/watch?path=/tmp" "$FSCAP")" "403 deny"
is "a stream route without the WebSocket headers: 400" \
	"$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $CAP" "$NU/v1/sandboxes/$S/processes/stream?args=$ARGS")" 400
is "Sec-WebSocket-Version 8: 426 with the version we speak" \
	"$(curl -s -D - -o /dev/null -H "Authorization: Bearer $CAP" -H 'Upgrade: websocket' -H 'Connection: Upgrade' \
	    -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H 'Sec-WebSocket-Version: 8' \
	    "$NU/v1/sandboxes/$S/processes/stream?args=$ARGS" | tr -d '\r' | awk 'NR==1 { print $2 } /^Sec-WebSocket-Version/ { print $2 }' | tr '\n' ' ')" "426 13 "
is "a start without args: 400" "$($PROBE status "$NU/v1/sandboxes/$S/processes/stream" "$CAP")" "400 bad_request"
is "a start whose args are not JSON: 400" "$($PROBE status "$NU/v1/sandboxes/$S/processes/stream?args=%7Bx" "$CAP")" "400 bad_request"
is "a process id 0 is no route: 404" "$($PROBE status "$NU/v1/sandboxes/$S/processes/0/stream" "$CAP")" "404 not_found"
is "a watch without a path: 400" "$($PROBE status "$NU/v1/sandboxes/$S/watch" "$CAP")" "400 bad_request"
is "a watch with recursive=maybe: 400" "$($PROBE status "$NU/v1/sandboxes/$S/watch?path=/tmp&recursive=maybe" "$CAP")" "400 bad_request"
is "another sandbox's capability on this one's stream: 403" \
	"$($PROBE status "$NU/v1/sandboxes/other-sbx/processes/1/stream" "$CAP")" "403 deny"

# ---- open streams (the guest serves processes) ----
if [ "$($PROBE status "$NU/v1/sandboxes/$S/processes/stream?args=$ARGS" "$CAP")" = 101 ]; then
	OUT=$($PROBE run "$WU/v1/sandboxes/$S/processes/stream?args=$ARGS" "$CAP")
	echo "$OUT" | sed 's/^/#   /'
	printf '%s\n' "$OUT" >"$T/out1"
	check "a started process: the result (pid) first" grep -q '^first {"result":{"pid":' "$T/out1"
	check "its stdout as a binary STDOUT message" grep -qF "out stdout b'hi\\n'" "$T/out1"
	check "its EXIT (code 0), then close 1000" sh -c "grep -q '^exit 0 0 0' '$T/out1' && tail -1 '$T/out1' | grep -q '^close 1000'"
	CAT=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/cat"]}')
	OUT=$($PROBE run "$WU/v1/sandboxes/$S/processes/stream?args=$CAT" "$CAP" 0461626364 'text:{"type":"stdin","data":"xyz"}' 05)
	echo "$OUT" | sed 's/^/#   /'
	check "stdin (binary and JSON text) reaches cat, STDIN_EOF ends it" sh -c "echo \"\$1\" | grep -q 'abcd' && echo \"\$1\" | grep -q 'xyz' && echo \"\$1\" | grep -q '^exit 0 0 0'" _ "$OUT"
	SLP=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/sleep","30"]}')
	OUT=$($PROBE run "$WU/v1/sandboxes/$S/processes/stream?args=$SLP" "$CAP" 070f)
	is "a SIGNAL message (TERM) ends the process: EXIT by signal 15, close 1000" "$(printf '%s\n' "$OUT" | tail -2 | tr '\n' ' ')" "exit 0 15 0 close 1000 "
	OUT=$($PROBE run "$WU/v1/sandboxes/$S/processes/stream?args=$SLP" "$CAP" 0600180050)
	is "a RESIZE on a process without a terminal: close 4400" "$(printf '%s\n' "$OUT" | tail -1)" "close 4400"
	# stdin to a process that never reads it, until the stream holds it,
	# then a reset: node-api must not spin on the dead connection
	SLP2=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/sleep","60"]}')
	OUT=$($PROBE floodreset "$WU/v1/sandboxes/$S/processes/stream?args=$SLP2" "$CAP")
	is "stdin until the stream holds it, then a reset" "${OUT%% *} ${OUT#* } " "reset after ${OUT##* } "
	ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
	sleep 0.5
	t0=$(ticks "$N1"); sleep 2; t1=$(ticks "$N1")
	diag "node-api's CPU over 2 s after it: $((t1 - t0)) ticks ($OUT)"
	check "... node-api is not spinning (under 50 ticks of CPU in 2 s; a spin takes about 200)" test $((t1 - t0)) -lt 50
	# pings that are never read: their pongs must not pile up in node-api
	rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
	R0=$(rss "$N1")
	OUT=$($PROBE pingflood "$WU/v1/sandboxes/$S/processes/stream?args=$SLP2" "$CAP")
	R1=$(rss "$N1")
	diag "node-api's RSS $R0 -> $R1 KiB after $OUT bytes of pings never read"
	LIM=32768; [ "${SPACE_SAN:-0}" = 1 ] && LIM=65536
	check "pings never read: node-api grows by under $((LIM / 1024)) MiB ($R0 -> $R1 KiB, $OUT bytes)" test $((R1 - R0)) -lt "$LIM"
	for c in unmasked:1002 oversized:1009 continuation:1002 badutf8:1007 badkind:1007 outkind:4400 reserved:1002 badjson:1007; do
		is "a ${c%%:*} frame: close ${c#*:}" \
		    "$($PROBE raw "$WU/v1/sandboxes/$S/processes/stream?args=$CAT" "$CAP" "${c%%:*}")" "close ${c#*:}"
	done
else
	diag "the guest does not serve proc.start yet: open streams not tested here"
fi

# ---- unharmed ----
check "node-api still answers" wait_http "$NU/healthz" 5
check "node-api process alive" alive "$N1"
check "sbx-manager process alive" alive "$M1"
is "an ordinary request still works" "$(CAP=$CAP napi GET "fs/stat?path=/tmp")" 200
done_testing
