#!/bin/sh
# The worker data path end to end: space-control assigns an execution,
# sbx-manager installs a real spaced-host (jail) and records it, node-api
# (unprivileged) serves exec and every file operation with the X-Space-*
# headers; a 1 GiB upload and download pass with bounded memory; a
# restarted sbx-manager adopts its bridge; retiring cancels a running
# operation (an exec, and a large read by a slow client with the guest
# stopped: cut short, what arrived a prefix of the file) and later
# requests get refresh_route.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

[ "${SPACE_SAN:-0}" = 1 ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
platform_init
MGR_FLAGS="--disk-mb 1100"
NP=$(free_port)
NU=http://127.0.0.1:$NP
W=$T/w1

register_worker w1
check "space-control up" start_ctl
check "sbx-manager made its socket" start_mgr 1 w1 "$NP"
check "node-api answers /healthz" start_napi 1 w1 "$NP" --metrics-file "$W/metrics.prom"
is "healthz body" "$(curl -s "$NU/healthz")" '{"ok":true}'

# ---- privilege separation ----
is "node-api runs as nobody (real, effective, saved, fs uid)" \
	"$(awk '/^Uid:/ { print $2, $3, $4, $5 }' /proc/$N1/status)" "65534 65534 65534 65534"
is "node-api has no capabilities" "$(awk '/^CapEff:/ { print $2 }' /proc/$N1/status)" "0000000000000000"
is "node-api has only its own group" "$(awk '/^Groups:/ { print $2 }' /proc/$N1/status)" "65534"
is "sbx-manager socket is 0660 root:nogroup" "$(stat -c '%a %U:%G' "$W/run/sbx-manager.sock")" "660 root:nogroup"
is "records.db is 0600" "$(stat -c %a "$W/records.db")" 600

# ---- install ----
is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "sandbox running within 20 s" wait_state "$S" running 20
is "record committed as serving, generation 1" "$(wsql w1 "select state, generation, activation from records where sandbox='$S'")" "serving|1|1"
is "resident is this worker's incarnation" "$(jget execution.resident "$T/sbx")" "$(cat "$W/incarnation")"
BPID=$(wsql w1 "select bridge_pid from records where sandbox='$S'")
check "recorded bridge pid $BPID is a live spaced-host" test "$(readlink /proc/$BPID/exe)" = "$BIN/spaced-host"
is "recorded start time equals /proc/PID/stat field 22" \
	"$(wsql w1 "select bridge_start from records where sandbox='$S'")" \
	"$(sed 's/.*) //' /proc/$BPID/stat | cut -d' ' -f20)"
is "recorded exe inode equals the binary's" "$(wsql w1 "select exe_ino from records where sandbox='$S'")" "$(stat -c %i "$BIN/spaced-host")"
is "run directory is 0700" "$(stat -c %a "$W/run/$S.g1")" 700
CAP=$(route "$S")

# ---- exec ----
is "exec -> 200" "$(napi POST exec --data-binary '{"argv":["sh","-c","echo hello; echo err >&2; exit 3"]}')" 200
is "exec stdout" "$(jget stdout)" "hello"
is "exec stderr" "$(jget stderr)" "err"
is "exec exit code" "$(jget exit_code)" 3
is "X-Space-Generation" "$(hdr X-Space-Generation)" 1
is "X-Space-Worker" "$(hdr X-Space-Worker)" w1
is "exec runs as the unprivileged sandbox user" \
	"$(napi POST exec --data-binary '{"argv":["id","-u"]}' >/dev/null; jget stdout)" 1000

# ---- files ----
printf 'line one\nline two\n' >"$T/small"
is "PUT files -> 200" "$(napi PUT 'files?path=/home/user/notes.txt' --data-binary @"$T/small")" 200
is "PUT result size" "$(jget size)" 18
is "GET files -> 200" "$(napi GET 'files?path=/home/user/notes.txt')" 200
check "GET returns the bytes written" cmp -s "$T/body" "$T/small"
is "GET Content-Length" "$(hdr Content-Length)" 18
is "GET carries X-Space-Generation" "$(hdr X-Space-Generation)" 1
is "fs/stat -> 200" "$(napi GET 'fs/stat?path=/home/user/notes.txt')" 200
is "stat type and size" "$(jget type) $(jget size)" "file 18"
is "fs/mkdir -> 200" "$(napi POST fs/mkdir --data-binary '{"path":"/home/user/d/e","parents":true}')" 200
is "fs/rename -> 200" "$(napi POST fs/rename --data-binary '{"from":"/home/user/notes.txt","to":"/home/user/d/e/n.txt"}')" 200
is "old name is gone -> 404" "$(napi GET 'fs/stat?path=/home/user/notes.txt')" 404
is "404 code" "$(jget error)" not_found
is "an error answered by the execution carries X-Space-Generation" "$(hdr X-Space-Generation)" 1
is "fs/list -> 200" "$(napi GET 'fs/list?path=/home/user/d/e')" 200
is "list shows the renamed file" "$(python3 -c 'import json,sys;print(",".join(e["name"] for e in json.load(open(sys.argv[1]))["entries"]))' "$T/body")" "n.txt"
is "remove a non-empty dir without recursive -> 409" "$(napi POST fs/remove --data-binary '{"path":"/home/user/d"}')" 409
is "fs/remove recursive -> 200" "$(napi POST fs/remove --data-binary '{"path":"/home/user/d","recursive":true}')" 200
is "removed" "$(napi GET 'fs/stat?path=/home/user/d')" 404
is "mode query is applied" "$(napi PUT 'files?path=/home/user/x.sh&mode=0750' --data-binary 'x' >/dev/null; napi GET 'fs/stat?path=/home/user/x.sh' >/dev/null; jget mode)" 488

# ---- 1 GiB through node-api and sbx-manager with constant memory ----
SZ=1073741824
ZSUM=$(head -c $SZ /dev/zero | sha256sum | cut -d' ' -f1)
t0=$(date +%s)
code=$(head -c $SZ /dev/zero | curl -s -o "$T/body" -w '%{http_code}' -X PUT -T - \
	-H "Authorization: Bearer $CAP" "$NU/v1/sandboxes/$S/files?path=/home/user/big")
t1=$(date +%s)
is "1 GiB PUT (chunked) -> 200" "$code" 200
is "1 GiB PUT size" "$(jget size)" $SZ
CAP=$(route "$S")
sum=$(curl -s -H "Authorization: Bearer $CAP" "$NU/v1/sandboxes/$S/files?path=/home/user/big" | sha256sum | cut -d' ' -f1)
t2=$(date +%s)
is "1 GiB GET returns the same bytes" "$sum" "$ZSUM"
# under ASan the allocator's quarantine keeps freed chunks: the bound is
# looser there (the daemons are started with a 16 MB quarantine)
LIM=65536; [ "${SPACE_SAN:-0}" = 1 ] && LIM=196608
hwm_m=$(awk '/^VmHWM:/ { print $2 }' /proc/$M1/status)
hwm_n=$(awk '/^VmHWM:/ { print $2 }' /proc/$N1/status)
diag "1 GiB: PUT $((t1 - t0)) s, GET $((t2 - t1)) s; peak RSS sbx-manager ${hwm_m} kB, node-api ${hwm_n} kB"
check "sbx-manager peak RSS under $((LIM / 1024)) MiB ($hwm_m kB)" test "$hwm_m" -lt $LIM
check "node-api peak RSS under $((LIM / 1024)) MiB ($hwm_n kB)" test "$hwm_n" -lt $LIM
napi POST fs/remove --data-binary '{"path":"/home/user/big"}' >/dev/null

# ---- metrics ----
# a bridge keeps its refusal counts in its run directory, written at its
# first refusal (spaced-host audit.c); sbx-manager folds the serving
# bridges' sample lines into its own, and nothing else of the file
printf '# TYPE space_bridge_refusals_total counter\nspace_bridge_refusals_total{sandbox="%s",generation="1",activation="1",outcome="deny",reason="generation_mismatch"} 3\nnot_a_refusal 1\n' "$S" \
	>"$W/run/$S.g1/metrics.prom"
prom_fresh "$W/metrics.prom"      # sbx-manager rewrites it every 2 s
curl -s "$NU/metrics" >"$T/metrics"
check "metrics: node-api requests by route and status" grep -q '^space_nodeapi_requests_total{route="exec",status="200"} ' "$T/metrics"
check "metrics: sbx-manager admissions (appended)" grep -q '^space_sbxmgr_admission_total{outcome="allow",reason="ok"} ' "$T/metrics"
is "metrics: the serving bridge's refusal count folded in" \
	"$(grep -c "^space_bridge_refusals_total{sandbox=\"$S\",generation=\"1\",activation=\"1\",outcome=\"deny\",reason=\"generation_mismatch\"} 3$" "$T/metrics")" 1
is "... its other lines not" "$(grep -c '^not_a_refusal' "$T/metrics")" 0
rm -f "$W/run/$S.g1/metrics.prom"
# records.db: every record written is counted once, in a commit of one or
# more records (group commit), so there are at least as many as commits
RC=$(sed -n 's/^space_sbxmgr_record_commits_total \([0-9]*\)$/\1/p' "$T/metrics")
RW=$(sed -n 's/^space_sbxmgr_records_written_total \([0-9]*\)$/\1/p' "$T/metrics")
check "metrics: records.db commits counted ($RC)" test "${RC:-0}" -ge 2
check "metrics: records written ($RW), no fewer than commits" test "${RW:-0}" -ge "${RC:-1}"

# ---- restart: the bridge is adopted, not relaunched ----
crash M1
check "bridge survives sbx-manager's death" kill -0 "$BPID"
start_mgr 1 w1 "$NP"
sleep 0.5
is "after restart: same bridge, same activation" "$(wsql w1 "select bridge_pid, activation, state from records where sandbox='$S'")" "$BPID|1|serving"
is "exec with the same capability still works" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
check "sbx-manager logged the adoption" grep -q "adopted bridge of $S" "$T/mgr_w1.log"

# ---- the control plane away: the worker keeps serving what it has ----
stop CTL
crash M1
start_mgr 1 w1 "$NP"
check "sbx-manager starts while the control plane is down" test -S "$W/run/sbx-manager.sock"
is "exec still served (key bundle kept in D/keys.bundle)" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
check "logged that it serves without the control plane" grep -q "control plane unreachable" "$T/mgr_w1.log"
start_ctl
i=0; while ! grep -q '"control: registered"' "$T/mgr_w1.log" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
check "registers once the control plane is back" grep -q '"control: registered"' "$T/mgr_w1.log"

# ---- retire cancels the running operation; late requests refresh ----
# a large read by a slow client is running too. Its body is the file's
# descriptor, passed up from the guest and sent by node-api (every hop
# checked it); sbx-manager holds the operation's lease meanwhile, and the
# read must end with the execution, not drain the file.
CAP=$(route "$S")
RSZ=67108864
pattern() { yes 0123456789abcdef | head -c "$1"; }
is "64 MiB patterned PUT -> 200" "$(pattern $RSZ | curl -s -o /dev/null -w '%{http_code}' \
	-X PUT -T - -H "Authorization: Bearer $CAP" "$NU/v1/sandboxes/$S/files?path=/home/user/slow")" 200
bodies() { curl -s "$NU/metrics" | sed -n "s/^space_nodeapi_file_bodies_$1 //p"; }
d0=$(bodies 'total{from="descriptor"}'); c0=$(bodies cut_total)
curl -s --limit-rate 2M -o "$T/slow" -w '%{http_code}' -H "Authorization: Bearer $CAP" \
	"$NU/v1/sandboxes/$S/files?path=/home/user/slow" >"$T/slow.code" &
SLOW=$!
i=0; while [ "$(stat -c %s "$T/slow" 2>/dev/null || echo 0)" -lt 1048576 ] && [ $i -lt 300 ]; do
	sleep 0.1; i=$((i + 1)); done
check "the slow read is under way" test "$(stat -c %s "$T/slow" 2>/dev/null || echo 0)" -ge 1048576
curl -s -o "$T/long" -w '%{http_code}' -X POST -H "Authorization: Bearer $CAP" \
	--data-binary '{"argv":["sleep","30"]}' "$NU/v1/sandboxes/$S/exec" >"$T/long.code" &
LONG=$!
sleep 1
# the guest stopped (a hung execution): the exec waits on it, the read
# does not (its descriptor is node-api's); the retire below must end both
G=$(guest_of "$BPID")
STOPPED="$G $(desc "$G")"
kill -STOP $STOPPED 2>/dev/null
# (curl's --limit-rate reads in bursts and sleeps between them: up to 10 s)
a=$(stat -c %s "$T/slow"); b=$a; i=0
while [ "$b" -le "$a" ] && [ $i -lt 100 ]; do sleep 0.1; b=$(stat -c %s "$T/slow"); i=$((i + 1)); done
check "the read goes on with the guest stopped ($a, then $b bytes)" test "$b" -gt "$a"
t0=$(date +%s)
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S"
at_delete=$(stat -c %s "$T/slow")
wait $LONG
t1=$(date +%s)
kill -CONT $STOPPED 2>/dev/null
wait $SLOW; slow_rc=$?
got=$(stat -c %s "$T/slow")
diag "slow read: $at_delete bytes when the retire was answered, $got at the end (curl exit $slow_rc)"
check "the read ends with the execution, cut short ($got of $RSZ bytes)" test "$got" -lt "$RSZ"
check "... as a failed transfer for the client (curl exit $slow_rc)" test "$slow_rc" -ne 0
check "... and what arrived is the file's own prefix" sh -c "yes 0123456789abcdef | head -c $got | cmp -s - '$T/slow'"
# counted when the answer ends (node-api's completion, after the client saw the cut)
cut_counted() { [ $(($(bodies cut_total) - c0)) -ge 1 ]; }
eventually 10 cut_counted
is "node-api sent it from the descriptor, and counts it cut" \
	"$(($(bodies 'total{from="descriptor"}') - d0)) $(($(bodies cut_total) - c0))" "1 1"
is "the running exec is cut off -> 503" "$(cat "$T/long.code")" 503
is "... with reason execution_replaced" "$(jget reason "$T/long")" execution_replaced
check "... well before the command's 30 s ($((t1 - t0)) s)" test $((t1 - t0)) -lt 15
is "record retired (and kept)" "$(wsql w1 "select state from records where sandbox='$S'")" retired
check "bridge stopped" gone "$BPID"
is "request after retirement -> 409" "$(napi POST exec --data-binary '{"argv":["true"]}')" 409
is "refresh_route / not_serving" "$(jget error) $(jget reason)" "refresh_route not_serving"
check "the refusal is audited with both identities" \
	grep -q "\"audit\":\"admission\".*\"reason\":\"not_serving\".*\"cap_route\":{.*\"record_route\":{" "$T/mgr_w1.log"

done_testing
