#!/bin/sh
# Three space-control replicas A, B and C on one PostgreSQL (a fresh
# cluster of the test's own, tests/lib_pg.sh), sharing nothing else but
# the signing keys' directory (docs/control-plane.md, "Several replicas"):
#  1. a worker long-polling A gets an install that B committed, woken by
#     the store's notification (LISTEN/NOTIFY), not by A reading the table;
#  2. creates and capability issuance alternate between A, B and C: every
#     create placed once, every route answered by all three with the same
#     generation, signed by keys all three publish;
#  3. the same move sent to A, B and C at once: exactly one 202;
#  4. A killed (-9) during a burst of creates sent to all three: B and C
#     keep serving (creates, routes, a worker's long-poll), every
#     acknowledged create is stored, and no generation is issued twice;
#  5. A started again: it serves the same state as B.
# Workers are simulated with curl and a python loop.
# ci: once
# ci: beside
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_pg.sh"
if [ ! -x "$PG_BIN/initdb" ]; then
	not_ok "a PostgreSQL server is installed (postgresql in packages.txt)"
	done_testing; exit
fi

T=$(mktemp -d)
D=$T/data
PIDA= PIDB= PIDC= BURST=
cleanup() {
	rc=$?
	for p in $BURST $PIDA $PIDB $PIDC; do kill "$p" 2>/dev/null; done
	for p in $BURST $PIDA $PIDB $PIDC; do wait "$p" 2>/dev/null; done
	if [ "$_tap_fail" != 0 ] || [ "$rc" != 0 ]; then
		L=$(dirname "$SPACE_BIN")/test-logs/2r-daemons
		rm -rf "$L"; mkdir -p "$L"; cp "$T"/*.log "$L/" 2>/dev/null
		cp "$PGT/server.log" "$L/pg_server.log" 2>/dev/null
		echo "# daemons' logs kept in $L"
	fi
	pg_cleanup
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

check "PostgreSQL of the test started" pg_start || exit 1
export SPACE_CONTROL_STORE="$PG_URL"
on_pg() { true; }       # sql (tests/lib.sh) reads the cluster
PA=$(free_port)
PB=$(free_port)
while [ "$PB" = "$PA" ]; do PB=$(free_port); done
PC=$(free_port)
while [ "$PC" = "$PA" ] || [ "$PC" = "$PB" ]; do PC=$(free_port); done
UC=http://127.0.0.1:$PC
UA=http://127.0.0.1:$PA
UB=http://127.0.0.1:$PB

req() { curl -s -m 40 -o "$T/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $4" \
	${5:+--data-binary "$5"} "$1$3"; }
start() { # NAME PORT
	space-control --data-dir "$D" --listen "127.0.0.1:$2" --heartbeat-timeout 3600 \
		--lease-ttl 2 2>>"$T/$1.log" &
	eval "PID$1=\$!"
	wait_http "http://127.0.0.1:$2/healthz" 10
}
notifications() { curl -s "$1/metrics" | awk '$1 == "space_control_store_notifications_total" { print $2 }'; }
fetch() { # URL W CRED [WAIT]: W's next assignments in $T/a_W, the cursor kept
	c=$(cat "$T/cur_$2" 2>/dev/null || echo 0)
	curl -s -m 60 -H "Authorization: Bearer $3" "$1/v1/workers/$2/assignments?after=$c&wait=${4:-5}" >"$T/a_$2"
	jget revision "$T/a_$2" >"$T/cur_$2"
}

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/cli.log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/cli.log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/cli.log")
check "replica A started" start A "$PA"
check "replica B started on the same database" start B "$PB"
check "replica C started on the same database" start C "$PC"
# each listens from a thread of its own, which may connect after /healthz answers
listening() { for n in A B C; do grep -q 'listening for other replicas' "$T/$n.log" || return 1; done; }
i=0; while ! listening && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "all three listen for the others' assignments" listening
is "w1 registers (through A)" "$(req "$UA" POST /v1/workers/w1/register "$W1" '{"incarnation":"i1","endpoint":"http://127.0.0.1:9001","capacity":200}')" 200
is "w2 registers (through B)" "$(req "$UB" POST /v1/workers/w2/register "$W2" '{"incarnation":"i2","endpoint":"http://127.0.0.1:9002","capacity":200}')" 200
fetch "$UA" w1 "$W1" 0
fetch "$UB" w2 "$W2" 0

# ---- 1. a long-poll on A woken by B's commit ----
N0=$(notifications "$UA")
fetch "$UA" w1 "$W1" 30 &
POLL=$!
# the poll is in A before B commits: A counts its request once it started
i=0; while ! curl -s "$UA/metrics" | grep -q 'route="/v1/workers/\*/assignments"' && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
is "create pinned to w1 through B -> 201" "$(req "$UB" POST /v1/sandboxes "$K" '{"worker":"w1"}')" 201
S0=$(jget id)
wait "$POLL"
is "w1's long-poll at A returns B's install" \
	"$(jget assignments.0.action "$T/a_w1") $(jget assignments.0.identity.sandbox "$T/a_w1")" "install $S0"
# the listener counts a notification on its own thread, which may come
# after the poll returned (a poll also looks at the store every 250 ms)
i=0; while [ "$(notifications "$UA")" -le "${N0:-0}" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
N1=$(notifications "$UA")
check "... A received the store's notification of it ($N0 -> $N1)" test "${N1:-0}" -gt "${N0:-0}"

# ---- 2. creates and capabilities alternating between A, B and C ----
bad=0 ids=
for i in $(seq 1 20); do
	case $((i % 3)) in 0) u=$UA ;; 1) u=$UB ;; *) u=$UC ;; esac
	[ $((i % 4)) -lt 2 ] && w=w1 || w=w2
	[ "$(req "$u" POST /v1/sandboxes "$K" "{\"worker\":\"$w\"}")" = 201 ] || bad=$((bad + 1))
	ids="$ids $(jget id)"
done
is "20 creates alternating A/B/C: all 201" "$bad" 0
# the workers: every install reported serving, through A or B alternately
cat >"$T/serve.py" <<'EOF'
import json, sys, urllib.request
T, urls, w, cred = sys.argv[1], sys.argv[2:4], sys.argv[4], sys.argv[5]
def call(url, method, path, body=None):
    r = urllib.request.Request(url + path, method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": "Bearer " + cred})
    with urllib.request.urlopen(r, timeout=30) as f:
        return json.load(f)
cur, n, seen = int(open("%s/cur_%s" % (T, w)).read().strip() or 0), 0, {}
while True:
    a = call(urls[n % 2], "GET", "/v1/workers/%s/assignments?after=%d&wait=0" % (w, cur))
    if not a["assignments"]:
        break
    for x in a["assignments"]:
        if x["action"] == "install":
            k = (x["identity"]["sandbox"], x["identity"]["generation"])
            seen[k] = seen.get(k, 0) + 1
            call(urls[n % 2], "POST", "/v1/workers/%s/status" % w, {"identity": x["identity"], "state": "serving"})
            n += 1
    cur = a["revision"]
open("%s/cur_%s" % (T, w), "w").write("%d\n" % cur)
print(n, sum(1 for v in seen.values() if v > 1))
EOF
R1=$(python3 "$T/serve.py" "$T" "$UA" "$UB" w1 "$W1")
R2=$(python3 "$T/serve.py" "$T" "$UB" "$UA" w2 "$W2")
is "each install reached its worker once (w1: installs, repeats; w2 the same)" "$R1 $R2" "10 0 10 0"
bad=0
for s in $ids; do
	ga=$(req "$UA" POST "/v1/sandboxes/$s/routes" "$K" '{"access":["exec"]}'); ra=$(jget route.generation); ca=$(jget capability)
	gb=$(req "$UB" POST "/v1/sandboxes/$s/routes" "$K" '{"access":["exec"]}'); rb=$(jget route.generation); cb=$(jget capability)
	gc=$(req "$UC" POST "/v1/sandboxes/$s/routes" "$K" '{"access":["exec"]}'); rc=$(jget route.generation); cc=$(jget capability)
	[ "$ga $gb $gc $ra $rb $rc" = "200 200 200 1 1 1" ] && [ -n "$ca" ] && [ -n "$cb" ] && [ -n "$cc" ] ||
		{ bad=$((bad + 1)); diag "$s: $ga $gb $gc gen $ra $rb $rc"; }
done
is "capabilities from A, B and C for every sandbox: 200, generation 1 from each" "$bad" 0
KA=$(curl -s "$UA/v1/keys" | md5sum)
is "the three replicas publish the same keys" "$KA $KA" "$(curl -s "$UB/v1/keys" | md5sum) $(curl -s "$UC/v1/keys" | md5sum)"

# ---- 3. the same move through A and B at once ----
M=$(echo $ids | cut -d' ' -f1)
(T=$T/ma; mkdir "$T"; echo "$(req "$UA" POST "/v1/sandboxes/$M/move" "$K" '{"to":"w2"}')" >"$T/code") &
MA=$!
(T=$T/mb; mkdir "$T"; echo "$(req "$UB" POST "/v1/sandboxes/$M/move" "$K" '{"to":"w2"}')" >"$T/code") &
MB=$!
(T=$T/mc; mkdir "$T"; echo "$(req "$UC" POST "/v1/sandboxes/$M/move" "$K" '{"to":"w2"}')" >"$T/code") &
MC=$!
wait "$MA" "$MB" "$MC"
is "a move sent to A, B and C at once: one 202, two 409" \
	"$(cat "$T/ma/code" "$T/mb/code" "$T/mc/code" | sort | tr '\n' ' ')" "202 409 409 "

# ---- 4. A killed -9 during a burst of creates to both ----
cat >"$T/burst.sh" <<EOF
for i in \$(seq 1 40); do
	for u in $UA $UB $UC; do
		out=\$(curl -s -m 10 -w ' %{http_code}' -X POST -H "Authorization: Bearer $K" \
			--data-binary '{"worker":"w2"}' "\$u/v1/sandboxes")
		echo "\$u \$out"
	done
done >"$T/burst"
EOF
sh "$T/burst.sh" &
BURST=$!
i=0 n=0
while [ "${n:-0}" -lt 10 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); n=$(grep -c ' 201$' "$T/burst" 2>/dev/null); done
kill -9 "$PIDA"; wait "$PIDA" 2>/dev/null; PIDA=
wait "$BURST"; BURST=
ACKA=$(grep "^$UA " "$T/burst" | grep -c ' 201$')
ACKB=$(grep "^$UB " "$T/burst" | grep -c ' 201$')
ACKC=$(grep "^$UC " "$T/burst" | grep -c ' 201$')
diag "burst: A acknowledged $ACKA creates before its kill, B $ACKB, C $ACKC"
is "B and C answered every create of the burst with 201" "$ACKB $ACKC" "40 40"
missing=0
for s in $(grep ' 201$' "$T/burst" | grep -o '"id": *"sbx_[^"]*"' | sed 's/.*"\(sbx_[^"]*\)"/\1/'); do
	[ "$(sql "SELECT COUNT(*) FROM sandboxes WHERE id='$s'")" = 1 ] || missing=$((missing + 1))
done
is "every acknowledged create (A's and B's) is stored" "$missing/$(grep ' 201$' "$T/burst" | grep -c '"sbx_')" "0/$((ACKA + ACKB + ACKC))"
is "after the kill, a create through B -> 201" "$(req "$UB" POST /v1/sandboxes "$K" '{"worker":"w1"}')" 201
S9=$(jget id)
fetch "$UB" w1 "$W1" 10
check "... and w1, long-polling B, gets its install" grep -q "\"sandbox\": *\"$S9\"" "$T/a_w1"
is "a route through B for a sandbox A created -> 200" \
	"$(req "$UB" POST "/v1/sandboxes/$(echo $ids | cut -d' ' -f3)/routes" "$K" '{"access":["exec"]}')" 200
is "... and through C" \
	"$(req "$UC" POST "/v1/sandboxes/$(echo $ids | cut -d' ' -f3)/routes" "$K" '{"access":["exec"]}')" 200
is "no generation issued twice, none skipped (every sandbox: 1..max)" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox, COUNT(*) c, COUNT(DISTINCT generation) d, MAX(generation) m FROM executions GROUP BY sandbox) x WHERE c <> d OR c <> m")" 0
is "never two active executions of one sandbox" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox FROM executions WHERE state IN ('pending','starting','serving') GROUP BY sandbox HAVING COUNT(*) > 1) x")" 0
is "no install assigned twice" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox, generation FROM assignments WHERE action='install' GROUP BY 1, 2 HAVING COUNT(*) > 1) x")" 0

# ---- 5. A again ----
check "replica A started again" start A "$PA"
is "A and B show the same sandbox list" "$(req "$UA" GET /v1/sandboxes "$K" >/dev/null; md5sum <"$T/body")" \
	"$(req "$UB" GET /v1/sandboxes "$K" >/dev/null; md5sum <"$T/body")"
is "a route through the restarted A -> 200" \
	"$(req "$UA" POST "/v1/sandboxes/$(echo $ids | cut -d' ' -f3)/routes" "$K" '{"access":["exec"]}')" 200
done_testing
