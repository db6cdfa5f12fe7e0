#!/bin/sh
# Streams through the bridge (docs/protocol.md "Streams"): processes on
# pipes and on a terminal, background processes, re-attach with replay,
# stdin, signals, timeouts, file watches with their overflow, bad frames
# from the client's side; then a stream ending with its execution, whose
# processes die with it.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
W=$(mktemp -d)
HP=""
HOLD=""
cleanup() {
	[ -n "$HOLD" ] && kill "$HOLD" 2>/dev/null
	[ -n "$HP" ] && kill "$HP" 2>/dev/null
	i=0; while [ -n "$HP" ] && kill -0 "$HP" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

UB=$((1000000 + (($$ + 1733) % 4000) * 65536))
SB=s$$
mkdir -p "$W/layer" && mkdir -m 700 "$W/run"
MEM=256
[ "${SPACE_SAN:-0}" = 1 ] && MEM=2048
"$SPACE_BIN/spaced-host" --sandbox "$SB" --generation 1 --activation 1 --worker w1 \
    --resident r1 --substrate jail --template host --run-dir "$W/run" --layer-dir "$W/layer" \
    --uid-base "$UB" --disk-mb 200 --memory-mb "$MEM" --pids 128 >"$W/ready" 2>"$W/log" &
HP=$!
i=0; while [ $i -lt 200 ] && [ ! -s "$W/ready" ]; do sleep 0.1; i=$((i + 1)); done
is "bridge ready" "$(cut -d" " -f1 "$W/ready")" "ready"
SPC="python3 $SPACE_TOP/tests/tools/spc.py"
C=$($SPC claims --sandbox "$SB" --gen 1 --worker w1 --resident r1 --acc exec,fs:r,fs:w,pty,watch)
CX=$($SPC claims --sandbox "$SB" --gen 1 --worker w1 --resident r1 --acc exec,fs:r,fs:w)

python3 "$SPACE_TOP/tests/tools/streams.py" "$W/run/bridge.sock" "$SB" "$C" "$CX" >"$W/out" 2>"$W/err"
rc=$?
while IFS= read -r line; do
	case "$line" in
	"ok - "*) ok "${line#ok - }" ;;
	"not ok - "*) not_ok "${line#not ok - }" ;;
	*) echo "$line" ;;
	esac
done <"$W/out"
is "the stream checks ran to the end" "$rc" "0"
[ "$rc" = 0 ] || sed 's/^/# /' "$W/err" | tail -20

# ---- processes die with their execution, and so do their streams ----
python3 "$SPACE_TOP/tests/tools/streams.py" hold "$W/run/bridge.sock" "$SB" "$C" >"$W/hold" 2>&1 &
HOLD=$!
i=0; while [ $i -lt 100 ] && ! grep -q '^started [0-9]' "$W/hold"; do sleep 0.1; i=$((i + 1)); done
check "a stream on a long process is open" grep -q '^started [0-9]' "$W/hold"
check "its process runs (seen from the host)" pgrep -f -x "sleep 7777" >/dev/null
kill "$HP"
i=0; while [ $i -lt 100 ] && ! grep -q '^ended' "$W/hold"; do sleep 0.1; i=$((i + 1)); done
check "the stream ends when its execution ends" grep -q '^ended' "$W/hold"
i=0; while [ $i -lt 50 ] && pgrep -f -x "sleep 7777" >/dev/null; do sleep 0.1; i=$((i + 1)); done
check "the process died with its execution" sh -c '! pgrep -f -x "sleep 7777" >/dev/null'
wait "$HOLD" 2>/dev/null
HOLD=""
grep -qi 'sanitizer\|runtime error' "$W/log" && { not_ok "no sanitizer report"; sed 's/^/# /' "$W/log" | tail -20; }
done_testing
