#!/bin/sh
# A guest whose file body breaks the size its own answer announced, seen
# by a client of node-api (docs/worker.md, node-api, "Streams file
# bodies"). The bridge and sbx-manager relay DATA as it comes; node-api
# holds the body to the announced Content-Length. The guest is the test
# double of tests/doubles/fake_guest.c ("hostile"), installed where the
# platform takes spaced-guest from, so every hop before it is the real one.
#  - more than announced (small, and large enough to be spliced): the
#    client gets exactly the announced bytes, the guest's own first ones,
#    and nothing of the rest;
#  - fewer than announced: the transfer ends short (curl: partial), with
#    the guest's own bytes only;
#  - a body passed as a descriptor that is not a plain file open for
#    reading (a pipe, procfs, writable, a directory), or one the answer
#    does not announce (or announces without passing): refused, 500;
#  - node-api and sbx-manager serve on afterwards.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
DOUBLES=$(dirname "$SPACE_BIN")/tests/doubles
NP=$(free_port)
NU=http://127.0.0.1:$NP

cp "$DOUBLES/guest-hostile" "$BIN/spaced-guest"
register_worker w1
check "space-control up" start_ctl
check "sbx-manager made its socket" start_mgr 1 w1 "$NP"
check "node-api answers /healthz" start_napi 1 w1 "$NP"
is "create a sandbox whose guest lies" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "sandbox running within 20 s" wait_state "$S" running 20
CAP=$(route "$S")

# get PATH: "HTTP-code bytes-received curl-exit", the body in $T/got
get() {
	_c=$(curl -s -m 60 -o "$T/got" -w '%{http_code} %{size_download}' \
	    -H "Authorization: Bearer $CAP" "$NU/v1/sandboxes/$S/files?path=$1")
	echo "$_c $?"
}
# the guest's bytes: 'A' + i % 26, the first N of them
expect() {
	python3 -c 'import sys; n = int(sys.argv[1]); sys.stdout.buffer.write(bytes(65 + i % 26 for i in range(n)))' "$1" >"$T/want"
}

expect 4096
is "4 KiB announced, 8 KiB sent: 200 with exactly 4096 bytes" "$(get /overlong/4096/8192)" "200 4096 0"
check "... the guest's first 4096 bytes" cmp -s "$T/got" "$T/want"

expect 2097152
is "2 MiB announced, 3 MiB sent (spliced hops): exactly 2 MiB" "$(get /overlong/2097152/3145728)" "200 2097152 0"
check "... the guest's first 2 MiB" cmp -s "$T/got" "$T/want"

# short LABEL PATH SENT: announced more than SENT bytes, sent SENT
short() {
	r=$(get "$2")
	is "$1: 200, cut short (curl: partial transfer)" "$(echo "$r" | cut -d' ' -f1,3)" "200 18"
	n=$(echo "$r" | cut -d' ' -f2)
	check "... at most the $3 bytes sent ($n)" test "$n" -le "$3"
	expect "$n"
	check "... all of them the guest's own" cmp -s "$T/got" "$T/want"
}
short "8 KiB announced, 4 KiB sent" /short/8192/4096 4096
short "3 MiB announced, 2 MiB sent (spliced hops)" /short/3145728/2097152 2097152

# A body passed as a descriptor (node-api asks for one on every read): the
# bridge takes only a regular file open for reading only, on a file
# system of files, and only when the answer says it is one; anything else
# is a bad answer (500), and nothing of it reaches the client.
bad_fd() {
	r=$(get "/fd/$1")
	is "a descriptor of $2: refused, 500" "$(echo "$r" | cut -d' ' -f1)" 500
	check "... as a bad answer from the guest" grep -q '"bad answer from the guest"' "$T/got"
}
bad_fd pipe "a pipe"
bad_fd proc "a procfs file"
bad_fd rdwr "a file open for writing too"
bad_fd dir "a directory"
bad_fd unsaid "a good file the answer does not announce"
bad_fd missing "nothing, the answer announcing one"
expect 200000
is "a good descriptor announced as 5 bytes: 200, the file's own 200,000" "$(get /fd/good)" "200 200000 0"
check "... its bytes" cmp -s "$T/got" "$T/want"
# counted when the answer ends, after its last byte reached the client
fd_bodies() { curl -s "$NU/metrics" | sed -n 's/^space_nodeapi_file_bodies_total{from="descriptor"} //p'; }
fd_bodies_one() { [ "$(fd_bodies)" = 1 ]; }
eventually 10 fd_bodies_one
is "node-api counts one body from a descriptor" "$(fd_bodies)" 1

is "node-api serves on" "$(curl -s "$NU/healthz")" '{"ok":true}'
expect 10
is "and the next read on the same sandbox is answered" "$(get /overlong/10/5000)" "200 10 0"
check "... with the guest's first 10 bytes" cmp -s "$T/got" "$T/want"
check "node-api still runs" kill -0 "$N1"
check "sbx-manager still runs" kill -0 "$M1"

done_testing
