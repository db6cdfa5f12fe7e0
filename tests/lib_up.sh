# Shell helpers for integration tests that run the platform the way a user
# does, through `space up` (the supervisor). Source it after tests/lib.sh:
#   . "$SPACE_TOP/tests/lib.sh"; . "$SPACE_TOP/tests/lib_up.sh"
#   up_init                   # $T, $D, private binaries on PATH, traps
#   up_start || exit          # space up --workers 2 on free ports, env loaded
#
# Variables it sets: T (the test's temporary directory, removed at exit),
# D (space up's data directory, $T/data), P (the control plane's port; the
# node-apis listen on P+1, P+2), UP (the supervisor's pid while it runs),
# up_rc (its exit status after stop_up). A test may list more pids to kill
# at exit in UP_KILL (SIGTERM, before the supervisor stops) and UP_KILL9
# (SIGKILL, after it stopped: children it should have stopped), and
# SIGSTOPped pids to continue first in UP_STOPPED.

# up_init: the temporary directory (711: node-api runs as nobody and must
# reach DIR/wI/run/sbx-manager.sock) and a private copy of the binaries: a
# rebuild of the tree while a test runs must not replace the bridge binary
# under a running execution (sbx-manager rightly refuses that)
# SPACE_TEST_STORE=pg: space up's control plane uses a PostgreSQL of the
# test's own (tests/lib_pg.sh, through SPACE_CONTROL_STORE)
up_init() {
	if [ "${SPACE_TEST_STORE:-}" = pg ]; then
		. "$SPACE_TOP/tests/lib_pg.sh"
		pg_start || { not_ok "PostgreSQL of the test started"; exit 1; }
		export SPACE_CONTROL_STORE="$PG_URL"
	fi
	T=$(mktemp -d)
	chmod 711 "$T"
	D="$T/data"
	mkdir "$T/bin" && cp "$SPACE_BIN"/* "$T/bin/"
	PATH="$T/bin:$PATH"
	UP=""
	UP_KILL=""
	UP_KILL9=""
	UP_STOPPED=""
	trap up_cleanup EXIT
	trap 'exit 1' INT TERM
	unset SPACE_API_URL SPACE_API_KEY SPACE_DEBUG
	export SPACE_ROUTE_CACHE="$T/routes.json"
}

# stop_up: SIGTERM the supervisor and wait for it, at most 20 s
stop_up() {
	[ -n "$UP" ] || return 0
	kill -TERM "$UP" 2>/dev/null
	_up_i=0
	while kill -0 "$UP" 2>/dev/null && [ $_up_i -lt 200 ]; do sleep 0.1; _up_i=$((_up_i + 1)); done
	wait "$UP" 2>/dev/null
	up_rc=$?
	UP=""
}

# bridges: pids of the spaced-host processes serving executions under $D
bridges() {
	# one pgrep, not a process per process on the machine
	_up_re=$(printf '%s' "$D" | sed 's/[][\\.^$*+?(){}|]/\\&/g')
	pgrep -f -- "spaced-host.*--run-dir $_up_re/w" | tr '\n' ' ' | sed 's/ $//'
}

# daemon_pid NAME WORKER: the pid of space-control (WORKER empty),
# or of the sbx-manager or node-api of worker WORKER, under $D
daemon_pid() {
	for c in /proc/[0-9]*/cmdline; do
		_up_l=$(tr '\0' ' ' 2>/dev/null <"$c")
		case "$1:$_up_l" in
		space-control:*/space-control\ --data-dir\ "$D/control"*|\
		sbx-manager:*/sbx-manager\ --data-dir\ "$D/$2"\ *|\
		node-api:*/node-api\ *"$D/$2/run/sbx-manager.sock"*)
			_up_p=${c#/proc/}; echo "${_up_p%/cmdline}"; return 0 ;;
		esac
	done
	return 1
}

up_cleanup() {
	for _up_p in $UP_STOPPED; do kill -CONT "$_up_p" 2>/dev/null; done
	for _up_p in $UP_KILL; do kill "$_up_p" 2>/dev/null; done
	stop_up
	for _up_p in $UP_KILL9 $(bridges); do kill -9 "$_up_p" 2>/dev/null; done
	sleep 0.2
	grep " $T/" /proc/mounts | cut -d' ' -f2 | sort -r | while read -r m; do umount -l "$m"; done
	[ "${SPACE_TEST_STORE:-}" = pg ] && pg_cleanup
	if [ "${_tap_fail:-0}" != 0 ] && [ -d "$D/logs" ]; then
		_up_l=$(dirname "$SPACE_BIN")/test-logs/$(basename "$0" .sh)-daemons
		rm -rf "$_up_l"; mkdir -p "$_up_l"; cp "$D"/logs/*.log "$T"/*.log "$_up_l/" 2>/dev/null
		echo "# daemons' logs kept in $_up_l"
	fi
	rm -rf "$T"
}

# three consecutive free ports BASE..BASE+2, BASE+41..42 (the gateways) and
# BASE+80, BASE+81 (space-edge), below the ephemeral range so
# that no outgoing connection of a concurrent test takes one meanwhile
port_free() { python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null; }
pick_ports() {
	P=""
	for _up_try in 1 2 3 4 5 6 7 8 9 10; do
		_up_b=$(python3 -c 'import random; print(random.randrange(20000, 30000))')
		if port_free "$_up_b" && port_free $((_up_b + 1)) && port_free $((_up_b + 2)) &&
		    port_free $((_up_b + 80)) && port_free $((_up_b + 81)) &&
		    port_free $((_up_b + 41)) && port_free $((_up_b + 42)); then
			P=$_up_b
			return 0
		fi
	done
	return 1
}

# start_up LOG [space up flags...]: space up --workers 2 on port P; until it
# says it is up (90 s at most), or it exits
start_up() {
	_up_log=$1; shift
	space up --data-dir "$D" --workers 2 --port "$P" "$@" >"$_up_log" 2>&1 &
	UP=$!
	_up_i=0
	while [ $_up_i -lt 900 ]; do
		grep -q "space is up" "$_up_log" 2>/dev/null && return 0
		kill -0 "$UP" 2>/dev/null || { wait "$UP"; UP=""; return 1; }
		sleep 0.1; _up_i=$((_up_i + 1))
	done
	return 1
}

# up_start [space up flags...]: free ports, space up (once more on other
# ports if another process took one meanwhile), one TAP line, and the
# platform's env (SPACE_API_URL, SPACE_API_KEY) exported. Returns 1, with
# the supervisor's last words as diagnostics and done_testing printed, when
# it did not come up: the caller exits.
up_start() {
	if ! pick_ports; then
		not_ok "three free ports"
		done_testing
		return 1
	fi
	_up_ok=0
	start_up "$T/up.log" "$@" && _up_ok=1
	if [ "$_up_ok" = 0 ] && grep -q "choose another --port" "$T/up.log"; then
		pick_ports && start_up "$T/up.log" "$@" && _up_ok=1
	fi
	if [ "$_up_ok" = 0 ]; then
		not_ok "space up --workers 2"
		tail -20 "$T/up.log" | sed 's/^/# up: /'
		done_testing
		return 1
	fi
	ok "space up --workers 2"
	export $(cat "$D/env")
	return 0
}
