# Simulated hosts for the platform tests (tests/lib_platform.sh): with
# SPACE_TEST_HOSTS=1, platform_init runs the script again in a network
# namespace of its own (the "lab"), and every daemon the start functions
# start (space-control, each worker's sbx-manager and node-api, which
# share their worker's host, and space-edge: start_edge) runs in a
# network namespace of its host, with an address of its own on a bridge
# of the lab:
#
#	lab            hb0  10.77.0.1/24  (the test's own shell, curl, sqlite3)
#	host "ctl"     eth0 10.77.0.2     space-control
#	host "edge"    eth0 10.77.0.3     space-edge (start_edge, e.g. 5j_edge_hosts.sh)
#	host "wN"      eth0 10.77.0.(10+N)  sbx-manager, node-api and bridges of worker wN
#
# Each host is a veth pair from the lab's bridge into a namespace held by
# one process; nothing is routed out of the lab, so no packet leaves the
# machine. Hosts share the file system (the data directories are per
# worker; the snapshot store is what the test gives --snapshot-dir).
# Sourced by platform_init; it replaces lib_platform.sh's pl_addr, pl_ns
# and pl_host. Tests may use:
#	host_addr NAME   the host's address
#	host_ns NAME     the prefix that runs a command on the host (nsenter)
#	host_kill NAME   the host disappears: kill -9 of every process in its
#	                 namespace and their descendants (sandboxes included),
#	                 then of the process holding it; the namespace and its
#	                 veth go with them. host_up makes it again (new
#	                 namespace, same address).
# Helpers name their variables _hs_*.

# hosts_enter: run the script again inside a new network namespace (once),
# then make the lab's bridge
hosts_enter() {
	if [ -z "${SPACE_HOSTS_LAB:-}" ]; then
		exec unshare --net env SPACE_HOSTS_LAB=1 sh "$0"
	fi
	ip link set lo up
	ip link add hb0 type bridge
	ip addr add 10.77.0.1/24 dev hb0
	ip link set hb0 up
	_hs_dir=$(mktemp -d)
}

host_addr() {
	case $1 in
	ctl) echo 10.77.0.2 ;;
	edge) echo 10.77.0.3 ;;
	w[0-9] | w[0-9][0-9]) echo "10.77.0.$((10 + ${1#w}))" ;;
	*) echo "10.77.0.$((120 + $(printf %s "$1" | cksum | cut -d' ' -f1) % 120))" ;;
	esac
}

# _hs_pid NAME: the pid holding the host's namespace, if it lives
_hs_pid() {
	_hs_p=$(cat "$_hs_dir/$1" 2>/dev/null) && [ -n "$_hs_p" ] && kill -0 "$_hs_p" 2>/dev/null &&
	    echo "$_hs_p"
}

# host_up NAME: the host's namespace with its address (made once)
host_up() {
	_hs_pid "$1" >/dev/null && return 0
	unshare --net sleep 1000000 &
	_hs_h=$!
	echo "$_hs_h" >"$_hs_dir/$1"
	_hs_i=0
	while [ "$(readlink /proc/$_hs_h/ns/net)" = "$(readlink /proc/self/ns/net)" ] && [ $_hs_i -lt 50 ]; do
		sleep 0.1; _hs_i=$((_hs_i + 1))
	done
	[ "$(readlink /proc/$_hs_h/ns/net)" != "$(readlink /proc/self/ns/net)" ] || return 1
	ip link del "h-$1" 2>/dev/null
	ip link add "h-$1" type veth peer name eth0 netns "$_hs_h" || return 1
	ip link set "h-$1" master hb0 up
	nsenter --net=/proc/"$_hs_h"/ns/net sh -c "ip link set lo up &&
		ip addr add $(host_addr "$1")/24 dev eth0 && ip link set eth0 up"
}

host_ns() {
	_hs_h=$(_hs_pid "$1") || return 1
	echo "nsenter --net=/proc/$_hs_h/ns/net"
}

# _hs_members NAME: every process in the host's namespace, and their
# descendants (a sandbox's processes have namespaces of their own)
_hs_members() {
	_hs_ns=$(readlink /proc/"$1"/ns/net) || return 0
	for _hs_q in /proc/[0-9]*; do
		[ "$(readlink "$_hs_q/ns/net" 2>/dev/null)" = "$_hs_ns" ] || continue
		echo "${_hs_q#/proc/}"
		desc "${_hs_q#/proc/}"
	done | sort -u
}

host_kill() {
	_hs_h=$(_hs_pid "$1") || return 0
	# twice: a process forked while the first list was taken
	for _hs_round in 1 2; do
		_hs_l=$(_hs_members "$_hs_h")
		[ -n "$_hs_l" ] && kill -9 $_hs_l 2>/dev/null
	done
	kill -9 "$_hs_h" 2>/dev/null
	wait "$_hs_h" 2>/dev/null
	rm -f "$_hs_dir/$1"
	# the veth goes with its namespace
	_hs_i=0
	while ip link show "h-$1" >/dev/null 2>&1 && [ $_hs_i -lt 50 ]; do sleep 0.1; _hs_i=$((_hs_i + 1)); done
	! ip link show "h-$1" >/dev/null 2>&1
}

# hosts_cleanup: the processes holding the hosts (platform_cleanup, after
# the daemons)
hosts_cleanup() {
	for _hs_f in "$_hs_dir"/*; do
		[ -f "$_hs_f" ] || continue
		_hs_p=$(cat "$_hs_f")
		kill -9 "$_hs_p" 2>/dev/null
		wait "$_hs_p" 2>/dev/null
	done
	rm -rf "$_hs_dir"
}

pl_addr() { host_addr "$1"; }
pl_ns() { host_ns "$1"; }
pl_host() { host_up "$1"; }
