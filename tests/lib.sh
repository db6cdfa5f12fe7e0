# Shell TAP helpers for integration tests. Source it: . "$SPACE_TOP/tests/lib.sh"
# Each script prints "ok N - what" / "not ok N - what" and exits non-zero on failure.
: "${SPACE_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SPACE_BIN:=$SPACE_TOP/build/bin}"
# the system's tools first: tests use Debian's python3 and its modules
# (python3-nacl, python3-websockets), never an interpreter a user put
# earlier on PATH (a version manager's shim costs a shell script per call)
PATH="$SPACE_BIN:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
_tap_n=0
_tap_fail=0
ok()     { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $*"; }
not_ok() { _tap_n=$((_tap_n + 1)); _tap_fail=$((_tap_fail + 1)); echo "not ok $_tap_n - $*"; }
# check "description" command...: passes when the command exits 0
check()  { d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
# is "description" got want
is()     { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1"; echo "#   got '$2', want '$3'"; fi; }
diag()   { echo "# $*"; }
done_testing() { _fp_release; echo "1..$_tap_n"; [ "$_tap_n" -gt 0 ] && [ "$_tap_fail" = 0 ]; }
# free_port: a TCP port on 127.0.0.1 nobody listens on right now, and not
# one any test running on this machine was given (the kernel draws them
# at random: two drawn before either is bound met once in some 14,000, and
# a test that stops a daemon to start it again on its port leaves that
# port free meanwhile, for another test beside it to draw). Each port given
# is a file of /tmp/space-test-ports.d naming the test's shell; a file
# whose test is gone is taken over. done_testing gives this test's back.
_fp_dir=${TMPDIR:-/tmp}/space-test-ports.d
_fp_seen=${TMPDIR:-/tmp}/space-test-ports.$$
free_port() { python3 - "$_fp_dir" "$_fp_seen" "$$" <<'PY'
import os, socket, sys
d, seen_f, me = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(d, exist_ok=True)
seen = set(open(seen_f).read().split()) if os.path.exists(seen_f) else set()
def alive(pid):
    try:
        os.kill(int(pid), 0)
        return True
    except (OSError, ValueError):
        return False
def claim(p):
    f = os.path.join(d, str(p))
    for _ in range(2):
        try:
            fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, me.encode())
            os.close(fd)
            return True
        except FileExistsError:
            try:
                owner = open(f).read().strip()
            except OSError:
                continue
            if owner == me or alive(owner):
                return False
            try:
                os.unlink(f)
            except OSError:
                pass
    return False
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if str(p) not in seen and claim(p):
        break
open(seen_f, "a").write("%d\n" % p)
print(p)
PY
}
_fp_release() {
	[ -f "$_fp_seen" ] || return 0
	for _fp in $(cat "$_fp_seen"); do
		[ "$(cat "$_fp_dir/$_fp" 2>/dev/null)" = "$$" ] && rm -f "$_fp_dir/$_fp"
	done
	rm -f "$_fp_seen"
}
# wait_http URL [seconds]: until the URL answers
wait_http() { i=0; while [ $i -lt $((${2:-10} * 10)) ]; do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
# eventually SECS CMD...: CMD again every 0.1 s until it succeeds, for at
# most SECS seconds (what a daemon does after it answered: a log line, a
# counter, a file removed)
eventually() { _ev_n=$(($1 * 10)); shift; while ! "$@"; do [ "$_ev_n" -le 0 ] && return 1; sleep 0.1; _ev_n=$((_ev_n - 1)); done; }
# prom_fresh FILE: until sbx-manager replaced its metrics.prom twice (every
# 2 s after its pass's work, which may take longer): the file then counts
# everything that happened before the call
prom_fresh() { for _pf in 1 2; do _pm=$(stat -c %i.%y "$1" 2>/dev/null); eventually 30 prom_changed "$1" "$_pm" || return 1; done; }
prom_changed() { [ "$(stat -c %i.%y "$1" 2>/dev/null)" != "$2" ]; }
# kill9 PID: kill -9 of one process; an empty pid or 0 (a record without a
# bridge) would be the test's own process group, and is refused
kill9() { [ "${1:-0}" -gt 1 ] 2>/dev/null && kill -9 "$1"; }
# alive PID: a running process (a zombie is not)
alive() { [ "$1" -gt 0 ] 2>/dev/null && [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# rnd N: a random number in 0..N-1
rnd() { echo $(( $(od -An -N2 -tu2 /dev/urandom) % $1 )); }
# desc PID: every descendant of PID; guest_of BRIDGE-PID: its spaced-guest,
# a descendant of the bridge that made the jail; a relaunched bridge
# attached to a kept jail (docs/jail.md) has none, so then the guest of the
# same sandbox and generation among all processes
desc() { for _d in $(cat /proc/"$1"/task/*/children 2>/dev/null); do echo "$_d"; desc "$_d"; done; }
argv_of() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }
guest_of() {
	for _g in $(desc "$1"); do [ "$(cat /proc/"$_g"/comm 2>/dev/null)" = spaced-guest ] && { echo "$_g"; return 0; }; done
	_a=$(argv_of "$1")
	_s=$(echo "$_a" | sed -n 's/.*--sandbox \([^ ]*\) .*/\1/p')
	_n=$(echo "$_a" | sed -n 's/.*--generation \([0-9]*\) .*/\1/p')
	[ -n "$_s" ] && [ -n "$_n" ] || return 1
	for _g in $(pgrep -x spaced-guest); do
		case " $(argv_of "$_g")" in *" --sandbox $_s --generation $_n "*) echo "$_g"; return 0 ;; esac
	done
	return 1
}

# jget KEY[.KEY|.INDEX...] [FILE]: one value of a JSON file (default
# $T/body): strings bare, objects and lists as JSON with sorted keys (so
# that they compare as text); nothing when absent
jget() {
	python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[int(k)] if isinstance(d, list) else d[k]
print(json.dumps(d, sort_keys=True) if isinstance(d, (dict, list)) or d is None else d)' "${2:-$T/body}" "$1" 2>/dev/null
}

# A space-control of the test's own (the 2x tests): T (the test's
# directory), D (the daemon's data directory), PORT and U (its base URL),
# PID (its pid while it runs); CTL_FLAGS, more flags for every start (split
# at spaces).
# ctl_init [SIGNAL]: set them, the exit trap stops the daemon with SIGNAL
# (default TERM) and removes $T
# SPACE_TEST_STORE=pg: the daemon and its subcommands use a PostgreSQL of
# the test's own (tests/lib_pg.sh, SPACE_CONTROL_STORE), started here once
# per script, and sql runs on it.
ctl_init() {
	if [ "${SPACE_TEST_STORE:-}" = pg ]; then
		. "$SPACE_TOP/tests/lib_pg.sh"
		pg_start || { not_ok "PostgreSQL of the test started"; exit 1; }
		export SPACE_CONTROL_STORE="$PG_URL"
	fi
	T=$(mktemp -d)
	D=$T/data
	PORT=$(free_port)
	U=http://127.0.0.1:$PORT
	PID=
	# shellcheck disable=SC2064 # the signal is fixed now
	trap "ctl_cleanup ${1:-TERM}" EXIT
	# a test stopped by a signal ends (through the exit trap), it does not
	# go on without its daemon and directory
	trap 'exit 143' INT TERM
}
# ctl_start [FLAG...]: start it (log in $T/log); true once it answers
ctl_start() {
	# shellcheck disable=SC2086 # CTL_FLAGS is a list of words
	space-control --data-dir "$D" --listen "127.0.0.1:$PORT" ${CTL_FLAGS:-} "$@" 2>>"$T/log" &
	PID=$!
	wait_http "$U/healthz" 10
}
# ctl_stop: stop it (SIGTERM); ctl_crash: kill -9 it
ctl_stop()  { kill "$PID"; wait "$PID" 2>/dev/null; PID=; }
ctl_crash() { kill -9 "$PID"; wait "$PID" 2>/dev/null; PID=; }
# ctl_cleanup [SIGNAL]: the exit trap: the daemon if it runs, then $T
ctl_cleanup() {
	[ -n "$PID" ] && kill -"${1:-TERM}" "$PID" 2>/dev/null
	[ -n "$PID" ] && wait "$PID" 2>/dev/null
	[ "${SPACE_TEST_STORE:-}" = pg ] && pg_cleanup
	rm -rf "$T"
}
# get PATH CRED, post PATH CRED JSON: one request with a bearer; the status
# on stdout, the body in $T/body, the headers in $T/headers
get()  { curl -s -D "$T/headers" -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $2" "$U$1"; }
post() {
	curl -s -D "$T/headers" -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $2" \
		-H 'Content-Type: application/json' --data-binary "$3" "$U$1"
}
# sql QUERY: on the space-control store in $D (or the test's PostgreSQL);
# on_pg: true when the tests run on PostgreSQL
on_pg() { [ "${SPACE_TEST_STORE:-}" = pg ]; }
# store_dump: every row of the store as text
store_dump() {
	if on_pg; then "$PG_BIN/pg_dump" -h 127.0.0.1 -p "$PG_PORT" -U space -a space
	else sqlite3 -cmd '.timeout 5000' "$D/control.db" .dump; fi
}
# store_integrity: "ok" when the store's pages and indexes check out
# (SQLite: PRAGMA integrity_check; PostgreSQL: pg_amcheck of every table
# and index of the database); store_fk_violations: how many rows break a
# foreign key (PostgreSQL enforces them: how many are not validated)
store_integrity() {
	if on_pg; then
		"$PG_BIN/pg_amcheck" -h 127.0.0.1 -p "$PG_PORT" -U space -d space --install-missing \
			--heapallindexed >"$T/amcheck" 2>&1 && echo ok || cat "$T/amcheck"
	else sql 'PRAGMA integrity_check'; fi
}
store_fk_violations() {
	if on_pg; then sql "SELECT COUNT(*) FROM pg_constraint WHERE contype = 'f' AND NOT convalidated"
	else sql 'PRAGMA foreign_key_check' | wc -l; fi
}
sql() { if on_pg; then pg_sql "$1"; else sqlite3 -cmd '.timeout 5000' "$D/control.db" "$1"; fi; }

# A simulated worker of the 2x tests (its assignment stream by curl):
# sim_fetch W CRED [WAIT]: the next assignments of W's stream (a long-poll
# of up to WAIT, default 10 s) in $T/a_W, the cursor kept like a worker's;
# sim_last W KEY: KEY (dotted) of the last assignment W got;
# sim_report W CRED STATE [DIGEST]: the status of the execution W's last
# fetch named (a retirement with DIGEST carries that archive)
sim_fetch() {
	_c=$(cat "$T/cur_$1" 2>/dev/null || echo 0)
	curl -s -H "Authorization: Bearer $2" "$U/v1/workers/$1/assignments?after=$_c&wait=${3:-10}" >"$T/a_$1"
	jget revision "$T/a_$1" >"$T/cur_$1"
}
sim_last() { jget "assignments.-1.$2" "$T/a_$1"; }
sim_report() {
	post "/v1/workers/$1/status" "$2" "$(python3 -c 'import json,sys
a=json.load(open(sys.argv[1]))["assignments"][-1]
b={"identity": a["identity"], "state": sys.argv[2]}
if len(sys.argv) > 3: b["snapshot"] = {"digest": sys.argv[3], "size": 4096}
print(json.dumps(b))' "$T/a_$1" "$3" $4)"
}
# rdigest: a random archive digest (64 hex digits)
rdigest() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# The npm package $1 of tests/js at the version tests/js/package-lock.json
# pins, installed by npm ci once for every test that needs one (a
# concurrent run waits on the lock instead of reinstalling under it); one
# check that it is there.
# run_scripts LABEL "NN NN ..." ENV=VALUE...: runs each listed test script
# again (tests/integration/NN_*.sh) with the given environment, one result
# line per script, in the list's order: ok when every check of it passed
# and it ran at least one; otherwise its failing checks and the end of its
# output. The logs go to $L; a script's daemon logs kept on failure are
# named after the caller and it (lib_platform.sh's PLATFORM_TEST: "5h-27").
# RUN_SCRIPTS_JOBS (default 1) scripts run at once: each has its own
# directory, ports and daemons (and store), so a caller whose scripts
# mostly wait on leases and timeouts sets more; the results are printed
# once all have ended, still in the list's order.
run_scripts() {
	_label=$1; _list=$2; shift 2
	: >"$L/.scripts"
	for _n in $_list; do
		for _t in "$SPACE_TOP"/tests/integration/${_n}_*.sh; do
			[ -f "$_t" ] && echo "$_t" >>"$L/.scripts"
		done
	done
	# each script: its log, then "EXIT-STATUS SECONDS" in $L/NAME.rc
	# shellcheck disable=SC2016 # expanded by the inner shell
	env "$@" _rs_L="$L" _rs_caller="$(basename "$0" .sh | cut -d_ -f1)" \
	    xargs -r -d '\n' -n 1 -P "${RUN_SCRIPTS_JOBS:-1}" sh -c '
		_name=$(basename "$1" .sh); _t0=$(date +%s)
		PLATFORM_TEST="$_rs_caller-${_name%%_*}" timeout -k 10 600 sh "$1" >"$_rs_L/$_name.log" 2>&1
		echo "$? $(( $(date +%s) - _t0 ))" >"$_rs_L/$_name.rc"' run_scripts <"$L/.scripts"
	while read -r _t; do
		_name=$(basename "$_t" .sh)
		_rc=255 _secs=0
		[ -f "$L/$_name.rc" ] && read -r _rc _secs <"$L/$_name.rc"
		_p=$(grep -c '^ok ' "$L/$_name.log" 2>/dev/null)
		_f=$(grep -c '^not ok ' "$L/$_name.log" 2>/dev/null)
		if [ "$_rc" = 0 ] && [ "${_f:-0}" = 0 ] && [ "${_p:-0}" -gt 0 ]; then
			ok "$_name $_label: $_p checks ($_secs s)"
		else
			not_ok "$_name $_label: ${_p:-0} passed, ${_f:-0} failed, exit $_rc"
			grep -E '^not ok |^#' "$L/$_name.log" 2>/dev/null | head -20 | sed 's/^/#   /'
			tail -5 "$L/$_name.log" 2>/dev/null | sed 's/^/#   | /'
		fi
	done <"$L/.scripts"
}
js_version() { node -p "require('$SPACE_TOP/tests/js/node_modules/$1/package.json').version" 2>/dev/null; }
js_pinned() {
	_js="$SPACE_TOP/tests/js"
	_want=$(node -p "require('$_js/package-lock.json').packages['node_modules/$1'].version")
	(
		flock 9
		[ "$(js_version "$1")" = "$_want" ] ||
			(cd "$_js" && npm ci --no-audit --no-fund --loglevel=error >&2)
	) 9>"$_js/.install.lock"
	is "$1 is installed at its pinned version" "$(js_version "$1")" "$_want"
}
