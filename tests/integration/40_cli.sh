#!/bin/sh
# The space CLI: usage errors, --help for every verb, the environment it
# needs; the control verbs against a real space-control, with a scripted
# worker (registered through the worker endpoints of docs/protocol.md) whose
# endpoint answers the data verbs, so that the CLI's side of exec and fs
# (exit statuses, error mapping, streaming) is checked on the wire.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset SPACE_API_URL SPACE_API_KEY SPACE_DEBUG
# routes are cached per test, never in the home directory
export SPACE_ROUTE_CACHE="$T/routes.json"

# --- usage -----------------------------------------------------------------
space >/dev/null 2>&1; is "no verb is a usage error" "$?" 2
space no-such-verb >/dev/null 2>&1; is "unknown verb is a usage error" "$?" 2
verbs=$(space --help | awk '/^verbs:/ {v=1; next} v && !NF {exit} v {print $1}')
for v in create list show kill workers route exec fs pause resume move snapshot timeout demo up; do
	case " $(echo $verbs) " in *" $v "*) ok "verb table lists $v" ;; *) not_ok "verb table lists $v" ;; esac
done
for v in $verbs; do
	out=$(space "$v" --help 2>&1); rc=$?
	is "space $v --help exits 0" "$rc" 0
	case "$out" in *"usage: space $v"*) ok "space $v --help prints its usage" ;;
	*) not_ok "space $v --help prints its usage"; diag "$out" ;; esac
done
for sub in read write ls stat mkdir rm mv; do
	out=$(space fs "$sub" --help 2>&1); rc=$?
	is "space fs $sub --help exits 0" "$rc" 0
done
usage2() { # description, command...: exit status 2 and a usage line or reason on stderr
	d=$1; shift
	"$@" >/dev/null 2>"$T/err"; rc=$?
	if [ "$rc" = 2 ] && [ -s "$T/err" ]; then ok "$d"; else not_ok "$d"; diag "exit $rc: $(cat "$T/err")"; fi
}
usage2 "show without SBX" space show
usage2 "show with two SBX" space show a b
usage2 "show with a bad id" space show 'a/../b'
usage2 "create with an unknown option" space create --bogus
usage2 "create with a bad --memory-mb" space create --memory-mb lots
usage2 "create with an argument" space create extra
usage2 "kill without SBX" space kill
usage2 "exec without anything" space exec
usage2 "exec without a command" space exec sbx_x --
usage2 "exec with --timeout 0" space exec --timeout 0 sbx_x -- true
usage2 "exec with a bad --env" space exec --env NOEQUALS sbx_x -- true
usage2 "route with --access and --port" space route sbx_x --access exec --port 80 --proto http
usage2 "route with --port but no --proto" space route sbx_x --port 80
usage2 "route with a bad --proto" space route sbx_x --port 80 --proto ftp
usage2 "route with an unknown access" space route sbx_x --access exec,root
usage2 "fs without sub-verb" space fs
usage2 "fs with an unknown sub-verb" space fs chmod sbx_x /a
usage2 "fs read without PATH" space fs read sbx_x
usage2 "fs mv without TO" space fs mv sbx_x /a
usage2 "move without --to" space move sbx_x
usage2 "move with a bad --to" space move sbx_x --to 'w/1'
usage2 "pause with --worker" space pause sbx_x --worker w1
usage2 "resume with --to" space resume sbx_x --to w1
usage2 "resume with --wait 0" space resume sbx_x --wait 0
usage2 "snapshot with a bad --name" space snapshot sbx_x --name 'a b'
usage2 "snapshot list without SBX" space snapshot list
usage2 "snapshot rm without SNAPSHOT" space snapshot rm sbx_x
usage2 "snapshot rm with a bad id" space snapshot rm sbx_x 'a b'
usage2 "timeout with a bad --idle" space timeout sbx_x --idle -1
usage2 "timeout with a bad --action" space timeout sbx_x --action stop
usage2 "demo with an argument" space demo extra
usage2 "fs write with a bad --mode" space fs write --mode 999 sbx_x /a
usage2 "fs ls -r is not an option of ls" space fs ls -r sbx_x /
usage2 "up with a bad --workers" space up --workers many
usage2 "up with a bad --port" space up --port 70000

# --- environment -----------------------------------------------------------
fails1() { # description, stderr pattern, command...: exit 1, "space: VERB: ..." on stderr
	d=$1; pat=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"; rc=$?
	if [ "$rc" = 1 ] && grep -q -- "$pat" "$T/err"; then ok "$d"
	else not_ok "$d"; diag "exit $rc: $(cat "$T/err")"; fi
}
fails1 "no SPACE_API_URL: clear error" "^space: list: SPACE_API_URL is not set" space list
SPACE_API_URL=http://127.0.0.1:1 fails1 "no SPACE_API_KEY: clear error" \
	"^space: create: SPACE_API_KEY is not set" space create
fails1 "--api-url must be http(s)" "^space: show: bad API URL" \
	space show --api-url ftp://x --api-key k sbx_x
dead=$(free_port)
fails1 "control plane down: the transport error is shown" "^space: list: .*127.0.0.1:$dead" \
	space list --api-url "http://127.0.0.1:$dead" --api-key sk_x

# --- a real space-control --------------------------------------------------
P=$(free_port)
CTL="http://127.0.0.1:$P"
if [ ! -x "$SPACE_BIN/space-control" ]; then
	not_ok "space-control is built (the control-plane checks below cannot run)"
	done_testing
	exit
fi
space-control --data-dir "$T/control" --listen "127.0.0.1:$P" >"$T/control.log" 2>&1 &
pids="$pids $!"
if ! wait_http "$CTL/healthz" 15; then
	not_ok "space-control answers /healthz"
	tail -20 "$T/control.log" | sed 's/^/# /'
	done_testing
	exit
fi
ok "space-control answers /healthz"
KEY=$(space-control apikey add admin --data-dir "$T/control" 2>>"$T/control.log")
case "$KEY" in sk_*) ok "apikey add prints an API key" ;; *) not_ok "apikey add prints an API key" ;; esac
WK=$(space-control worker add wf --data-dir "$T/control" 2>>"$T/control.log")
case "$WK" in wk_*) ok "worker add prints a credential" ;; *) not_ok "worker add prints a credential" ;; esac
export SPACE_API_URL="$CTL" SPACE_API_KEY="$KEY"

SPACE_API_KEY=sk_wrong fails1 "a wrong API key is refused" "^space: list: unauthenticated" space list
SPACE_API_KEY="$WK" fails1 "a worker credential is no API key" "^space: list: unauthenticated" space list
out=$(space list); rc=$?
is "list with no sandboxes exits 0" "$rc" 0
fails1 "create --no-wait with no worker: clear error" "^space: create: ..*" space create --no-wait
fails1 "show of an unknown sandbox: not_found" "^space: show: not_found" space show sbx_nosuchsandbox
fails1 "kill of an unknown sandbox: not_found" "^space: kill: not_found" space kill sbx_nosuchsandbox

# --- a scripted worker -------------------------------------------------------
# Its node-api endpoint answers by the command name and records what it was
# sent; it needs a bearer that looks like a capability.
Q=$(free_port)
cat >"$T/node.py" <<'EOF'
import base64, hashlib, http.server, json, sys, urllib.parse
port, rec = int(sys.argv[1]), sys.argv[2]
def result(code=0, sig=None, timed_out=False, out="", err="", **kw):
    r = {"exit_code": code, "signal": sig, "timed_out": timed_out, "stdout": out,
         "stderr": err, "stdout_truncated": False, "stderr_truncated": False}
    r.update(kw)
    return r
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self, status, obj):
        b = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.send_header("X-Space-Generation", "1")
        self.send_header("X-Space-Worker", "wf")
        self.end_headers()
        self.wfile.write(b)
    def chunks(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline()
                    return
                while n:
                    d = self.rfile.read(min(n, 1 << 20)); n -= len(d); yield d
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length", "0"))
            while n:
                d = self.rfile.read(min(n, 1 << 20)); n -= len(d); yield d
    def authorized(self):
        a = self.headers.get("Authorization", "")
        if not a.startswith("Bearer v4.public."):
            self.answer(401, {"error": "unauthenticated"})
            return False
        return True
    def do_POST(self):
        if not self.authorized(): return
        body = b"".join(self.chunks())
        u = urllib.parse.urlparse(self.path)
        if not u.path.endswith("/exec"):
            open(rec + "/post", "w").write(u.path + " " + json.dumps(json.loads(body)))
            return self.answer(200, {})
        a = json.loads(body); cmd = a["argv"][0]
        open(rec + "/exec", "w").write(json.dumps(a))
        if cmd == "echo": return self.answer(200, result(out=" ".join(a["argv"][1:]) + "\n"))
        if cmd == "exit": return self.answer(200, result(code=int(a["argv"][1]), err="bye\n"))
        if cmd == "killed": return self.answer(200, result(code=None, sig=9))
        if cmd == "slow": return self.answer(200, result(code=None, sig=9, timed_out=True))
        if cmd == "cat":
            d = base64.b64decode(a["stdin_b64"]) if "stdin_b64" in a else a.get("stdin", "").encode()
            return self.answer(200, result(out=None, stdout_b64=base64.b64encode(d).decode()))
        if cmd == "foreign":
            b = json.dumps(result(out="from another execution\n")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b)))
            self.send_header("X-Space-Generation", "1")
            self.send_header("X-Space-Worker", "w-other")
            self.end_headers()
            return self.wfile.write(b)
        if cmd == "stale": return self.answer(409, {"error": "refresh_route", "reason": "generation_mismatch"})
        if cmd == "denied": return self.answer(403, {"error": "deny", "reason": "access_not_granted"})
        if cmd == "expired": return self.answer(401, {"error": "capability_expired"})
        return self.answer(500, {"error": "internal", "message": "unknown command"})
    def do_PUT(self):
        if not self.authorized(): return
        h = hashlib.sha256(); n = 0
        for d in self.chunks():
            h.update(d); n += len(d)
        open(rec + "/put", "w").write("%s %d %s" % (h.hexdigest(), n, self.path))
        self.answer(200, {"size": n})
    def do_GET(self):
        if self.path == "/healthz": return self.answer(200, {"ok": True})
        if not self.authorized(): return
        u = urllib.parse.urlparse(self.path); q = urllib.parse.parse_qs(u.query)
        p = q.get("path", [""])[0]
        if u.path.endswith("/files"):
            if p == "/missing": return self.answer(404, {"error": "not_found", "message": "no such file"})
            n = int(p.rsplit("/", 1)[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            # /foreign/N: answered as if by another execution
            self.send_header("X-Space-Generation", "2" if p.startswith("/foreign/") else "1")
            self.send_header("X-Space-Worker", "wf")
            self.end_headers()
            blk = bytes(range(256)) * 256
            while n:
                k = min(n, len(blk)); self.wfile.write(blk[:k]); n -= k
            return
        if u.path.endswith("/fs/list"):
            return self.answer(200, {"entries": [{"name": "a b", "type": "file", "size": 3, "mode": 420, "mtime": "2026-01-01T00:00:00Z"}]})
        if u.path.endswith("/fs/stat"):
            return self.answer(200, {"name": p, "type": "dir", "size": 4096, "mode": 493, "mtime": "2026-01-01T00:00:00Z"})
        self.answer(404, {"error": "not_found"})
class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
S(("127.0.0.1", port), H).serve_forever()
EOF
python3 "$T/node.py" "$Q" "$T" >"$T/node.log" 2>&1 &
pids="$pids $!"
check "the scripted node-api answers" wait_http "http://127.0.0.1:$Q/healthz" 10

wcurl() { # METHOD PATH [JSON]: a worker endpoint call with the credential
	if [ -n "${3:-}" ]; then
		curl -sS -X "$1" -H "Authorization: Bearer $WK" -H 'Content-Type: application/json' \
			--data "$3" "$CTL$2"
	else
		curl -sS -X "$1" -H "Authorization: Bearer $WK" "$CTL$2"
	fi
}
reg=$(wcurl POST /v1/workers/wf/register "{\"incarnation\":\"inc1\",\"endpoint\":\"http://127.0.0.1:$Q\",\"capacity\":4}")
case "$reg" in *'"revision"'*) ok "the scripted worker registers" ;; *) not_ok "the scripted worker registers"; diag "$reg" ;; esac
wcurl POST /v1/workers/wf/heartbeat '{"incarnation":"inc1"}' >/dev/null
# and keeps beating, as a real worker does: a slow run must not outlive its
# liveness and see "the execution's worker is not live"
( while :; do wcurl POST /v1/workers/wf/heartbeat '{"incarnation":"inc1"}' >/dev/null 2>&1; sleep 2; done ) &
pids="$pids $!"

out=$(space workers --json 2>"$T/err"); rc=$?
if [ "$rc" = 0 ] && echo "$out" | python3 -c '
import json, sys
w = json.load(sys.stdin)
assert isinstance(w, list) and len(w) == 1, w
assert w[0]["id"] == "wf" and w[0]["endpoint"].startswith("http://127.0.0.1:") and "state" in w[0] and isinstance(w[0]["sandboxes"], int), w[0]
'; then ok "workers --json lists the worker with id, endpoint, state, sandboxes"
else not_ok "workers --json lists the worker with id, endpoint, state, sandboxes (needs GET /v1/workers in space-control)"; diag "exit $rc: $(cat "$T/err")"; fi

# create waits for the execution to serve: ack the install meanwhile
space create --json >"$T/create.json" 2>"$T/create.err" &
cpid=$!
ident=""
i=0
while [ $i -lt 20 ] && [ -z "$ident" ]; do
	wcurl GET "/v1/workers/wf/assignments?after=0&wait=2" >"$T/assign.json"
	ident=$(python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
for x in a.get("assignments", []):
    if x["action"] == "install":
        print(json.dumps(x["identity"])); break
' "$T/assign.json" 2>/dev/null)
	i=$((i + 1))
done
if [ -n "$ident" ]; then ok "the worker is assigned the new execution"; else not_ok "the worker is assigned the new execution"; diag "$(cat "$T/assign.json")"; fi
st=$(wcurl POST /v1/workers/wf/status "{\"identity\":$ident,\"state\":\"serving\"}")
case "$st" in *'"ok"'*) ok "the worker reports serving" ;; *) not_ok "the worker reports serving"; diag "$st" ;; esac
wait "$cpid"; rc=$?
is "create waits until running and exits 0" "$rc" 0
SBX=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/create.json" 2>/dev/null)
check "create --json prints the sandbox, running" python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["state"] == "running", s
assert s["execution"]["worker"] == "wf", s' "$T/create.json"

out=$(space show "$SBX" --json)
check "show --json: id, state, execution {generation, worker, substrate, activation, resident}" \
	python3 -c '
import json, sys
s = json.loads(sys.argv[1]); e = s["execution"]
assert s["id"] == sys.argv[2] and s["state"] == "running", s
assert e["generation"] == 1 and e["worker"] == "wf", e
for k in ("substrate", "activation", "resident"): assert k in e, k
' "$out" "$SBX"
out=$(space show "$SBX")
case "$out" in *"$SBX"*running*generation*1*wf*) ok "show prints state, generation and worker" ;;
*) not_ok "show prints state, generation and worker"; diag "$out" ;; esac
out=$(space list)
case "$out" in *"$SBX"*running*) ok "list shows the sandbox" ;; *) not_ok "list shows the sandbox"; diag "$out" ;; esac
out=$(space list --json)
check "list --json has the sandbox" python3 -c '
import json, sys
assert [s for s in json.loads(sys.argv[1])["sandboxes"] if s["id"] == sys.argv[2]]' "$out" "$SBX"

out=$(space route "$SBX" --json)
check "route --json: endpoint, capability, expires_at, route identity" python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["endpoint"] == "http://127.0.0.1:" + sys.argv[3], r
assert r["capability"].startswith("v4.public."), r
assert r["expires_at"].endswith("Z"), r
i = r["route"]
assert i["sandbox"] == sys.argv[2] and i["generation"] == 1 and i["worker"] == "wf", i
for k in ("substrate", "activation", "resident"): assert k in i, k
' "$out" "$SBX" "$Q"
cap=$(space route "$SBX")
case "$cap" in v4.public.*) ok "route prints the capability alone" ;; *) not_ok "route prints the capability alone" ;; esac
[ "$(printf '%s\n' "$cap" | wc -l)" = 1 ] && ok "route output is one line" || not_ok "route output is one line"
check "route --access fs:r is granted" sh -c 'space route "$1" --access fs:r >/dev/null' sh "$SBX"
fails1 "route to an unknown sandbox: not_found" "^space: route: not_found" space route sbx_nosuchsandbox

# --- the data verbs, CLI side ------------------------------------------------
out=$(space exec "$SBX" -- echo hello world </dev/null); rc=$?
is "exec: stdout" "$out" "hello world"
is "exec: exit status 0" "$rc" 0
check "exec sends argv and timeout" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["argv"] == ["echo", "hello", "world"] and a["timeout"] == 30 and "stdin" not in a, a' "$T/exec"
space exec "$SBX" --timeout 5 --cwd /tmp --env A=1 --env B=x=y -- exit 3 </dev/null 2>"$T/err"; rc=$?
is "exec: the command's exit status" "$rc" 3
is "exec: the command's stderr" "$(cat "$T/err")" "bye"
check "exec sends cwd, env and timeout" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["cwd"] == "/tmp" and a["env"] == {"A": "1", "B": "x=y"} and a["timeout"] == 5, a' "$T/exec"
space exec "$SBX" -- killed </dev/null; is "exec: killed by signal 9 exits 137" "$?" 137
space exec "$SBX" -- slow </dev/null; is "exec: timed out exits 124" "$?" 124
printf 'a\000b\377' >"$T/bin.in"
space exec "$SBX" -- cat <"$T/bin.in" >"$T/bin.out"; rc=$?
check "exec: binary stdin and stdout round-trip" cmp "$T/bin.in" "$T/bin.out"
echo "text in" | space exec "$SBX" -- cat >"$T/txt.out"
check "exec: text stdin goes as \"stdin\"" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["stdin"] == "text in\n"' "$T/exec"
head -c 1048577 /dev/zero | space exec "$SBX" -- cat >/dev/null 2>"$T/err"; rc=$?
is "exec: stdin over 1 MiB is refused" "$rc" 1
# the scripted worker refuses every route: the one repair the client makes
# meets the same refusal, and the error names it and why repair failed
fails1 "exec: 409 refresh_route is shown with its reason" "^space: exec: refresh_route: .*generation_mismatch" \
	space exec "$SBX" -- stale
fails1 "exec: 403 deny is shown with its reason" "^space: exec: deny: access_not_granted" \
	space exec "$SBX" -- denied
fails1 "exec: 401 capability_expired is shown" "^space: exec: capability_expired" \
	space exec "$SBX" -- expired

head -c 67108864 /dev/urandom >"$T/big"
want=$(sha256sum <"$T/big" | cut -d' ' -f1)
cat "$T/big" | space fs write "$SBX" /home/user/big --mode 640; rc=$?
is "fs write from a pipe exits 0" "$rc" 0
got=$(cut -d' ' -f1,2 "$T/put")
is "fs write streams every byte (64 MiB, chunked)" "$got" "$want 67108864"
case "$(cat "$T/put")" in *"path=%2Fhome%2Fuser%2Fbig&mode=0640"*) ok "fs write: path escaped, mode octal" ;;
*) not_ok "fs write: path escaped, mode octal"; diag "$(cat "$T/put")" ;; esac
space fs write "$SBX" '/a b&c' <"$T/big"; rc=$?
is "fs write from a file exits 0" "$rc" 0
is "fs write from a file sends every byte" "$(cut -d' ' -f1,2 "$T/put")" "$want 67108864"
n=$(space fs read "$SBX" /x/3000000 | wc -c)
is "fs read streams the whole body" "$n" 3000000
fails1 "fs read of a missing file: not_found" "^space: fs read: not_found: no such file" \
	space fs read "$SBX" /missing
# a receiver answering for another execution than the capability names:
# nothing it sent is used, and it is not asked again
out=$(space -v fs read "$SBX" /foreign/100000 2>"$T/err"); rc=$?
is "fs read answered by another execution: exit 1" "$rc" 1
is "  ... and not one byte of its data reaches stdout" "$(printf %s "$out" | wc -c)" 0
check "  ... saying so" grep -q "^space: fs read: .*another execution\|^space: fs read: .*not from gen 1 on wf" "$T/err"
check "  ... after one attempt" grep -q "done: 1 attempt," "$T/err"
out=$(space exec "$SBX" -- foreign 2>"$T/err"); rc=$?
is "exec answered by another worker: exit 1, no output" "$rc:$out" "1:"
check "  ... saying so" grep -q "^space: exec: .*w-other" "$T/err"
out=$(space fs ls "$SBX" /)
case "$out" in *file*0644*3*"a b"*) ok "fs ls prints type, mode, size, name" ;; *) not_ok "fs ls prints type, mode, size, name"; diag "$out" ;; esac
out=$(space fs stat "$SBX" /etc --json)
check "fs stat --json is the stat object" python3 -c '
import json, sys
s = json.loads(sys.argv[1]); assert s["name"] == "/etc" and s["type"] == "dir", s' "$out"
space fs mkdir -p "$SBX" /a/b && grep -q '"parents": true' "$T/post" && ok "fs mkdir -p sends parents" || not_ok "fs mkdir -p sends parents"
space fs rm -r "$SBX" /a && grep -q '"recursive": true' "$T/post" && ok "fs rm -r sends recursive" || not_ok "fs rm -r sends recursive"
space fs mv "$SBX" /a /b && grep -q 'fs/rename {"from": "/a", "to": "/b"}' "$T/post" && ok "fs mv sends from and to" || not_ok "fs mv sends from and to"

# --- kill ------------------------------------------------------------------
out=$(space kill "$SBX"); rc=$?
is "kill exits 0" "$rc" 0
st=$(space show "$SBX" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
case "$st" in stopping|killed) ok "after kill the sandbox is $st" ;; *) not_ok "after kill the sandbox is stopping or killed"; diag "$st" ;; esac

done_testing
