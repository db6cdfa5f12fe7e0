#!/bin/sh
# Bridge verification (DESIGN section 6): sbx-manager forwards only to the
# process it launched, checked on every connection. A process that is not
# the recorded bridge listening on the bridge path receives nothing; a
# recorded PID that now belongs to another process is never trusted (nor
# signalled); a bridge whose binary was replaced on disk is refused; a
# bridge that dies is noticed. What is simulated is said where it is done.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
MGR_FLAGS="--disk-mb 1100"
NP=$(free_port)
NU=http://127.0.0.1:$NP
W=$T/w1
FAKE= IMPOSTOR=
# the test's own processes, when it ends early: the fake listener, the
# impostor, the stand-in bridges (not ours: another executable)
platform_on_cleanup() {
	for _p in $FAKE $IMPOSTOR; do kill "$_p" 2>/dev/null; wait "$_p" 2>/dev/null; done
	for _p in /proc/[0-9]*; do [ "$(readlink "$_p/exe" 2>/dev/null)" = "$T/liar/spaced-host" ] && kill "${_p#/proc/}"; done
}
sql() { wsql w1 "$1"; }

register_worker w1
check "space-control up" start_ctl
check "sbx-manager made its socket" start_mgr 1 w1 "$NP"
check "node-api answers /healthz" start_napi 1 w1 "$NP" --metrics-file "$W/metrics.prom"
is "healthz body" "$(curl -s "$NU/healthz")" '{"ok":true}'

exec_marker() { napi POST exec --data-binary "{\"argv\":[\"touch\",\"/home/user/$1\"]}"; }
refusal_logged() { grep -q "\"audit\":\"bridge\".*\"reason\":\"$1\"" "$T/mgr_w1.log"; }

is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
CAP=$(route "$S")
RUN=$W/run/$S.g1
BPID=$(sql "select bridge_pid from records where sandbox='$S'")
# sbx-manager keeps a bridge connection for the next operation of the same
# execution (docs/jail.md "Kept connections"), and opens one, verified as
# for an operation, when the execution starts serving; every check below
# must hold with one kept, not only on fresh connections
mgr_metric() { prom_fresh "$W/metrics.prom"; curl -s "$NU/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
check "a bridge connection was opened at the execution's start" \
	test "$(mgr_metric space_sbxmgr_bridge_opened_ahead_total)" -ge 1
is "control: the real bridge serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
is "a second operation -> 200" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
check "... both carried by the kept bridge connection (the first: the one opened at the start)" \
	test "$(mgr_metric space_sbxmgr_bridge_kept_used_total)" -ge 2

# ---- 1. another process listening on the bridge path ----
# The real bridge is stopped (SIGSTOP, so nothing notices it is gone) and
# its socket moved aside; a Python listener binds the same path and records
# every byte it receives.
kill -STOP "$BPID"
mv "$RUN/bridge.sock" "$RUN/bridge.sock.real"
cat >"$T/fake.py" <<'PY'
import socket, sys, threading
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8)
open(log, "wb").close()
print("listening", flush=True)
def serve(c):
    c.settimeout(10)
    try:
        while True:
            d = c.recv(65536)
            if not d: break
            open(log, "ab").write(d)
    except OSError:
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
python3 "$T/fake.py" "$RUN/bridge.sock" "$T/fake.bytes" >"$T/fake.out" 2>&1 &
FAKE=$!
i=0; while ! grep -q listening "$T/fake.out" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
is "fake listener on the bridge path -> 503" "$(exec_marker fake)" 503
is "... unavailable" "$(jget error)" unavailable
sleep 0.5
is "the fake listener received no byte at all" "$(wc -c <"$T/fake.bytes")" 0
check "refusal audited: SO_PEERCRED names another process" refusal_logged 'peer is not the recorded bridge (SO_PEERCRED)'
check "the kept connection to the real bridge was closed, not used past the fake" \
	test "$(mgr_metric space_sbxmgr_bridge_kept_dropped_total)" -ge 1
kill "$FAKE"; wait "$FAKE" 2>/dev/null; FAKE=
rm -f "$RUN/bridge.sock"
mv "$RUN/bridge.sock.real" "$RUN/bridge.sock"
kill -CONT "$BPID"
is "real bridge back on its path: served again" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
is "... and the refused command never ran" "$(napi GET 'fs/stat?path=/home/user/fake')" 404

# ---- 2. the bridge binary replaced on disk ----
cp "$BIN/spaced-host" "$BIN/spaced-host.new"
mv "$BIN/spaced-host.new" "$BIN/spaced-host"
is "binary replaced under a running bridge -> 503" "$(exec_marker replaced)" 503
check "refusal audited: binary replaced" refusal_logged 'bridge binary replaced on disk'
check "the old bridge is still the recorded process (pid, start time)" test "$(sql "select bridge_pid from records where sandbox='$S'")" = "$BPID"
# a restart is how a new binary is taken into use: the old bridge (ours,
# untrusted binary) is stopped and a new activation starts from the new file
stop M1
start_mgr 1 w1 "$NP"
i=0; while [ "$(sql "select activation, state from records where sandbox='$S'")" != "2|serving" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
is "restart relaunches: activation 2, serving" "$(sql "select activation, state from records where sandbox='$S'")" "2|serving"
check "logged why the old bridge was not adopted" grep -q "not adoptable (bridge binary replaced on disk)" "$T/mgr_w1.log"
check "the old bridge was stopped" gone "$BPID"
is "new bridge runs the new file" "$(sql "select exe_ino from records where sandbox='$S'")" "$(stat -c %i "$BIN/spaced-host")"
is "activation-1 capability -> 409 activation_mismatch" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "409 activation_mismatch"
CAP=$(route "$S")
is "fresh capability served" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
is "the command refused earlier never ran" "$(napi GET 'fs/stat?path=/home/user/replaced')" 404

# ---- 3. the recorded PID belongs to another process (simulated reuse) ----
# Simulated: with sbx-manager stopped, the bridge is killed and the record
# is edited to name a live unrelated process (a sleep) under the bridge's
# recorded start time, which is what a reused PID looks like: the pid is
# alive, its start time is not the recorded one.
BPID=$(sql "select bridge_pid from records where sandbox='$S'")
stop M1
kill -9 "$BPID"; gone "$BPID"
sleep 300 &
IMPOSTOR=$!
sql "update records set bridge_pid = $IMPOSTOR where sandbox='$S'"
check "the impostor's start time differs from the recorded one" test \
	"$(sed 's/.*) //' /proc/$IMPOSTOR/stat | cut -d' ' -f20)" != "$(sql "select bridge_start from records where sandbox='$S'")"
start_mgr 1 w1 "$NP"
i=0; while [ "$(sql "select activation, state from records where sandbox='$S'")" != "3|serving" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
is "reused pid not adopted: relaunched as activation 3" "$(sql "select activation, state from records where sandbox='$S'")" "3|serving"
check "logged: start time differs (pid reused)" grep -q "not adoptable (bridge start time differs (pid reused))" "$T/mgr_w1.log"
check "the impostor was never signalled" kill -0 "$IMPOSTOR"
kill "$IMPOSTOR"; wait "$IMPOSTOR" 2>/dev/null; IMPOSTOR=
check "the new bridge is a different, live spaced-host" test "$(readlink /proc/$(sql "select bridge_pid from records where sandbox='$S'")/exe)" = "$BIN/spaced-host"
CAP=$(route "$S")
is "served by activation 3" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# ---- 4. a bridge that dies while sbx-manager runs ----
# relaunched as activation + 1 (the same relaunch as after a restart); the
# capability for activation 3 is refused with activation_mismatch. Kept
# connections to activation 3 exist when it dies: the next operation lands
# on activation 4 (whose bridge alone accepts claims of activation 4),
# never on them.
BPID=$(sql "select bridge_pid from records where sandbox='$S'")
napi POST exec --data-binary '{"argv":["true"]}' >/dev/null
napi GET 'fs/stat?path=/home/user' >/dev/null
used3=$(mgr_metric space_sbxmgr_bridge_kept_used_total)
dropped3=$(mgr_metric space_sbxmgr_bridge_kept_dropped_total)
check "operations on kept connections to activation 3 ($used3)" test "$used3" -ge 2
kill -9 "$BPID"
i=0; while [ "$(sql "select activation, state from records where sandbox='$S'")" != "4|serving" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
is "its death is noticed: relaunched as activation 4" "$(sql "select activation, state from records where sandbox='$S'")" "4|serving"
is "the activation 3 capability -> 409 refresh_route activation_mismatch" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "409 activation_mismatch"
CAP=$(route "$S")
is "served by activation 4" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
is "a file operation too" "$(napi GET 'fs/stat?path=/home/user')" 200
check "the kept connections to activation 3 were closed unused ($dropped3 before)" \
	test "$(mgr_metric space_sbxmgr_bridge_kept_dropped_total)" -gt "${dropped3:-0}"

# ---- 4b. the binary changed in place between two bridges ----
# sbx-manager keeps the binary's hash between spawns, keyed by its inode,
# size, mtime and ctime (bridge.c). The file is changed in place (same
# inode; a running bridge would make the write fail with ETXTBSY, so the
# sandbox goes first): the next bridge must record the new content's
# hash, also when the change keeps the size.
bhash() { b2sum -l 256 "$BIN/spaced-host" | cut -d' ' -f1; }
kill_wait() {
	_p=$(sql "select bridge_pid from records where sandbox='$1'")
	curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$1"
	gone "$_p"
}
check "sandbox killed, its bridge gone" kill_wait "$S"
INO=$(stat -c %i "$BIN/spaced-host")
printf a >>"$BIN/spaced-host"
# settled (older than 2 s), so the next bridge's hash is kept
sleep 3
is "create T1 on the changed binary" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "T1 running" wait_state "$S" running 20
H1=$(sql "select exe_hash from records where sandbox='$S'")
is "T1's recorded hash is the changed file's" "$H1" "$(bhash)"
check "T1 killed" kill_wait "$S"
SZ=$(stat -c %s "$BIN/spaced-host")
printf b | dd of="$BIN/spaced-host" bs=1 seek=$((SZ - 1)) conv=notrunc 2>/dev/null
is "changed again in place: same inode" "$(stat -c %i "$BIN/spaced-host")" "$INO"
is "... same size" "$(stat -c %s "$BIN/spaced-host")" "$SZ"
is "create T2" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "T2 running" wait_state "$S" running 20
H2=$(sql "select exe_hash from records where sandbox='$S'")
is "T2's recorded hash is the file's new content, not the kept one" "$H2" "$(bhash)"
check "... which differs from T1's" test "$H2" != "$H1"
CAP=$(route "$S")
is "T2 serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# ---- 5. a bridge that lies about what it serves ----
# A stand-in spaced-host (compiled here against libspace) that speaks the
# protocol but answers exec as another generation, and fs.stat with DATA
# before any RESPONSE. It is a real launched, recorded, verified bridge:
# only the answers are hostile. Like spaced-host, it serves from a child
# under the sandbox range's last uid and names that child on its ready line.
cat >"$T/liar.c" <<'C'
#include <grp.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <jansson.h>
#include "proto.h"
int main(int argc, char **argv) {
	const char *rd = "", *sb = "", *g = "1", *w = "", *su = "", *a = "1", *re = "", *ub = "0";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--run-dir")) rd = argv[i + 1];
		if (!strcmp(argv[i], "--sandbox")) sb = argv[i + 1];
		if (!strcmp(argv[i], "--generation")) g = argv[i + 1];
		if (!strcmp(argv[i], "--worker")) w = argv[i + 1];
		if (!strcmp(argv[i], "--substrate")) su = argv[i + 1];
		if (!strcmp(argv[i], "--activation")) a = argv[i + 1];
		if (!strcmp(argv[i], "--resident")) re = argv[i + 1];
		if (!strcmp(argv[i], "--uid-base")) ub = argv[i + 1];
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/bridge.sock", rd);
	unlink(sa.sun_path);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)))
		return 1;
	/* ready only once the child serves under its uid, as spaced-host */
	int sync[2];
	char one;
	if (pipe(sync))
		return 1;
	pid_t child = fork();
	if (child > 0) {
		close(sync[1]);
		if (read(sync[0], &one, 1) != 1)
			return 1;
		printf("ready %d\n", (int)child);
		fflush(stdout);
		waitpid(child, NULL, 0);
		return 0;
	}
	uid_t id = (uid_t)strtoul(ub, NULL, 10) + 65535;
	if (setgroups(0, NULL) || setresgid(id, id, id) || setresuid(id, id, id) || listen(l, 8))
		return 1;
	if (write(sync[1], "r", 1) != 1)
		return 1;
	close(sync[1]);
	for (;;) {
		int c = accept(l, NULL, NULL);
		enum proto_role peer;
		struct frame f = { 0 };
		char buf[2048];
		if (c < 0 || proto_hello_server(c, ROLE_SPACED_HOST, &peer) < 0 || frame_read(c, &f)) {
			close(c);
			continue;
		}
		json_t *j = json_loadb((char *)f.payload, f.len, 0, NULL);
		const char *op = json_string_value(json_object_get(j, "op"));
		int lie = op && !strcmp(op, "exec");
		snprintf(buf, sizeof(buf), "{\"status\":200,\"serving\":{\"sandbox\":\"%s\",\"generation\":%llu,"
		    "\"worker\":\"%s\",\"substrate\":\"%s\",\"activation\":%s,\"resident\":\"%s\"},"
		    "\"result\":{\"exit_code\":0,\"stdout\":\"from the liar\"}}",
		    sb, strtoull(g, NULL, 10) + (lie ? 1 : 0), w, su, a, re);
		if (op && !strcmp(op, "fs.stat"))
			frame_write(c, MSG_DATA, "secret", 6);
		else
			frame_write_json(c, MSG_RESPONSE, buf);
		json_decref(j);
		frame_free(&f);
		close(c);
	}
}
C
LIB=$(dirname "$SPACE_BIN")/libspace.a
SANFLAGS=; [ "${SPACE_SAN:-0}" = 1 ] && SANFLAGS="-fsanitize=address,undefined"
mkdir -p "$T/liar"
check "stand-in bridge compiles" cc -D_GNU_SOURCE $SANFLAGS -I"$SPACE_TOP/src/libspace" -o "$T/liar/spaced-host" \
	"$T/liar.c" "$LIB" -ljansson -lsodium -lpthread
stop M1
MGR_FLAGS=         # without --disk-mb
start_mgr 1 w1 "$NP" --spaced-host "$T/liar/spaced-host"
is "create a sandbox served by the stand-in" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
CAP=$(route "$S")
is "control: an honest answer passes" "$(napi GET 'fs/list?path=/')" 200
is "RESPONSE serving another generation -> 503" "$(napi POST exec --data-binary '{"argv":["true"]}')" 503
check "... its result never reaches the client" sh -c "! grep -q 'from the liar' '$T/body'"
check "... audited as serving_mismatch" grep -q '"audit":"serving_mismatch"' "$T/mgr_w1.log"
is "DATA before any RESPONSE -> 503" "$(napi GET 'fs/stat?path=/')" 503
check "... and those bytes never reach the client" sh -c "! grep -q secret '$T/body'"
stop M1
for p in /proc/[0-9]*; do [ "$(readlink "$p/exe" 2>/dev/null)" = "$T/liar/spaced-host" ] && kill "${p#/proc/}"; done

# ---- a relaunch that fails: the layer is archived with the failure ----
# a bridge that cannot start again (here: the file sbx-manager starts it
# from is replaced by one that exits at once) fails the execution; what the
# sandbox wrote is archived with the report, so the sandbox comes back
# with its files
mkdir -p "$T/wrap"
cp "$SPACE_BIN/spaced-host" "$T/wrap/spaced-host.real"
cp "$SPACE_BIN/spaced-guest" "$T/wrap/spaced-guest"     # found beside spaced-host
cp /bin/false "$T/wrap/false"
cp "$T/wrap/spaced-host.real" "$T/wrap/spaced-host"
start_mgr 1 w1 "$NP" --spaced-host "$T/wrap/spaced-host"
is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 30
CAP=$(route "$S")
is "a file written in it" "$(napi PUT 'files?path=/home/user/kept.txt' --data-binary 'written before the failure')" 200
mv "$T/wrap/false" "$T/wrap/spaced-host"
BPID=$(sql "select bridge_pid from records where sandbox='$S'")
kill9 "$BPID"
check "its bridge killed and never started again: the sandbox failed" wait_state "$S" failed 60
check "... the layer archived with the failure" grep -q "failed $S g1: layer archived as" "$T/mgr_w1.log"
SNAP=$(jget snapshot "$T/sbx")
check "... which is the sandbox's latest snapshot ($SNAP)" test -n "$SNAP"
mv "$T/wrap/spaced-host.real" "$T/wrap/spaced-host"
is "resume -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{}')" 202
check "running again" wait_state "$S" running 60
CAP=$(route "$S")
is "... with the file written before the failure" "$(napi GET 'files?path=/home/user/kept.txt') $(cat "$T/body")" "200 written before the failure"
stop M1

done_testing
