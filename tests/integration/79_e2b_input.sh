#!/bin/sh
# space-edge's E2B-compatible API under hostile input, with no worker
# behind it (cheap enough for every CI run, also under the sanitizers):
# space-control and space-edge --e2b-listen only. Malformed JSON, unknown
# fields, duplicate keys, wrong types, over-long bodies, broken Connect
# envelopes, broken multipart uploads, too many parts, bad headers and
# random bytes at every endpoint: each gets its status and error body,
# and the daemon serves on (docs/e2b.md).
. "$SPACE_TOP/tests/lib.sh"
PATH="$SPACE_BIN:$PATH"
ctl_init
EPID=
trap 'for p in $EPID $PID; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"' EXIT
ctl_start || { not_ok "space-control up"; done_testing; exit 1; }
KEY=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
space-control edgekey create edge --data-dir "$D" >"$T/cred" 2>>"$T/log"
chmod 600 "$T/cred"
EP=$(free_port)
XP=$(free_port)
space-edge --listen "127.0.0.1:$EP" --control "$U" --domain "localhost:$EP" \
    --edge-credential-file "$T/cred" --e2b-listen "127.0.0.1:$XP" 2>>"$T/edge.log" &
EPID=$!
X=http://127.0.0.1:$XP
wait_http "$X/health" 10
check "space-edge serves the E2B API" wait_http "$X/health" 1

code() { curl -s -o "$T/body" -w '%{http_code}' --max-time 20 "$@"; }
A="X-API-KEY: $KEY"
J='Content-Type: application/json'
C='Content-Type: application/connect+json'
S="E2b-Sandbox-Id: sbx_nosuch"
K="X-Access-Token: $KEY"

is "create: not JSON" "$(code -H "$A" -d 'nope' "$X/v2/sandboxes")" 400
is "create: an array" "$(code -H "$A" -d '[1]' "$X/v2/sandboxes")" 400
is "create: no templateID" "$(code -H "$A" -d '{}' "$X/v2/sandboxes")" 400
is "create: a long templateID" "$(code -H "$A" -d "{\"templateID\":\"$(printf 'a%.0s' $(seq 1 80))\"}" "$X/v2/sandboxes")" 400
is "create: metadata not strings" "$(code -H "$A" -d '{"templateID":"base","metadata":{"a":1}}' "$X/v2/sandboxes")" 400
is "create: a negative timeout" "$(code -H "$A" -d '{"templateID":"base","timeout":-1}' "$X/v2/sandboxes")" 400
is "create: envVars not strings" "$(code -H "$A" -d '{"templateID":"base","envVars":{"A":1}}' "$X/v2/sandboxes")" 400
is "create: an envVars name a shell would not take" "$(code -H "$A" -d '{"templateID":"base","envVars":{"1A":"b"}}' "$X/v2/sandboxes")" 400
is "create: an envVars name with =" "$(code -H "$A" -d '{"templateID":"base","envVars":{"A=B":"b"}}' "$X/v2/sandboxes")" 400
is "create: an envVars value with a NUL" "$(code -H "$A" -d '{"templateID":"base","envVars":{"A":"b\u0000c"}}' "$X/v2/sandboxes")" 400
is "create: 65 envVars" "$(code -H "$A" -d "{\"templateID\":\"base\",\"envVars\":{$(for i in $(seq 1 65); do printf '"V%d":"x",' "$i"; done | sed 's/,$//')}}" "$X/v2/sandboxes")" 400
is "create: envVars over 8 KiB" "$(code -H "$A" -d "{\"templateID\":\"base\",\"envVars\":{\"A\":\"$(head -c 9000 /dev/zero | tr '\0' a)\"}}" "$X/v2/sandboxes")" 400
is "create: autoPauseMemory refused" "$(code -H "$A" -d '{"templateID":"base","autoPause":true,"autoPauseMemory":true}' "$X/v2/sandboxes")" 400
grep -q '"code":400' "$T/body"; check "with a {code, message} body" test $? = 0
is "create: deeply nested JSON" "$(code -H "$A" -d "$(python3 -c 'print("{\"templateID\":\"base\",\"metadata\":" + "["*5000 + "]"*5000 + "}")')" "$X/v2/sandboxes")" 400
is "list: a bad limit" "$(code -H "$A" "$X/v2/sandboxes?limit=0")" 400
is "list: a bad nextToken" "$(code -H "$A" "$X/v2/sandboxes?nextToken=../x")" 400
is "list: a bad state" "$(code -H "$A" "$X/v2/sandboxes?state=dead")" 400
is "list: an odd metadata filter" "$(code -H "$A" "$X/v2/sandboxes?metadata=%25%25%3D%00")" 200
is "timeout: a wrong type" "$(code -H "$A" -d '{"timeout":"x"}' "$X/sandboxes/sbx_nosuch/timeout")" 400
is "pause: memory kept is refused" "$(code -H "$A" -d '{"memory":true}' "$X/sandboxes/sbx_nosuch/pause")" 400
is "connect: an unknown field" "$(code -H "$A" -d '{"bogus":1}' "$X/v2/sandboxes/sbx_nosuch/connect")" 400
is "an unknown sandbox" "$(code -H "$A" "$X/sandboxes/sbx_nosuch")" 404
is "a method not served" "$(code -X PATCH -H "$A" "$X/v2/sandboxes")" 405

is "unary: not JSON" "$(code -H "$S" -H "$K" -H "$J" -d 'x' "$X/filesystem.Filesystem/Stat")" 400
is "unary: wrong content type" "$(code -H "$S" -H "$K" -H 'Content-Type: text/plain' -d '{}' "$X/filesystem.Filesystem/Stat")" 415
is "unary: an unknown field" "$(code -H "$S" -H "$K" -H "$J" -d '{"path":"/","x":1}' "$X/filesystem.Filesystem/Stat")" 400
is "unary: a bad depth" "$(code -H "$S" -H "$K" -H "$J" -d '{"path":"/","depth":99}' "$X/filesystem.Filesystem/ListDir")" 400
is "unary: a pid selector out of range" "$(code -H "$S" -H "$K" -H "$J" -d '{"process":{"pid":0}}' "$X/process.Process/SendSignal")" 400
is "unary: an unknown signal" "$(code -H "$S" -H "$K" -H "$J" -d '{"process":{"pid":5},"signal":"SIGNAL_SIGSTOP"}' "$X/process.Process/SendSignal")" 400
is "unary: a tag selector is not_found" "$(code -H "$S" -H "$K" -H "$J" -d '{"process":{"tag":"x"}}' "$X/process.Process/SendSignal")" 404
is "unary: a path too long" "$(code -H "$S" -H "$K" -H "$J" -d "{\"path\":\"/$(head -c 5000 /dev/zero | tr '\0' a)\"}" "$X/filesystem.Filesystem/Stat")" 400
printf '\000\000\000\000\050{"process":{"cmd":"sh"}}' >"$T/short"
is "stream: an envelope longer than the body" "$(code -H "$S" -H "$K" -H "$C" --data-binary @"$T/short" "$X/process.Process/Start")" 400
printf '\001\000\000\000\002{}' >"$T/gz"
is "stream: a compressed envelope" "$(code -H "$S" -H "$K" -H "$C" --data-binary @"$T/gz" "$X/process.Process/Start")" 400
printf '\000\000\000\000\002{}\000\000\000\000\002{}' >"$T/two"
is "stream: two envelopes" "$(code -H "$S" -H "$K" -H "$C" --data-binary @"$T/two" "$X/process.Process/Start")" 400
printf '\000\000\000\000\002{}' >"$T/nocmd"
is "stream: a start without cmd" "$(code -H "$S" -H "$K" -H "$C" --data-binary @"$T/nocmd" "$X/process.Process/Start")" 400
printf '\000\000\000\000\057{"process":{"cmd":"sh"},"pty":{"size":{"rows":0}}}' >"$T/pty"
is "stream: a pty of no rows" "$(code -H "$S" -H "$K" -H "$C" --data-binary @"$T/pty" "$X/process.Process/Start")" 400
printf '\000\000\000\000\030{"process":{"cmd":"sh"}}' >"$T/ok"
is "stream: a well-formed start for an unknown sandbox is answered 200" "$(code -H "$S" -H "$K" -H "$C" --data-binary @"$T/ok" "$X/process.Process/Start")" 200
grep -q 'not_found' "$T/body"; check "its end-of-stream error says not_found" test $? = 0

is "upload: a broken multipart body" "$(code -H "$S" -H "$K" -H 'Content-Type: multipart/form-data; boundary=zz' --data-binary 'garbage--zz--' "$X/files?path=/tmp/x")" 400
set --
for i in $(seq 1 65); do set -- "$@" -F "file=@$T/ok;filename=/tmp/f$i"; done
# (streamed: the first file is refused by the unknown sandbox, the rest
# dropped; the 65-file limit is test 75's, with a sandbox)
is "upload: 65 files to an unknown sandbox: the first one's 404" "$(code -H "$S" -H "$K" "$@" "$X/files")" 404
is "upload: octet-stream to an unknown sandbox" "$(code -H "$S" -H "$K" -H 'Content-Type: application/octet-stream' --data-binary @"$T/ok" "$X/files?path=/tmp/x")" 404
is "download: no path" "$(code -H "$S" -H "$K" "$X/files")" 400
{ printf 'X-API-KEY: '; head -c 200000 /dev/zero | tr '\0' a; echo; } >"$T/hdr"
is "a header too large" "$(code -H @"$T/hdr" "$X/v2/sandboxes")" 431

python3 - "$XP" "$KEY" >"$T/garbage" 2>&1 <<'PY'
import http.client, os, random, socket, sys
port, key = int(sys.argv[1]), sys.argv[2]
paths = ["/v2/sandboxes", "/sandboxes", "/sandboxes/x", "/sandboxes/x/timeout", "/sandboxes/x/pause",
         "/v2/sandboxes/x/connect", "/files?path=/tmp/x", "/files", "/process.Process/Start",
         "/process.Process/Connect", "/process.Process/SendInput", "/process.Process/List",
         "/process.Process/Update", "/filesystem.Filesystem/ListDir", "/filesystem.Filesystem/Move",
         "/filesystem.Filesystem/WatchDir", "/filesystem.Filesystem/CreateWatcher",
         "/filesystem.Filesystem/GetWatcherEvents", "/health", "/%00", "/" + "a" * 3000]
bodies = [b"", b"{", b"[]", b"null", b'{"a":1}', b'{"path":1}', b'{"process":{"pid":-1}}',
          b'{"templateID":"base","metadata":{"k":"v"},"timeout":1e99}',
          b"\x00\x00\x00\x00\x02{}", b"\x01\x00\x00\x00\x02{}", b"\x00\xff\xff\xff\xff{}",
          b"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/a\"\r\n\r\nhi\r\n--x--\r\n",
          b"\xff" * 64]
cts = ["application/json", "application/connect+json", "multipart/form-data; boundary=x",
       "multipart/form-data", "application/octet-stream", "text/plain"]
random.seed(79)
answered = 0
for i in range(400):
    b = random.choice(bodies) if random.random() < 0.7 else os.urandom(random.randrange(1, 400))
    h = {"Content-Type": random.choice(cts),
         "E2b-Sandbox-Id": random.choice(["x", "sbx_nosuch", "a" * 70, "\t"]),
         "X-Access-Token": random.choice([key, "k k", ""]), "X-API-KEY": random.choice([key, "bad key", ""])}
    if random.random() < 0.3:
        del h["E2b-Sandbox-Id"]
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        c.request(random.choice(["POST", "GET", "PUT", "DELETE"]), random.choice(paths), b, h)
        r = c.getresponse(); r.read()
        if 200 <= r.status < 600: answered += 1
        c.close()
    except Exception as e:
        print("exception", type(e).__name__)
# raw garbage on the socket, and a request cut in its body
for raw in [os.urandom(2000), b"POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
            b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n"]:
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(raw)
    except OSError:
        pass
    s.close()
print("answered", answered)
PY
is "400 random requests each answered" "$(tail -n 1 "$T/garbage")" "answered 400"
is "still serving" "$(code "$X/health")" 204
check "space-edge is still running" alive "$EPID"
done_testing
