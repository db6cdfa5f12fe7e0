#!/bin/sh
# Prepared jails (sbx-manager jailpool.c, docs/worker.md "Prepared jails"):
# with --jail-pool N the worker keeps N jails ready (guest running, layer
# mounted, unbound, each on a uid slot of its own). A new sandbox claims
# one: the jail serves it (same guest pid as prepared), its bridge is the
# kept spaced-host --pool that made the jail, given the claim (no new
# bridge process, back at the default priority), its serving process the
# one made ahead (serving uid, confined, listening on nothing until the
# claim hands it the socket), two sandboxes get
# two different jails (guest pids, uid ranges), the pool is filled again.
# A prepared jail is out of reach of a capability before its claim. A
# prepared jail whose guest died is not claimed: the create still
# succeeds with a new jail and nothing of the dead one is left. A prepared
# jail the bridge cannot bind (jail.sock gone): a new jail serves, and the
# log says so rather than "claimed". kill -9 of sbx-manager with prepared
# jails present: the next start destroys them (guest, cgroup, netns, layer
# mount, loop device, directories); a clean stop destroys them too.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
MD=$T/w1/jail-pool
LOG=$T/mgr_w1.log
marks() { find "$MD" -maxdepth 1 -name 'pool-*' 2>/dev/null | wc -l; }
# wait_pool N SECONDS: true once N jails are marked and N guests listen
wait_pool() {
	_end=$(($(date +%s) + $2))
	while [ "$(date +%s)" -le $_end ]; do
		[ "$(marks)" -eq "$1" ] && [ "$(pooled_pids | wc -w)" -eq "$1" ] && return 0
		sleep 0.2
	done
	return 1
}
# the pid listening on unix socket path $1 (the guest of a jail listens on
# its jail.sock itself)
listener() { ss -xlpn 2>/dev/null | awk -v p="$1" '$5 == p' | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1; }
# guest pids of the prepared jails still unbound (one look at the sockets)
pooled_pids() {
	ss -xlpn 2>/dev/null >"$T/ss"
	for _m in $(ls "$MD" 2>/dev/null); do
		awk -v p="$T/w1/run/$_m.g1/jail.sock" '$5 == p' "$T/ss" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1
	done
}
# note NAME PID of every prepared jail (a socket keeps the name it was bound
# with: a claimed jail's listener still shows its pool path)
note_pool() {
	for _m in $(ls "$MD" 2>/dev/null); do
		echo "$_m $(listener "$T/w1/run/$_m.g1/jail.sock")" >>"$T/pooled"
	done
}
# the guest pid of the prepared jail sandbox $1 claimed
claimed_guest() {
	_n=$(sed -n "s/.*install $1 g1: claimed a prepared jail \(pool-[0-9a-f]*\) .*/\1/p" "$LOG" | head -1)
	awk -v n="$_n" '$1 == n { print $2 }' "$T/pooled" | head -1
}
ALLPOOL=
platform_on_cleanup() {
	for _g in $ALLPOOL $(pooled_pids); do
		{ tr '\0' ' ' </proc/"$_g"/cmdline | grep -q -- "--pool"; } 2>/dev/null && kill -9 "$_g" 2>/dev/null
	done
	true
}
# the uid the host sees for root of the jail whose guest is $1
uid0_of() { awk '$1 == 0 { print $2 }' /proc/"$1"/uid_map; }
R256='"resources":{"disk_mb":256}'

check "space-control up" start_ctl
check "worker w1 up (jail pool of 2, 256 MiB layers)" \
    add_worker 1 w1 "$NP" --jail-pool 2 --layer-pool 2 --disk-mb 256
check "two prepared jails" wait_pool 2 60
P1=$(pooled_pids | tr '\n' ' ')
note_pool
ALLPOOL=$P1
is "... the marks' directory is root's, 0700" "$(stat -c %u:%a "$MD")" "0:700"
PN=$(ls "$MD" | head -1)
check "... a prepared jail has no bridge.sock" test ! -e "$T/w1/run/$PN.g1/bridge.sock"
check "... its jail.sock is in a 0700 root directory" \
    test "$(stat -c %u:%a "$T/w1/run/$PN.g1")" = "0:700" -a -S "$T/w1/run/$PN.g1/jail.sock"
# every one, the first made too: sbx-manager binds its own socket as these
# are made, without narrowing the umask its other threads create with
for n in $(ls "$MD"); do
	is "... $n: its run directory is 0700 root's" "$(stat -c %u:%a "$T/w1/run/$n.g1")" "0:700"
done
is "... nothing left of the binding of sbx-manager.sock" "$(find "$T/w1/run" -maxdepth 1 -name '.api*' | wc -l)" 0
U1=$(for g in $P1; do uid0_of "$g"; done | sort -u | wc -l)
is "... on two different uid ranges" "$U1" 2
# each prepared jail's bridge waits for its claim: the spaced-host --pool
# that made the jail is its guest's parent, still running, at the lower
# priority of work made ahead, holding nothing a capability reaches
ppid_of() { ps -o ppid= -p "$1" | tr -d ' '; }
for g in $P1; do
	kb=$(ppid_of "$g")
	check "... guest $g: its parent $kb is a kept spaced-host --pool" \
	    sh -c "tr '\\0' ' ' </proc/$kb/cmdline | grep -q 'spaced-host.* --pool'"
	is "... which runs at nice 10 until claimed" "$(ps -o ni= -p "$kb" | tr -d ' ')" 10
	# its serving process is made ahead too: forked, on the serving uid
	# (the range's last id), confined, and reachable by nobody (no
	# bridge.sock until the claim hands it one)
	ks=$(pgrep -P "$kb" | grep -vx "$g" | head -1)
	check "... its serving process ($ks) is made ahead" test -n "$ks"
	is "... on the serving uid of the jail's range" \
	    "$(awk '/^Uid:/ { print $3 }' /proc/"$ks"/status)" "$(($(uid0_of "$g") + 65535))"
	is "... under its seccomp filter" "$(awk '/^Seccomp:/ { print $2 }' /proc/"$ks"/status)" 2
	is "... listening on nothing" "$(ss -xlp 2>/dev/null | grep -c "pid=$ks,")" 0
done

is "create A" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
A=$(jget id)
check "A running" wait_state "$A" running 30
check "... the install claimed a prepared jail" grep -q "install $A g1: claimed a prepared jail" "$LOG"
S=$A CAP=$(route "$A")
is "A serves an exec" \
    "$(napi POST exec --data-binary '{"argv":["sh","-c","echo hi > /home/user/f && cat /home/user/f && echo $$"]}')" 200
is "... its output" "$(jget stdout | head -1)" hi
# the guest that serves A is one of the prepared ones: PID 1 of A's jail
# seen from the host is the guest listening on A's jail.sock
GA=$(claimed_guest "$A")
case " $P1 " in *" $GA "*) ok "A's guest (pid $GA) is a prepared one" ;;
*) not_ok "A's guest (pid $GA) is a prepared one ($P1)" ;; esac
# the bridge that serves A is the kept one that made its jail, given the
# claim: no spaced-host was started for A, and it runs at the default
# priority now, as its serving process does
BA=$(sed -n "s/.*serving $A g1 a1 (bridge pid \([0-9]*\)).*/\1/p" "$LOG" | head -1)
is "A's bridge (pid $BA) is the kept bridge that made its jail" "$(ppid_of "$GA")" "$BA"
check "... the log says the kept bridge was claimed" \
    grep -q "bridge of $A g1 a1 spawned in .*(the prepared jail's kept bridge, claimed)" "$LOG"
check "... its command line names A (as a start for A would)" \
    sh -c "tr '\\0' ' ' </proc/$BA/cmdline | grep -q -- '--claim-from pool-[0-9a-f]* --sandbox $A --generation 1 '"
is "... at the default priority now" "$(ps -o ni= -p "$BA" | tr -d ' ')" 0
SA=$(pgrep -P "$BA" | grep -vx "$GA" | head -1)
is "... its serving process ($SA) too" "$(ps -o ni= -p "$SA" | tr -d ' ')" 0
check "... which listens on A's bridge.sock now" sh -c "ss -xlp | grep 'pid=$SA,' | grep -q bridge.sock"
# made before A existed, it holds what one forked for A would: the serving
# uid, its filter, no_new_privs, and of the monitor's only its channels and
# the OOM count of A's group (the jail's group, renamed at the claim)
is "... on the serving uid, no_new_privs, under its filter" \
    "$(awk '/^Uid:/ { u = $3 } /^NoNewPrivs:/ { n = $2 } /^Seccomp:/ { f = $2 } END { print u, n, f }' /proc/"$SA"/status)" \
    "$(($(uid0_of "$GA") + 65535)) 1 2"
o6=$(readlink "/proc/$SA/fd/6")
check "... its fd 6 is A's OOM count ($o6)" \
    sh -c "case '$o6' in */$A.g1/memory.oom_control|*/$A.g1/memory.events) true ;; *) false ;; esac"
others=$(for fd in /proc/$SA/fd/*; do n=${fd##*/}; [ "$n" -le 6 ] && continue; readlink "$fd"; done | grep -v '^socket:\|^pipe:\|^anon_inode:' | tr '\n' ' ')
is "... and no file beyond it [$others]" "$others" ""
is "... the file is the sandbox user's" \
    "$(napi POST exec --data-binary '{"argv":["stat","-c","%u","/home/user/f"]}' >/dev/null; jget stdout)" 1000
check "... the record's uid range is the jail's" \
    test "$(stat -c %u "$T/w1/run/$A.g1/rw/home/f")" = "$(($(uid0_of "$GA") + 1000))"
check "... the pool mark of the claimed jail is gone" test "$(marks)" -le 2
check "the pool is filled again" wait_pool 2 60
note_pool

is "create B" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
B=$(jget id)
check "B running" wait_state "$B" running 30
check "... claimed a prepared jail" grep -q "install $B g1: claimed a prepared jail" "$LOG"
GB=$(claimed_guest "$B")
check "... another guest than A's ($GB, $GA)" test -n "$GB" -a "$GB" != "$GA"
check "... another uid range than A's" test "$(uid0_of "$GB")" != "$(uid0_of "$GA")"
S=$B CAP=$(route "$B")
is "B serves" "$(napi POST exec --data-binary '{"argv":["cat","/home/user/f"]}')" 200
is "... and sees none of A's files" "$(jget exit_code)" 1
check "pool filled again" wait_pool 2 60

# out of reach before its claim: a capability naming a prepared jail (signed
# with the control plane's key, as if it had been issued) is refused and
# reaches no bridge
PN=$(ls "$MD" | head -1)
PCAP=$(/usr/bin/python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$CAP" 0 "$B:$PN" 2>>"$T/log")
check "a capability naming prepared jail $PN" test -n "$PCAP"
S=$PN CAP=$PCAP
st=$(napi POST exec --data-binary '{"argv":["true"]}')
echo "# $(head -c 300 "$T/body")"
case "$st" in 403|404|409) ok "... refused ($st)" ;; *) not_ok "... refused (got $st)" ;; esac
check "... refused by admission: no record of it" \
    grep -q "\"reason\":\"[a-z_]*\",\"op\":\"exec\",\"sandbox\":\"$PN\",\"record_state\":null" "$LOG"
check "... the prepared jail is still unbound" test ! -e "$T/w1/run/$PN.g1/bridge.sock"

# a prepared jail whose guest died is not claimed: a new jail serves
for g in $(pooled_pids); do kill -9 "$g"; done
sleep 0.3
is "create C (the prepared jails are dead)" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
C=$(jget id)
check "C running" wait_state "$C" running 30
S=$C CAP=$(route "$C")
is "C serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# a prepared jail the bridge cannot bind (its jail.sock gone, the guest
# alive): spaced-host starts a new jail, and sbx-manager logs what it did,
# not that it claimed one
check "pool filled again (jail.sock removed next)" wait_pool 2 60
P3=$(pooled_pids | tr '\n' ' ')
ALLPOOL="$ALLPOOL $P3"
for n in $(ls "$MD"); do rm -f "$T/w1/run/$n.g1/jail.sock"; done
is "create D (the prepared jails cannot be reached)" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
D=$(jget id)
check "D running" wait_state "$D" running 30
S=$D CAP=$(route "$D")
is "D serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
check "... the log does not say D claimed a prepared jail" \
    sh -c "! grep -q 'install $D g1: claimed a prepared jail' '$LOG' && ! grep -q 'serving $D g1 .*claimed a prepared jail' '$LOG'"
check "... it says the prepared jail was not bound" \
    grep -q "install $D g1: prepared jail pool-[0-9a-f]* not bound by the bridge: a new jail serves" "$LOG"
# the prepared guest it was handed is gone (spaced-host destroyed it), the
# other one is killed here so that the pool fills again
for g in $P3; do kill -9 "$g" 2>/dev/null; done
for g in $P3; do check "... prepared guest $g is gone" gone "$g" 10; done
is "D still serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# kill -9 of sbx-manager with prepared jails: the next start destroys them
check "pool filled again before the crash" wait_pool 2 60
P2=$(pooled_pids | tr '\n' ' ')
ALLPOOL="$ALLPOOL $P2"
N2=$(ls "$MD" | tr '\n' ' ')
crash M1
check "sbx-manager started again (no pool)" start_mgr 1 w1 "$NP" --jail-pool 0 --layer-pool 2 --disk-mb 256
for g in $P2; do check "... prepared guest $g is gone" gone "$g" 10; done
is "... no mark left" "$(marks)" 0
for n in $N2; do
	check "... $n: no run or layer directory" test ! -e "$T/w1/run/$n.g1" -a ! -e "$T/w1/exec/$n.g1"
	is "... $n: no mount" "$(grep -c "/$n.g1/" /proc/mounts)" 0
	is "... $n: no cgroup" "$(find /sys/fs/cgroup -maxdepth 6 -name "$n.g1" 2>/dev/null | wc -l)" 0
	is "... $n: no loop device" "$(losetup -a 2>/dev/null | grep -c "/$n.g1/")" 0
done
S=$A CAP=$(route "$A")
is "A still serves" "$(napi POST exec --data-binary '{"argv":["cat","/home/user/f"]}')" 200
check "sbx-manager kept running" alive "$M1"

# a clean stop (SIGTERM, as space up stops) destroys every unclaimed
# prepared jail, as a start does; the sandboxes' bridges keep running
stop M1
check "sbx-manager started again with a pool of 2" \
    start_mgr 1 w1 "$NP" --jail-pool 2 --layer-pool 2 --disk-mb 256
check "two prepared jails" wait_pool 2 60
P4=$(pooled_pids | tr '\n' ' ')
ALLPOOL="$ALLPOOL $P4"
N4=$(ls "$MD" | tr '\n' ' ')
stop M1
for g in $P4; do check "after a clean stop: prepared guest $g is gone" gone "$g" 10; done
is "... no mark left" "$(marks)" 0
for n in $N4; do
	check "... $n: no run or layer directory" test ! -e "$T/w1/run/$n.g1" -a ! -e "$T/w1/exec/$n.g1"
	is "... $n: no mount" "$(grep -c "/$n.g1/" /proc/mounts)" 0
	is "... $n: no cgroup" "$(find /sys/fs/cgroup -maxdepth 6 -name "$n.g1" 2>/dev/null | wc -l)" 0
	is "... $n: no loop device" "$(losetup -a 2>/dev/null | grep -c "/$n.g1/")" 0
done
check "sbx-manager started again (no pool)" start_mgr 1 w1 "$NP" --jail-pool 0 --layer-pool 2 --disk-mb 256
S=$A CAP=$(route "$A")
is "A still serves after the clean stop" "$(napi POST exec --data-binary '{"argv":["cat","/home/user/f"]}')" 200
done_testing
