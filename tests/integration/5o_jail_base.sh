#!/bin/sh
# Jails cloned from the worker's base mount namespace (sbx-manager
# jailbase.c, spaced-host substrate_jail.c; docs/jail.md, "The base
# namespace"): sbx-manager binds on D/jail-mntns a namespace built up from
# binds of only the host paths a jail's set-up reads (a read-only tmpfs
# root, /usr and the like, /etc, a few /dev nodes, /proc); every
# jail is cloned from a private copy of it holding only that jail's own
# layer, so the base never gains a sandbox's mount, and it keeps no mount
# of the host alive: a loop mount made before the worker started is
# unmounted and its loop device detached while the worker runs. What is
# found at D/jail-mntns at a start is replaced; something there that is
# not a mount namespace makes the bridge clone from the worker's
# namespace, as without a base; a clean stop unbinds it.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
D1=$T/w1
BASE=$D1/jail-mntns
bound() { awk -v p="$BASE" '$2 == p { print $3 }' /proc/mounts; }
# the mount points in the base's own table
base_mounts() { nsenter --mount="$BASE" cat /proc/self/mountinfo | awk '{ print $5 }'; }
# ... that are not what a jail's set-up reads (sbx-manager jailbase.c)
in_base() {
	base_mounts | grep -Ev '^/$|^/(usr|bin|sbin|lib|lib64|lib32|libx32|etc|proc)$|^/dev/[^/]+$'
}
# the mount namespace bound there, by its inode
base_ino() { stat -L -c %i "$BASE"; }
# a guest process of sandbox $1 (in its jail's namespaces)
guest_pid() {
	for _g in $(pgrep -x spaced-guest); do
		case " $(argv_of "$_g") " in *" --sandbox $1 "*) echo "$_g"; return 0 ;; esac
	done
	return 1
}
# exec ARGV... in sandbox $S: its stdout
sx() {
	napi POST exec --data-binary "$(python3 -c 'import json,sys; print(json.dumps({"argv": sys.argv[1:]}))' "$@")" >/dev/null
	jget stdout
}

# an operator's loop mount, made before the worker starts
OPIMG=$T/op.img
OPMNT=$T/opmnt
mkdir -p "$OPMNT"
truncate -s 16M "$OPIMG"
check "an ext4 image for the operator's mount" mkfs.ext4 -q -F "$OPIMG"
check "mounted on a loop device before the worker starts" mount -o loop "$OPIMG" "$OPMNT"
is "... one loop device on it" "$(losetup -j "$OPIMG" | wc -l)" 1

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
is "the base is bound on D/jail-mntns" "$(bound)" nsfs
check "... a mount namespace" nsenter --mount="$BASE" true
is "... holding only what a jail's set-up reads" "$(in_base | wc -l)" 0
is "... /usr and /proc among its mounts" "$(base_mounts | grep -cx '/usr\|/proc')" 2
is "... its root read-only" "$(nsenter --mount="$BASE" awk '$5 == "/" { print $6 }' /proc/self/mountinfo | cut -d, -f1)" ro
is "... /usr bound read-only" "$(nsenter --mount="$BASE" awk '$5 == "/usr" { print $6 }' /proc/self/mountinfo | cut -d, -f1)" ro
check "... /etc/ld.so.cache there" nsenter --mount="$BASE" test -f /etc/ld.so.cache
is "... /etc the host's directory, not files bound one by one (an upgrade renames new files in)" \
	"$(nsenter --mount="$BASE" stat -c %i /etc)" "$(stat -c %i /etc)"
check "... the data directory not" nsenter --mount="$BASE" test ! -e "$D1"
is "... nor the operator's mount" "$(base_mounts | grep -c "^$OPMNT")" 0
check "... the log says jails are cloned from it" grep -q "jails are cloned from a base mount namespace" "$T/mgr_w1.log"

is "create A" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
A=$(jget id)
check "A running" wait_state "$A" running 30
check "A's jail was cloned from the base" \
    grep -q "jail of $A g1 in .*cloned from the base mount namespace" "$T/mgr_w1.log"
S=$A CAP=$(route "$A")
is "A writes and reads its home" "$(sx sh -c 'echo a > /home/user/f && cat /home/user/f')" a
is "... as the sandbox user, its root the sandbox's" "$(echo $(sx stat -c %u /home/user/f /))" "1000 0"
is "A's root is its own tmpfs, not a host path" "$(sx sh -c 'test -e /etc/shadow || echo none')" none
is "the base still holds no mount under the data directory" "$(in_base | wc -l)" 0
G=$(guest_pid "$A")
check "A has a guest process ($G)" test -n "$G"
is "A's jail holds no mount of the data directory" \
    "$(grep -c " $D1/" "/proc/$G/mountinfo" 2>/dev/null)" 0

is "create B" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
B=$(jget id)
check "B running" wait_state "$B" running 30
check "B's jail was cloned from the base" \
    grep -q "jail of $B g1 in .*cloned from the base mount namespace" "$T/mgr_w1.log"
S=$B CAP=$(route "$B")
is "B does not see A's file" "$(sx sh -c 'cat /home/user/f 2>/dev/null || echo none')" none
is "the base still holds none after two" "$(in_base | wc -l)" 0

# the worker runs with sandboxes; the operator unmounts: nothing of the
# platform keeps that file system alive
check "the operator unmounts its loop mount" umount "$OPMNT"
for _ in $(seq 50); do [ -z "$(losetup -j "$OPIMG")" ] && break; sleep 0.1; done
is "its loop device detached (no copy of the mount is left anywhere)" "$(losetup -j "$OPIMG" | wc -l)" 0

# something else bound there: a network namespace (root on the host could
# do it; nothing the sandboxes reach can): a bridge does not use it
umount -l "$BASE"
mount --bind /proc/self/ns/net "$BASE"
is "create C over a network namespace at D/jail-mntns" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
C=$(jget id)
check "C running" wait_state "$C" running 30
check "C's jail was cloned from the worker's namespace" \
    grep -q "jail of $C g1 in .*cloned from the worker's mount namespace" "$T/mgr_w1.log"
check "... with a warning" grep -q "jail of $C: no base mount namespace" "$T/mgr_w1.log"
S=$C CAP=$(route "$C")
is "C serves" "$(sx sh -c 'echo c > /home/user/f && cat /home/user/f')" c

# a crash leaves whatever is bound; the next start replaces it
crash M1
umount -l "$BASE"
rm -f "$BASE"
printf planted >"$BASE"
check "sbx-manager started again" start_mgr 1 w1 "$NP"
is "the planted file was replaced by a base" "$(bound)" nsfs
is "... holding only what a jail's set-up reads (three jails run)" "$(in_base | wc -l)" 0
S=$A CAP=$(route "$A")
is "A (adopted) still reads its file" "$(sx cat /home/user/f)" a
is "create E" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
E=$(jget id)
check "E running" wait_state "$E" running 30
check "E's jail was cloned from the new base" \
    grep -q "jail of $E g1 in .*cloned from the base mount namespace" "$T/mgr_w1.log"
OLD=$(base_ino)

# a clean stop unbinds it; a start makes another
stop M1
is "after a clean stop D/jail-mntns is not bound" "$(bound)" ""
check "... and gone" test ! -e "$BASE"
check "sbx-manager started once more" start_mgr 1 w1 "$NP"
is "a base again" "$(bound)" nsfs
check "... another namespace than the last run's" test "$(base_ino)" != "$OLD"
S=$E CAP=$(route "$E")
is "E (adopted) serves" "$(sx sh -c 'echo e')" e
done_testing
