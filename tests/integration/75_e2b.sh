#!/bin/sh
# The E2B-compatible API of space-edge (docs/e2b.md) driven by the official
# `e2b` SDK (tests/js, pinned in package-lock.json, installed by npm ci),
# configured only by what `space up` wrote into its env file: create, run
# (stdout, stderr, exit codes, CommandExitError), env and cwd, streaming
# output, background commands (list, stdin, kill), files (text, 5 MiB
# binary, list, exists, rename, remove, makeDir), getInfo, list with
# filters and pages, pause and connect with files kept, kill, another key
# kept out; per-sandbox access tokens from the attacker's side; streamed
# uploads (80 MiB with space-edge's memory bounded, many files, a cut one); the polling watcher over raw Connect calls (another key kept
# out); then raw requests: bad input at each endpoint gets the status
# and body the SDK maps to its error classes, and the listener survives.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_up.sh"

JS="$SPACE_TOP/tests/js"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "1..0 # SKIP node and npm are needed for the E2B SDK"
	exit 0
fi
js_pinned e2b

up_init
up_start || exit
ok_if() { if [ "$1" = 0 ]; then ok "$2"; else not_ok "$2"; fi; }
grep -q '^E2B_API_URL=http://127.0.0.1:' "$D/env" && grep -q '^E2B_SANDBOX_URL=' "$D/env" &&
    grep -q "^E2B_API_KEY=$SPACE_API_KEY\$" "$D/env" && grep -q '^E2B_DOMAIN=localhost:' "$D/env"
ok_if $? "space up wrote E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY and E2B_DOMAIN"

OKEY=$(space-control apikey add e2bother --data-dir "$D/control" 2>"$T/err") ||
	diag "apikey add: $(cat "$T/err")"

tap_lines() {
	while IFS= read -r l; do
		case "$l" in
		"ok - "*) ok "${l#ok - }" ;;
		"not ok - "*) not_ok "${l#not ok - }" ;;
		*) echo "$l" ;;
		esac
	done
}
(cd "$JS" && OTHER_KEY="$OKEY" timeout 150 node e2b_e2e.mjs >"$T/e2e.out" 2>"$T/e2e.err"; echo "rc=$?" >"$T/e2e.rc")
tap_lines <"$T/e2e.out"
is "the SDK client finished" "$(cat "$T/e2e.rc")" "rc=0"
[ -s "$T/e2e.err" ] && sed 's/^/# e2e: /' "$T/e2e.err" | tail -20

# raw requests from the attacker's side
U=$E2B_API_URL
code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
is "no API key: 401" "$(code "$U/v2/sandboxes")" 401
is "a malformed API key: 401" "$(code -H 'X-API-KEY: a b' "$U/v2/sandboxes")" 401
is "a wrong API key: 401" "$(code -H 'X-API-KEY: sk_wrong' "$U/v2/sandboxes")" 401
grep -q '"code":401' "$T/body"; ok_if $? "the error body is {code, message}"
is "create with bad JSON: 400" "$(code -H "X-API-KEY: $SPACE_API_KEY" -d '{"templateID":' "$U/v2/sandboxes")" 400
is "create with an unknown field: 400" "$(code -H "X-API-KEY: $SPACE_API_KEY" -d '{"templateID":"base","bogus":1}' "$U/v2/sandboxes")" 400
is "create with a duplicate key: 400" "$(code -H "X-API-KEY: $SPACE_API_KEY" -d '{"templateID":"base","templateID":"base"}' "$U/v2/sandboxes")" 400
is "create with a wrong type: 400" "$(code -H "X-API-KEY: $SPACE_API_KEY" -d '{"templateID":"base","timeout":"x"}' "$U/v2/sandboxes")" 400
head -c 2000000 /dev/zero | tr '\0' 'a' >"$T/huge"
is "a body over 1 MiB: 413" "$(code -H "X-API-KEY: $SPACE_API_KEY" --data-binary @"$T/huge" "$U/v2/sandboxes")" 413
is "an unknown sandbox: 404" "$(code -H "X-API-KEY: $SPACE_API_KEY" "$U/sandboxes/nosuch")" 404
is "a malformed sandbox id: 404" "$(code -H "X-API-KEY: $SPACE_API_KEY" "$U/sandboxes/a.b")" 404
is "envd call without a token: 401" "$(code -H 'E2b-Sandbox-Id: abc' -H 'Content-Type: application/json' -d '{}' "$U/process.Process/List")" 401
is "envd call with a bad sandbox id: 400" "$(code -H 'E2b-Sandbox-Id: a/b' -H "X-Access-Token: $SPACE_API_KEY" -H 'Content-Type: application/json' -d '{}' "$U/process.Process/List")" 400
is "envd call on another port: 400" "$(code -H 'E2b-Sandbox-Id: abc' -H 'E2b-Sandbox-Port: 8080' -H "X-Access-Token: $SPACE_API_KEY" -H 'Content-Type: application/json' -d '{}' "$U/process.Process/List")" 400
is "envd call on an unknown sandbox: 404 not_found" "$(code -H 'E2b-Sandbox-Id: nosuch' -H "X-Access-Token: $SPACE_API_KEY" -H 'Content-Type: application/json' -d '{}' "$U/process.Process/List")" 404
grep -q '"code":"not_found"' "$T/body"; ok_if $? "a Connect error body {code, message}"
is "a stream with a broken envelope: 400" "$(code -H 'E2b-Sandbox-Id: abc' -H "X-Access-Token: $SPACE_API_KEY" -H 'Content-Type: application/connect+json' --data-binary 'xx' "$U/process.Process/Start")" 400
is "an unknown RPC: 501" "$(code -H 'E2b-Sandbox-Id: abc' -H "X-Access-Token: $SPACE_API_KEY" -H 'Content-Type: application/json' -d '{}' "$U/process.Process/Nope")" 501
is "an upload that is not multipart: 400" "$(code -H 'E2b-Sandbox-Id: abc' -H "X-Access-Token: $SPACE_API_KEY" -H 'Content-Type: text/plain' -d 'x' "$U/files?path=/tmp/x")" 400
# per-sandbox access tokens (the envdAccessToken of create and connect),
# from the attacker's side: a token opens its own sandbox's envd calls and
# nothing else, and dies with the sandbox
e2b_new() { curl -s -H "X-API-KEY: $SPACE_API_KEY" -H 'Content-Type: application/json' \
    -d '{"templateID":"base","timeout":300}' "$U/v2/sandboxes"; }
e2b_new >"$T/sa.json"; e2b_new >"$T/sb.json"
SA=$(jget sandboxID "$T/sa.json"); TA=$(jget envdAccessToken "$T/sa.json")
SB=$(jget sandboxID "$T/sb.json"); TB=$(jget envdAccessToken "$T/sb.json")
case "$TA" in at_*) ok "create answers a per-sandbox access token, not the API key" ;;
*) not_ok "create answers a per-sandbox access token, not the API key"; diag "$(cat "$T/sa.json")" ;; esac
[ -n "$TB" ] && [ "$TA" != "$TB" ]; ok_if $? "each sandbox gets its own token"
plist() { # TOKEN SBX
	curl -s -o "$T/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $2" -H "X-Access-Token: $1" \
	    -H 'Content-Type: application/json' -d '{}' "$U/process.Process/List"
}
is "sandbox A's token runs A's envd calls" "$(plist "$TA" "$SA")" 200
is "sandbox A's token on sandbox B: 403" "$(plist "$TA" "$SB")" 403
grep -q '"code":"permission_denied"' "$T/body"; ok_if $? "... permission_denied"
echo x >"$T/small"
is "sandbox A's token uploads nothing into B" "$(code -H "E2b-Sandbox-Id: $SB" -H "X-Access-Token: $TA" -F "file=@$T/small;filename=/tmp/x" "$U/files")" 403
is "sandbox A's token as the control API's key: list 401" "$(code -H "X-API-KEY: $TA" "$U/v2/sandboxes")" 401
is "... create 401" "$(code -H "X-API-KEY: $TA" -d '{"templateID":"base"}' "$U/v2/sandboxes")" 401
is "... kill of its own sandbox 401" "$(code -X DELETE -H "X-API-KEY: $TA" "$U/sandboxes/$SA")" 401
is "... connect 401" "$(code -H "X-API-KEY: $TA" -d '{}' "$U/v2/sandboxes/$SA/connect")" 401
C=$SPACE_API_URL
cpost() { # TOKEN PATH BODY
	curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $1" \
	    -H 'Content-Type: application/json' -d "$3" "$C$2"
}
is "at space-control: its sandbox's control capability" "$(cpost "$TA" "/v1/sandboxes/$SA/routes" '{"access":["exec"]}')" 200
is "... another sandbox's: 403" "$(cpost "$TA" "/v1/sandboxes/$SB/routes" '{"access":["exec"]}')" 403
is "... a service port of its sandbox: 403" "$(cpost "$TA" "/v1/sandboxes/$SA/routes" '{"port":8080,"proto":"http"}')" 403
is "... another access token: 401" "$(cpost "$TA" "/v1/sandboxes/$SA/access-token" '{}')" 401
is "... a traffic token: 401" "$(cpost "$TA" "/v1/sandboxes/$SA/traffic-token" '{}')" 401
is "... the list of sandboxes: 401" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TA" "$C/v1/sandboxes")" 401
is "... a forged token of the same shape: 401" "$(cpost "at_$(printf 'A%.0s' $(seq 1 43))" "/v1/sandboxes/$SA/routes" '{"access":["exec"]}')" 401
curl -s -H "X-API-KEY: $SPACE_API_KEY" -d '{}' "$U/v2/sandboxes/$SA/connect" >"$T/sa2.json"
TA2=$(jget envdAccessToken "$T/sa2.json")
[ -n "$TA2" ] && [ "$TA2" != "$TA" ]; ok_if $? "connect answers a new token"
is "... and the token of create still works" "$(plist "$TA" "$SA")" 200
is "kill of sandbox A" "$(code -X DELETE -H "X-API-KEY: $SPACE_API_KEY" "$U/sandboxes/$SA")" 204
is "after the kill, A's token is refused at space-control: 401" "$(cpost "$TA2" "/v1/sandboxes/$SA/routes" '{"access":["exec"]}')" 401
st=$(plist "$TA" "$SA"); [ "$st" != 200 ]; ok_if $? "... and by envd calls ($st)"
is "B's token still works" "$(plist "$TB" "$SB")" 200
code -X DELETE -H "X-API-KEY: $SPACE_API_KEY" "$U/sandboxes/$SB" >/dev/null

# uploads are streamed to the sandbox (e2b_upload.c): one larger than the
# 64 MiB space-edge once kept in memory goes through while space-edge's
# resident memory stays small; several files in one request; the limit of
# 64 files; a cut upload leaves nothing
e2b_new >"$T/su.json"
SU=$(jget sandboxID "$T/su.json"); TU=$(jget envdAccessToken "$T/su.json")
EPID=$(pgrep -f "^$T/bin/space-edge" | head -n 1)
head -c $((80 << 20)) /dev/zero >"$T/big"
is "an 80 MiB octet-stream upload" "$(code -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" -H 'Content-Type: application/octet-stream' --data-binary @"$T/big" "$U/files?path=/home/user/big/big.bin")" 200
stat_size() { curl -s -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" -H 'Content-Type: application/json' \
    -d "{\"path\":\"$1\"}" "$U/filesystem.Filesystem/Stat" | python3 -c 'import json,sys; print(json.load(sys.stdin)["entry"]["size"])' 2>/dev/null; }
is "... all of it written (its parent made)" "$(stat_size /home/user/big/big.bin)" $((80 << 20))
# downloads are kept by space-edge while they pass, at most 64 MiB: a
# larger file is refused by its size, and a link to one (whose own size
# is small) is cut off as it arrives, not kept whole
is "a download of 80 MiB: 400" "$(code -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" "$U/files?path=/home/user/big/big.bin")" 400
space exec "$SU" -- sh -c 'truncate -s 4G /home/user/huge && ln -s huge /home/user/link' >/dev/null 2>"$T/err" ||
	diag "exec: $(cat "$T/err")"
is "a download through a link to a 4 GiB file: 400" "$(code -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" "$U/files?path=/home/user/link")" 400
check "... cut off at the bound" grep -q "at most 64 MiB" "$T/body"
is "... and space-edge serves on" "$(code "$U/health")" 204
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$EPID/status" 2>/dev/null)
diag "space-edge's peak resident memory: ${hwm:-?} KiB"
[ -n "$hwm" ] && [ "$hwm" -lt $((48 << 10)) ]; ok_if $? "space-edge's peak resident memory stayed under 48 MiB"
echo one >"$T/p1"; echo two >"$T/p2"
is "two files in one multipart upload" "$(code -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" -F "file=@$T/p1;filename=/home/user/m/one.txt" -F "file=@$T/p2;filename=m/two.txt" "$U/files")" 200
is "... both written" "$(stat_size /home/user/m/one.txt) $(stat_size /home/user/m/two.txt)" "4 4"
set --
for i in $(seq 1 65); do set -- "$@" -F "file=@$T/p1;filename=/tmp/many/f$i"; done
is "65 files in one upload: 400" "$(code -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" "$@" "$U/files")" 400
curl -s -o /dev/null --limit-rate 2M --max-time 2 -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" \
    -H 'Content-Type: application/octet-stream' --data-binary @"$T/big" "$U/files?path=/home/user/cut.bin"
st=$(curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" -H 'Content-Type: application/json' -d '{"path":"/home/user/cut.bin"}' "$U/filesystem.Filesystem/Stat")
is "an upload cut by its client leaves no file" "$st" 404
is "... and space-edge serves on" "$(code "$U/health")" 204
# Content-Encoding: gzip (the SDK's files.write(..., {gzip: true})): inflated
# as it arrives; anything else is refused and leaves no file
head -c $((3 << 20)) /dev/urandom | od -An -tx1 >"$T/plain"
gzip -c "$T/plain" >"$T/plain.gz"
gzup() { code -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" -H 'Content-Type: application/octet-stream' \
    -H "Content-Encoding: $1" --data-binary @"$2" "$U/files?path=$3"; }
is "a gzip upload" "$(gzup gzip "$T/plain.gz" /home/user/gz/plain.txt)" 200
is "... written inflated" "$(stat_size /home/user/gz/plain.txt)" "$(stat -c %s "$T/plain")"
is "... the same bytes" "$(curl -s -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" "$U/files?path=/home/user/gz/plain.txt" | sha256sum)" "$(sha256sum <"$T/plain")"
# 8 MiB of zeros in a few KiB: each piece of the body inflates to many
# times zlib's output buffer, and its end must still be reached
head -c $((8 << 20)) /dev/zero | gzip -c >"$T/zeros.gz"
is "a gzip upload that inflates 1,000-fold" "$(gzup gzip "$T/zeros.gz" /home/user/gz/zeros)" 200
is "... all of it written" "$(stat_size /home/user/gz/zeros)" $((8 << 20))
head -c 4096 /dev/urandom >"$T/notgz"
is "a body that is not gzip: 400" "$(gzup gzip "$T/notgz" /home/user/gz/bad1)" 400
head -c $(( $(stat -c %s "$T/plain.gz") - 100 )) "$T/plain.gz" >"$T/cutgz"
is "a gzip body cut short: 400" "$(gzup gzip "$T/cutgz" /home/user/gz/bad2)" 400
{ cat "$T/plain.gz"; printf 'x'; } >"$T/padgz"
is "a byte after the gzip body: 400" "$(gzup gzip "$T/padgz" /home/user/gz/bad3)" 400
is "an encoding not taken (br): 400" "$(gzup br "$T/plain.gz" /home/user/gz/bad4)" 400
is "gzip of a multipart body: 400" "$(code -H "E2b-Sandbox-Id: $SU" -H "X-Access-Token: $TU" -H 'Content-Encoding: gzip' -F "file=@$T/p1;filename=/home/user/gz/bad5" "$U/files")" 400
n=0; for f in bad1 bad2 bad3 bad4 bad5; do [ "$(stat_size /home/user/gz/$f)" = "" ] && n=$((n + 1)); done
is "... none of them left a file" "$n" 5
rm -f "$T/big"
code -X DELETE -H "X-API-KEY: $SPACE_API_KEY" "$U/sandboxes/$SU" >/dev/null

# the polling watcher (CreateWatcher, GetWatcherEvents, RemoveWatcher)
rpc() { # KEY SBX METHOD JSON
	curl -s -o "$T/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $2" -H "X-Access-Token: $1" \
	    -H 'Content-Type: application/json' -d "$4" "$U/filesystem.Filesystem/$3"
}
WS=$(space create 2>"$T/err") || diag "$(cat "$T/err")"
is "MakeDir for the watcher" "$(rpc "$SPACE_API_KEY" "$WS" MakeDir '{"path":"/home/user/pw"}')" 200
is "CreateWatcher" "$(rpc "$SPACE_API_KEY" "$WS" CreateWatcher '{"path":"/home/user/pw"}')" 200
WID=$(jget watcherId "$T/body")
echo hello >"$T/up.txt"
is "an upload into the watched directory" "$(code -H "E2b-Sandbox-Id: $WS" -H "X-Access-Token: $SPACE_API_KEY" -F "file=@$T/up.txt;filename=/home/user/pw/a.txt" "$U/files")" 200
got=""
for i in $(seq 1 50); do
	rpc "$SPACE_API_KEY" "$WS" GetWatcherEvents "{\"watcherId\":\"$WID\"}" >/dev/null
	cat "$T/body" >>"$T/events"
	grep -q '"name":"a.txt"' "$T/events" && { got=1; break; }
	sleep 0.1
done
is "GetWatcherEvents gives the write" "$got" 1
is "another key cannot read the watcher" "$(rpc "$OKEY" "$WS" GetWatcherEvents "{\"watcherId\":\"$WID\"}")" 404
is "nor remove it" "$(rpc "$OKEY" "$WS" RemoveWatcher "{\"watcherId\":\"$WID\"}")" 404
is "RemoveWatcher" "$(rpc "$SPACE_API_KEY" "$WS" RemoveWatcher "{\"watcherId\":\"$WID\"}")" 200
is "a removed watcher is not_found" "$(rpc "$SPACE_API_KEY" "$WS" GetWatcherEvents "{\"watcherId\":\"$WID\"}")" 404
# keys cost nothing (every connect makes a token): a sandbox has at most
# 8 watchers whatever keys ask, so no one tenant holds them all
n=0
for i in $(seq 1 8); do
	curl -s -H "X-API-KEY: $SPACE_API_KEY" -d '{}' "$U/v2/sandboxes/$WS/connect" >"$T/wc.json"
	[ "$(rpc "$(jget envdAccessToken "$T/wc.json")" "$WS" CreateWatcher '{"path":"/home/user/pw"}')" = 200 ] && n=$((n + 1))
done
is "8 watchers on one sandbox, each with a fresh token" "$n" 8
curl -s -H "X-API-KEY: $SPACE_API_KEY" -d '{}' "$U/v2/sandboxes/$WS/connect" >"$T/wc.json"
is "a 9th, with yet another token: resource_exhausted" \
    "$(rpc "$(jget envdAccessToken "$T/wc.json")" "$WS" CreateWatcher '{"path":"/home/user/pw"}') $(jget code "$T/body")" "429 resource_exhausted"
space kill "$WS" >/dev/null 2>&1
# a watcher slot reserved by a create still connecting has no id yet: an
# unauthenticated caller racing creates with removals of the empty id
# must find nothing (it found the half-made slot, and space-edge died on
# its missing stream)
python3 - "${U##*:}" >"$T/wrace" 2>&1 <<'PY'
import http.client, sys, threading, time
port = int(sys.argv[1])
end = time.time() + 4
counts = {"create": 0, "remove": 0, "other": 0}
lock = threading.Lock()
def call(method, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/filesystem.Filesystem/" + method, body,
              {"E2b-Sandbox-Id": "a", "X-Access-Token": "a", "Content-Type": "application/json"})
    st = c.getresponse().status
    c.close()
    return st
def loop(method, body, name):
    while time.time() < end:
        try:
            call(method, body)
            with lock: counts[name] += 1
        except Exception:
            with lock: counts["other"] += 1
            time.sleep(0.01)
ts = [threading.Thread(target=loop, args=("CreateWatcher", '{"path":"/"}', "create")) for _ in range(8)]
ts += [threading.Thread(target=loop, args=("RemoveWatcher", '{"watcherId":""}', "remove")) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print(counts["create"], counts["remove"], counts["other"])
PY
diag "watcher race: creates, removals, failed calls: $(cat "$T/wrace")"
is "creates racing removals of the empty watcher id: space-edge serves on" "$(code "$U/health")" 204

# random bytes and random JSON at every endpoint: answers, never a crash
python3 - "${U##*:}" "$SPACE_API_KEY" >"$T/garbage" 2>&1 <<'PY'
import http.client, os, random, sys
port, key = int(sys.argv[1]), sys.argv[2]
paths = ["/v2/sandboxes", "/sandboxes", "/sandboxes/x/timeout", "/sandboxes/x/pause",
         "/v2/sandboxes/x/connect", "/files?path=/tmp/x", "/process.Process/Start",
         "/process.Process/SendInput", "/process.Process/List", "/filesystem.Filesystem/ListDir",
         "/filesystem.Filesystem/WatchDir", "/filesystem.Filesystem/GetWatcherEvents"]
bodies = [b"", b"{", b"[]", b"null", b'{"a":1}', b'{"path":1}', b'{"process":{"pid":-1}}',
          b"\x00\x00\x00\x00\x02{}", b"\x01\x00\x00\x00\x02{}", b"\xff" * 64]
cts = ["application/json", "application/connect+json", "multipart/form-data; boundary=x",
       "application/octet-stream", "text/plain"]
random.seed(75)
answered = 0
for i in range(300):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    b = random.choice(bodies) if random.random() < 0.7 else os.urandom(random.randrange(1, 300))
    h = {"Content-Type": random.choice(cts), "E2b-Sandbox-Id": random.choice(["x", "nosuch", "a" * 70]),
         "X-Access-Token": key, "X-API-KEY": random.choice([key, "bad key", ""])}
    try:
        c.request(random.choice(["POST", "GET", "PUT", "DELETE"]), random.choice(paths), b, h)
        r = c.getresponse(); r.read()
        if 200 <= r.status < 600: answered += 1
    except Exception as e:
        print("exception", type(e).__name__)
    c.close()
print("answered", answered)
PY
is "300 garbled requests each answered" "$(tail -n 1 "$T/garbage")" "answered 300"
printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n\001\002garbage\r\n\r\n' | timeout 5 nc -q1 127.0.0.1 "${U##*:}" >/dev/null 2>&1
is "still serving after garbage" "$(code "$U/health")" 204

done_testing
