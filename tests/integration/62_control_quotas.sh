#!/bin/sh
# space-control, from a tenant's side: an API key's quota (running
# sandboxes, their memory, creates per minute) answers 429 + Retry-After,
# a burst of parallel creates by one tenant does not starve another, and
# a revoked key is refused at once (and its tenant's access tokens with
# it), and a resume counts as a create would (pausing does not make room
# for more than the quota; nor does revoking the key that made a paused
# sandbox). Workers are simulated with curl.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
D=$T/data
PORT=$(free_port)
U=http://127.0.0.1:$PORT
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; [ -n "$PID" ] && wait "$PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM

post() { curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X POST -H "Authorization: Bearer $2" \
	--data-binary "$3" "$U$1"; }
reg() { post "/v1/workers/$1/register" "$2" "{\"incarnation\":\"inc$1\",\"endpoint\":\"http://127.0.0.1:$3\",\"capacity\":100}"; }

A=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
M=$(space-control apikey add mallory --max-sandboxes 3 --data-dir "$D" 2>>"$T/log")
R=$(space-control apikey add rate --creates-per-minute 2 --data-dir "$D" 2>>"$T/log")
B=$(space-control apikey add mem --max-memory-mb 1024 --data-dir "$D" 2>>"$T/log")
P=$(space-control apikey add pauser --max-sandboxes 1 --max-memory-mb 1024 --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
space-control --data-dir "$D" --listen "127.0.0.1:$PORT" --heartbeat-timeout 3600 2>>"$T/log" &
PID=$!
check "daemon started" wait_http "$U/healthz" 10
is "w1 registers" "$(reg w1 "$W1" 9001)" 200

# mallory's burst: 20 parallel creates against a quota of 3 running
export U M
seq 1 20 | xargs -P 10 -I@ sh -c 'curl -s -o /dev/null -D - -w "code=%{http_code}\n" -X POST \
	-H "Authorization: Bearer $M" --data-binary "{}" "$U/v1/sandboxes"' >"$T/burst"
is "20 parallel creates with a quota of 3: three 201" "$(grep -c '^code=201' "$T/burst")" 3
is "... and seventeen 429" "$(grep -c '^code=429' "$T/burst")" 17
is "... each 429 with Retry-After" "$(grep -ci '^retry-after: [1-9]' "$T/burst")" 17
is "another tenant still creates -> 201" "$(post /v1/sandboxes "$A" '{}')" 201
is "mallory holds 3 sandboxes" "$(sqlite3 "$D/control.db" "SELECT COUNT(*) FROM sandboxes WHERE owner = 'mallory'")" 3
S=$(sqlite3 "$D/control.db" "SELECT id FROM sandboxes WHERE owner = 'mallory' LIMIT 1")
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $M" "$U/v1/sandboxes/$S"
is "after a kill mallory creates again" "$(post /v1/sandboxes "$M" '{}')" 201

# creates per minute
is "rate: first create" "$(post /v1/sandboxes "$R" '{}')" 201
is "rate: second create" "$(post /v1/sandboxes "$R" '{}')" 201
is "rate: third within the minute -> 429" "$(post /v1/sandboxes "$R" '{}')" 429
RA=$(grep -i '^retry-after:' "$T/hdr" | tr -dc 0-9)
check "... quota_exceeded, Retry-After $RA s: when the oldest create leaves the minute" \
	sh -c "grep -q quota_exceeded '$T/body' && [ '${RA:-0}' -ge 1 ] && [ '${RA:-0}' -le 60 ]"

# memory
is "mem: 512 MiB" "$(post /v1/sandboxes "$B" '{"resources":{"memory_mb":512}}')" 201
is "mem: another 512 MiB" "$(post /v1/sandboxes "$B" '{"resources":{"memory_mb":512}}')" 201
is "mem: 1 MiB more than 1024 -> 429" "$(post /v1/sandboxes "$B" '{"resources":{"memory_mb":1}}')" 429

# a resume passes the quota too: pause one, create another, resume the first
sim_fetch w1 "$W1" 0
is "pauser: one sandbox" "$(post /v1/sandboxes "$P" '{"resources":{"memory_mb":512}}')" 201
P1=$(jget id)
sim_fetch w1 "$W1"
sim_report w1 "$W1" serving >/dev/null
is "pauser: pause it -> 202" "$(post "/v1/sandboxes/$P1/pause" "$P" '{}')" 202
sim_fetch w1 "$W1"
sim_report w1 "$W1" retired "$(rdigest)" >/dev/null
i=0; while [ $i -lt 200 ] && [ "$(sqlite3 "$D/control.db" "SELECT state FROM sandboxes WHERE id='$P1'")" != paused ]; do sleep 0.1; i=$((i + 1)); done
is "... paused" "$(sqlite3 "$D/control.db" "SELECT state FROM sandboxes WHERE id='$P1'")" paused
is "pauser: a paused sandbox does not count: another create -> 201" "$(post /v1/sandboxes "$P" '{"resources":{"memory_mb":512}}')" 201
P2=$(jget id)
is "pauser: resuming the first would make two running -> 429" "$(post "/v1/sandboxes/$P1/resume" "$P" '{}')" 429
check "... quota_exceeded with Retry-After" sh -c "grep -q quota_exceeded '$T/body' && grep -qi '^retry-after: [1-9]' '$T/hdr'"
is "... the sandbox stays paused" "$(sqlite3 "$D/control.db" "SELECT state FROM sandboxes WHERE id='$P1'")" paused
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $P" "$U/v1/sandboxes/$P2"
is "pauser: after killing the second, the resume -> 202" "$(post "/v1/sandboxes/$P1/resume" "$P" '{}')" 202

# a key rotation does not take a paused sandbox out of every quota:
# resumed after the key that made it was revoked, it passes the quota of
# the key that resumes it, and counts against that key from then on
dbstate() { sqlite3 "$D/control.db" "SELECT state FROM sandboxes WHERE id='$1'"; }
wait_dbstate() { i=0; while [ $i -lt 200 ] && [ "$(dbstate "$1")" != "$2" ]; do sleep 0.1; i=$((i + 1)); done; [ "$(dbstate "$1")" = "$2" ]; }
sim_fetch w1 "$W1"
sim_report w1 "$W1" serving >/dev/null
check "pauser: the first runs again" wait_dbstate "$P1" running
is "pauser: pause it once more -> 202" "$(post "/v1/sandboxes/$P1/pause" "$P" '{}')" 202
sim_fetch w1 "$W1"
sim_report w1 "$W1" retired "$(rdigest)" >/dev/null
check "... paused" wait_dbstate "$P1" paused
PN=$(space-control apikey add pauser --max-sandboxes 1 --max-memory-mb 1024 --data-dir "$D" 2>>"$T/log")
PID1=$(echo "$P" | cut -c4-15) PIDN=$(echo "$PN" | cut -c4-15)
check "pauser's first key revoked (a rotation)" sh -c "space-control apikey revoke '$PID1' --data-dir '$D' >/dev/null 2>>'$T/log'"
is "... it is refused" "$(post /v1/sandboxes "$P" '{}')" 401
is "pauser's new key: one sandbox of its own" "$(post /v1/sandboxes "$PN" '{"resources":{"memory_mb":512}}')" 201
PN1=$(jget id)
is "pauser's new key resumes the first: its own quota is full -> 429" "$(post "/v1/sandboxes/$P1/resume" "$PN" '{}')" 429
is "... the sandbox stays paused" "$(dbstate "$P1")" paused
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $PN" "$U/v1/sandboxes/$PN1"
is "after killing its own, the new key's resume -> 202" "$(post "/v1/sandboxes/$P1/resume" "$PN" '{}')" 202
is "... the sandbox now counts against the new key" "$(sqlite3 "$D/control.db" "SELECT api_key FROM sandboxes WHERE id='$P1'")" "$PIDN"
is "... so the new key's next create is over its quota -> 429" "$(post /v1/sandboxes "$PN" '{"resources":{"memory_mb":512}}')" 429

# list and revoke
space-control apikey list --data-dir "$D" >"$T/list" 2>>"$T/log"
check "apikey list shows mallory's quota" grep -Eq ' mallory +.* 3 +0 +0$' "$T/list"
check "apikey list never prints a key" sh -c "! grep -q 'sk_' '$T/list'"
is "mallory's key works" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $M" "$U/v1/sandboxes")" 200
MS=$(sqlite3 "$D/control.db" "SELECT id FROM sandboxes WHERE owner = 'mallory' AND state != 'killed' LIMIT 1")
is "mallory makes an access token for one of hers" "$(post "/v1/sandboxes/$MS/access-token" "$M" '{}')" 200
MAT=$(jget access_token)
st=$(post "/v1/sandboxes/$MS/routes" "$MAT" '{}')
check "... which the control plane takes for that sandbox ($st)" test "$st" != 401
check "apikey revoke mallory" sh -c "space-control apikey revoke mallory --data-dir '$D' >/dev/null 2>>'$T/log'"
is "her access token is refused once she is revoked -> 401" "$(post "/v1/sandboxes/$MS/routes" "$MAT" '{}')" 401
is "the revoked key is refused at once -> 401" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $M" "$U/v1/sandboxes")" 401
is "... creates too" "$(post /v1/sandboxes "$M" '{}')" 401
is "another tenant is unaffected" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $A" "$U/v1/sandboxes")" 200
space-control apikey list --data-dir "$D" >"$T/list" 2>>"$T/log"
check "apikey list shows it revoked" grep -Eq ' mallory +[0-9TZ:-]+ +[0-9]{4}-' "$T/list"
check "revoking it again finds nothing" sh -c "! space-control apikey revoke mallory --data-dir '$D' >/dev/null 2>&1"

# a key's id is an argument of the commands: none begins with '-' (which
# would read as an option; 1 in 64 did), and "--" takes one as it is
i=0; dash=0
while [ $i -lt 400 ]; do
	k=$(space-control apikey add "many$i" --data-dir "$D" 2>>"$T/log")
	case "$k" in sk_-*) dash=$((dash + 1)) ;; sk_*) ;; *) dash=$((dash + 1000)) ;; esac
	i=$((i + 1))
done
is "400 keys made: no id begins with '-'" "$dash" 0
KID=$(echo "$k" | cut -c4-15)
check "apikey revoke -- ID revokes that key" sh -c "space-control apikey revoke -- '$KID' --data-dir '$D' >/dev/null 2>>'$T/log'"
is "... which is refused" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $k" "$U/v1/sandboxes")" 401
check "an id beginning with '-' without \"--\" is refused with a hint" sh -c \
	"! space-control apikey revoke -abc --data-dir '$D' 2>'$T/err' && grep -q 'apikey revoke -- ID' '$T/err'"
done_testing
