#!/bin/sh
# spaced-host from a hostile guest's side: whatever the guest sends reaches
# only the bridge's serving process, which is unprivileged (an uid of the
# sandbox's range that nothing inside it can hold, no capabilities,
# no_new_privs, a seccomp filter), survives malformed frames, and never the
# root monitor. A refusal at the bridge is counted and audited with both
# identities. The guest is a test double (tests/doubles/fake_guest.c,
# built as guest-hostile) started exactly as spaced-guest is.
. "$SPACE_TOP/tests/lib.sh"
SPC="python3 $SPACE_TOP/tests/tools/spc.py"
DOUBLES=$(dirname "$SPACE_BIN")/tests/doubles
W=$(mktemp -d)
HP=
cleanup() {
	[ -n "$HP" ] && kill "$HP" 2>/dev/null
	i=0; while [ -n "$HP" ] && kill -0 "$HP" 2>/dev/null && [ $i -lt 80 ]; do sleep 0.1; i=$((i + 1)); done
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

UB=$((1000000 + (($$ + 2000) % 4000) * 65536))
SB=p$$
mkdir -p "$W/layer" && mkdir -m 700 "$W/run"
"$SPACE_BIN/spaced-host" --sandbox "$SB" --generation 5 --activation 1 --worker w1 \
    --resident r1 --substrate jail --template host --run-dir "$W/run" --layer-dir "$W/layer" \
    --uid-base "$UB" --disk-mb 64 --memory-mb 256 --pids 128 --guest "$DOUBLES/guest-hostile" \
    >"$W/ready" 2>"$W/log" &
HP=$!
i=0; while [ ! -s "$W/ready" ] && kill -0 "$HP" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
check "bridge with a hostile guest is ready" grep -q '^ready [0-9][0-9]*$' "$W/ready"
SP=$(cut -d' ' -f2 "$W/ready")
# valid for 30 minutes: a loaded machine must not make it expire
claims() { $SPC claims --sandbox "$SB" --gen "${1:-5}" --worker w1 --resident r1 --act 1 --exp-in 1800; }
C=$(claims)
call() { $SPC call "$W/run/bridge.sock" exec "$SB" "$C" "{\"argv\":[\"$1\"]}"; }
get() { $SPC get "$1"; }
status() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }

# the host end of the guest's control channel: the peer of the guest's
# fd 3, found through the kernel's socket table (ss), then every process
# holding that socket
GP=$(pgrep -P "$HP" | grep -vx "$SP" | head -1)
gino=$(readlink "/proc/$GP/fd/3" | tr -dc 0-9)
peer=$(ss -xna | awk -v i="$gino" '$6 == i { print $8 }' | head -1)
holders=$(find /proc/[0-9]*/fd -lname "socket:\[$peer\]" 2>/dev/null | cut -d/ -f3 | sort -u | tr '\n' ' ' | sed 's/ $//')
is "the guest's frames reach exactly one process: the serving one" "$holders" "$SP"
check "it is a child of the monitor" test "$(status "$SP" PPid)" = "$HP"
is "... running as the range's last uid (not root, not mapped in the sandbox)" "$(status "$SP" Uid)" \
    "$((UB + 65535)) $((UB + 65535)) $((UB + 65535)) $((UB + 65535))"
is "... with that gid and no other group" "$(status "$SP" Gid) [$(status "$SP" Groups)]" \
    "$((UB + 65535)) $((UB + 65535)) $((UB + 65535)) $((UB + 65535)) []"
is "... no effective capability" "$(status "$SP" CapEff)" 0000000000000000
is "... none permitted, none in the bounding set" "$(status "$SP" CapPrm) $(status "$SP" CapBnd)" \
    "0000000000000000 0000000000000000"
is "... no_new_privs" "$(status "$SP" NoNewPrivs)" 1
is "... under a seccomp filter" "$(status "$SP" Seccomp)" 2
is "the monitor is root and holds no socket of the guest" "$(status "$HP" Uid | cut -d' ' -f1) $(echo " $holders " | grep -c " $HP ")" "0 0"
check "the guest's uid map leaves the serving uid out" \
    grep -q "^ *0 *$UB *65535$" "/proc/$GP/uid_map"
# what it holds of the monitor's: nothing but its three channels and, for
# an exec's OOM count, one cgroup file opened read-only (no other cgroup
# file, not the layer's lock)
others=$(for fd in /proc/$SP/fd/*; do n=${fd##*/}; [ "$n" -le 6 ] && continue; readlink "$fd"; done | grep -v '^socket:\|^pipe:\|^anon_inode:' | tr '\n' ' ')
is "the serving process holds no file beyond fd 6 (only sockets, pipes, its own anon inodes) [$others]" "$others" ""
o6=$(readlink "/proc/$SP/fd/6")
check "... fd 6 is the sandbox's OOM count ($o6)" sh -c "case '$o6' in */memory.oom_control|*/memory.events) true ;; *) false ;; esac"
is "... open read-only" "$(awk '$1 == "flags:" { print substr($2, length($2), 1) % 4 }' "/proc/$SP/fdinfo/6")" 0

# ---- hostile answers: each is refused, the serving process survives ----
for h in not-a-frame huge-length bad-json wrong-shape bad-error wrong-type; do
	out=$(call "$h")
	is "guest answers $h: 500 internal to sbx-manager" \
	    "$(printf '%s\n' "$out" | get frame) $(printf '%s\n' "$out" | get body.status) $(printf '%s\n' "$out" | get body.error)" \
	    "ERROR 500 internal"
done
out=$(call fine)
is "after all of them, the same bridge still serves" "$(printf '%s\n' "$out" | get body.result.stdout)" "hostile guest"
check "... from the same serving process" test "$(status "$SP" PPid)" = "$HP"

# ---- a refusal at the bridge: audited with both identities, counted ----
refuse() { $SPC call "$W/run/bridge.sock" exec "$SB" "$(claims 4)" '{"argv":["true"]}'; }
out=$(refuse)
is "an older generation is refused at the bridge" "$(printf '%s\n' "$out" | get body.status) $(printf '%s\n' "$out" | get body.reason)" "409 generation_mismatch"
# the monitor writes the audit line and the count after the refusal went
# out (asynchronously, from the serving process's report): waited for
i=0; while ! grep -q '"audit":"bridge_admission"' "$W/log" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
line=$(grep '"audit":"bridge_admission"' "$W/log" | tail -1)
check "audit line written" test -n "$line"
is "... with the capability's identity" "$(printf '%s' "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cap_route"]["generation"])')" 4
is "... and the record's identity" "$(printf '%s' "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin)["record_route"]; print(r["sandbox"], r["generation"], r["activation"])')" "$SB 5 1"
is "... outcome and reason" "$(printf '%s' "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["outcome"], r["reason"], r["op"])')" "refresh_route generation_mismatch exec"
count() { sed -n 's/^space_bridge_refusals_total{.*reason="generation_mismatch"} //p' "$W/run/metrics.prom" 2>/dev/null; }
# bounded wait for the count to reach $1 (the monitor writes it after the answer)
count_at() { i=0; while [ "$(count)" != "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; count; }
is "counted once" "$(count_at 1)" 1
refuse >/dev/null
is "a second refusal: counted twice" "$(count_at 2)" 2
audited() { grep '"audit":"bridge_admission"' "$W/log" | grep -c generation_mismatch; }
i=0; while [ "$(audited)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
is "... and audited twice" "$(audited)" 2

# ---- garbage on the control channel: the guest is gone for the bridge ----
call bad-control >/dev/null
i=0; while kill -0 "$HP" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "garbage on the control channel ends the bridge" sh -c "! kill -0 $HP 2>/dev/null"
wait "$HP"; rc=$?; HP=
check "... with a non-zero status (got $rc)" test "$rc" -ne 0
# the sandbox's processes die with its PID 1 (the kernel kills the rest of
# its PID namespace), which takes a moment after the bridge's exit: bounded
left() { ps -eo uid= | awk -v lo=$UB '$1 >= lo && $1 <= lo + 65535' | grep -c .; }
i=0; while [ "$(left)" -gt 0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
is "... and no process of the sandbox or of the bridge is left" "$(left)" 0
done_testing
