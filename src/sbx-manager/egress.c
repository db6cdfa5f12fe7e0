/* Egress: one uplink per sandbox execution, NAT, DNS and the policy
 * (DESIGN section 15, docs/network.md).
 *
 * The worker (this process, root, in the worker's network namespace):
 *   - owns one nftables table "inet space_wNN" (NN: its uid window, so
 *     several workers in one namespace never share a table, an interface
 *     name or an address);
 *   - gives each execution a veth pair: "spNNSS" (SS: the record's slot)
 *     here with 10.200.0.0/14 + NN*1024 + SS*4 + 1, and "eth0" in the
 *     jail's network namespace with + 2, default route via + 1;
 *   - filters every packet from a sandbox in a chain of its own (sSS):
 *     always-denied first, then the deny list, the allow list, internet
 *     off, private ranges; answers with a reject, so a refusal is
 *     immediate;
 *   - refuses every packet from a sandbox to the worker itself (input
 *     hook) and every new connection into a sandbox (forward hook);
 *   - rewrites DNS to the gateway address to the upstream resolver
 *     (--egress-dns) and masquerades the rest to the worker's uplink.
 *
 * Locking: the uplink of a slot is set up, changed and taken down under
 * that slot's lock (a detach of a retired execution and the attach of the
 * next one that got its slot never interleave); the uplinks of different
 * slots are set up at once, their links and addresses by ip(8) in
 * parallel, and only the nft(8) transactions on the shared table one at a
 * time (nft_lock).
 *
 * Everything here runs ip(8) and nft(8) with fixed argument vectors and
 * scripts built from validated binary values (addresses, prefixes, slot
 * numbers); no byte a sandbox or a client sent reaches them. The policy
 * arrives by the strict assignment codec (msg_assign.c, netpolicy.c). */
#include <arpa/inet.h>
#include <net/if.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "egress.h"
#include "jailend.h"
#include "log.h"
#include "msg.h"
#include "netpolicy.h"
#include "sbx-manager.h"

#define EGRESS_SUPERNET  0x0ac80000u    /* 10.200.0.0/14: all workers of a machine */
#define EGRESS_SUPER_LEN 14
#define EGRESS_PER_WORKER 1024u         /* a /22 per uid window: 256 slots of a /30 (a worker
                                         * of K windows has K consecutive /22s) */
#define EXTRA_DENY_MAX   32
#define SCRIPT_MAX       (64u << 10)

static struct {
	struct mgr *m;                  /* set by egress_init; its cfg is read-only */
	bool on;
	uint32_t base;                  /* host order: this worker's /22 */
	char dns[INET_ADDRSTRLEN];      /* upstream resolver, "" = none */
	char table[32];                 /* "space_wNN" */
	char prefix[8];                 /* "spNN" */
	char ip[64], nft[64];           /* the tools, absolute */
	struct net_cidr deny[EXTRA_DENY_MAX];  /* control plane, --egress-deny */
	unsigned ndeny;
} eg;

static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t slot_lock[MGR_CAPACITY_MAX];
static pthread_once_t slot_lock_once = PTHREAD_ONCE_INIT;

static void
slot_lock_init(void)
{
	unsigned i;

	for (i = 0; i < MGR_CAPACITY_MAX; i++)
		pthread_mutex_init(&slot_lock[i], NULL);
}

/* the lock of r's slot (r->slot < the worker's slots, checked by the caller) */
static pthread_mutex_t *
lock_slot(const struct record *r)
{
	pthread_once(&slot_lock_once, slot_lock_init);
	pthread_mutex_lock(&slot_lock[r->slot]);
	return &slot_lock[r->slot];
}

static const char *const private4[] = {
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", NULL
};
/* always denied whatever the policy: this host's own nets, link-local
 * (cloud metadata at 169.254.169.254), multicast, reserved, every
 * sandbox range of the machine, and the metadata addresses that live
 * outside link-local */
static const char *const always4[] = {
	"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
	"10.200.0.0/14", "100.100.100.200/32", NULL
};

int
egress_option(const char *name, const char *arg)
{
	struct net_cidr c;

	if (strcmp(name, "egress") == 0) {
		eg.on = true;
		return 0;
	}
	if (strcmp(name, "egress-dns") == 0) {
		if (net_cidr_parse(arg, true, &c) != 0 || c.family != 4 || c.prefix != 32)
			return -EINVAL;
		inet_ntop(AF_INET, c.addr, eg.dns, sizeof(eg.dns));
		return 0;
	}
	if (strcmp(name, "egress-deny") == 0) {
		if (eg.ndeny >= EXTRA_DENY_MAX || net_cidr_parse(arg, false, &c) != 0)
			return -EINVAL;
		eg.deny[eg.ndeny++] = c;
		return 0;
	}
	return -ENOENT;
}

bool
egress_enabled(void)
{
	return eg.on;
}

/* run argv (absolute path), optionally inside the network namespace of
 * pid, with script on its stdin; 0 when it exits 0. Its stderr goes to
 * ours (the log), its stdout nowhere. */
static int run_out(pid_t netns_of, const char *script, const char *const argv[], char *out,
    size_t cap);

static int
run(pid_t netns_of, const char *script, const char *const argv[])
{
	return run_out(netns_of, script, argv, NULL, 0);
}

/* argv with stdin in0 and stdout out1 (left as it is when -1), in the
 * network namespace nsfd (when >= 0): its pid or -1. vfork: the child
 * shares our memory until its exec, so no page table of this
 * multi-threaded process is copied per ip or nft run (docs/worker.md);
 * it makes system calls only and writes nothing of ours but errno, and no
 * handler of ours can run in it (sbx-manager installs none). A function
 * of its own: no variable of the caller can be clobbered by the child. */
static pid_t __attribute__((noinline))
spawn_in(int nsfd, int in0, int out1, const char *const argv[])
{
	pid_t pid = vfork();

	if (pid != 0)
		return pid;
	if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
		_exit(126);
	if (dup2(in0, 0) < 0 || (out1 >= 0 && dup2(out1, 1) < 0))
		_exit(126);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

/* run(), with up to cap - 1 bytes of its stdout in out (NUL-terminated) */
static int
run_out(pid_t netns_of, const char *script, const char *const argv[], char *out, size_t cap)
{
	int po[2] = { -1, -1 };
	size_t got = 0;
	ssize_t rd;
	char path[64];
	int in[2] = { -1, -1 }, nsfd = -1, st, dn;
	size_t len = script ? strlen(script) : 0, off = 0;
	ssize_t w;
	pid_t pid;

	if (netns_of > 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)netns_of);
		if ((nsfd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return -errno;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || (out != NULL && pipe2(po, O_CLOEXEC) < 0)) {
		if (nsfd >= 0)
			close(nsfd);
		return -errno;
	}
	/* stdout: the pipe, or /dev/null (none if it cannot be opened) */
	dn = po[1] >= 0 ? po[1] : open("/dev/null", O_WRONLY | O_CLOEXEC);
	pid = spawn_in(nsfd, in[0], dn, argv);
	if (dn >= 0 && dn != po[1])
		close(dn);
	if (pid < 0) {
		close(in[0]);
		close(in[1]);
		if (nsfd >= 0)
			close(nsfd);
		return -errno;
	}
	close(in[0]);
	if (nsfd >= 0)
		close(nsfd);
	while (off < len) {
		w = write(in[1], script + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	close(in[1]);
	if (out != NULL) {
		close(po[1]);
		while (got + 1 < cap && ((rd = read(po[0], out + got, cap - 1 - got)) > 0 ||
		    (rd < 0 && errno == EINTR)))
			if (rd > 0)
				got += (size_t)rd;
		out[got] = '\0';
		close(po[0]);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static int
nft_script(const char *script)
{
	const char *argv[] = { eg.nft, "-f", "-", NULL };
	int rc;

	pthread_mutex_lock(&nft_lock);
	rc = run(0, script, argv);
	pthread_mutex_unlock(&nft_lock);
	return rc;
}

static void
addr4(uint32_t a, char out[INET_ADDRSTRLEN])
{
	uint32_t n = htonl(a);

	inet_ntop(AF_INET, &n, out, INET_ADDRSTRLEN);
}

static const char *
find_tool(const char *name, char *out, size_t cap)
{
	static const char *const dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin", NULL };
	int i;

	for (i = 0; dirs[i]; i++) {
		snprintf(out, cap, "%s/%s", dirs[i], name);
		if (access(out, X_OK) == 0)
			return out;
	}
	return NULL;
}

/* the addresses of the control plane's host: a sandbox never reaches it */
static void
deny_control_plane(void)
{
	char host[256];
	const char *p = strstr(eg.m->cfg.control_url, "://"), *e;
	struct addrinfo hints, *res, *ai;
	size_t n;

	if (p == NULL)
		return;
	p += 3;
	if (*p == '[') {
		p++;
		e = strchr(p, ']');
	} else
		e = p + strcspn(p, ":/");
	if (e == NULL || (n = (size_t)(e - p)) == 0 || n >= sizeof(host))
		return;
	memcpy(host, p, n);
	host[n] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0) {
		log_warnx("egress: cannot resolve the control plane host %s", host);
		return;
	}
	for (ai = res; ai != NULL && eg.ndeny < EXTRA_DENY_MAX; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET)
			continue;       /* IPv6 is refused whole */
		memset(&eg.deny[eg.ndeny], 0, sizeof(eg.deny[0]));
		eg.deny[eg.ndeny].family = 4;
		eg.deny[eg.ndeny].prefix = 32;
		memcpy(eg.deny[eg.ndeny].addr, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
		eg.ndeny++;
	}
	freeaddrinfo(res);
}

/* the first IPv4 nameserver of the worker's resolv.conf that a sandbox
 * could be sent to (not loopback: that is the worker's own) */
static void
default_dns(void)
{
	char line[512], a[64];
	struct net_cidr c;
	FILE *f = fopen("/etc/resolv.conf", "re");

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "nameserver %63s", a) != 1 || net_cidr_parse(a, true, &c) != 0 ||
		    c.family != 4 || c.addr[0] == 127)
			continue;
		inet_ntop(AF_INET, c.addr, eg.dns, sizeof(eg.dns));
		break;
	}
	fclose(f);
}

/* interfaces "spNN*" left by an earlier run: their executions are
 * re-attached (adopted) or gone */
static void
reclaim_links(void)
{
	const char *argv[] = { eg.ip, "link", "del", NULL, NULL };
	struct if_nameindex *all, *i;

	/* netlink, so the links of our network namespace */
	if ((all = if_nameindex()) == NULL)
		return;
	for (i = all; i->if_index != 0 && i->if_name != NULL; i++) {
		if (strncmp(i->if_name, eg.prefix, strlen(eg.prefix)) != 0 ||
		    strlen(i->if_name) != strlen(eg.prefix) + 2)
			continue;
		argv[3] = i->if_name;
		if (run(0, NULL, argv) == 0)
			log_info("egress: reclaimed %s", i->if_name);
	}
	if_freenameindex(all);
}

int
egress_init(struct mgr *m)
{
	char *s, b[INET_ADDRSTRLEN], c[NET_CIDR_STR_MAX];
	size_t o = 0;
	unsigned i;
	int fd, r;

	eg.m = m;
	if (!eg.on)
		return 0;
	if (find_tool("ip", eg.ip, sizeof(eg.ip)) == NULL ||
	    find_tool("nft", eg.nft, sizeof(eg.nft)) == NULL) {
		log_warnx("egress: ip(8) and nft(8) are needed (packages iproute2, nftables)");
		return -ENOENT;
	}
	/* a /22 per window in the /14: the worker's slots, over its windows */
	if (eg.m->cfg.uid_window + eg.m->cfg.uid_windows > 256)
		return -ERANGE;
	eg.base = EGRESS_SUPERNET + eg.m->cfg.uid_window * EGRESS_PER_WORKER;
	snprintf(eg.table, sizeof(eg.table), "space_w%02x", eg.m->cfg.uid_window);
	snprintf(eg.prefix, sizeof(eg.prefix), "sp%02x", eg.m->cfg.uid_window);
	if (!eg.dns[0])
		default_dns();
	deny_control_plane();
	/* forwarding on in this namespace: the sandboxes' only way out */
	if ((fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC)) < 0 ||
	    write(fd, "1\n", 2) != 2) {
		log_warn("egress: cannot enable ip_forward");
		if (fd >= 0)
			close(fd);
		return -EPERM;
	}
	close(fd);
	reclaim_links();
	if ((s = malloc(SCRIPT_MAX)) == NULL)
		return -ENOMEM;
#define P(...) (o += (size_t)snprintf(s + o, o < SCRIPT_MAX ? SCRIPT_MAX - o : 0, __VA_ARGS__))
	/* add-then-delete: one transaction that replaces whatever an earlier
	 * run left (its per-sandbox chains included) */
	P("add table inet %s\ndelete table inet %s\ntable inet %s {\n", eg.table, eg.table, eg.table);
	P(" set always4 { type ipv4_addr; flags interval; auto-merge; elements = { ");
	for (i = 0; always4[i]; i++)
		P("%s%s", i ? ", " : "", always4[i]);
	for (i = 0; i < eg.ndeny; i++) {
		if (eg.deny[i].family != 4)
			continue;
		net_cidr_format(&eg.deny[i], c);
		P(", %s", c);
	}
	P(" } }\n set private4 { type ipv4_addr; flags interval; elements = { ");
	for (i = 0; private4[i]; i++)
		P("%s%s", i ? ", " : "", private4[i]);
	P(" } }\n map egress { type ifname : verdict; }\n");
	/* answers to the worker's own connections pass; nothing a sandbox
	 * starts reaches the worker (its daemons, its addresses) */
	P(" chain input { type filter hook input priority -10; policy accept;\n"
	  "  iifname \"%s*\" ct state established,related accept\n"
	  "  iifname \"%s*\" reject with icmpx admin-prohibited\n }\n", eg.prefix, eg.prefix);
	P(" chain forward { type filter hook forward priority -10; policy accept;\n"
	  "  oifname \"%s*\" ct state established,related accept\n"
	  "  oifname \"%s*\" reject with icmpx admin-prohibited\n"
	  "  iifname \"%s*\" iifname vmap @egress\n"
	  "  iifname \"%s*\" reject with icmpx admin-prohibited\n }\n",
	  eg.prefix, eg.prefix, eg.prefix, eg.prefix);
	addr4(eg.base, b);
	P(" chain prerouting { type nat hook prerouting priority -100; policy accept;\n");
	if (eg.dns[0])
		P("  iifname \"%s*\" fib daddr type local meta l4proto { tcp, udp } th dport 53 "
		  "dnat ip to %s\n", eg.prefix, eg.dns);
	P(" }\n chain postrouting { type nat hook postrouting priority 100; policy accept;\n"
	  "  ip saddr %s/22 oifname != \"%s*\" masquerade\n }\n}\n", b, eg.prefix);
#undef P
	if (o >= SCRIPT_MAX)
		r = -E2BIG;
	else
		r = nft_script(s);
	free(s);
	if (r != 0) {
		log_warnx("egress: cannot install table inet %s", eg.table);
		return r;
	}
	log_info("egress: table inet %s, sandboxes in %s/22, dns %s", eg.table, b,
	    eg.dns[0] ? eg.dns : "none");
	return 0;
}

/* ---- policies on disk: D/net/<sandbox>.json, the worker's copy ---- */

static void
policy_path(const char *sandbox, char *out, size_t cap)
{
	snprintf(out, cap, "%s/net/%s.json", eg.m->cfg.data_dir, sandbox);
}

int
egress_policy_save(const char *sandbox, const struct netpolicy *p)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8], dir[PATH_MAX];
	json_t *j;
	int r;

	snprintf(dir, sizeof(dir), "%s/net", eg.m->cfg.data_dir);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	policy_path(sandbox, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((j = netpolicy_to_json(p)) == NULL)
		return -EINVAL;
	r = json_dump_file(j, tmp, JSON_COMPACT);
	json_decref(j);
	if (r != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

/* the saved policy, or the default (internet on, private ranges off) */
static void
policy_load(const char *sandbox, struct netpolicy *p)
{
	char path[PATH_MAX];
	json_error_t e;
	const char *why;
	json_t *j;

	policy_path(sandbox, path, sizeof(path));
	netpolicy_default(p);
	if ((j = json_load_file(path, JSON_REJECT_DUPLICATES, &e)) == NULL)
		return;
	if (netpolicy_from_json(j, p, &why) != 0) {
		log_warnx("egress: %s: %s; internet off until a new policy arrives", path, why);
		netpolicy_default(p);
		p->internet = false;
	}
	json_decref(j);
}

void
egress_policy_forget(const char *sandbox)
{
	char path[PATH_MAX];

	policy_path(sandbox, path, sizeof(path));
	unlink(path);
}

/* ---- per-sandbox chains ---- */

static void
list_set(char *s, size_t *o, const struct net_cidr *l, uint8_t n)
{
	char c[NET_CIDR_STR_MAX];
	bool first = true;
	uint8_t i;

	for (i = 0; i < n; i++) {
		if (l[i].family != 4)
			continue;       /* IPv6 is refused whole */
		net_cidr_format(&l[i], c);
		*o += (size_t)snprintf(s + *o, *o < SCRIPT_MAX ? SCRIPT_MAX - *o : 0, "%s%s",
		    first ? "" : ", ", c);
		first = false;
	}
}

static bool
has_v4(const struct net_cidr *l, uint8_t n)
{
	for (uint8_t i = 0; i < n; i++)
		if (l[i].family == 4)
			return true;
	return false;
}

/* the rules of chain sSS for policy p, after "flush chain" */
static size_t
chain_rules(char *s, uint32_t slot, const struct netpolicy *p)
{
	char g[INET_ADDRSTRLEN];
	const char *T = eg.table;
	size_t o = 0;

	addr4(eg.base + slot * 4 + 2, g);
#define P(...) (o += (size_t)snprintf(s + o, o < SCRIPT_MAX ? SCRIPT_MAX - o : 0, __VA_ARGS__))
	P("add chain inet %s s%02x\nflush chain inet %s s%02x\n", T, slot, T, slot);
	/* a sandbox speaks from its own address or not at all */
	P("add rule inet %s s%02x meta nfproto ipv6 reject with icmpx admin-prohibited\n", T, slot);
	P("add rule inet %s s%02x ip saddr != %s drop\n", T, slot, g);
	if (eg.dns[0] && (p->internet || p->nallow > 0))
		P("add rule inet %s s%02x ip daddr %s meta l4proto { tcp, udp } th dport 53 "
		  "ct status dnat accept\n", T, slot, eg.dns);
	P("add rule inet %s s%02x ip daddr @always4 reject with icmpx admin-prohibited\n", T, slot);
	if (has_v4(p->deny, p->ndeny)) {
		P("add rule inet %s s%02x ip daddr { ", T, slot);
		list_set(s, &o, p->deny, p->ndeny);
		P(" } reject with icmpx admin-prohibited\n");
	}
	if (has_v4(p->allow, p->nallow)) {
		P("add rule inet %s s%02x ip daddr { ", T, slot);
		list_set(s, &o, p->allow, p->nallow);
		P(" } accept\n");
	}
	if (!p->internet)
		P("add rule inet %s s%02x reject with icmpx admin-prohibited\n", T, slot);
	P("add rule inet %s s%02x ip daddr @private4 reject with icmpx admin-prohibited\n", T, slot);
	P("add rule inet %s s%02x accept\n", T, slot);
#undef P
	return o;
}

static void
ifname(uint32_t slot, char out[16])
{
	snprintf(out, 16, "%s%02x", eg.prefix, slot);
}

/* which execution an interface serves: its alias, set at attach */
static void
owner_tag(const struct record *r, char out[96])
{
	snprintf(out, 96, "%s.g%llu", r->id.sandbox, (unsigned long long)r->id.generation);
}

/* 1 the interface of slot exists and serves r, 0 it does not exist,
 * -1 it serves another execution (a slot reused since) */
static int
owned_by(const struct record *r)
{
	/* asked of the kernel through ip(8), in our network namespace (a
	 * sysfs mounted elsewhere would show another namespace's links) */
	char dev[16], tag[96], want[112], got[4096];
	const char *argv[] = { eg.ip, "-o", "link", "show", "dev", dev, NULL };
	const char *p;
	size_t n;

	ifname(r->slot, dev);
	if (if_nametoindex(dev) == 0 || run_out(0, NULL, argv, got, sizeof(got)) != 0)
		return 0;
	owner_tag(r, tag);
	snprintf(want, sizeof(want), " alias %s", tag);
	n = strlen(want);
	for (p = strstr(got, want); p != NULL; p = strstr(p + 1, want))
		if (p[n] == '\0' || p[n] == '\n' || p[n] == '\\' || p[n] == ' ')
			return 1;
	return -1;
}

/* the guest: the bridge monitor's child whose network namespace is not
 * ours (the serving process shares ours) */
static pid_t
guest_pid(pid_t monitor)
{
	char path[64], buf[4096], a[64], b[64];
	ssize_t n, m;
	char *p, *end;
	FILE *f;
	long v;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)monitor, (int)monitor);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	n = (ssize_t)fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if ((m = readlink("/proc/self/ns/net", a, sizeof(a) - 1)) <= 0)
		return -1;
	a[m] = '\0';
	for (p = buf; *p; p = end) {
		v = strtol(p, &end, 10);
		if (end == p)
			break;
		snprintf(path, sizeof(path), "/proc/%ld/ns/net", v);
		if ((m = readlink(path, b, sizeof(b) - 1)) <= 0)
			continue;
		b[m] = '\0';
		if (strcmp(a, b) != 0)
			return (pid_t)v;
	}
	return -1;
}

void
egress_nameserver(const struct record *r, char out[16])
{
	out[0] = '\0';
	if (eg.on && eg.dns[0] && r->slot < eg.m->cfg.uid_windows * MGR_SLOTS_MAX)
		addr4(eg.base + r->slot * 4 + 1, out);
}

pid_t
egress_guest_pid(pid_t monitor)
{
	return guest_pid(monitor);
}

static int attach_locked(const struct record *r, pid_t guest);

int
egress_attach(const struct record *r)
{
	pthread_mutex_t *l;
	pid_t guest;
	int rc;

	if (!eg.on)
		return 0;
	/* a jail not started by this bridge (a claimed prepared one) is
	 * found by its guest listening on jail.sock */
	if ((guest = guest_pid(r->bridge_pid)) <= 0)
		guest = jail_guest(r->run_dir);
	if (r->slot >= eg.m->cfg.uid_windows * MGR_SLOTS_MAX || guest <= 0) {
		log_warnx("egress: %s: no guest to attach", r->id.sandbox);
		return -ESRCH;
	}
	l = lock_slot(r);
	rc = attach_locked(r, guest);
	pthread_mutex_unlock(l);
	return rc;
}

static int
attach_locked(const struct record *r, pid_t guest)
{
	char dev[16], h[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN], pidstr[16], hcidr[32], inner[256];
	char tag[96];
	const char *del[] = { eg.ip, "link", "del", dev, NULL };
	const char *batch[] = { eg.ip, "-batch", "-", NULL };
	char outer[512];
	struct netpolicy p;
	char *s;
	size_t o;
	int rc;

	ifname(r->slot, dev);
	/* a relaunch (new activation) of an execution whose uplink is
	 * there: the namespace was kept (netns.c), and so are the uplink,
	 * its addresses, rules and the connections through them */
	if (owned_by(r) == 1) {
		log_info("egress: %s g%llu a%u: uplink %s kept", r->id.sandbox,
		    (unsigned long long)r->id.generation, r->id.activation, dev);
		return 0;
	}
	owner_tag(r, tag);
	addr4(eg.base + r->slot * 4 + 1, h);
	addr4(eg.base + r->slot * 4 + 2, g);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)guest);
	snprintf(hcidr, sizeof(hcidr), "%s/30", h);
	snprintf(inner, sizeof(inner), "addr add %s/30 dev eth0\nlink set eth0 up\n"
	    "route add default via %s\n", g, h);
	/* an earlier activation's, if any: asked of our network namespace
	 * (an ioctl on a socket of it), no process when there is none */
	if (if_nametoindex(dev) != 0 || errno != ENODEV)
		(void)run(0, NULL, del);
	/* the host side in one process: link, address, up (ip -batch stops
	 * at the first command that fails and exits non-zero) */
	snprintf(outer, sizeof(outer), "link add %s type veth peer name eth0 netns %s\n"
	    "addr add %s dev %s\nlink set dev %s up alias %s\n", dev, pidstr, hcidr, dev, dev, tag);
	if ((rc = run(0, outer, batch)) != 0 || (rc = run(guest, inner, batch)) != 0) {
		log_warnx("egress: %s: cannot set up %s", r->id.sandbox, dev);
		(void)run(0, NULL, del);
		return rc;
	}
	policy_load(r->id.sandbox, &p);
	if ((s = malloc(SCRIPT_MAX)) == NULL)
		return -ENOMEM;
	o = chain_rules(s, r->slot, &p);
	o += (size_t)snprintf(s + o, o < SCRIPT_MAX ? SCRIPT_MAX - o : 0,
	    "add element inet %s egress { \"%s\" : jump s%02x }\n", eg.table, dev, r->slot);
	rc = o < SCRIPT_MAX ? nft_script(s) : -E2BIG;
	free(s);
	if (rc != 0) {
		log_warnx("egress: %s: cannot install its rules", r->id.sandbox);
		(void)run(0, NULL, del);
		return rc;
	}
	log_info("egress: %s g%llu on %s (%s), internet %s, %u allowed, %u denied",
	    r->id.sandbox, (unsigned long long)r->id.generation, dev, g,
	    p.internet ? "on" : "off", p.nallow, p.ndeny);
	return 0;
}

static void detach_locked(const struct record *r);

void
egress_detach(const struct record *r)
{
	pthread_mutex_t *l;

	if (!eg.on || r->slot >= eg.m->cfg.uid_windows * MGR_SLOTS_MAX)
		return;
	l = lock_slot(r);
	detach_locked(r);
	pthread_mutex_unlock(l);
}

static void
detach_locked(const struct record *r)
{
	char dev[16], *s;
	const char *del[] = { eg.ip, "link", "del", dev, NULL };
	size_t o = 0;

	/* the slot went to another execution since: nothing here is ours */
	if (owned_by(r) < 0)
		return;
	ifname(r->slot, dev);
	if ((s = malloc(4096)) == NULL)
		return;
	/* the element first (it jumps to the chain), then the chain: one
	 * transaction, so no packet sees half of it. Each is created first
	 * so that a detach of what was never attached is not an error. */
	o += (size_t)snprintf(s + o, 4096 - o,
	    "add chain inet %s s%02x\n"
	    "add element inet %s egress { \"%s\" : jump s%02x }\n"
	    "delete element inet %s egress { \"%s\" }\n"
	    "delete chain inet %s s%02x\n",
	    eg.table, r->slot, eg.table, dev, r->slot, eg.table, dev, eg.table, r->slot);
	if (nft_script(s) != 0)
		log_warnx("egress: %s: cannot remove chain s%02x", r->id.sandbox, r->slot);
	free(s);
	(void)run(0, NULL, del);
}

int
egress_apply(const struct record *r, const struct netpolicy *p)
{
	char *s;
	size_t o;
	int rc;

	pthread_mutex_t *l;

	if (!eg.on)
		return 0;
	if (r->slot >= eg.m->cfg.uid_windows * MGR_SLOTS_MAX)
		return -ENOENT;
	l = lock_slot(r);
	/* only the uplink of this execution (the policy file already holds
	 * the new policy for its next attach) */
	if (owned_by(r) != 1) {
		pthread_mutex_unlock(l);
		return -ENOENT;
	}
	if ((s = malloc(SCRIPT_MAX)) == NULL) {
		pthread_mutex_unlock(l);
		return -ENOMEM;
	}
	/* flush and refill in one nft transaction: the new policy applies
	 * from the next packet, to established flows too (no rule here
	 * accepts by connection state) */
	o = chain_rules(s, r->slot, p);
	rc = o < SCRIPT_MAX ? nft_script(s) : -E2BIG;
	free(s);
	pthread_mutex_unlock(l);
	if (rc == 0)
		log_info("egress: %s policy applied: internet %s, %u allowed, %u denied",
		    r->id.sandbox, p->internet ? "on" : "off", p->nallow, p->ndeny);
	return rc;
}

/* a 'network' assignment: the policy of the named execution changes.
 * Saved first (a relaunch or restart attaches with it), then applied to
 * the live uplink. One for an older generation is stale and ignored. */
void
egress_assignment(const struct msg_assignment *a)
{
	struct record r;

	if (records_get(eg.m, a->id.sandbox, &r) != 0 || r.id.generation != a->id.generation ||
	    strcmp(r.id.worker, a->id.worker) != 0 || strcmp(r.id.resident, a->id.resident) != 0 ||
	    (r.state != EXEC_SERVING && r.state != EXEC_STARTING)) {
		log_info("egress: policy for %s g%llu: no such execution here, ignored",
		    a->id.sandbox, (unsigned long long)a->id.generation);
		return;
	}
	if (egress_policy_save(r.id.sandbox, &a->network) != 0) {
		log_warnx("egress: %s: cannot save its policy", r.id.sandbox);
		return;
	}
	if (r.state == EXEC_SERVING && eg.on && egress_apply(&r, &a->network) != 0)
		log_warnx("egress: %s: cannot apply its policy", r.id.sandbox);
}
