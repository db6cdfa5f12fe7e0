#!/bin/sh
# space up, as a newcomer uses it: start a platform with two workers, source
# its env file, create a sandbox, run commands and move files; then the
# supervisor's own duties: a killed node-api comes back, SIGTERM stops every
# process, a second space up on the same directory is refused, and a new one
# after the stop continues with the same key, credentials and sandbox.
. "$SPACE_TOP/tests/lib.sh"

. "$SPACE_TOP/tests/lib_up.sh"

up_init
pick_ports || { not_ok "three free ports"; done_testing; exit; }

children() { pgrep -P "$UP" | tr '\n' ' '; }
# sp: a data verb, bounded. Once the data plane has left one request
# unanswered for 12 s the next ones are not tried (they fail, reported as
# such), so that a hung platform cannot stretch this test for minutes.
sp() {
	if [ -f "$T/hung" ]; then
		echo "space $1: not tried: the data plane stopped answering earlier" >&2
		return 1
	fi
	timeout 12 space "$@"
	sp_rc=$?
	if [ "$sp_rc" = 124 ]; then
		touch "$T/hung"
		echo "space $1: no answer within 12 s" >&2
	fi
	return "$sp_rc"
}

started=0
start_up "$T/up1.log" && started=1
if [ "$started" = 0 ] && grep -q "choose another --port" "$T/up1.log"; then
	# a concurrent test took one of the ports: once more, elsewhere
	pick_ports && start_up "$T/up1.log" && started=1
fi
if [ "$started" = 1 ]; then
	ok "space up starts a platform with two workers"
else
	not_ok "space up starts a platform with two workers"
	tail -20 "$T/up1.log" | sed 's/^/# up: /'
	for f in "$D"/logs/*.log; do [ -f "$f" ] && tail -5 "$f" | sed "s|^|# $(basename "$f"): |"; done
	done_testing
	exit
fi
kids=$(children); UP_KILL9=$kids
is "it supervises six processes" "$(echo $kids | wc -w)" 6
check "the summary names the env file" grep -q "$D/env" "$T/up1.log"
check "and the next commands" grep -q "space exec" "$T/up1.log"
check "env file exists" test -f "$D/env"
is "env file is mode 0600" "$(stat -c %a "$D/env")" 600
is "credential of w1 is mode 0600" "$(stat -c %a "$D/w1/credential")" 600
check "one log per process" test -f "$D/logs/space-control.log" -a -f "$D/logs/w1-sbx-manager.log" \
	-a -f "$D/logs/w2-node-api.log"

# a second supervisor on the same data directory is refused
space up --data-dir "$D" --workers 2 --port $((P + 10)) >"$T/second.log" 2>&1; rc=$?
is "a second space up on the same directory exits 1" "$rc" 1
check "and says another one runs" grep -q "another space up is running" "$T/second.log"
space up --data-dir "$T/nodir" --disk-mb 8 >"$T/disk.log" 2>&1; rc=$?
is "space up --disk-mb 8 exits 2" "$rc" 2
check "... saying the range" grep -q -- "--disk-mb is 16..16777216" "$T/disk.log"
mgrs=0
for k in $kids; do
	case "$(tr '\0' ' ' <"/proc/$k/cmdline" 2>/dev/null)" in
	*sbx-manager*" --disk-mb 4096"*) mgrs=$((mgrs + 1)) ;;
	esac
done
is "each sbx-manager is given the pools' layer size (--disk-mb 4096)" "$mgrs" 2

# as a newcomer: the env file, then the verbs
export $(cat "$D/env")
is "SPACE_API_URL points at space-control" "$SPACE_API_URL" "http://127.0.0.1:$P"
is "SPACE_EDGE_URL points at space-edge" "$SPACE_EDGE_URL" "http://localhost:$((P + 80))"
is "SPACE_EDGE_DOMAIN is its domain" "$SPACE_EDGE_DOMAIN" "localhost:$((P + 80))"
check "the summary names the edge" grep -q "space-edge *http://localhost:$((P + 80))" "$T/up1.log"
is "space-edge answers on its domain" \
	"$(curl -s --max-time 5 "$SPACE_EDGE_URL/healthz")" "ok"
KEY1=$SPACE_API_KEY
SBX=$(space create 2>"$T/err"); rc=$?
is "space create exits 0" "$rc" 0
[ "$rc" = 0 ] || diag "$(cat "$T/err")"
# GET ?until=STATE&wait=S: held until the state is reached (the CLI's and
# the E2B front's wait), strict about its parameters
lp() { curl -s --max-time 40 -o "$T/lp.json" -w '%{http_code}' -H "Authorization: Bearer $SPACE_API_KEY" "$SPACE_API_URL/v1/sandboxes/$SBX$1"; }
lp_state() { python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); print(o["state"], (o.get("execution") or {}).get("state"))' "$T/lp.json"; }
is "GET ?until=running&wait=10: 200" "$(lp '?until=running&wait=10')" 200
is "... running, its execution serving" "$(lp_state)" "running serving"
is "GET ?until=paused&wait=1 of a running sandbox: 200 at the deadline" "$(lp '?until=paused&wait=1')" 200
is "... still running" "$(lp_state)" "running serving"
for q in '?until=bogus&wait=1' '?wait=5' '?until=running&wait=31' '?until=running&wait=-1' \
    '?until=running&wait=1x' '?until=running&wait=' '?until=running&wait=99999999999999999999'; do
	is "GET $q: 400" "$(lp "$q")" 400
done
check "... saying what is allowed" grep -q "until must be\|wait is 0" "$T/lp.json"
# a create through the API, then at once a GET that waits: it answers only
# once the new sandbox runs (without the wait it is still creating)
SBX0=$SBX
SBX=$(curl -s --max-time 20 -X POST -H "Authorization: Bearer $SPACE_API_KEY" \
    -H 'Content-Type: application/json' -d '{}' "$SPACE_API_URL/v1/sandboxes" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
is "POST then GET ?until=running&wait=20 at once: 200" "$(lp '?until=running&wait=20')" 200
is "... answered once it runs, its execution serving" "$(lp_state)" "running serving"
space kill "$SBX" >/dev/null 2>&1
SBX=$SBX0
out=$(sp exec --timeout 10 "$SBX" -- echo hello </dev/null 2>"$T/err"); rc=$?
is "exec echo hello: stdout" "$out" "hello"
is "exec echo hello: exit status" "$rc" 0
[ "$rc" = 0 ] || diag "$(cat "$T/err")"
sp exec --timeout 10 "$SBX" -- sh -c 'exit 3' </dev/null 2>"$T/err"; rc=$?
is "exec sh -c 'exit 3' exits 3" "$rc" 3
out=$(echo piped | sp exec --timeout 10 "$SBX" -- cat 2>"$T/err")
is "exec passes stdin" "$out" "piped"
# the documented cap is 1 MiB of stdin, whatever its bytes: text, bytes
# that are not UTF-8, text made mostly of escapes
head -c 1048576 /dev/zero | tr '\0' 'a' >"$T/in.text"
head -c 1048576 /dev/urandom >"$T/in.bin"
head -c 1048576 /dev/zero | tr '\0' '\001' >"$T/in.ctl"
for f in text bin ctl; do
	out=$(sp exec --timeout 20 "$SBX" -- wc -c <"$T/in.$f" 2>"$T/err")
	is "exec takes exactly 1 MiB of stdin ($f)" "$out" "1048576"
done
# the streamed exec takes stdin of any size; the buffered one (--json)
# carries it whole in one request, so at most 1 MiB
out=$({ cat "$T/in.text"; echo; } | sp exec --timeout 20 "$SBX" -- wc -c 2>"$T/err")
is "the streamed exec takes more than 1 MiB of stdin" "$out" 1048577
{ cat "$T/in.text"; echo; } | sp exec --json --timeout 20 "$SBX" -- wc -c >/dev/null 2>"$T/err"; rc=$?
is "exec --json refuses 1 MiB + 1 byte of stdin" "$rc" 1
out=$(sp exec --json --timeout 10 "$SBX" -- sh -c 'echo out; echo err >&2; exit 5' </dev/null 2>"$T/err"); rc=$?
is "exec --json keeps the command's exit status" "$rc" 5
is "exec --json prints the whole result" \
    "$(printf '%s' "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["exit_code"], repr(r["stdout"]), repr(r["stderr"]), r["timed_out"], r["stdout_truncated"])')" \
    "5 'out\\n' 'err\\n' False False"

head -c 3000000 /dev/urandom >"$T/blob"
sp fs write "$SBX" /home/user/blob <"$T/blob" 2>"$T/err"; rc=$?
is "fs write exits 0" "$rc" 0
[ "$rc" = 0 ] || diag "$(cat "$T/err")"
sp fs read "$SBX" /home/user/blob >"$T/blob.back" 2>"$T/err"
check "fs write / read round trip (3 MB of random bytes)" cmp "$T/blob" "$T/blob.back"
echo hi | sp fs write "$SBX" /home/user/hi.txt
is "fs read of a small file" "$(sp fs read "$SBX" /home/user/hi.txt 2>&1)" "hi"
# /proc links to an open file jump past the jail's root to what the
# operation's descriptor names: its executable and its stderr are host
# files (the guest binary, the worker's log)
sp fs read "$SBX" /proc/self/exe >"$T/exe" 2>"$T/err"; rc=$?
check "fs read of /proc/self/exe refused (exit $rc, $(wc -c <"$T/exe") bytes)" \
	sh -c "[ $rc != 0 ] && [ ! -s '$T/exe' ] && grep -q 'not followed' '$T/err'"
sp fs read "$SBX" /dev/stderr >"$T/se" 2>"$T/err"; rc=$?
check "fs read of /dev/stderr (-> /proc/self/fd/2) refused (exit $rc)" sh -c "[ $rc != 0 ] && [ ! -s '$T/se' ]"
echo hi | sp fs write "$SBX" /home/user/lnk-target
sp exec "$SBX" -- ln -s /home/user/lnk-target /home/user/lnk >/dev/null 2>&1
is "an ordinary symbolic link is still followed" "$(sp fs read "$SBX" /home/user/lnk 2>&1)" "hi"
out=$(sp fs stat "$SBX" /home/user/blob --json 2>&1)
check "fs stat --json: file of the written size" python3 -c '
import json, sys
s = json.loads(sys.argv[1]); assert s["type"] == "file" and s["size"] == 3000000, s' "$out"
check "fs mkdir -p" sp fs mkdir -p "$SBX" /home/user/d1/d2
out=$(sp fs ls "$SBX" /home/user 2>&1)
case "$out" in *d1*) ok "fs ls shows the new directory" ;; *) not_ok "fs ls shows the new directory"; diag "$out" ;; esac
out=$(sp fs ls "$SBX" /home/user --json 2>&1)
check "fs ls --json has blob as a file" python3 -c '
import json, sys
e = {x["name"]: x for x in json.loads(sys.argv[1])["entries"]}
assert e["blob"]["type"] == "file" and e["d1"]["type"] == "dir", e' "$out"
check "fs mv" sp fs mv "$SBX" /home/user/hi.txt /home/user/d1/d2/hi.txt
is "the moved file reads back" "$(sp fs read "$SBX" /home/user/d1/d2/hi.txt 2>&1)" "hi"
gone() { # description, path: stat fails with not_found
	sp fs stat "$SBX" "$2" >/dev/null 2>"$T/err"; rc=$?
	if [ "$rc" = 1 ] && grep -q "not_found" "$T/err"; then ok "$1"
	else not_ok "$1"; diag "exit $rc: $(cat "$T/err")"; fi
}
gone "the old name is gone (not_found)" /home/user/hi.txt
check "fs rm -r" sp fs rm -r "$SBX" /home/user/d1
# a directory the user may not read: removed when empty, as rm -rf does;
# one with something in it is refused as a permission problem
sp exec "$SBX" -- sh -c 'mkdir -p /home/user/rmt/x /home/user/rmf/y && touch /home/user/rmf/y/f && chmod 000 /home/user/rmt/x /home/user/rmf/y' >/dev/null 2>&1
check "fs rm -r of a tree with an unreadable empty directory" sp fs rm -r "$SBX" /home/user/rmt
sp fs rm -r "$SBX" /home/user/rmf >/dev/null 2>"$T/err"; rc=$?
check "... with an unreadable directory that holds a file: refused as permission denied (exit $rc)" \
	sh -c "[ $rc != 0 ] && grep -qi 'permission' '$T/err'"
sp exec "$SBX" -- chmod 755 /home/user/rmf/y >/dev/null 2>&1
check "... removed once readable" sp fs rm -r "$SBX" /home/user/rmf
gone "the removed tree is gone (not_found)" /home/user/d1

# each node-api also listens on a local socket, which the CLI takes for
# its HTTP requests: the same checks, another transport (docs/worker.md)
is "SPACE_ENDPOINT_SOCKETS maps each worker's endpoint to its socket" "$SPACE_ENDPOINT_SOCKETS" \
	"http://127.0.0.1:$((P + 1))=$D/w1/api.sock,http://127.0.0.1:$((P + 2))=$D/w2/api.sock"
is "w1's local socket is a socket anyone local may connect to, as its TCP port" \
	"$(stat -c '%F %a' "$D/w1/api.sock")" "socket 666"
sp -v fs read "$SBX" /home/user/blob >"$T/blob.sock" 2>"$T/err"
check "fs read of 3 MB through the local socket: the same bytes" cmp "$T/blob" "$T/blob.sock"
WS=$(sed -n 's/.*served by gen [0-9]* on \(w[0-9]\) through .*/\1/p' "$T/err" | head -1)
check "... the CLI said it took its worker's local socket" grep -q "served by gen [0-9]* on $WS through $D/$WS/api.sock" "$T/err"
[ -n "$WS" ] || { diag "$(cat "$T/err")"; WS=w1; }
WO=w2; [ "$WS" = w2 ] && WO=w1
out=$(echo streamed | sp -v exec --timeout 10 "$SBX" -- cat 2>"$T/err")
is "exec with stdin through the local socket (a WebSocket stream)" "$out" streamed
check "... the CLI said it took the socket" grep -q "HTTP 101, served by gen [0-9]* on $WS through $D/$WS/api.sock" "$T/err"
out=$(echo streamed | SPACE_ENDPOINT_SOCKETS="http://127.0.0.1:$((P + 1))=$T/none.sock,http://127.0.0.1:$((P + 2))=$T/none.sock" \
	sp -v exec --timeout 10 "$SBX" -- cat 2>"$T/err")
is "exec with stdin, the mapped socket not there: over TCP" "$out" streamed
is "... and says nothing of a socket" "$(grep -c ' through ' "$T/err")" 0
SPACE_ENDPOINT_SOCKETS="http://127.0.0.1:$((P + 1))=$T/none.sock,http://127.0.0.1:$((P + 2))=$T/none.sock" \
	sp -v fs read "$SBX" /home/user/blob >"$T/blob.tcp" 2>"$T/err"
check "a mapped socket that is not there: the read goes over TCP" cmp "$T/blob" "$T/blob.tcp"
is "... and says nothing of a socket" "$(grep -c ' through ' "$T/err")" 0
# from the attacker's side: nothing but a capability opens the socket
CAP=$(space route "$SBX" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["capability"])')
uget() { curl -s --max-time 10 --unix-socket "$D/$1/api.sock" -o "$T/u.out" -w '%{http_code}' ${3:+-H "Authorization: Bearer $3"} "http://localhost$2"; }
is "local socket, no capability: 401" "$(uget "$WS" "/v1/sandboxes/$SBX/files?path=/home/user/blob")" 401
is "local socket, a forged capability: 403" \
	"$(uget "$WS" "/v1/sandboxes/$SBX/files?path=/home/user/blob" v4.public.AAAA)" 403
is "local socket, the capability at the other worker's socket: 409 refresh_route" \
	"$(uget "$WO" "/v1/sandboxes/$SBX/files?path=/home/user/blob" "$CAP")" 409
check "... nothing of the file in the answer" grep -q refresh_route "$T/u.out"
is "local socket, the capability at its own worker: 200" \
	"$(uget "$WS" "/v1/sandboxes/$SBX/files?path=/home/user/blob" "$CAP")" 200
check "... the file's bytes" cmp "$T/blob" "$T/u.out"
# a write cut short by the death of the operation that receives it
# leaves nothing in the directory (its file had no name yet): half of a
# body sent, then the guest's operation killed
python3 - "$D/$WS/api.sock" "$SBX" "$CAP" >/dev/null 2>&1 <<'PY' &
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(("PUT /v1/sandboxes/%s/files?path=/home/user/cut.bin HTTP/1.1\r\nHost: localhost\r\n"
           "Authorization: Bearer %s\r\nContent-Length: 2097152\r\n\r\n" % (sys.argv[2], sys.argv[3])).encode())
s.sendall(os.urandom(1 << 20))
time.sleep(30)
PY
CUTW=$!
writer() { # the guest process holding the file being written
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/exe" 2>/dev/null)" in *spaced-guest*) ;; *) continue ;; esac
		ls -l "$p/fd" 2>/dev/null | grep -Eq 'cut\.bin\.space-|/#[0-9]+ \(deleted\)' && { echo "${p#/proc/}"; return 0; }
	done
	return 1
}
i=0; while [ $i -lt 100 ] && ! writer >/dev/null; do sleep 0.1; i=$((i + 1)); done
WP=$(writer)
check "a write in progress is held by a guest operation ($WP)" test -n "$WP"
[ -n "$WP" ] && kill -9 "$WP"
sleep 0.5
kill "$CUTW" 2>/dev/null; wait "$CUTW" 2>/dev/null
is "... killed: no file of it is left in the directory" \
	"$(sp exec "$SBX" -- ls -a /home/user 2>&1 | grep -c 'cut\.bin')" 0
# node-api never replaces a file that is not a socket
: >"$T/plain"
node-api --listen 127.0.0.1:$((P + 9)) --listen-unix "$T/plain" --manager-socket "$D/w1/run/sbx-manager.sock" \
	--worker-id w1 >"$T/na.out" 2>&1; rc=$?
is "node-api --listen-unix on a regular file exits 1" "$rc" 1
check "... saying it is not a socket" grep -q "not a socket" "$T/na.out"
check "... and leaves the file as it was" test -f "$T/plain" -a ! -S "$T/plain"

# a node-api killed with SIGKILL is restarted
NA=""
for p in $kids; do
	case "$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)" in
	*node-api*"--listen 127.0.0.1:$((P + 1))"*) NA=$p ;;
	esac
done
if [ -n "$NA" ]; then
	kill -9 "$NA"
	i=0; new=""
	while [ $i -lt 150 ]; do
		for p in $(children); do
			case "$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)" in
			*node-api*"--listen 127.0.0.1:$((P + 1))"*) [ "$p" != "$NA" ] && new=$p ;;
			esac
		done
		[ -n "$new" ] && curl -sf -o /dev/null "http://127.0.0.1:$((P + 1))/healthz" && break
		sleep 0.1; i=$((i + 1))
	done
	if [ -n "$new" ]; then ok "the killed node-api was restarted (pid $NA -> $new)"; else not_ok "the killed node-api was restarted"; fi
	check "the restarted node-api answers /healthz" wait_http "http://127.0.0.1:$((P + 1))/healthz" 10
	check "the restart is logged" grep -q "restarted" "$D/logs/w1-node-api.log"
	kids=$(children); UP_KILL9=$kids
else
	not_ok "found the node-api of w1 among the children"
fi
out=$(sp exec --timeout 10 "$SBX" -- echo again </dev/null 2>&1)
is "exec works after the restart" "$out" "again"
is "the restarted node-api of w1 replaced its stale socket: /healthz there" "$(uget w1 /healthz)" 200

# SIGTERM stops everything
before=$kids
stop_up
is "space up exits 0 on SIGTERM" "$up_rc" 0
left=""
for p in $before; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
is "every child is gone" "$left" ""
is "no sandbox bridge is left running" "$(bridges)" ""
is "no mount is left under the data directory" "$(grep -c " $D/" /proc/mounts)" 0
for port in $P $((P + 1)) $((P + 2)); do
	port_free "$port" && ok "nothing listens on $port any more" || not_ok "nothing listens on $port any more"
done

# again, on the same directory: same key, same credentials, same sandbox
cred1=$(sha256sum "$D/w1/credential" "$D/w2/credential")
edgecred1=$(sha256sum <"$D/edge/credential")
if start_up "$T/up2.log"; then ok "space up starts again on the same directory"; else
	not_ok "space up starts again on the same directory"; tail -20 "$T/up2.log" | sed 's/^/# up: /'; fi
kids=$(children); UP_KILL9=$kids
# this space up was started from a shell that exported the env file:
# none of its daemons takes the mapping of local sockets
inh=""
for p in $kids; do
	tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -q '^SPACE_ENDPOINT_SOCKETS=' && inh="$inh $p"
done
is "no daemon of a space up started with SPACE_ENDPOINT_SOCKETS set inherits it" "$inh" ""
export $(cat "$D/env")
is "the API key is reused" "$SPACE_API_KEY" "$KEY1"
is "the worker credentials are reused" "$(sha256sum "$D/w1/credential" "$D/w2/credential")" "$cred1"
is "the edge credential is reused" "$(sha256sum <"$D/edge/credential")" "$edgecred1"
st=$(space show "$SBX" --json 2>"$T/err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
is "the sandbox is still known" "$st" "$SBX"
rm -f "$T/hung"
# the worker may need a moment to bring the execution back
end=$(($(date +%s) + 30))
while :; do
	out=$(sp exec --timeout 5 "$SBX" -- echo back </dev/null 2>"$T/err") && break
	[ "$(date +%s)" -lt "$end" ] || break
	sleep 1
done
is "the sandbox serves again" "$out" "back"
[ "$out" = back ] || diag "$(cat "$T/err")"
sp fs read "$SBX" /home/user/blob >"$T/blob.again" 2>"$T/err"
check "its files survived the restart" cmp "$T/blob" "$T/blob.again"
check "space kill" sh -c 'space kill "$1" >/dev/null' sh "$SBX"
is "GET ?until=running&wait=20 of a killed sandbox: 200" "$(lp '?until=running&wait=20')" 200
is "... answered with the state it will not leave" "$(lp_state | cut -d' ' -f1)" "killed"
before=$kids
stop_up
is "the second space up exits 0 on SIGTERM" "$up_rc" 0
left=""
for p in $before; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
is "every child of the second run is gone" "$left" ""
is "no sandbox bridge is left running after the second run" "$(bridges)" ""
kids=""; UP_KILL9=""

done_testing
