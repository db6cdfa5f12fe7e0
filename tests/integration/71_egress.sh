#!/bin/sh
# Egress (docs/network.md), from inside sandboxes. The whole platform runs
# in a network namespace this script made, whose only uplink leads to an
# "outside" namespace it also made, with its own HTTP servers and DNS: no
# packet can leave the machine even when a rule is wrong. Every refusal is
# paired with the same target reached from the worker's namespace, so a
# refusal is the policy's and not a missing server's.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
if [ -z "${EGRESS_NETNS:-}" ]; then
	exec unshare --net env EGRESS_NETNS=1 sh "$0" "$@"
fi
. "$SPACE_TOP/tests/lib_platform.sh"

ip link set lo up
platform_init
OUT= HELPERS=
platform_on_cleanup() {
	for p in $HELPERS $OUT; do kill "$p" 2>/dev/null; done
	return 0
}

# ---- the outside: 198.51.100.1 on the worker's uplink; behind it a web
# server on every address (203.0.113.10 "web.test", .20, .30; 10.99.0.1 a
# private one; 169.254.169.254 a metadata service) and a DNS server
unshare --net sleep 100000 &
OUT=$!
i=0; while [ "$(readlink /proc/$OUT/ns/net)" = "$(readlink /proc/self/ns/net)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ox() { nsenter --net=/proc/"$OUT"/ns/net "$@"; }
ip link add up0 type veth peer name out0 netns "$OUT"
ip addr add 198.51.100.2/24 dev up0
ip link set up0 up
ip route add default via 198.51.100.1
ox ip link set lo up
ox ip addr add 198.51.100.1/24 dev out0
ox ip link set out0 up
for a in 203.0.113.10 203.0.113.20 203.0.113.30 203.0.113.53 10.99.0.1 169.254.169.254; do
	ox ip addr add "$a/32" dev lo
done
mkdir "$T/www"; echo outside >"$T/www/index.html"
# nsenter execs the server: $! is the server
nsenter --net=/proc/"$OUT"/ns/net python3 -m http.server 8080 --bind 0.0.0.0 --directory "$T/www" >/dev/null 2>&1 &
HELPERS="$HELPERS $!"
nsenter --net=/proc/"$OUT"/ns/net python3 "$SPACE_TOP/tests/tools/dnsd.py" --bind 203.0.113.53 web.test=203.0.113.10 >"$T/dnsd.out" 2>&1 &
HELPERS="$HELPERS $!"
# a daemon of the worker's own, on every address of its namespace
WP=$(free_port)
python3 -m http.server "$WP" --bind :: --directory "$T/www" >/dev/null 2>&1 &
HELPERS="$HELPERS $!"
# reach URL: the worker itself gets an answer (3 s at most)
reach() { [ "$(curl -s -m 3 -o /dev/null -w '%{http_code}' "$1")" = 200 ]; }
check "the outside web server answers the worker" wait_http http://203.0.113.10:8080/ 10
check "the worker's own daemon answers on its uplink address" wait_http "http://198.51.100.2:$WP/" 10

MGR_FLAGS="--egress --egress-dns 203.0.113.53"
NP1=$(free_port); NP2=$(free_port)
# the control plane listens on every address of the worker's namespace
check "space-control up" start_ctl --listen "0.0.0.0:$CP"
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"

# probe SBX CAP ENDPOINT HOST PORT: from inside SBX, "open" when an HTTP
# answer came back, else why not
cat >"$T/probe.py" <<'EOF'
import socket, sys
h, p = sys.argv[1], int(sys.argv[2])
try:
    fam = socket.AF_INET6 if ":" in h else socket.AF_INET
    ai = socket.getaddrinfo(h, p, fam, socket.SOCK_STREAM)[0]
    s = socket.socket(ai[0], socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(ai[4])
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print("open" if s.recv(16).startswith(b"HTTP/") else "noanswer")
except OSError as e:
    print("refused:%s" % type(e).__name__)
EOF
setup_sbx() { # SBX CAP ENDPOINT: the probe into the sandbox
	S=$1 CAP=$2
	napi_at "$3" PUT 'files?path=/home/user/probe.py' --data-binary @"$T/probe.py"
}
probe() {
	routeto "$1"
	S=$1 CAP=$CAP
	napi_at "$E" POST exec --data-binary "{\"argv\":[\"python3\",\"/home/user/probe.py\",\"$4\",\"$5\"]}" >/dev/null
	jget stdout
}
in_sbx() { # SBX CAP ENDPOINT SHELL-COMMAND: its stdout
	routeto "$1"
	S=$1 CAP=$CAP
	napi_at "$E" POST exec --data-binary "$(python3 -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]]}))' "$4")" >/dev/null
	jget stdout
}
routeto() { # SBX: CAP and E (endpoint) of its current execution
	cpost "/v1/sandboxes/$1/routes" '{"access":["exec","fs:r","fs:w"]}' >/dev/null
	CAP=$(jget capability); E=$(jget endpoint)
}

# ---- bad policies are refused at the API ----
is "internet not a boolean -> 400" "$(cpost /v1/sandboxes '{"worker":"w1","network":{"internet":"yes"}}')" 400
is "an entry neither CIDR nor name -> 400" "$(cpost /v1/sandboxes '{"worker":"w1","network":{"allow":["a b"]}}')" 400
is "an unknown member -> 400" "$(cpost /v1/sandboxes '{"worker":"w1","network":{"ports":[1]}}')" 400
L=$(python3 -c 'import json; print(json.dumps({"worker":"w1","network":{"deny":["192.0.2.%d" % i for i in range(33)]}}))')
is "33 entries -> 400" "$(cpost /v1/sandboxes "$L")" 400

# ---- sandbox A: default internet, 203.0.113.20 denied; B: a server ----
is "create A with a deny list" "$(cpost /v1/sandboxes '{"worker":"w1","network":{"deny":["203.0.113.20"]}}')" 201
A=$(jget id)
is "create B" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
B=$(jget id)
check "A running" wait_state "$A" running 30
check "B running" wait_state "$B" running 30
routeto "$A"; CA=$CAP; EA=$E
routeto "$B"; CB=$CAP; EB=$E
is "probe into A" "$(setup_sbx "$A" "$CA" "$EA")" 200
is "probe into B" "$(setup_sbx "$B" "$CB" "$EB")" 200

is "A: an allowed public address" "$(probe "$A" "$CA" "$EA" 203.0.113.10 8080)" open
is "A: the denied address is refused" "$(probe "$A" "$CA" "$EA" 203.0.113.20 8080 | cut -d: -f1)" refused
check "... which the worker reaches" reach http://203.0.113.20:8080/
is "A: DNS through the worker: web.test" "$(in_sbx "$A" "$CA" "$EA" 'python3 -c "import socket; print(socket.gethostbyname(\"web.test\"))"')" 203.0.113.10
is "A: resolv.conf names its gateway" "$(in_sbx "$A" "$CA" "$EA" 'cat /etc/resolv.conf' | cut -d' ' -f1)" nameserver
is "A: web.test by name" "$(probe "$A" "$CA" "$EA" web.test 8080)" open
is "A: a private range is off by default" "$(probe "$A" "$CA" "$EA" 10.99.0.1 8080 | cut -d: -f1)" refused
check "... which the worker reaches" reach http://10.99.0.1:8080/

# ---- always denied ----
GA=$(in_sbx "$A" "$CA" "$EA" 'ip -4 route show default 2>/dev/null | cut -d" " -f3; true')
[ -n "$GA" ] || GA=$(in_sbx "$A" "$CA" "$EA" 'sed -n "s/^nameserver //p" /etc/resolv.conf')
diag "A's gateway (the worker's end of its uplink): $GA"
BADDR=$(in_sbx "$B" "$CB" "$EB" 'python3 -c "import socket,fcntl,struct; s=socket.socket(); print(socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, struct.pack(\"256s\", b\"eth0\"))[20:24]))"')
diag "B's address: $BADDR"
in_sbx "$B" "$CB" "$EB" 'cd /home/user && setsid python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 </dev/null & sleep 1' >/dev/null
i=0; while [ $i -lt 20 ] && ! reach "http://$BADDR:8000/"; do sleep 0.2; i=$((i + 1)); done
check "B's server answers the worker" reach "http://$BADDR:8000/"
is "A: another sandbox's address" "$(probe "$A" "$CA" "$EA" "$BADDR" 8000 | cut -d: -f1)" refused
is "A: the worker's uplink address (its daemon)" "$(probe "$A" "$CA" "$EA" 198.51.100.2 "$WP" | cut -d: -f1)" refused
is "A: the control plane" "$(probe "$A" "$CA" "$EA" 198.51.100.2 "$CP" | cut -d: -f1)" refused
check "... which the worker reaches" reach "http://198.51.100.2:$CP/healthz"
is "A: its gateway (the worker)" "$(probe "$A" "$CA" "$EA" "$GA" "$WP" | cut -d: -f1)" refused
check "... where the worker's daemon listens" reach "http://$GA:$WP/"
is "A: the metadata address 169.254.169.254" "$(probe "$A" "$CA" "$EA" 169.254.169.254 8080 | cut -d: -f1)" refused
check "... which the worker reaches" reach http://169.254.169.254:8080/
# links: "NAME ALIAS" of every link of this namespace (sysfs would show
# another namespace's)
links() { ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\)[:@].* alias \([^ \\]*\).*/\1 \2/p'; }
DEV=$(links | awk -v a="$A.g1" '$2 == a { print $1 }')
LL=$(ip -6 addr show dev "$DEV" scope link | sed -n 's/.*inet6 \(fe80[^/]*\).*/\1/p')
is "A: the worker's link-local address ($LL)" "$(probe "$A" "$CA" "$EA" "$LL%eth0" "$WP" | cut -d: -f1)" refused
check "... where the worker's daemon listens" reach "http://[$LL%25$DEV]:$WP/"
# an allow list cannot open any of them
is "allow the always-denied ones -> 200" "$(cpost "/v1/sandboxes/$A/network" "{\"allow\":[\"198.51.100.2\",\"169.254.169.254\",\"$BADDR\",\"$GA\"]}")" 200
is "... the metadata address still refused" "$(probe "$A" "$CA" "$EA" 169.254.169.254 8080 | cut -d: -f1)" refused
is "... the worker still refused" "$(probe "$A" "$CA" "$EA" 198.51.100.2 "$WP" | cut -d: -f1)" refused
is "... B still refused" "$(probe "$A" "$CA" "$EA" "$BADDR" 8000 | cut -d: -f1)" refused

# ---- a policy changed live ----
# (a network assignment: w1 applies it a moment after the control plane
# answered; each probe below waits for w1 to say so)
napplied() { grep -c "egress: $A policy applied" "$T/mgr_w1.log"; }
applied_since() { [ "$(napplied)" -gt "$1" ]; }
P0=$(napplied)
is "internet off" "$(cpost "/v1/sandboxes/$A/network" '{"internet":false,"allow":[]}')" 200
check "... applied by w1" eventually 20 applied_since "$P0"
P0=$(napplied)
is "A: the public address now refused" "$(probe "$A" "$CA" "$EA" 203.0.113.10 8080 | cut -d: -f1)" refused
is "allow 203.0.113.10 and the private 10.99.0.1" "$(space network "$A" --api-url "$CU" --api-key "$K" --allow-out 203.0.113.10 --allow-out 10.99.0.1 >/dev/null; echo $?)" 0
check "... applied by w1" eventually 20 applied_since "$P0"
is "A: 203.0.113.10 open with internet off" "$(probe "$A" "$CA" "$EA" 203.0.113.10 8080)" open
is "A: 10.99.0.1 open" "$(probe "$A" "$CA" "$EA" 10.99.0.1 8080)" open
is "A: 203.0.113.30 refused" "$(probe "$A" "$CA" "$EA" 203.0.113.30 8080 | cut -d: -f1)" refused
is "A: DNS still answers (an allow list is egress)" "$(in_sbx "$A" "$CA" "$EA" 'python3 -c "import socket; print(socket.gethostbyname(\"web.test\"))"')" 203.0.113.10
space network "$A" --api-url "$CU" --api-key "$K" >"$T/pol"
is "space network shows it" "$(head -2 "$T/pol")" "$(printf 'internet: off\nallow: 203.0.113.10/32, 10.99.0.1/32')"
is "B keeps its own policy" "$(probe "$B" "$CB" "$EB" 203.0.113.30 8080)" open

# ---- a host name is resolved when the policy is set ----
is "deny localhost (a name)" "$(cpost "/v1/sandboxes/$B/network" '{"deny":["localhost"]}')" 200
is "... stored with the address it resolved to" "$(jget resolved.deny.0)" 127.0.0.1/32

# ---- the policy moves with the sandbox ----
is "move A to w2" "$(cpost "/v1/sandboxes/$A/move" '{"to":"w2"}')" 202
check "A running on w2" wait_state "$A" running 40
routeto "$A"; CA=$CAP; EA=$E
is "A: now on w2" "$EA" "http://127.0.0.1:$NP2"
is "A on w2: 203.0.113.10 still allowed" "$(probe "$A" "$CA" "$EA" 203.0.113.10 8080)" open
is "A on w2: internet still off" "$(probe "$A" "$CA" "$EA" 203.0.113.30 8080 | cut -d: -f1)" refused
is "A on w2: the metadata address refused" "$(probe "$A" "$CA" "$EA" 169.254.169.254 8080 | cut -d: -f1)" refused
is "A on w2: B (on w1) refused" "$(probe "$A" "$CA" "$EA" "$BADDR" 8000 | cut -d: -f1)" refused
is "w1 keeps no uplink of A" "$(links | grep -c " $A\.g1$")" 0

# ---- a restarted worker reclaims and re-attaches ----
crash M2
check "w2 restarted" start_mgr 2 w2 "$NP2"
i=0; while [ $i -lt 100 ] && ! grep -q "egress: $A g2 on" "$T/mgr_w2.log"; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
is "A after w2's restart: 203.0.113.10 open" "$(probe "$A" "$CA" "$EA" 203.0.113.10 8080)" open
is "... 203.0.113.30 refused" "$(probe "$A" "$CA" "$EA" 203.0.113.30 8080 | cut -d: -f1)" refused

# ---- teardown: nothing left after the kills ----
for s in "$A" "$B"; do
	curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$s"
done
nsp() { ip -o link show | grep -c '^[0-9]*: sp[0-9a-f]'; }
i=0; while [ $i -lt 100 ] && [ "$(nsp)" != 0 ]; do sleep 0.1; i=$((i + 1)); done
is "no sandbox uplink left" "$(nsp)" 0
is "no sandbox chain left" "$(nft list ruleset | grep -c 'chain s[0-9a-f][0-9a-f] ')" 0
done_testing
