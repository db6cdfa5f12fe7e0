#!/bin/sh
# The worker side of the lifecycle: pause archives the writable layer into
# the snapshot store after the execution is retired (and refused), resume
# installs generation 2 from that archive (files back, owned by the
# sandbox user), a capability for generation 1 is refused with
# refresh_route at the receiver that now holds generation 2, and a live
# snapshot archives a serving layer.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
chmod 711 "$T"          # node-api runs as nobody and must reach $T/w/run
BIN=$T/bin
CTL= MGR= NAPI=
# private copies: a rebuild of the tree while this runs must not look like
# a replaced bridge binary (which sbx-manager rightly refuses)
mkdir "$BIN"
for b in sbx-manager spaced-host spaced-guest node-api space-control; do cp "$SPACE_BIN/$b" "$BIN/"; done
CP=$(free_port); NP=$(free_port)
CU=http://127.0.0.1:$CP
NU=http://127.0.0.1:$NP
W=$T/w

# the bridges of this test only: their executable is our private copy
bridges() {
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/exe" 2>/dev/null)" in "$BIN/spaced-host"*) echo "${p#/proc/}" ;; esac
	done
}
cleanup() {
	for p in $NAPI $MGR $CTL; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
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
# napi METHOD PATH [curl args...]: status on stdout, body in $T/body, headers in $T/hdr
napi() { m=$1; p=$2; shift 2; curl -s -D "$T/hdr" -o "$T/body" -w '%{http_code}' -X "$m" \
	-H "Authorization: Bearer $CAP" "$@" "$NU/v1/sandboxes/$S/$p"; }
hdr() { tr -d '\r' <"$T/hdr" | awk -v h="$1" 'tolower($0) ~ "^"tolower(h)":" { sub(/^[^:]*: */, ""); print }'; }
sql() { sqlite3 "$W/records.db" "$1"; }
start_mgr() {
	rm -f "$W/run/sbx-manager.sock"         # a killed instance leaves its socket
	"$BIN/sbx-manager" --data-dir "$W" --control "$CU" --worker-id w1 --credential-file "$T/cred" \
	    --root-key "$ROOT" --endpoint "$NU" --capacity 4 --api-group nogroup --snapshot-dir "$T/snapshots" 2>>"$T/mgr.log" &
	MGR=$!
	i=0; while [ ! -S "$W/run/sbx-manager.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
}
wait_state() { # sandbox state [seconds]
	i=0
	while [ $i -lt $((${3:-20} * 10)) ]; do
		curl -s -o "$T/sbx" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$1"
		[ "$(jget state "$T/sbx")" = "$2" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
route() { cpost "/v1/sandboxes/$1/routes" "{\"access\":[${2:-\"exec\",\"fs:r\",\"fs:w\"}]}" >/dev/null; jget capability; }

K=$("$BIN/space-control" apikey add alice --data-dir "$T/c" 2>>"$T/ctl.log")
"$BIN/space-control" worker add w1 --data-dir "$T/c" >"$T/cred" 2>>"$T/ctl.log"
ROOT=$("$BIN/space-control" keys root --data-dir "$T/c" 2>>"$T/ctl.log")
"$BIN/space-control" --data-dir "$T/c" --listen "127.0.0.1:$CP" 2>>"$T/ctl.log" &
CTL=$!
check "space-control up" wait_http "$CU/healthz" 10
start_mgr
check "sbx-manager made its socket" test -S "$W/run/sbx-manager.sock"
"$BIN/node-api" --listen "127.0.0.1:$NP" --manager-socket "$W/run/sbx-manager.sock" --worker-id w1 \
    --metrics-file "$W/metrics.prom" 2>>"$T/napi.log" &
NAPI=$!
check "node-api answers /healthz" wait_http "$NU/healthz" 10
is "healthz body" "$(curl -s "$NU/healthz")" '{"ok":true}'

is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
CAP1=$(route "$S")
CAP=$CAP1
printf 'kept across pause\n' >"$T/f"
is "write a file in generation 1" "$(napi PUT 'files?path=/home/user/keep.txt' --data-binary @"$T/f")" 200
is "make a directory" "$(napi POST fs/mkdir --data-binary '{"path":"/home/user/dir"}')" 200

# ---- live snapshot ----
is "POST snapshots -> 202" "$(cpost "/v1/sandboxes/$S/snapshots" '{"name":"live"}')" 202
i=0; while [ $i -lt 100 ]; do
	curl -s -o "$T/snaps" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S/snapshots"
	[ "$(jget snapshots.0.state "$T/snaps")" = ready ] && break
	sleep 0.1; i=$((i + 1))
done
is "live snapshot ready" "$(jget snapshots.0.state "$T/snaps")" ready
D=$(jget snapshots.0.digest "$T/snaps")
check "archive $D in the store" test -f "$T/snapshots/$D.snap"

# ---- pause: retire with an archive ----
is "pause -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "paused" wait_state "$S" paused 30
is "generation 1 record retired" "$(sql "select state, generation from records where sandbox='$S'")" "retired|1"
is "generation-1 capability after pause -> 409 not_serving" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "409 not_serving"
P=$(jget snapshot "$T/sbx")
check "the pause archive ($P) is in the store" test -f "$T/snapshots/$P.snap"

# ---- resume: generation 2 from the archive ----
is "resume -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{}')" 202
check "running again" wait_state "$S" running 30
is "record now generation 2, serving" "$(sql "select state, generation from records where sandbox='$S'")" "serving|2"
CAP=$CAP1
is "generation-1 capability at the generation-2 receiver -> 409" "$(napi POST exec --data-binary '{"argv":["true"]}')" 409
is "... refresh_route / generation_mismatch" "$(jget error) $(jget reason)" "refresh_route generation_mismatch"
CAP=$(route "$S")
is "generation-2 capability: the file is back" "$(napi GET 'files?path=/home/user/keep.txt')" 200
check "... with its content" cmp -s "$T/body" "$T/f"
is "... served by generation 2" "$(hdr X-Space-Generation)" 2
is "the restored files belong to the sandbox user (append works)" \
	"$(napi POST exec --data-binary '{"argv":["sh","-c","echo more >> /home/user/keep.txt && stat -c %U /home/user/keep.txt /home/user/dir"]}' >/dev/null; jget stdout)" \
	"$(printf 'user\nuser')"

done_testing
