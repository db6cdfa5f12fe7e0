#!/bin/sh
# space-edge started by a platform test (tests/lib_platform.sh start_edge):
# a web server in a sandbox reached through the edge by Host name, then the
# same URL after a move to the other worker. Written for the layout of
# simulated hosts (5h_hosts_layout.sh runs it with SPACE_TEST_HOSTS=1:
# space-edge on host "edge", reaching space-control and the workers'
# netgtw listeners by their host addresses, the client reaching the edge at
# its own); it passes on the loopback too.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP1=$(free_port); NP2=$(free_port); G1=$(free_port); G2=$(free_port); EP=$(free_port)
check "space-control up" start_ctl
check "worker w1 up (netgtw on its host)" add_worker 1 w1 "$NP1" --gateway-listen "$(pl_addr w1):$G1"
check "worker w2 up (netgtw on its host)" add_worker 2 w2 "$NP2" --gateway-listen "$(pl_addr w2):$G2"
check "space-edge up at $(pl_addr edge)" start_edge "$EP"
if [ "${SPACE_TEST_HOSTS:-}" = 1 ]; then
	check "space-edge runs in host edge's network namespace, not the test's" \
		sh -c '[ "$(readlink /proc/$1/ns/net)" != "$(readlink /proc/self/ns/net)" ]' sh "$EDGE"
fi

is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
# a web server on 8081, started in the background; the exec returns once
# the port takes connections (python's start under load can be slow)
cat >"$T/serve.json" <<'JSON'
{"argv":["sh","-c","setsid /usr/bin/python3 -m http.server 8081 --bind 127.0.0.1 >/dev/null 2>&1 </dev/null & for i in $(seq 150); do /usr/bin/python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8081), 1)\" 2>/dev/null && exit 0; sleep 0.1; done; exit 1"],"timeout":30}
JSON
serve() {
	CAP=$(route "$S"); _e=$(jget endpoint)
	napi_at "$_e" POST exec --data-binary @"$T/serve.json" >/dev/null &&
	    [ "$(jget exit_code)" = 0 ]
}
check "a web server starts in the sandbox (8081)" serve
is "the owner declares 8081 public" "$(cpost "/v1/sandboxes/$S/ports" '{"port":8081,"public":true}')" 200
H="8081-$S.edge.test:$EP"
get() { curl -s -o "$T/page" -w '%{http_code}' --max-time 20 -H "Host: $H" "$EU/"; }
is "through the edge by Host name: 200" "$(get)" 200
check "... the sandbox's directory listing" grep -q "Directory listing" "$T/page"

is "move to w2 -> 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
check "running again" wait_state "$S" running 30
is "now on w2" "$(jget execution.worker "$T/sbx")" w2
check "the web server starts again after the move" serve
is "the same Host through the edge after the move: 200" "$(get)" 200
check "... the sandbox's directory listing" grep -q "Directory listing" "$T/page"
done_testing
