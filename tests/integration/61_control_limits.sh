#!/bin/sh
# space-control, from a tenant's and an operator's side: a sandbox cannot
# ask more than the deployment's maxima (400 naming the maximum), gets the
# deployment's defaults when it asks nothing, and is placed only where its
# memory fits beside what the worker already runs (the reported memory,
# times the overcommit ratio), not merely where a slot is free. An unknown
# template is refused at create, and a failed execution's reason is in the
# API and in `space show`. Workers are simulated with curl.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
D=$T/data
PORT=$(free_port)
U=http://127.0.0.1:$PORT
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; [ -n "$PID" ] && wait "$PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM

get() { curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $2" "$U$1"; }
post() { curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $2" \
	--data-binary "$3" "$U$1"; }
jget() { python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[int(k)] if isinstance(d, list) else d[k]
print(json.dumps(d) if isinstance(d, (dict, list)) or d is None else d)' "${2:-$T/body}" "$1"; }
sql() { sqlite3 -cmd '.timeout 5000' "$D/control.db" "$1"; }
start() {
	space-control --data-dir "$D" --listen "127.0.0.1:$PORT" --heartbeat-timeout 3600 "$@" \
		2>>"$T/log" &
	PID=$!
	wait_http "$U/healthz" 10
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null; PID=; }
reg() { # WORKER CRED PORT MEMORY_MB
	post "/v1/workers/$1/register" "$2" "{\"incarnation\":\"inc$1\",\"endpoint\":\"http://127.0.0.1:$3\",\"capacity\":100,\"resources\":{\"memory_mb\":$4,\"cpu_percent\":200,\"disk_mb\":1000000}}"
}
create() { post /v1/sandboxes "$K" "$1"; }

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
start
check "daemon started" true
is "w1 registers with 1024 MiB" "$(reg w1 "$W1" 9001 1024)" 200
is "w2 registers with 2048 MiB" "$(reg w2 "$W2" 9002 2048)" 200

# the tenant's side: asking for the host
is "memory_mb 1048576 (1 TiB) -> 400" "$(create '{"resources":{"memory_mb":1048576}}')" 400
check "... naming the maximum (8192)" grep -q 'memory_mb.*maximum of 8192' "$T/body"
is "pids 30000 -> 400" "$(create '{"resources":{"pids":30000}}')" 400
check "... naming the maximum (4096)" grep -q 'pids.*maximum of 4096' "$T/body"
is "cpu_percent 10000 -> 400" "$(create '{"resources":{"cpu_percent":10000}}')" 400
check "... naming the maximum (400)" grep -q 'cpu_percent.*maximum of 400' "$T/body"
is "disk_mb 10000000 -> 400" "$(create '{"resources":{"disk_mb":10000000}}')" 400
is "nothing was created by the refused requests" "$(sql "SELECT COUNT(*) FROM sandboxes")" 0

# an unknown template is refused at create, not relaunched until it fails
is "template nope -> 400" "$(create '{"template":"nope"}')" 400
check "... naming the known templates" grep -q 'unknown template.*host' "$T/body"

# defaults, and placement by memory: w1 holds two 512 MiB sandboxes, w2 four
is "a create with no resources -> 201" "$(create '{}')" 201
is "... gets the deployment's defaults" "$(jget resources)" \
	'{"memory_mb": 512, "pids": 256, "cpu_percent": 100, "disk_mb": 4096}'
for i in 2 3 4 5 6; do create '{"resources":{"memory_mb":512}}' >/dev/null; done
is "six 512 MiB sandboxes fit (1024 + 2048 MiB)" "$(sql "SELECT COUNT(*) FROM executions")" 6
is "the seventh does not fit anywhere -> 503" "$(create '{"resources":{"memory_mb":512}}')" 503
is "no worker is asked more memory than it reported" \
	"$(sql "SELECT COUNT(*) FROM (SELECT e.worker, SUM(json_extract(s.resources, '\$.memory_mb')) m FROM executions e JOIN sandboxes s ON s.id = e.sandbox GROUP BY e.worker) u JOIN workers w ON w.id = u.worker WHERE u.m > w.memory_mb")" 0
is "a small sandbox still fits nowhere (memory is full)" "$(create '{"resources":{"memory_mb":1}}')" 503
is "GET /v1/workers" "$(get /v1/workers "$K")" 200
is "... shows what w1 reported and what its sandboxes ask" \
	"$(jget workers.0.resources.memory_mb) $(jget workers.0.used.memory_mb)" "1024 1024"
SPACE_API_URL=$U SPACE_API_KEY=$K space workers >"$T/workers" 2>>"$T/log"
check "space workers shows memory used/total" grep -q '^w2 .* 2048/2048 ' "$T/workers"

# a failed execution's reason reaches the API and space show
S=$(sql "SELECT sandbox FROM executions WHERE worker = 'w1' LIMIT 1")
ID=$(sql "SELECT json_object('sandbox', sandbox, 'generation', generation, 'worker', worker, 'substrate', substrate, 'activation', activation, 'resident', resident) FROM executions WHERE sandbox = '$S'")
is "w1 reports the launch failed" "$(post /v1/workers/w1/status "$W1" "{\"identity\":$ID,\"state\":\"failed\",\"error\":\"spaced-host: cannot launch: template missing\"}")" 200
get "/v1/sandboxes/$S" "$K" >/dev/null
is "the API shows the reason on the execution" "$(jget execution.error)" "spaced-host: cannot launch: template missing"
is "... and in the history" "$(jget history.0.error)" "spaced-host: cannot launch: template missing"
SPACE_API_URL=$U SPACE_API_KEY=$K space show "$S" >"$T/show" 2>>"$T/log"
check "space show prints the reason" grep -q 'cannot launch: template missing' "$T/show"

# what a worker has is refreshed by its heartbeat, not only at registration
hb() { post /v1/workers/w1/heartbeat "$W1" "{\"incarnation\":\"incw1\",$1}"; }
is "w2's heartbeat: capacity 0 from now on" "$(post /v1/workers/w2/heartbeat "$W2" '{"incarnation":"incw2","capacity":0}')" 200
is "w1's heartbeat: 64 MiB of memory left" "$(hb '"capacity":100,"resources":{"memory_mb":64,"cpu_percent":200,"disk_mb":1000000}')" 200
get /v1/workers "$K" >/dev/null
is "GET /v1/workers shows the figures of the heartbeat" \
	"$(python3 -c 'import json,sys
w={x["id"]: x for x in json.load(open(sys.argv[1]))["workers"]}
print(w["w1"]["resources"]["memory_mb"], w["w2"]["capacity"])' "$T/body")" "64 0"
is "a 128 MiB sandbox fits nowhere now -> 503" "$(create '{"resources":{"memory_mb":128}}')" 503
is "a heartbeat with a negative capacity -> 400" "$(hb '"capacity":-1')" 400
is "... with an unknown resource -> 400" "$(hb '"resources":{"memory_mb":1,"gpus":1}')" 400
is "w1's heartbeat: 4096 MiB again" "$(hb '"resources":{"memory_mb":4096,"cpu_percent":200,"disk_mb":1000000}')" 200
is "... and it fits again -> 201" "$(create '{"resources":{"memory_mb":128}}')" 201

# the operator's side: other maxima, defaults and an overcommit ratio
stop
start --max-memory-mb 2048 --default-memory-mb 256 --overcommit-memory 200
is "restarted with --max-memory-mb 2048" "$(create '{"resources":{"memory_mb":4096}}')" 400
check "... naming the operator's maximum" grep -q 'maximum of 2048' "$T/body"
is "with --overcommit-memory 200 a 512 MiB sandbox fits again" \
	"$(create '{"resources":{"memory_mb":512}}')" 201
is "a create with no resources gets the operator's default" "$(create '{}') $(jget resources.memory_mb)" "201 256"
stop
space-control --data-dir "$D" --default-memory-mb 9000 >/dev/null 2>"$T/err" &
P=$!
wait "$P"
check "a default above its maximum is refused at start" grep -q 'above its --max' "$T/err"
done_testing
