#!/bin/sh
# The OpenAPI documents (docs/openapi/*.json) against the code that serves
# them: the copies the build embeds are generated from the files, each daemon serves
# its document at GET /openapi.json, the documents are structurally valid
# OpenAPI 3.0, every route of each daemon's routing table is documented and
# nothing else is, and the running daemons behave as documented: each
# documented method answers (not 404/405), undocumented methods get 405,
# authentication is required exactly where the document says so, and a
# body with an unknown field is refused exactly where the schema says
# additionalProperties: false. Every status seen must be a documented one.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
chmod 711 "$T"          # node-api drops to nobody
CP=$(free_port)
NP=$(free_port)
CU=http://127.0.0.1:$CP
NU=http://127.0.0.1:$NP
CTL= NAPI=
cleanup() {
	for p in $NAPI $CTL; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT INT TERM
# turn the checker's PASS/FAIL lines into TAP (read from a file: a pipe
# would run the loop in a subshell and lose the counts)
tap() { while IFS= read -r l; do
	case $l in PASS\ *) ok "${l#PASS }";; FAIL\ *) not_ok "${l#FAIL }";; *) diag "$l";; esac
done; }

CDOC=$SPACE_TOP/docs/openapi/space-control.json
NDOC=$SPACE_TOP/docs/openapi/node-api.json

# ---- the build embeds the documents (nothing generated is committed) ----
B=$(dirname "$SPACE_BIN")
(cd "$SPACE_TOP" && sh scripts/embed.sh docs/openapi/space-control.json space_control_openapi) >"$T/c_doc.c"
check "the build's space-control openapi_doc.c is generated from docs/openapi/space-control.json" \
	cmp -s "$T/c_doc.c" "$B/gen/space-control/openapi_doc.c"
(cd "$SPACE_TOP" && sh scripts/embed.sh docs/openapi/node-api.json node_api_openapi) >"$T/n_doc.c"
check "the build's node-api openapi_doc.c is generated from docs/openapi/node-api.json" \
	cmp -s "$T/n_doc.c" "$B/gen/node-api/openapi_doc.c"
# roundtrip FILE: embed, compile with the project's warnings, print the
# string back; it must be the file, byte for byte
cat >"$T/rt_main.c" <<'EOF'
#include <stdio.h>
#include <string.h>
extern const char rt_doc[];
extern const size_t rt_doc_len;
int main(void)
{
	fwrite(rt_doc, 1, rt_doc_len, stdout);
	return strlen(rt_doc) == rt_doc_len ? 0 : 1;
}
EOF
roundtrip() {
	sh "$SPACE_TOP/scripts/embed.sh" "$1" rt_doc >"$T/rt_doc.c" || return 1
	cc -std=gnu11 -Wall -Wextra -Werror -Wformat=2 -Wmissing-prototypes -o "$T/rt" \
	    "$T/rt_main.c" "$T/rt_doc.c" 2>"$T/cc.log" || { cat "$T/cc.log"; return 1; }
	"$T/rt" >"$T/rt_out" && cmp -s "$T/rt_out" "$1"
}
check "embedded space-control document compiles and is the file, byte for byte" roundtrip "$CDOC"
check "embedded node-api document compiles and is the file, byte for byte" roundtrip "$NDOC"
cat >"$T/nasty.json" <<'EOF'
{"q":"a \"quoted\" \\ back\\slash ??= ??/ ??( %d %s \u00e9 /* */",
 "t":"\t"}
EOF
check "embed.sh keeps quotes, backslashes, trigraph-like ??, % and comments intact" roundtrip "$T/nasty.json"
printf '{"a":"\303\251"}\n' >"$T/utf8.json"
check "embed.sh refuses bytes it cannot escape" sh -c "! sh '$SPACE_TOP/scripts/embed.sh' '$T/utf8.json' x_doc >/dev/null 2>&1"

# ---- routing tables, read from the source ----
# space-control: rows { "METHOD", "/pattern", handler, AUTH_x } of http.c
sed -n 's/^[[:space:]]*{ *"\([A-Z]*\)", *"\([^"]*\)", *\([a-z_]*\), *\(AUTH_[A-Z]*\) *},.*/\1 \2 \4/p' \
	"$SPACE_TOP/src/space-control/http.c" >"$T/c_routes"
check "space-control routing table found in http.c ($(wc -l <"$T/c_routes") rows)" test "$(wc -l <"$T/c_routes")" -ge 20
# node-api: the table rows { "METHOD", "suffix", "op", "label", K_x[, limit] } under
# /v1/sandboxes/*/, and the fixed paths compared with strcmp(url, ...)
{
	sed -n 's/^[[:space:]]*{ *"\([A-Z]*\)", *"\([^"]*\)", *"[^"]*", *"[^"]*", *K_[A-Z]*\(, *[A-Z_0-9]*\)\{0,1\} *},.*/\1 \/v1\/sandboxes\/*\/\2 AUTH_CAP/p' \
		"$SPACE_TOP/src/node-api/http.c"
	sed -n 's/.*strcmp(url, "\(\/[^"]*\)") == 0 && strcmp(method, "\([A-Z]*\)") == 0.*/\2 \1 AUTH_NONE/p' \
		"$SPACE_TOP/src/node-api/http.c"
} >"$T/n_routes"
check "node-api routes found in http.c ($(wc -l <"$T/n_routes") rows)" test "$(wc -l <"$T/n_routes")" -ge 11

cat >"$T/check.py" <<'EOF'
# check.py DOC ROUTES [BASE_URL CRED...]: structural validation, route
# table comparison, and (with a URL) probes of the running daemon.
import json, re, sys, urllib.request, urllib.error

doc_path, routes_path = sys.argv[1], sys.argv[2]
base = sys.argv[3] if len(sys.argv) > 3 else None
creds = dict(a.split("=", 1) for a in sys.argv[4:])
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

def res(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    return ok

with open(doc_path) as f:
    text = f.read()
def no_dups(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key among %s" % keys)
    return dict(pairs)
try:
    doc = json.loads(text, object_pairs_hook=no_dups)
    res(True, "%s is JSON without duplicate keys" % doc_path.split("/")[-1])
except ValueError as e:
    res(False, "%s is JSON without duplicate keys: %s" % (doc_path, e))
    sys.exit(0)

# ---- structure ----
res(re.fullmatch(r"3\.0\.\d+", str(doc.get("openapi", ""))) is not None, "openapi is 3.0.x")
info = doc.get("info", {})
res(isinstance(info.get("title"), str) and isinstance(info.get("version"), str), "info has title and version")
paths = doc.get("paths")
res(isinstance(paths, dict) and len(paths) > 0, "paths is a non-empty object")
bad_refs = []
def walk(node, where):
    if isinstance(node, dict):
        r = node.get("$ref")
        if r is not None:
            cur = doc
            for part in r[2:].split("/") if r.startswith("#/") else [None]:
                if part is None or not isinstance(cur, dict) or part not in cur:
                    bad_refs.append("%s at %s" % (r, where)); break
                cur = cur[part]
        for k, v in node.items():
            walk(v, where + "/" + k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, "%s/%d" % (where, i))
walk(doc, "#")
res(not bad_refs, "every $ref resolves" + ("" if not bad_refs else ": " + "; ".join(bad_refs[:5])))

def deref(node):
    while isinstance(node, dict) and "$ref" in node:
        cur = doc
        for part in node["$ref"][2:].split("/"):
            cur = cur[part]
        node = cur
    return node

schemes = doc.get("components", {}).get("securitySchemes", {})
problems, opids = [], set()
ops = []   # (method, path, operation, path-level params)
for p, item in paths.items():
    if not p.startswith("/"):
        problems.append("path %s does not start with /" % p)
    plevel = item.get("parameters", [])
    for m, o in item.items():
        if m == "parameters":
            continue
        if m not in METHODS:
            problems.append("%s: %s is not an HTTP method" % (p, m)); continue
        ops.append((m.upper(), p, o, plevel))
        oid = o.get("operationId")
        if not oid or oid in opids:
            problems.append("%s %s: missing or repeated operationId" % (m, p))
        opids.add(oid)
        rs = o.get("responses")
        if not isinstance(rs, dict) or not rs:
            problems.append("%s %s: no responses" % (m, p)); continue
        for code, r in rs.items():
            if not re.fullmatch(r"[1-5]\d\d|default", code):
                problems.append("%s %s: response key %s" % (m, p, code))
            if "description" not in deref(r):
                problems.append("%s %s %s: response without description" % (m, p, code))
        for req in o.get("security", doc.get("security", [])):
            for name in req:
                if name not in schemes:
                    problems.append("%s %s: unknown security scheme %s" % (m, p, name))
        params = [deref(x) for x in plevel + o.get("parameters", [])]
        for x in params:
            if not {"name", "in"} <= set(x) or ("schema" not in x and "content" not in x):
                problems.append("%s %s: incomplete parameter %s" % (m, p, x))
            if x.get("in") == "path" and x.get("required") is not True:
                problems.append("%s %s: path parameter %s not required" % (m, p, x.get("name")))
        declared = {x["name"] for x in params if x.get("in") == "path"}
        templ = set(re.findall(r"\{([^}]+)\}", p))
        if declared != templ:
            problems.append("%s %s: path parameters %s declared as %s" % (m, p, sorted(templ), sorted(declared)))
res(not problems, "every operation is well formed (operationId, responses, parameters, security)" +
    ("" if not problems else ": " + "; ".join(problems[:5])))
for name, s in schemes.items():
    res(s.get("type") == "http" and s.get("scheme") == "bearer", "security scheme %s is an HTTP bearer" % name)

# ---- the routing table ----
code_routes = {}
for line in open(routes_path):
    m, pat, auth = line.split()
    code_routes[(m, pat)] = auth
doc_routes = {(m, re.sub(r"\{[^}]+\}", "*", p)): o for m, p, o, _ in ops}
missing = sorted(set(code_routes) - set(doc_routes))
extra = sorted(set(doc_routes) - set(code_routes))
res(not missing, "every route of the daemon is documented" + ("" if not missing else ": missing %s" % missing))
res(not extra, "every documented route exists in the daemon" + ("" if not extra else ": extra %s" % extra))
wrong = []
for k, auth in code_routes.items():
    if k not in doc_routes:
        continue
    sec = doc_routes[k].get("security", doc.get("security", []))
    names = sorted(n for req in sec for n in req)
    want = {"AUTH_NONE": [], "AUTH_USER": ["apiKey"], "AUTH_WORKER": ["workerCredential"], "AUTH_EDGE": ["edgeCredential"],
            "AUTH_SANDBOX": ["accessToken", "apiKey"],
            "AUTH_CAP": ["capability"]}[auth]
    if names != want:
        wrong.append("%s %s: %s, code says %s" % (k[0], k[1], names, auth))
res(not wrong, "each route's security scheme matches its authentication in the code" +
    ("" if not wrong else ": " + "; ".join(wrong)))

if base is None:
    sys.exit(0)

# ---- the running daemon ----
def call(method, path, bearer=None, body=None, ctype="application/json"):
    data = None if body is None else body.encode()
    rq = urllib.request.Request(base + path, data=data, method=method)
    if bearer:
        rq.add_header("Authorization", "Bearer " + bearer)
    if data is not None:
        rq.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(rq, timeout=40) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

def concrete(p, values):
    return re.sub(r"\{([^}]+)\}", lambda m: values.get(m.group(1), "zz1"), p)

def err_code(body):
    try:
        return json.loads(body).get("error")
    except Exception:
        return None

values = {"id": "w1", "sbx": "sbx_zz1", "pid": "1"}
undocumented = []
for m, p, o, _ in ops:
    vals = dict(values)
    if "/sandboxes/{id}" in p:
        vals["id"] = "sbx_zz1"
    path = concrete(p, vals)
    q = "?path=/x" if any(deref(x).get("name") == "path" for x in o.get("parameters", [])) else ""
    q += "&wait=0" if p.endswith("/assignments") else ""
    if q.startswith("&"):
        q = "?" + q[1:]
    sec = [n for req in o.get("security", []) for n in req]
    documented = set(o["responses"])
    # 1. the route answers: neither "no such endpoint" nor 405
    st, body = call(m, path + q)
    res(st != 405 and not (st == 404 and (b"no such endpoint" in body or b"no such route" in body)),
        "%s %s is routed (%d)" % (m, p, st))
    if str(st) not in documented:
        undocumented.append("%s %s -> %d (no credentials)" % (m, p, st))
    # 2. authentication where, and only where, the document says so
    if sec:
        res(st == 401 and err_code(body) == "unauthenticated", "%s %s without a bearer -> 401 unauthenticated" % (m, p))
        st2, _ = call(m, path + q, bearer="sk_" + "A" * 43 if sec[0] != "capability" else "garbage")
        res(st2 in (401, 403), "%s %s with a forged bearer is refused (%d)" % (m, p, st2))
    else:
        res(st == 200, "%s %s needs no credentials (%d)" % (m, p, st))
    # 3. unknown fields: refused exactly where the schema is closed
    rb = o.get("requestBody")
    if rb and "application/json" in rb.get("content", {}) and sec and sec[0] in creds:
        schema = deref(rb["content"]["application/json"]["schema"])
        st3, body3 = call(m, path + q, bearer=creds[sec[0]], body='{"zz_unknown_field":1}')
        refused = st3 == 400 and b"unknown field" in body3
        if schema.get("additionalProperties") is False:
            res(refused, "%s %s refuses an unknown field, as its schema says (%d %s)" % (m, p, st3, body3[:80]))
        else:
            res(not refused, "%s %s accepts unknown fields, as its schema says (%d)" % (m, p, st3))
        if str(st3) not in documented:
            undocumented.append("%s %s -> %d (unknown field)" % (m, p, st3))
        st4, _ = call(m, path + q, bearer=creds[sec[0]], body='{"a":1,"a":2}')
        res(st4 == 400, "%s %s refuses a duplicate key (%d)" % (m, p, st4))
# 4. every method the document does not give a path is 405 (unless the
# concrete path is also another documented path's, with that method:
# .../archives/stream is a path of its own and a shape of .../archives/{digest})
def template_matches(t, cp):
    ts, cs = t.split("/"), cp.split("/")
    return len(ts) == len(cs) and all(a == b or (a.startswith("{") and a.endswith("}")) for a, b in zip(ts, cs))
for p, item in paths.items():
    vals = dict(values)
    if "/sandboxes/{id}" in p:
        vals["id"] = "sbx_zz1"
    for m in ("GET", "POST", "PUT", "DELETE"):
        if m.lower() in item:
            continue
        cp = concrete(p, vals)
        if any(p2 != p and m.lower() in it2 and template_matches(p2, cp) for p2, it2 in paths.items()):
            continue
        st, body = call(m, cp + "?path=/x", body="{}" if m in ("POST", "PUT") else None)
        # space-control answers 405 for a known path; node-api answers
        # 404 for its fixed paths (healthz, metrics, openapi.json)
        res(st == 405 or (st == 404 and item.get("get", {}).get("security") == []),
            "%s %s (undocumented method) is refused (%d)" % (m, p, st))
        if st == 405 and "405" not in {c for o in item.values() if isinstance(o, dict) and "responses" in o for c in o["responses"]}:
            undocumented.append("%s %s -> 405 not documented on the path" % (m, p))
res(not undocumented, "every status seen is documented for its operation" +
    ("" if not undocumented else ": " + "; ".join(undocumented[:6])))
# 5. errors have the documented shape
st, body = call("GET", "/no/such/thing")
eschema = deref(doc["components"]["schemas"]["Error"])
try:
    b = json.loads(body)
    shape = set(b) <= set(eschema["properties"]) and set(eschema.get("required", [])) <= set(b)
except Exception:
    shape = False
res(st == 404 and shape, "an unknown path is 404 with the documented error body (%s)" % body[:80])
EOF

# ---- documents alone ----
python3 "$T/check.py" "$CDOC" "$T/c_routes" >"$T/r1"; tap <"$T/r1"
python3 "$T/check.py" "$NDOC" "$T/n_routes" >"$T/r2"; tap <"$T/r2"

# ---- space-control, running ----
K=$(space-control apikey add alice --data-dir "$T/c" 2>>"$T/ctl.log")
WC=$(space-control worker add w1 --data-dir "$T/c" 2>>"$T/ctl.log")
EC=$(space-control edgekey create e1 --data-dir "$T/c" 2>>"$T/ctl.log")
space-control --data-dir "$T/c" --listen "127.0.0.1:$CP" 2>>"$T/ctl.log" &
CTL=$!
check "space-control answers /healthz" wait_http "$CU/healthz" 10
is "GET /openapi.json -> 200 without credentials" \
	"$(curl -s -o "$T/served_c.json" -w '%{http_code} %{content_type}' "$CU/openapi.json")" "200 application/json"
check "space-control serves docs/openapi/space-control.json byte for byte" cmp -s "$T/served_c.json" "$CDOC"
python3 "$T/check.py" "$T/served_c.json" "$T/c_routes" "$CU" "apiKey=$K" "workerCredential=$WC" "edgeCredential=$EC" >"$T/r3"; tap <"$T/r3"
check "space-control still answers after the probes" wait_http "$CU/healthz" 2

# ---- node-api, running alone (no sbx-manager: admission cannot be reached) ----
node-api --listen "127.0.0.1:$NP" --manager-socket "$T/absent.sock" --worker-id w1 2>>"$T/napi.log" &
NAPI=$!
check "node-api answers /healthz" wait_http "$NU/healthz" 10
is "node-api GET /openapi.json -> 200 without credentials" \
	"$(curl -s -o "$T/served_n.json" -w '%{http_code} %{content_type}' "$NU/openapi.json")" "200 application/json"
check "node-api serves docs/openapi/node-api.json byte for byte" cmp -s "$T/served_n.json" "$NDOC"
python3 "$T/check.py" "$T/served_n.json" "$T/n_routes" "$NU" >"$T/r4"; tap <"$T/r4"
LONG=$(python3 -c 'print("/x" * 2100)')
is "node-api: a request URI over 4096 bytes -> 414" \
	"$(curl -s -o /dev/null -w '%{http_code}' "$NU/v1/sandboxes/sbx_a/fs/stat?path=$LONG")" 414
check "414 is documented for fs/stat" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); sys.exit(0 if "414" in d["paths"]["/v1/sandboxes/{sbx}/fs/stat"]["get"]["responses"] else 1)' "$NDOC"
# a bearer shaped like a capability passes node-api's cheap check and is
# then 503: sbx-manager (the authority) cannot be reached. Documented.
CAP=$(python3 -c 'import base64,json
b=lambda x: base64.urlsafe_b64encode(x).rstrip(b"=").decode()
print("v4.public." + b(b"{}" + bytes(64)) + "." + b(json.dumps({"kid": "k4.pid." + b(bytes(33))}).encode()))')
is "a capability-shaped bearer with no sbx-manager -> 503" \
	"$(curl -s -o "$T/b" -w '%{http_code}' -H "Authorization: Bearer $CAP" "$NU/v1/sandboxes/sbx_a/fs/stat?path=/x")" 503
check "503 is documented for fs/stat" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); sys.exit(0 if "503" in d["paths"]["/v1/sandboxes/{sbx}/fs/stat"]["get"]["responses"] else 1)' "$NDOC"

# ---- both daemons stop cleanly (under sanitizers: no report) ----
kill -TERM "$NAPI" "$CTL"
wait "$NAPI"; rn=$?
wait "$CTL"; rc=$?
NAPI= CTL=
is "node-api exits 0 on SIGTERM" "$rn" 0
is "space-control exits 0 on SIGTERM" "$rc" 0
check "no sanitizer report in the daemons' logs" sh -c \
	"! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' '$T/ctl.log' '$T/napi.log'"

done_testing
