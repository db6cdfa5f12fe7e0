#!/bin/sh
# Streams through the CLI and across a replacement: `space exec` streams
# live and keeps its exit statuses, --background / ps / signal / attach,
# `space fs watch`, `space shell` typed into through tmux as a person would
# (prompt, a command, a resize then `stty size`, `exit`), a capability that
# expires while its stream is open does not cut it, and a move closes the
# streams of the old execution with 4409 (the CLI exits 75 saying so).
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

PY=/usr/bin/python3
PROBE="$PY $SPACE_TOP/tests/tools/ws_probe.py"
platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
N1P=$(free_port) N2P=$(free_port)
WU=ws://127.0.0.1:$N1P
export SPACE_API_URL SPACE_API_KEY SPACE_ROUTE_CACHE
TMUX_SOCK=$T/tmux.sock
platform_on_cleanup() {
	tmux -S "$TMUX_SOCK" kill-server 2>/dev/null
	for p in $BGP; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
sp() { timeout 60 "$SPACE_BIN/space" "$@"; }
# until FILE holds PATTERN (grep -E), at most 20 s
wait_for() { _i=0; while ! grep -qE "$2" "$1" 2>/dev/null && [ $_i -lt 200 ]; do sleep 0.1; _i=$((_i + 1)); done; grep -qE "$2" "$1"; }

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$N1P"
check "worker w2 up" add_worker 2 w2 "$N2P"
SPACE_API_URL=$CU SPACE_API_KEY=$K SPACE_ROUTE_CACHE=$T/routes.json
is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "sandbox running" wait_state "$S" running 30
ECHO=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/true"]}')
if [ "$($PROBE status "ws://127.0.0.1:$N1P/v1/sandboxes/$S/processes/stream?args=$ECHO" "$(route "$S" '"exec"')")" != 101 ]; then
	diag "this guest does not serve proc.start: the rest is not tested here"
	done_testing; exit
fi

# ---- space exec ----
out=$(sp exec "$S" -- sh -c 'echo out; echo err >&2; exit 3' 2>"$T/err" </dev/null); rc=$?
is "exec: stdout" "$out" out
is "exec: stderr apart" "$(cat "$T/err")" err
is "exec: the command's exit status" "$rc" 3
sp exec "$S" -- sh -c 'kill -9 $$' </dev/null; is "exec: killed by signal 9 exits 137" "$?" 137
sp exec "$S" --timeout 1 -- sleep 30 </dev/null; is "exec: timed out exits 124" "$?" 124
is "exec: a piped stdin streams to the command" "$(printf 'abc\ndef' | sp exec "$S" -- cat)" "$(printf 'abc\ndef')"
is "exec: stdin of 3 MiB (over the buffered 1 MiB) streams through" \
	"$(head -c 3145728 /dev/zero | sp exec "$S" -- wc -c | tr -d ' ')" 3145728
# live: the first line arrives while the command still waits for a file
# only this test creates after seeing it
sp exec "$S" -- sh -c 'echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second' \
	</dev/null >"$T/live" 2>&1 &
LIVE=$!; BGP="$BGP $LIVE"
check "exec streams live: the first line is here while the command runs" wait_for "$T/live" '^first$'
check "  ... and the second is not yet" sh -c "! grep -q second '$T/live'"
sp exec "$S" -- touch /tmp/go </dev/null
wait $LIVE; is "  ... then it is, and the status is the command's" "$?:$(tr '\n' ' ' <"$T/live")" "0:first second "

# ---- background, ps, signal, attach ----
P=$(sp exec "$S" --background -- sh -c 'i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.2; done')
check "exec --background prints a process id ($P)" test "$P" -gt 0
check "ps lists it running" sh -c "'$SPACE_BIN/space' ps '$S' | grep -E '^$P +running'"
sp attach "$S" "$P" </dev/null >"$T/att" 2>&1 &
ATT=$!; BGP="$BGP $ATT"
check "attach: live output of the background process" wait_for "$T/att" 'tick [0-9]+'
check "signal KILL" sp signal "$S" "$P" KILL
wait $ATT; is "attach exits with the process's status (137)" "$?" 137
check "ps shows it exited by signal 9" sh -c "'$SPACE_BIN/space' ps '$S' --json | grep -q '\"signal\": 9'"
sp signal "$S" "$P" NOSUCH 2>/dev/null; is "signal: an unknown name is a usage error" "$?" 2

# ---- fs watch ----
sp exec "$S" -- mkdir -p /tmp/w </dev/null
sp fs watch "$S" /tmp/w --json >"$T/watch" 2>&1 &
WP=$!; BGP="$BGP $WP"
i=0; while [ $i -lt 100 ]; do sp exec "$S" -- sh -c 'echo x > /tmp/w/f$$' </dev/null; grep -q create "$T/watch" && break; sleep 0.2; i=$((i + 1)); done
check "fs watch: a create event as JSON" grep -q '"event": *"create".*"path": *"/tmp/w/f' "$T/watch"
kill $WP 2>/dev/null; wait $WP 2>/dev/null

# ---- space shell through tmux ----
tmux -S "$TMUX_SOCK" new-session -d -x 80 -y 24 -s sh \
	"SPACE_API_URL=$CU SPACE_API_KEY=$K SPACE_ROUTE_CACHE=$T/routes.json TERM=xterm '$SPACE_BIN/space' shell $S; echo rc=\$? >'$T/shell_rc'; stty -a >'$T/stty_after'; sleep 30"
pane() { tmux -S "$TMUX_SOCK" capture-pane -p -t sh >"$T/pane"; }
waitpane() { _i=0; while [ $_i -lt 200 ]; do pane; grep -qE "$1" "$T/pane" && return 0; sleep 0.1; _i=$((_i + 1)); done; return 1; }
check "shell: a prompt" waitpane '[$#] *$'
tmux -S "$TMUX_SOCK" send-keys -t sh 'echo hello-$((40+2))' Enter
check "shell: a command and its output" waitpane '^hello-42'
tmux -S "$TMUX_SOCK" resize-window -t sh -x 100 -y 30
# the SIGWINCH reaches the client, which tells the sandbox's terminal: ask
# again (up to 10 times) until the new size shows
sized() { tmux -S "$TMUX_SOCK" send-keys -t sh 'stty size' Enter; _j=0; while [ $_j -lt 10 ]; do pane; grep -qE '^30 100' "$T/pane" && return 0; sleep 0.1; _j=$((_j + 1)); done; return 1; }
i=0; while ! sized && [ $i -lt 10 ]; do i=$((i + 1)); done
check "shell: after a resize, stty size says 30 100" waitpane '^30 100'
tmux -S "$TMUX_SOCK" send-keys -t sh 'exit 7' Enter
i=0; while [ ! -s "$T/shell_rc" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
is "shell: exit 7 is the client's status" "$(cat "$T/shell_rc" 2>/dev/null)" rc=7
check "shell: the terminal is restored (echo, icanon)" sh -c "grep -qE '(^| )icanon' '$T/stty_after' && grep -qE '(^| )echo ' '$T/stty_after'"

# ---- a capability that expires while its stream is open ----
# (back-dated to expire 2 s from now; the stream outlives it and the
# comparator's clock skew of 15 s)
CAP=$($PY "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$(route "$S" '"exec"')" 118)
ARGS=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/sh","-c","sleep 19; echo after-expiry"]}')
$PROBE run "$WU/v1/sandboxes/$S/processes/stream?args=$ARGS" "$CAP" >"$T/exp" 2>&1
check "a stream whose capability expired while open delivers to its end" sh -c "grep -q after-expiry '$T/exp' && tail -1 '$T/exp' | grep -q 'close 1000'"
is "  ... and the same capability opens nothing now: 401" "$($PROBE status "$WU/v1/sandboxes/$S/processes/1/stream" "$CAP")" "401 capability_expired"

# ---- the control plane dies and comes back while a stream is open ----
# (kill -9, then a new space-control on the same store: every lease of the
# old one is handed over; an open stream depends on none of them)
CAP=$(route "$S" '"exec"')
ARGS=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/sh","-c","i=0; while [ $i -lt 40 ]; do echo n$i; i=$((i+1)); sleep 0.1; done"]}')
$PROBE run "$WU/v1/sandboxes/$S/processes/stream?args=$ARGS" "$CAP" >"$T/handoff" 2>&1 &
PR=$!
i=0; while ! grep -q 'n1' "$T/handoff" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
crash CTL
check "space-control killed (-9) and started again while the stream runs" start_ctl
wait $PR
got=$($PY -c 'import ast,sys
out=b"".join(ast.literal_eval(l.split(" ",2)[2]) for l in open(sys.argv[1]) if l.startswith("out stdout "))
print("all" if out==b"".join(b"n%d\n"%i for i in range(40)) else "got %r"%out[-40:])' "$T/handoff")
is "the stream delivered every line, in order, across the control plane's restart" "$got" all
check "... then the exit status (0) and close 1000" sh -c "grep -q '^exit 0 0 0' '$T/handoff' && tail -1 '$T/handoff' | grep -q 'close 1000'"
[ "$_tap_fail" = 0 ] || sed 's/^/# /' "$T/handoff"

# ---- a move closes the streams of the old execution with 4409 ----
CAP=$(route "$S" '"exec"')
ARGS=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/sh","-c","while :; do echo gen1; sleep 0.1; done"]}')
$PROBE hold "$WU/v1/sandboxes/$S/processes/stream?args=$ARGS" "$CAP" 60 >"$T/mv" 2>&1 &
PR=$!; BGP="$BGP $PR"
P2=$(sp exec "$S" --background -- sh -c 'while :; do echo bg; sleep 0.2; done')
sp attach "$S" "$P2" </dev/null >"$T/att2" 2>"$T/att2.err" &
ATT=$!; BGP="$BGP $ATT"
check "a stream is open before the move" wait_for "$T/mv" '^out stdout'
check "an attach is open before the move" wait_for "$T/att2" bg
is "move w1 -> w2: 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
wait $PR
is "the open stream closed with 4409" "$(tail -1 "$T/mv")" "close 4409"
check "  ... and carried nothing but the old execution's output" sh -c "! grep -v -e '^first ' -e '^close ' -e \"^out stdout b'\\(gen1\\\\\\\\n\\)*'\$\" '$T/mv'"
wait $ATT; is "space attach exits 75 when the execution was replaced" "$?" 75
check "  ... saying so" grep -q "execution was replaced" "$T/att2.err"
check "the sandbox serves on w2" wait_state "$S" running 60
is "exec after the move (one route repair)" "$(sp exec "$S" -- echo moved </dev/null)" moved

check "node-api w1 alive" alive "$N1"
check "sbx-manager w1 alive" alive "$M1"
done_testing
