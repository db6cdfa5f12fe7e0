#!/bin/sh
# space-control moves a sandbox between two real workers (sbx-manager +
# node-api each, one shared snapshot store): a file written on w1 is read
# back on w2, generation 1's capability is refused by w1 once retired, a
# client that reports the rejected route gets a route to w2 and generation
# 2, and w2 refuses a capability for the execution it does not run.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
chmod 711 "$T"          # node-api runs as nobody and must reach the run dirs
BIN=$T/bin
CTL= M1= M2= N1= N2=
# private copies: a rebuild of the tree while this runs must not look like
# a replaced bridge binary (which sbx-manager rightly refuses)
mkdir "$BIN"
for b in sbx-manager spaced-host spaced-guest node-api space-control; do cp "$SPACE_BIN/$b" "$BIN/"; done
CP=$(free_port); NP1=$(free_port); NP2=$(free_port)
CU=http://127.0.0.1:$CP

bridges() {
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/exe" 2>/dev/null)" in "$BIN/spaced-host"*) echo "${p#/proc/}" ;; esac
	done
}
cleanup() {
	for p in $N1 $N2 $M1 $M2 $CTL; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	b=$(bridges); [ -n "$b" ] && kill $b 2>/dev/null
	i=0; while [ -n "$(bridges)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	b=$(bridges); [ -n "$b" ] && kill -9 $b 2>/dev/null && sleep 0.5
	awk -v t="$T/" 'index($2, t) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r umount -l 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

jget() { python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[int(k)] if isinstance(d, list) else d[k]
print(json.dumps(d) if isinstance(d, (dict, list)) or d is None else d)' "${2:-$T/body}" "$1"; }
cpost() { curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $K" --data-binary "$2" "$CU$1"; }
# napi URL METHOD PATH [curl args...]: status; body in $T/body, headers in $T/hdr
napi() { u=$1; m=$2; p=$3; shift 3; curl -s -D "$T/hdr" -o "$T/body" -w '%{http_code}' -X "$m" \
	-H "Authorization: Bearer $CAP" "$@" "$u/v1/sandboxes/$S/$p"; }
hdr() { tr -d '\r' <"$T/hdr" | awk -v h="$1" 'tolower($0) ~ "^"tolower(h)":" { sub(/^[^:]*: */, ""); print }'; }
wait_state() { # sandbox state [seconds]
	i=0
	while [ $i -lt $((${3:-20} * 10)) ]; do
		curl -s -o "$T/sbx" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$1"
		[ "$(jget state "$T/sbx")" = "$2" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
# worker N ID PORT: sbx-manager and node-api of one worker
worker() {
	W=$T/$2
	"$BIN/space-control" worker add "$2" --data-dir "$T/c" >"$T/cred_$2" 2>>"$T/ctl.log"
	"$BIN/sbx-manager" --data-dir "$W" --control "$CU" --worker-id "$2" --credential-file "$T/cred_$2" \
	    --root-key "$ROOT" --endpoint "http://127.0.0.1:$3" --capacity 4 --api-group nogroup \
	    --snapshot-dir "$T/snapshots" 2>>"$T/mgr_$2.log" &
	eval "M$1=\$!"
	i=0; while [ ! -S "$W/run/sbx-manager.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	"$BIN/node-api" --listen "127.0.0.1:$3" --manager-socket "$W/run/sbx-manager.sock" \
	    --worker-id "$2" 2>>"$T/napi_$2.log" &
	eval "N$1=\$!"
	wait_http "http://127.0.0.1:$3/healthz" 10
}

K=$("$BIN/space-control" apikey add alice --data-dir "$T/c" 2>>"$T/ctl.log")
ROOT=$("$BIN/space-control" keys root --data-dir "$T/c" 2>>"$T/ctl.log")
"$BIN/space-control" --data-dir "$T/c" --listen "127.0.0.1:$CP" 2>>"$T/ctl.log" &
CTL=$!
check "space-control up" wait_http "$CU/healthz" 10
check "worker w1 up" worker 1 w1 "$NP1"
check "worker w2 up" worker 2 w2 "$NP2"

is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
cpost "/v1/sandboxes/$S/routes" '{"access":["exec","fs:r","fs:w"]}' >/dev/null
CAP1=$(jget capability); R1=$(jget route); E1=$(jget endpoint)
is "the route names w1's node-api" "$E1" "http://127.0.0.1:$NP1"
CAP=$CAP1
printf 'moved with the sandbox\n' >"$T/f"
is "write a file on w1" "$(napi "$E1" PUT 'files?path=/home/user/keep.txt' --data-binary @"$T/f")" 200

is "move to w2 -> 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
check "running again" wait_state "$S" running 30
is "now generation 2 on w2" "$(jget execution.generation "$T/sbx") $(jget execution.worker "$T/sbx")" "2 w2"
is "history: g1 retired on w1, g2 serving on w2" \
	"$(python3 -c 'import json,sys; print(" ".join("%d:%s:%s" % (h["generation"], h["worker"], h["state"]) for h in json.load(open(sys.argv[1]))["history"]))' "$T/sbx")" \
	"1:w1:retired 2:w2:serving"
P=$(jget snapshot "$T/sbx")
check "the move's archive ($P) is in the shared store" test -f "$T/snapshots/$P.snap"

CAP=$CAP1
is "generation-1 capability at w1 (retired) -> refused" "$(napi "$E1" POST exec --data-binary '{"argv":["true"]}') $(jget error) $(jget reason)" "409 refresh_route not_serving"
is "generation-1 capability sent to w2 -> refused: refresh the route (same sandbox, another execution)" \
	"$(napi "http://127.0.0.1:$NP2" POST exec --data-binary '{"argv":["true"]}') $(jget error)" "409 refresh_route"
cpost "/v1/sandboxes/$S/routes" "{\"access\":[\"exec\",\"fs:r\",\"fs:w\"],\"rejected\":$R1}" >/dev/null
CAP=$(jget capability); E2=$(jget endpoint)
is "the client reports the rejected route and gets w2, generation 2" "$(jget route.worker) $(jget route.generation) $E2" "w2 2 http://127.0.0.1:$NP2"
is "the file is on w2" "$(napi "$E2" GET 'files?path=/home/user/keep.txt')" 200
check "... with its content" cmp -s "$T/body" "$T/f"
is "... served by generation 2 on w2" "$(hdr X-Space-Generation) $(hdr X-Space-Worker)" "2 w2"
is "a generation-2 capability sent to w1 -> refused" "$(napi "$E1" POST exec --data-binary '{"argv":["true"]}') $(jget error)" "409 refresh_route"

is "kill" "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S")" 200
i=0; while [ $i -lt 100 ]; do
	curl -s -o "$T/sbx" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S"
	[ "$(jget execution.state "$T/sbx")" = retired ] && break
	sleep 0.1; i=$((i + 1))
done
is "w2 retired generation 2" "$(jget execution.state "$T/sbx")" retired
check "no sanitizer report in the control plane's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/ctl.log'"
done_testing
