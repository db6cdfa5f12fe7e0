# Shell TAP helpers for integration tests. Source it: . "$SPACE_TOP/tests/lib.sh"
# Each script prints "ok N - what" / "not ok N - what" and exits non-zero on failure.
: "${SPACE_TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SPACE_BIN:=$SPACE_TOP/build/bin}"
PATH="$SPACE_BIN:$PATH"
_tap_n=0
_tap_fail=0
ok()     { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $*"; }
not_ok() { _tap_n=$((_tap_n + 1)); _tap_fail=$((_tap_fail + 1)); echo "not ok $_tap_n - $*"; }
# check "description" command...: passes when the command exits 0
check()  { d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
# is "description" got want
is()     { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1"; echo "#   got '$2', want '$3'"; fi; }
diag()   { echo "# $*"; }
done_testing() { echo "1..$_tap_n"; [ "$_tap_n" -gt 0 ] && [ "$_tap_fail" = 0 ]; }
# free_port: a TCP port on 127.0.0.1 nobody listens on right now
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
# wait_http URL [seconds]: until the URL answers
wait_http() { i=0; while [ $i -lt $((${2:-10} * 10)) ]; do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
# kill9 PID: kill -9 of one process; an empty pid or 0 (a record without a
# bridge) would be the test's own process group, and is refused
kill9() { [ "${1:-0}" -gt 1 ] 2>/dev/null && kill -9 "$1"; }
# alive PID: a running process (a zombie is not)
alive() { [ "$1" -gt 0 ] 2>/dev/null && [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# rnd N: a random number in 0..N-1
rnd() { echo $(( $(od -An -N2 -tu2 /dev/urandom) % $1 )); }
# desc PID: every descendant of PID; guest_of BRIDGE-PID: its spaced-guest
desc() { for _d in $(cat /proc/"$1"/task/*/children 2>/dev/null); do echo "$_d"; desc "$_d"; done; }
guest_of() { for _g in $(desc "$1"); do [ "$(cat /proc/"$_g"/comm 2>/dev/null)" = spaced-guest ] && { echo "$_g"; return 0; }; done; return 1; }
