#!/bin/sh
# Network namespaces made ahead of creates (sbx-manager netnspool.c): the
# worker keeps --netns-pool namespaces bound in D/netns-pool; a new
# execution's RUNDIR/netns is one of them (the same namespace, its lo up),
# taken out of the pool (claimed once: two sandboxes never share one), and
# the pool is filled again. A crash leaves the pool's binds; the next start
# removes them (and anything planted there) before filling it again; a clean
# stop leaves no bind of the pool.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
PD=$T/w1/netns-pool
# the pool's namespace binds (nsfs mounts under PD)
pool_mounts() { awk -v d="$PD/" 'index($2, d) == 1 && $3 == "nsfs" { print $2 }' /proc/mounts; }
pool_n() { pool_mounts | wc -l; }
pool_inos() { for _p in $(pool_mounts); do stat -c %i "$_p"; done | sort | tr '\n' ' '; }
wait_pool() {
	_i=0
	while [ "$(pool_n)" -ne "$1" ] && [ $_i -lt $(($2 * 10)) ]; do sleep 0.1; _i=$((_i + 1)); done
	[ "$(pool_n)" -eq "$1" ]
}
in_list() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
# not_pooled INO: true once no bind in the pool is of namespace INO (a
# claimed slot's bind is removed by the pool's thread, off the create's path)
not_pooled() {
	_i=0
	while in_list "$1" "$(pool_inos)" && [ $_i -lt 300 ]; do sleep 0.1; _i=$((_i + 1)); done
	! in_list "$1" "$(pool_inos)"
}

check "space-control up" start_ctl
check "worker w1 up (netns pool of 2)" add_worker 1 w1 "$NP" --netns-pool 2
check "the pool holds 2 namespaces" wait_pool 2 30
is "... the pool directory is root's, 0700" "$(stat -c %u:%a "$PD")" "0:700"
INOS=$(pool_inos)

is "create A" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
A=$(jget id)
check "A running" wait_state "$A" running 30
AN=$T/w1/run/$A.g1/netns
AI=$(stat -c %i "$AN")
if in_list "$AI" "$INOS"; then ok "A's namespace is a pooled one (inode $AI)"
else not_ok "A's namespace is a pooled one (inode $AI, pool had $INOS)"; fi
check "... the log says so" grep -q "$A g1: network namespace from the pool" "$T/mgr_w1.log"
check "... its loopback is up" sh -c "nsenter --net='$AN' ip -o link show lo | grep -q 'state UNKNOWN\|,UP'"
check "A's namespace is no longer in the pool" not_pooled "$AI"
check "the pool is filled again" wait_pool 2 30
NOW=$(pool_inos)
is "A's namespace is bound once" "$(awk -v i="$AI" '$3 == "nsfs"' /proc/mounts | while read -r _d p _r; do stat -c %i "$p"; done | grep -cx "$AI")" 1
S=$A CAP=$(route "$A")
is "A serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

is "create B" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
B=$(jget id)
check "B running" wait_state "$B" running 30
BI=$(stat -c %i "$T/w1/run/$B.g1/netns")
if [ "$BI" != "$AI" ] && in_list "$BI" "$NOW"; then ok "B has a pooled namespace of its own ($BI, A $AI)"
else not_ok "B has a pooled namespace of its own ($BI, A $AI, pool had $NOW)"; fi

# a crash: the pool's binds stay until the next start removes them
crash M1
is "after a crash the pool's binds are still there" "$(pool_n)" 2
: >"$PD/planted"
check "sbx-manager started again" start_mgr 1 w1 "$NP" --netns-pool 2
check "the pool holds 2 namespaces again" wait_pool 2 30
check "... the planted file is gone" test ! -e "$PD/planted"
is "... no bind of the crashed run is left (2 in all)" "$(pool_n)" 2
check "A still has its namespace" test "$(stat -c %i "$AN")" = "$AI"
S=$A CAP=$(route "$A")
is "A still serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# a clean stop: nothing of the pool stays bound
stop M1
is "after a stop no bind of the pool is left" "$(pool_n)" 0
check "A's own namespace is not the pool's to remove" test "$(stat -c %i "$AN")" = "$AI"
done_testing
