#!/bin/sh
# space-control: authentication and tenancy, from the attacker's side.
# No key, a wrong key, a worker credential on user endpoints, an API key on
# worker endpoints, another worker's path, another principal's sandbox.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init

# req METHOD PATH BEARER [BODY]: body -> $T/body, prints the status
req() {
	_m=$1 _p=$2 _b=$3
	shift 3
	set -- -s -o "$T/body" -w '%{http_code}' -X "$_m" "$@"
	[ -n "$_b" ] && set -- "$@" -H "Authorization: Bearer $_b"
	curl "$@" "$U$_p"
}

KA=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
KB=$(space-control apikey add bob --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
check "apikey add prints one sk_ key" sh -c "echo '$KA' | grep -Eq '^sk_[A-Za-z0-9_-]{43}$'"
check "worker add prints one wk_ credential" sh -c "echo '$W1' | grep -Eq '^wk_[A-Za-z0-9_-]{43}$'"
check "worker add refuses an existing worker" sh -c "! space-control worker add w1 --data-dir '$D' 2>/dev/null"
store_dump >"$T/dump"
check "the store holds the key's public id" grep -q -- "$(echo "$KA" | cut -c4-15)" "$T/dump"
check "keys are stored hashed, never in clear" sh -c "! grep -q -- '${KA#sk_}' '$T/dump'"

check "daemon answers /healthz" ctl_start --heartbeat-timeout 3600

is "worker registers with its credential" "$(post /v1/workers/w1/register "$W1" \
	'{"incarnation":"inc1","endpoint":"http://127.0.0.1:1","capacity":8}')" 200

# no key, garbage, wrong key of the right shape, truncated key
is "no key -> 401" "$(req GET /v1/sandboxes '')" 401
is "no key -> unauthenticated" "$(jget error)" unauthenticated
is "garbage key -> 401" "$(req GET /v1/sandboxes 'nonsense')" 401
is "unknown well-formed key -> 401" "$(req GET /v1/sandboxes 'sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')" 401
KX=$(echo "$KA" | cut -c1-15)AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
is "key with a valid lookup id but wrong secret -> 401" "$(req GET /v1/sandboxes "$KX")" 401
is "truncated key -> 401" "$(req GET /v1/sandboxes "$(echo "$KA" | cut -c1-20)")" 401
is "Basic instead of Bearer -> 401" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Basic $KA" "$U/v1/sandboxes")" 401

# cross-kind credentials
is "worker credential on a user endpoint -> 401" "$(req GET /v1/sandboxes "$W1")" 401
is "worker credential on create -> 401" "$(post /v1/sandboxes "$W1" '{}')" 401
is "API key on worker register -> 401" "$(post /v1/workers/w1/register "$KA" \
	'{"incarnation":"inc1","endpoint":"http://127.0.0.1:1","capacity":8}')" 401
is "API key on worker assignments -> 401" "$(req GET '/v1/workers/w1/assignments?after=0' "$KA")" 401
is "API key on worker status -> 401" "$(post /v1/workers/w1/status "$KA" '{}')" 401
is "worker w2's credential on w1's path -> 403" "$(req GET '/v1/workers/w1/assignments?after=0' "$W2")" 403
is "worker w2's credential cannot register as w1" "$(post /v1/workers/w1/register "$W2" \
	'{"incarnation":"evil","endpoint":"http://127.0.0.1:2","capacity":8}')" 403
is "no credential on a worker endpoint -> 401" "$(req GET '/v1/workers/w1/assignments?after=0' '')" 401

# tenancy
is "alice creates a sandbox" "$(post /v1/sandboxes "$KA" '{}')" 201
SA=$(jget id)
is "bob creates a sandbox" "$(post /v1/sandboxes "$KB" '{}')" 201
SB=$(jget id)
is "alice can read her sandbox" "$(req GET "/v1/sandboxes/$SA" "$KA")" 200
is "bob cannot read alice's sandbox (404)" "$(req GET "/v1/sandboxes/$SA" "$KB")" 404
is "... answered not_found, like an unknown id" "$(jget error)" not_found
is "unknown sandbox id is the same 404" "$(req GET "/v1/sandboxes/sbx_doesnotexist" "$KB")" 404
req GET /v1/sandboxes "$KB" >/dev/null
is "bob's list holds only his sandbox" "$(python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(open(sys.argv[1]))["sandboxes"]))' "$T/body")" "$SB"
# make alice's execution serving so that only ownership can refuse
post /v1/workers/w1/status "$W1" "{\"identity\":{\"sandbox\":\"$SA\",\"generation\":1,\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\"},\"state\":\"serving\"}" >/dev/null
is "alice gets routes for her serving sandbox" "$(post "/v1/sandboxes/$SA/routes" "$KA" '{"access":["exec"]}')" 200
is "bob cannot get routes for alice's sandbox (404)" "$(post "/v1/sandboxes/$SA/routes" "$KB" '{"access":["exec"]}')" 404
is "bob cannot delete alice's sandbox (404)" "$(req DELETE "/v1/sandboxes/$SA" "$KB")" 404
req GET "/v1/sandboxes/$SA" "$KA" >/dev/null
is "alice's sandbox is untouched" "$(jget state)" running
is "worker credential cannot report on another worker's execution" "$(post /v1/workers/w2/register "$W2" \
	'{"incarnation":"inc2","endpoint":"http://127.0.0.1:3","capacity":8}')" 200
is "w2 reporting alice's w1 execution -> 403" "$(post /v1/workers/w2/status "$W2" "{\"identity\":{\"sandbox\":\"$SA\",\"generation\":1,\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\"},\"state\":\"failed\"}")" 403
is "alice deletes her sandbox" "$(req DELETE "/v1/sandboxes/$SA" "$KA")" 200
is "... state killed" "$(jget state)" killed

curl -s "$U/metrics" >"$T/metrics"
check "auth failures are counted by kind" grep -q 'space_control_auth_failures_total{kind="worker_credential_on_user_endpoint"} [1-9]' "$T/metrics"
check "wrong-worker failures are counted" grep -q 'space_control_auth_failures_total{kind="wrong_worker"} [1-9]' "$T/metrics"
check "requests are counted by route and status" grep -q 'space_control_requests_total{route="/v1/sandboxes",status="401"}' "$T/metrics"
check "no key material in the logs" sh -c "! grep -q -- '${KA#sk_}' '$T/log' && ! grep -q -- '${W1#wk_}' '$T/log'"
# TLS and the config file: a second daemon on the same data, configured by
# file (listen, TLS), with a flag overriding the file's heartbeat timeout
P2=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$T/tls.key" \
	-out "$T/tls.crt" -days 1 -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
P3=$(free_port)
cat >"$T/control.conf" <<CONF
# space-control settings; --listen on the command line overrides this one
listen = 127.0.0.1:$P3
tls-cert = $T/tls.crt
tls-key  = $T/tls.key
heartbeat-timeout = 5
CONF
space-control --config "$T/control.conf" --data-dir "$D" --listen "127.0.0.1:$P2" 2>>"$T/log2" &
PID2=$!
i=0; while ! curl -s --cacert "$T/tls.crt" -o /dev/null "https://127.0.0.1:$P2/healthz" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
is "TLS listener from the config file answers over https" "$(curl -s --cacert "$T/tls.crt" "https://127.0.0.1:$P2/healthz")" '{"ok":true}'
is "... and authenticates over TLS" "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$T/tls.crt" -H "Authorization: Bearer $KA" "https://127.0.0.1:$P2/v1/sandboxes")" 200
check "... and refuses plain HTTP" sh -c "! curl -sf -o /dev/null 'http://127.0.0.1:$P2/healthz'"
check "... the flag overrode the file's listen address" sh -c "! curl -sk -o /dev/null 'https://127.0.0.1:$P3/healthz'"
kill "$PID2"; wait "$PID2" 2>/dev/null
space-control --data-dir "$T/d2" --store "sqlite:$T/elsewhere.db" --listen "127.0.0.1:$P2" 2>>"$T/log2" &
PID2=$!
wait_http "http://127.0.0.1:$P2/healthz" 10
check "--store sqlite:PATH puts the store there" sh -c "[ -s '$T/elsewhere.db' ] && [ ! -e '$T/d2/control.db' ]"
kill "$PID2"; wait "$PID2" 2>/dev/null
check "an unsupported store scheme is refused at start" sh -c "! space-control --data-dir '$T/d3' --store 'mysql://x/y' --listen 127.0.0.1:$P2 2>/dev/null"
check "a bad PostgreSQL connection string is refused at start" sh -c "! space-control --data-dir '$T/d3' --store 'postgres://[::1' --listen 127.0.0.1:$P2 2>'$T/bad'"
check "... with a clear error" grep -q 'not a valid connection string' "$T/bad"
check "a PostgreSQL that does not answer is refused at start" sh -c "! space-control --data-dir '$T/d3' --store 'postgresql://space@127.0.0.1:1/space' --listen 127.0.0.1:$P2 2>'$T/bad'"
check "... with a clear error" grep -q 'the database does not answer' "$T/bad"
echo 'listen = 127.0.0.1:1' >"$T/bad.conf"; echo 'colour = blue' >>"$T/bad.conf"
check "an unknown config setting is refused at start" sh -c "! space-control --config '$T/bad.conf' --data-dir '$D' 2>/dev/null"
check "a missing --data-dir is a usage error (2)" sh -c "space-control --listen 127.0.0.1:1 2>/dev/null; [ \$? = 2 ]"
kill "$PID"; wait "$PID"; RC=$?; PID=
is "daemon stops cleanly on SIGTERM" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
