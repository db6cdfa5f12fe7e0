#!/bin/sh
# space-control: every class of bad input gets a 4xx JSON error, stores
# nothing, and the daemon keeps serving.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init

# send METHOD PATH BEARER [curl args...]: body -> $T/body, prints the status
send() { _m=$1 _p=$2 _b=$3; shift 3; curl -s -o "$T/body" -w '%{http_code}' -X "$_m" \
	-H "Authorization: Bearer $_b" "$@" "$U$_p"; }
post() { send POST "$1" "$2" --data-binary "$3"; }
errcode() { python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
assert isinstance(d.get("message"), str)
print(d["error"])' "$T/body" 2>/dev/null || echo "not-json"; }
# bad "what" STATUS CODE -- answer must be STATUS with JSON error CODE
bad() { is "$1 -> $2 $3" "$4 $(errcode)" "$2 $3"; }

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
check "daemon started" ctl_start --heartbeat-timeout 3600
post /v1/workers/w1/register "$W" '{"incarnation":"inc1","endpoint":"http://127.0.0.1:1","capacity":100}' >/dev/null
post /v1/sandboxes "$K" '{}' >/dev/null
S=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/body")
post /v1/workers/w1/status "$W" "{\"identity\":{\"sandbox\":\"$S\",\"generation\":1,\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\"},\"state\":\"serving\"}" >/dev/null
BEFORE=$(sql "SELECT (SELECT COUNT(*) FROM sandboxes) || '/' || (SELECT COUNT(*) FROM executions) || '/' || (SELECT COUNT(*) FROM assignments)")

# malformed JSON and wrong shapes
c=$(post /v1/sandboxes "$K" '{"template":'); bad "truncated JSON" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" 'not json at all'); bad "not JSON" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '[1,2,3]'); bad "array instead of object" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"template":"host","template":"evil"}'); bad "duplicate key" 400 bad_request "$c"
c=$(printf '{"template":"ho\000st"}' | send POST /v1/sandboxes "$K" --data-binary @-); bad "NUL byte in a string" 400 bad_request "$c"
c=$(python3 -c 'print("[" * 100000 + "]" * 100000)' | send POST /v1/sandboxes "$K" --data-binary @-); bad "deeply nested JSON" 400 bad_request "$c"
printf '\377\376\375garbage' >"$T/bin"
c=$(send POST /v1/sandboxes "$K" --data-binary @"$T/bin"); bad "binary garbage" 400 bad_request "$c"

# unknown fields, everywhere
c=$(post /v1/sandboxes "$K" '{"owner":"bob"}'); bad "unknown field on create" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"resources":{"memory_mb":1,"gpu":1}}'); bad "unknown resource" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"timeouts":{"idle":1,"when":2}}'); bad "unknown timeout field" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"],"generation":1}'); bad "unknown field on routes" 400 bad_request "$c"
c=$(post /v1/workers/w1/register "$W" '{"incarnation":"inc1","endpoint":"http://x","capacity":1,"root":true}'); bad "unknown field on register" 400 bad_request "$c"
c=$(post /v1/workers/w1/status "$W" "{\"identity\":{\"sandbox\":\"$S\",\"generation\":1,\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\",\"extra\":1},\"state\":\"serving\"}"); bad "unknown field in an identity" 400 bad_request "$c"

# wrong types and ranges
c=$(post /v1/sandboxes "$K" '{"template":5}'); bad "template not a string" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"template":"../etc"}'); bad "template not an id" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"template":null}'); bad "template null (it has a default, it is not nullable)" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"resources":{"memory_mb":"512"}}'); bad "memory_mb as a string" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"resources":{"pids":-1}}'); bad "negative pids" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"resources":{"cpu_percent":1.5}}'); bad "fractional cpu" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"timeouts":{"action":"explode"}}'); bad "unknown timeout action" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"metadata":[1]}'); bad "metadata not an object" 400 bad_request "$c"
c=$(post /v1/sandboxes "$K" '{"worker":"a/b"}'); bad "pinned worker not an id" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"access":"exec"}'); bad "access not an array" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"access":[]}'); bad "empty access" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["root"]}'); bad "unknown access" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec","exec"]}'); bad "duplicate access" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"port":70000,"proto":"http"}'); bad "port out of range" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"port":80,"proto":"udp"}'); bad "unknown proto" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"port":80}'); bad "port without proto" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"],"port":80,"proto":"http"}'); bad "both purposes at once" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/routes" "$K" '{}'); bad "routes without purpose" 400 bad_request "$c"
c=$(post /v1/workers/w1/register "$W" '{"incarnation":"inc1","endpoint":"http://x","capacity":"many"}'); bad "capacity as a string" 400 bad_request "$c"
c=$(post /v1/workers/w1/register "$W" '{"incarnation":"inc1","endpoint":"ftp://x","capacity":1}'); bad "endpoint not http(s)" 400 bad_request "$c"
c=$(post /v1/workers/w1/register "$W" '{"incarnation":"in c1","endpoint":"http://x","capacity":1}'); bad "incarnation not an id" 400 bad_request "$c"
c=$(post /v1/workers/w1/status "$W" "{\"identity\":{\"sandbox\":\"$S\",\"generation\":\"1\",\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\"},\"state\":\"serving\"}"); bad "generation as a string" 400 bad_request "$c"
c=$(post /v1/workers/w1/status "$W" "{\"identity\":{\"sandbox\":\"$S\",\"generation\":1,\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\"},\"state\":\"dancing\"}"); bad "unknown execution state" 400 bad_request "$c"
c=$(post /v1/workers/w1/heartbeat "$W" '{}'); bad "heartbeat without incarnation" 400 bad_request "$c"
c=$(send GET '/v1/workers/w1/assignments?after=-1' "$W"); bad "negative revision" 400 bad_request "$c"
c=$(send GET '/v1/workers/w1/assignments?after=abc' "$W"); bad "revision not a number" 400 bad_request "$c"
c=$(send GET '/v1/workers/w1/assignments?after=0&wait=99999999999999999999' "$W"); bad "huge wait" 400 bad_request "$c"

# lifecycle endpoints (protocol.md section 5)
ID1="{\"sandbox\":\"$S\",\"generation\":1,\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\"}"
c=$(post "/v1/sandboxes/$S/pause" "$K" '{"force":true}'); bad "unknown field on pause" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/pause" "$K" '[]'); bad "pause body not an object" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/resume" "$K" '{"worker":7}'); bad "resume worker not a string" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/move" "$K" '{}'); bad "move without to" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/move" "$K" '{"to":"../w2"}'); bad "move to a non-id" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/move" "$K" '{"to":"w2","to":"w3"}'); bad "move with a duplicate key" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/snapshots" "$K" '{"name":"x y"}'); bad "snapshot name not an id" 400 bad_request "$c"
c=$(post "/v1/sandboxes/$S/snapshots" "$K" '{"name":"a","kind":"full"}'); bad "unknown field on snapshot" 400 bad_request "$c"
c=$(send PUT "/v1/sandboxes/$S/timeouts" "$K" --data-binary '{"idle":"5"}'); bad "idle timeout as a string" 400 bad_request "$c"
c=$(send PUT "/v1/sandboxes/$S/timeouts" "$K" --data-binary '{"absolute":99999999999}'); bad "absolute timeout out of range" 400 bad_request "$c"
c=$(send PUT "/v1/sandboxes/$S/timeouts" "$K"); bad "timeouts without a body" 400 bad_request "$c"
c=$(send POST "/v1/sandboxes/$S/timeouts" "$K" --data-binary '{}'); bad "timeouts with POST" 405 bad_request "$c"
c=$(post /v1/workers/w1/status "$W" "{\"identity\":$ID1,\"state\":\"retired\",\"snapshot\":{\"digest\":\"../../etc/passwd\",\"size\":1}}"); bad "retired with a path as digest" 400 bad_request "$c"
c=$(post /v1/workers/w1/status "$W" "{\"identity\":$ID1,\"state\":\"retired\",\"snapshot\":{\"digest\":\"$(printf 'A%.0s' $(seq 64))\",\"size\":1}}"); bad "retired with an uppercase digest" 400 bad_request "$c"
c=$(post /v1/workers/w1/status "$W" "{\"identity\":$ID1,\"state\":\"retired\",\"snapshot\":{\"digest\":\"$(printf 'a%.0s' $(seq 64))\",\"size\":-1}}"); bad "retired with a negative size" 400 bad_request "$c"
c=$(post /v1/workers/w1/status "$W" "{\"identity\":$ID1,\"state\":\"serving\",\"snapshot\":{\"digest\":\"$(printf 'a%.0s' $(seq 64))\",\"size\":1}}"); bad "a snapshot with serving" 400 bad_request "$c"
c=$(post /v1/workers/w1/snapshots "$W" '{"snapshot_id":"snp_x"}'); bad "snapshot answer with neither digest nor error" 400 bad_request "$c"
c=$(post /v1/workers/w1/snapshots "$W" '{"snapshot_id":"snp_x","error":"e","digest":"'"$(printf 'a%.0s' $(seq 64))"'","size":1}'); bad "snapshot answer with both" 400 bad_request "$c"
c=$(post /v1/workers/w1/snapshots "$W" '{"snapshot_id":"snp_unknown","error":"disk full"}'); bad "answer for an unknown snapshot" 404 not_found "$c"
c=$(post "/v1/sandboxes/sbx_unknown/pause" "$K" '{}'); bad "pause an unknown sandbox" 404 not_found "$c"
c=$(send GET "/v1/sandboxes/sbx_unknown/snapshots" "$K"); bad "snapshots of an unknown sandbox" 404 not_found "$c"
c=$(post "/v1/sandboxes/$S/pause" "$W" '{}'); bad "pause with a worker credential" 401 unauthenticated "$c"

# sizes
head -c 2000000 /dev/zero | tr '\0' 'a' >"$T/big"
c=$(send POST /v1/sandboxes "$K" --data-binary @"$T/big"); bad "2 MB body (Content-Length)" 413 too_large "$c"
c=$(send POST /v1/sandboxes "$K" -H 'Transfer-Encoding: chunked' --data-binary @"$T/big"); bad "2 MB chunked body" 413 too_large "$c"
python3 -c 'import json; print(json.dumps({"metadata": {"k": "v" * 20000}}))' >"$T/meta"
c=$(send POST /v1/sandboxes "$K" --data-binary @"$T/meta"); bad "metadata over 16 KiB" 413 too_large "$c"
# the routes anyone may call take no body: nothing is buffered for a
# peer that has not authenticated
c=$(send GET /healthz "" --data-binary @"$T/meta"); bad "a body on an unauthenticated route (Content-Length)" 400 bad_request "$c"
c=$(send GET /metrics "" -H 'Transfer-Encoding: chunked' --data-binary @"$T/meta"); bad "a chunked body on an unauthenticated route" 400 bad_request "$c"
c=$(send GET /v1/keys "" -H 'Content-Length: 0'); is "... an empty one is no body: 200" "$c" 200
LONG=$(head -c 5000 /dev/zero | tr '\0' 'a')
c=$(send GET "/v1/sandboxes/$LONG" "$K"); bad "URL over the limit" 414 too_large "$c"

# ids in paths and unknown ids
c=$(send GET "/v1/sandboxes/$(head -c 65 /dev/zero | tr '\0' 'a')" "$K"); bad "65-character id" 400 bad_request "$c"
c=$(send GET "/v1/sandboxes/a.b" "$K"); bad "id with a dot" 400 bad_request "$c"
c=$(send GET "/v1/sandboxes/a%2Fb" "$K"); bad "id with an encoded slash matches no endpoint" 404 not_found "$c"
c=$(send GET "/v1/sandboxes/sbx_unknown" "$K"); bad "unknown sandbox" 404 not_found "$c"
c=$(send DELETE "/v1/sandboxes/sbx_unknown" "$K"); bad "delete unknown sandbox" 404 not_found "$c"
c=$(post "/v1/sandboxes/sbx_unknown/routes" "$K" '{"access":["exec"]}'); bad "routes of an unknown sandbox" 404 not_found "$c"
c=$(post /v1/workers/w1/status "$W" '{"identity":{"sandbox":"sbx_unknown","generation":1,"worker":"w1","substrate":"jail","activation":1,"resident":"inc1"},"state":"serving"}'); bad "status of an unknown execution" 404 not_found "$c"
c=$(send GET "/v1/nothing" "$K"); bad "unknown endpoint" 404 not_found "$c"
c=$(send PUT "/v1/sandboxes" "$K"); bad "wrong method" 405 bad_request "$c"

# nothing bad reached the store, and the daemon is fine
is "the store is unchanged" "$(sql "SELECT (SELECT COUNT(*) FROM sandboxes) || '/' || (SELECT COUNT(*) FROM executions) || '/' || (SELECT COUNT(*) FROM assignments)")" "$BEFORE"
is "no operation, snapshot or lease came of it" \
	"$(sql "SELECT (SELECT COUNT(*) FROM operations) || '/' || (SELECT COUNT(*) FROM snapshots) || '/' || (SELECT COUNT(*) FROM sandboxes WHERE lease_owner IS NOT NULL)")" "0/0/0"
is "the timeouts are unchanged" "$(sql "SELECT timeouts FROM sandboxes WHERE id = '$S'")" '{"idle":0,"absolute":0,"action":"pause"}'
is "the sandbox is still running" "$(sql "SELECT state FROM sandboxes WHERE id = '$S'")" running
is "integrity_check ok" "$(store_integrity)" ok
check "daemon still answers /healthz" sh -c "curl -sf '$U/healthz' | grep -q '\"ok\":true'"
check "daemon still serves the API" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $K' '$U/v1/sandboxes/$S') = 200 ]"
check "daemon process is alive" kill -0 "$PID"
kill "$PID"; wait "$PID"; RC=$?; PID=
is "daemon stops cleanly on SIGTERM" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
