# Workers simulated by curl against one space-control at $U (tests of the
# control plane alone): each follows its assignment stream with
# long-polls and answers with status reports as sbx-manager would. Source
# it after tests/lib.sh and ctl_init; K is the API key the sandbox
# helpers use.
#
#   req METHOD PATH CRED [BODY]   status printed; body in $T/body, headers in $T/hdr
#   fetch W CRED [WAIT]           W's next assignments (a long-poll of up to
#                                 WAIT s, default 10) in $T/a_W, the cursor
#                                 kept as a worker keeps it
#   got W                         what W's last fetch got: "action gGEN
#                                 SNAPSHOT-OF-SPEC" (a snapshot's name for
#                                 a snapshot assignment), space-separated
#   report W CRED STATE [DIGEST]  the status of the execution W's last
#                                 fetch named last, with an archive
#   state SBX                     the sandbox's state ("" when unreachable)
#   wait_state SBX WANT SECONDS   true once it is WANT
#   digest                        64 random hex digits

req() {
	curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $3" \
		${4:+--data-binary "$4"} "$U$2"
}
digest() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
fetch() {
	c=$(cat "$T/cur_$1" 2>/dev/null || echo 0)
	curl -s -H "Authorization: Bearer $2" "$U/v1/workers/$1/assignments?after=$c&wait=${3:-10}" >"$T/a_$1"
	jget revision "$T/a_$1" >"$T/cur_$1"
}
got() {
	python3 -c 'import json,sys
a=json.load(open(sys.argv[1]))["assignments"]
print(" ".join("%s g%d %s" % (x["action"], x["identity"]["generation"],
    json.dumps(x["spec"].get("snapshot")) if x["action"] != "snapshot" else x["spec"].get("name"))
    for x in a))' "$T/a_$1"
}
report() {
	body=$(python3 -c 'import json,sys
a=json.load(open(sys.argv[1]))["assignments"][-1]
b={"identity": a["identity"], "state": sys.argv[2]}
if len(sys.argv) > 3: b["snapshot"] = {"digest": sys.argv[3], "size": 4096}
print(json.dumps(b))' "$T/a_$1" "$3" $4)
	req POST "/v1/workers/$1/status" "$2" "$body"
}
state() { req GET "/v1/sandboxes/$1" "$K" >/dev/null 2>&1 && jget state 2>/dev/null; }
wait_state() {
	i=0
	while [ $i -lt $(($3 * 10)) ]; do
		[ "$(state "$1")" = "$2" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
