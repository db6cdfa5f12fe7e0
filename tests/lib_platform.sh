# The real platform for integration tests: space-control and workers
# (sbx-manager + node-api each, on 127.0.0.1), started from private copies
# of the binaries, with all data and logs in one mktemp directory, and
# everything stopped, unmounted and removed when the script exits. POSIX sh;
# source it after tests/lib.sh:
#
#	. "$SPACE_TOP/tests/lib.sh"
#	. "$SPACE_TOP/tests/lib_platform.sh"
#	platform_init
#	check "space-control up" start_ctl
#	NP=$(free_port)
#	check "worker w1 up" add_worker 1 w1 "$NP"
#
# Set by platform_init (read them; the functions below rely on them):
#   T      the test's directory, mode 711 (node-api runs as nobody and must
#          reach the workers' run directories)
#   BIN    private copies of the daemons and the bridge binaries
#   CP CU  space-control's port and base URL
#   K      API key of user alice
#   ROOT   the root public key every sbx-manager is given
# Set by the start functions:
#   CTL    space-control's pid
#   M<n>   sbx-manager's pid of worker number <n>; N<n> its node-api's
#   CRASHT the time (date +%s%N) of the last crash, see crash()
# A test may set, before a daemon starts (split at spaces, so no flag value
# may contain one; the per-call arguments of the start functions may):
#   CTL_FLAGS   more flags for every space-control this test starts
#   MGR_FLAGS   ... for every sbx-manager (restarts included)
#   NAPI_FLAGS  ... for every node-api
#   MGR_CAPACITY  sbx-manager's --capacity (default 4)
#   MGR_UMASK   the umask every sbx-manager runs under (default the
#               script's; its log is still created under the script's): a
#               test of the modes of the files it creates
#   CTL_DB_UMASK  before platform_init: the umask under which its first
#               space-control subcommand (apikey add) creates control.db
#               (default the script's); the daemon itself runs under the
#               script's
#   PLATFORM_TEST  the name of the failure log directory (default: the
#                  script's number, "50" for 50_worker_path.sh)
# and may define platform_on_cleanup(), which the cleanup runs first (to
# stop the test's own helper processes).
#
# Files: space-control's data in $T/c, its log $T/ctl.log; worker <id>'s data
# directory $T/<id> (records.db, run/sbx-manager.sock, metrics.prom), its
# credential $T/cred_<id>, its logs $T/mgr_<id>.log and $T/napi_<id>.log.
# When the script fails (a "not ok" or a non-zero exit) every $T/*.log is
# copied to $(dirname "$SPACE_BIN")/test-logs/<PLATFORM_TEST>-daemons.
#
# The helpers name their own variables _pl_*: tests use i, p, b... freely.

# Where each daemon runs: pl_addr HOST its address, pl_ns HOST the prefix
# that runs a command there, pl_host HOST makes the host (HOST: "ctl", or a
# worker's id). Here every daemon is on 127.0.0.1 of one namespace; with
# SPACE_TEST_HOSTS=1 tests/lib_hosts.sh replaces them: each host a network
# namespace of its own with its own address (simulated hosts).
pl_addr() { echo 127.0.0.1; }
pl_ns() { :; }
pl_host() { :; }

# platform_init: the directory, private binaries, space-control's port, the
# API key and root key, and the exit trap
platform_init() {
	if [ "${SPACE_TEST_HOSTS:-}" = 1 ]; then
		. "$SPACE_TOP/tests/lib_hosts.sh"
		hosts_enter
	fi
	# SPACE_TEST_STORE=pg: space-control and its subcommands use a
	# PostgreSQL of the test's own (tests/lib_pg.sh), csql runs on it
	if [ "${SPACE_TEST_STORE:-}" = pg ]; then
		. "$SPACE_TOP/tests/lib_pg.sh"
		pg_start || { not_ok "PostgreSQL of the test started"; exit 1; }
		export SPACE_CONTROL_STORE="$PG_URL"
	fi
	T=$(mktemp -d)
	chmod 711 "$T"
	BIN=$T/bin
	# private copies: a rebuild of the tree while this runs must not look
	# like a replaced bridge binary (which sbx-manager rightly refuses)
	mkdir "$BIN"
	for _pl_b in sbx-manager spaced-host spaced-guest node-api space-control netgtw; do
		cp "$SPACE_BIN/$_pl_b" "$BIN/"
	done
	CP=$(free_port)
	CU=http://$(pl_addr ctl):$CP
	CTL='' CRASHT='' _pl_workers=''
	: "${PLATFORM_TEST:=$(basename "$0" .sh | cut -d_ -f1)}"
	# the cleanup runs once, on every exit; a signal is an exit with 1
	trap platform_cleanup EXIT
	trap 'exit 1' INT TERM
	K=$([ -z "${CTL_DB_UMASK:-}" ] || umask "$CTL_DB_UMASK"
	    "$BIN/space-control" apikey add alice --data-dir "$T/c" 2>>"$T/ctl.log")
	ROOT=$("$BIN/space-control" keys root --data-dir "$T/c" 2>>"$T/ctl.log")
}

# bridges: the pids of this test's bridges (their executable is our
# private copy, also when that file was replaced: "... (deleted)")
bridges() {
	# one find, not a readlink per process: cleanups stay fast with a
	# thousand processes of another run on the machine
	find /proc -mindepth 2 -maxdepth 2 -name exe -lname "$BIN/spaced-host*" 2>/dev/null |
	    sed 's|^/proc/||; s|/exe$||'
}

# platform_cleanup: the exit trap. Stops the daemons, then the bridges
# (which outlive sbx-manager by design), lazily unmounts what they left
# under $T, keeps the logs on failure and removes $T.
platform_cleanup() {
	_pl_rc=$?
	# once: a test that calls it before its exit trap would otherwise
	# empty the logs it kept (its $T is gone by the second call)
	[ -n "${_pl_cleaned:-}" ] && return 0
	_pl_cleaned=1
	command -v platform_on_cleanup >/dev/null 2>&1 && platform_on_cleanup
	_pl_pids=
	for _pl_n in $_pl_workers; do eval "_pl_pids=\"\$_pl_pids \$N$_pl_n\""; done
	for _pl_n in $_pl_workers; do eval "_pl_pids=\"\$_pl_pids \$M$_pl_n\""; done
	for _pl_p in ${EDGE:-} $_pl_pids $CTL; do kill "$_pl_p" 2>/dev/null; wait "$_pl_p" 2>/dev/null; done
	_pl_b=$(bridges); [ -n "$_pl_b" ] && kill $_pl_b 2>/dev/null
	_pl_i=0
	while [ -n "$(bridges)" ] && [ $_pl_i -lt 50 ]; do sleep 0.1; _pl_i=$((_pl_i + 1)); done
	_pl_b=$(bridges); [ -n "$_pl_b" ] && kill -9 $_pl_b 2>/dev/null && sleep 0.5
	command -v hosts_cleanup >/dev/null 2>&1 && hosts_cleanup
	awk -v t="$T/" 'index($2, t) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r umount -l 2>/dev/null
	[ "${SPACE_TEST_STORE:-}" = pg ] && { cp "$PGT/server.log" "$T/pg_server.log" 2>/dev/null; pg_cleanup; }
	if [ "$_tap_fail" != 0 ] || [ "$_pl_rc" != 0 ]; then
		_pl_l=$(dirname "$SPACE_BIN")/test-logs/$PLATFORM_TEST-daemons
		rm -rf "$_pl_l"; mkdir -p "$_pl_l"; cp "$T"/*.log "$_pl_l/" 2>/dev/null
		echo "# daemons' logs kept in $_pl_l"
	fi
	rm -rf "$T"
}

# start_ctl [flag...]: space-control on $CP (again after a stop or crash);
# true once it answers /healthz (10 s)
start_ctl() {
	pl_host ctl || return 1
	$(pl_ns ctl) "$BIN/space-control" --data-dir "$T/c" --listen "$(pl_addr ctl):$CP" $CTL_FLAGS "$@" 2>>"$T/ctl.log" &
	CTL=$!
	wait_http "$CU/healthz" 10
}

# start_edge PORT [flag...]: space-edge on host "edge" (PORT, domain
# edge.test:PORT) with an edge credential of its own, made once in
# $T/edge_cred; pid in EDGE, URL in EU. It reaches space-control at $CU and
# sandbox ports at the workers' --gateway-listen addresses. True once it
# answers /healthz (10 s).
start_edge() {
	_pl_ep=$1; shift
	[ -x "$BIN/space-edge" ] || cp "$SPACE_BIN/space-edge" "$BIN/" || return 1
	if [ ! -s "$T/edge_cred" ]; then
		(umask 077; "$BIN/space-control" edgekey create edge --data-dir "$T/c" >"$T/edge_cred" 2>>"$T/ctl.log") || return 1
	fi
	pl_host edge || return 1
	EU=http://$(pl_addr edge):$_pl_ep
	$(pl_ns edge) "$BIN/space-edge" --listen "$(pl_addr edge):$_pl_ep" --control "$CU" \
	    --domain "edge.test:$_pl_ep" --edge-credential-file "$T/edge_cred" --user nobody "$@" 2>>"$T/edge.log" &
	EDGE=$!
	wait_http "$EU/healthz" 10
}

# register_worker ID: the worker's credential, in $T/cred_ID
register_worker() {
	"$BIN/space-control" worker add "$1" --data-dir "$T/c" >"$T/cred_$1" 2>>"$T/ctl.log"
}

# start_mgr N ID PORT [flag...]: sbx-manager of worker ID (number N, its
# node-api on PORT), again after a stop or crash; pid in M<N>. True once its
# socket exists (10 s).
start_mgr() {
	_pl_n=$1 _pl_id=$2 _pl_port=$3; shift 3
	rm -f "$T/$_pl_id/run/sbx-manager.sock"  # a killed instance leaves its socket
	pl_host "$_pl_id" || return 1
	# the subshell execs sbx-manager (nsenter execs it too): $! is its pid
	([ -z "${MGR_UMASK:-}" ] || umask "$MGR_UMASK"
	exec $(pl_ns "$_pl_id") "$BIN/sbx-manager" --data-dir "$T/$_pl_id" --control "$CU" --worker-id "$_pl_id" \
	    --credential-file "$T/cred_$_pl_id" --root-key "$ROOT" --endpoint "http://$(pl_addr "$_pl_id"):$_pl_port" \
	    --capacity "${MGR_CAPACITY:-4}" --api-group nogroup $MGR_FLAGS "$@") 2>>"$T/mgr_$_pl_id.log" &
	eval "M$_pl_n=\$!"
	case " $_pl_workers " in *" $_pl_n "*) ;; *) _pl_workers="$_pl_workers $_pl_n" ;; esac
	_pl_i=0
	while [ ! -S "$T/$_pl_id/run/sbx-manager.sock" ] && [ $_pl_i -lt 100 ]; do sleep 0.1; _pl_i=$((_pl_i + 1)); done
	test -S "$T/$_pl_id/run/sbx-manager.sock"
}

# start_napi N ID PORT [flag...]: node-api of worker ID on PORT; pid in
# N<N>. True once it answers /healthz (10 s).
start_napi() {
	_pl_n=$1 _pl_id=$2 _pl_port=$3; shift 3
	pl_host "$_pl_id" || return 1
	$(pl_ns "$_pl_id") "$BIN/node-api" --listen "$(pl_addr "$_pl_id"):$_pl_port" --manager-socket "$T/$_pl_id/run/sbx-manager.sock" \
	    --worker-id "$_pl_id" $NAPI_FLAGS "$@" 2>>"$T/napi_$_pl_id.log" &
	eval "N$_pl_n=\$!"
	case " $_pl_workers " in *" $_pl_n "*) ;; *) _pl_workers="$_pl_workers $_pl_n" ;; esac
	wait_http "http://$(pl_addr "$_pl_id"):$_pl_port/healthz" 10
}

# add_worker N ID PORT [sbx-manager flag...]: register worker ID, start its
# sbx-manager and its node-api on PORT; true when both are up
add_worker() {
	register_worker "$2"
	start_mgr "$@" && start_napi "$1" "$2" "$3"
}

# crash VAR: kill -9 the process whose pid is in $VAR, reap it, empty VAR
# and note the time in CRASHT
crash() {
	eval "_pl_p=\$$1"
	kill -9 "$_pl_p" 2>/dev/null; wait "$_pl_p" 2>/dev/null
	eval "$1="
	CRASHT=$(date +%s%N)
}

# stop VAR: SIGTERM to the process whose pid is in $VAR, wait for it, empty VAR
stop() {
	eval "_pl_p=\$$1"
	kill "$_pl_p" 2>/dev/null; wait "$_pl_p" 2>/dev/null
	eval "$1="
}

# gone PID [seconds]: true once PID has exited (default 12 s)
gone() {
	_pl_end=$(($(date +%s) + ${2:-12}))
	while kill -0 "$1" 2>/dev/null && [ "$(date +%s)" -le $_pl_end ]; do sleep 0.1; done
	! kill -0 "$1" 2>/dev/null
}

# cpost PATH JSON: POST to space-control as alice; the status on stdout,
# the body in $T/body
cpost() {
	curl -s -m 20 -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $K" --data-binary "$2" "$CU$1"
}

# sbx ID: the sandbox as space-control shows it, in $T/sbx
sbx() { curl -s -m 10 -o "$T/sbx" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$1"; }

# wait_state ID STATE [seconds]: true once the sandbox is in STATE (default
# 30 s, by the clock); the last answer stays in $T/sbx
wait_state() {
	_pl_end=$(($(date +%s) + ${3:-30}))
	while [ "$(date +%s)" -le $_pl_end ]; do
		sbx "$1"
		[ "$(jget state "$T/sbx")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# route ID [ACCESS]: a capability for the sandbox (default access
# "exec","fs:r","fs:w"), printed; the route answer stays in $T/body. A
# test that needs more (the endpoint, retries) defines its own route().
route() {
	cpost "/v1/sandboxes/$1/routes" "{\"access\":[${2:-\"exec\",\"fs:r\",\"fs:w\"}]}" >/dev/null
	jget capability
}

# sbx_sh SBX SCRIPT: sh -c SCRIPT in the sandbox (60 s at most), through a
# route issued now, at the endpoint it names; its stdout printed; false
# (with the reason on stderr) unless the exec answered 200 with exit 0
sbx_sh() {
	CAP=$(route "$1"); _pl_e=$(jget endpoint)
	python3 -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]],"timeout":60}))' "$2" >"$T/req"
	[ "$(napi_at "$_pl_e" POST exec --data-binary @"$T/req")" = 200 ] || { echo "exec failed: $(cat "$T/body")" >&2; return 1; }
	[ "$(jget exit_code)" = 0 ] || { echo "exec exit $(jget exit_code): $(jget stderr)" >&2; return 1; }
	jget stdout
}

# napi_at URL METHOD PATH [curl arg...]: a request with $CAP to
# URL/v1/sandboxes/$S/PATH; the status on stdout, the body in $T/body,
# the headers in $T/hdr
napi_at() {
	_pl_u=$1 _pl_m=$2 _pl_path=$3; shift 3
	curl -s -m 30 -D "$T/hdr" -o "$T/body" -w '%{http_code}' -X "$_pl_m" \
	    -H "Authorization: Bearer $CAP" "$@" "$_pl_u/v1/sandboxes/$S/$_pl_path"
}

# napi METHOD PATH [curl arg...]: napi_at the node-api in $NU
napi() { napi_at "$NU" "$@"; }

# hdr NAME: the value of a header of the last napi answer
hdr() {
	tr -d '\r' <"$T/hdr" | awk -v h="$1" 'tolower($0) ~ "^"tolower(h)":" { sub(/^[^:]*: */, ""); print }'
}

# csql SQL: a query on space-control's database (SQLite's file, or the
# test's PostgreSQL: pg_sql prints booleans and shares functions as sqlite3)
csql() {
	if [ "${SPACE_TEST_STORE:-}" = pg ]; then pg_sql "$1"
	else sqlite3 -cmd '.timeout 5000' "$T/c/control.db" "$1"; fi
}

# wsql ID SQL: a query on worker ID's records
wsql() { sqlite3 -cmd '.timeout 5000' "$T/$1/records.db" "$2"; }

# ctl_child MGRPID: the pid of sbx-manager's control client (a child
# running sbx-manager's image as "sbx-manager control-client"), or nothing
ctl_child() {
	for _pl_c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		case "$(tr '\0' ' ' <"/proc/$_pl_c/cmdline" 2>/dev/null)" in
		"sbx-manager control-client "*) echo "$_pl_c"; return 0 ;;
		esac
	done
	return 1
}
