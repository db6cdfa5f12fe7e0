/* The signer process: the only process of space-control that holds private
 * keys (docs/architecture.md). The HTTP process, which parses untrusted
 * requests, starts it by re-executing itself ("space-control signer") with
 * one end of a SOCK_SEQPACKET socketpair on fd 3, and asks it to sign
 * capabilities and key bundles (sigmsg.h). A memory disclosure in the HTTP
 * process thus never reveals a key; a compromised HTTP process can have
 * tokens signed, but only well-formed ones for keys this process holds:
 *   - a capability's claims are decoded as every receiver decodes them,
 *     with the issuer's rules (fixed lifetime, audience of the purpose)
 *     and an iat within the clock skew of our own clock;
 *   - a bundle may list only the public keys of signing keys held here,
 *     so no foreign key can ever be published under the root key.
 * Keys are loaded from D/keys at start (a file with a wrong mode or owner
 * is refused there, and the daemon does not start) and the directory is
 * watched: a key added by `keys rotate` is loaded within a second, or at
 * once when a request names it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>
#include <sodium.h>

#include "control.h"
#include "log.h"
#include "paseto.h"
#include "sigmsg.h"
#include "util.h"

struct signer {
	int     fd;
	char    keydir[PATH_MAX];
	struct signing_key root;
	struct signing_key *keys;
	size_t  n;
	struct timespec dir_mtime;
	/* a file refused while running is reported once, not every second */
	char    refused[PATH_MAX];
};

/* the keys live in sodium_malloc'd pages: guarded, kept out of swap */
static void
keys_drop(struct signer *s)
{
	if (s->keys) {
		sodium_memzero(s->keys, s->n * sizeof(*s->keys));
		sodium_free(s->keys);
	}
	s->keys = NULL;
	s->n = 0;
}

static const char *
load_error(int rc)
{
	if (rc == -EACCES)
		return "readable by group or others, or not owned by this user (want mode 0600)";
	if (rc == -EINVAL)
		return "not a key file";
	return strerror(-rc);
}

/* (re)load every D/keys/<id>.key but the root key. At start a bad file is
 * fatal: the operator sees why at once instead of a daemon that cannot sign
 * with a key the store names. */
static int
keys_scan(struct signer *s, bool at_start)
{
	struct signing_key *keys = NULL;
	struct stat st;
	struct dirent *de;
	size_t n = 0, cap = 0;
	DIR *d;
	int rc = 0;

	if (stat(s->keydir, &st) == 0)
		s->dir_mtime = st.st_mtim;
	if ((d = opendir(s->keydir)) == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX], want[PATH_MAX];
		size_t len = strlen(de->d_name);
		struct signing_key k;

		if (de->d_name[0] == '.' || len < 5 || strcmp(de->d_name + len - 4, ".key") != 0 ||
		    strcmp(de->d_name, "root.key") == 0)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", s->keydir, de->d_name) >=
		    sizeof(path))
			continue;
		if ((rc = signing_key_load(path, &k)) == 0) {
			/* the file name is the key's id: a file renamed onto another
			 * id would make the store and the keys disagree */
			snprintf(want, sizeof(want), "%s.key", k.kid + strlen("k4.pid."));
			if (strcmp(want, de->d_name) != 0)
				rc = -EINVAL;
		}
		if (rc < 0) {
			signing_key_wipe(&k);
			if (at_start) {
				log_warnx("signer: signing key %s: %s", path, load_error(rc));
				break;
			}
			if (strcmp(s->refused, path) != 0)
				log_warnx("signer: signing key %s refused: %s", path, load_error(rc));
			snprintf(s->refused, sizeof(s->refused), "%s", path);
			rc = 0;
			continue;
		}
		if (n == cap) {
			struct signing_key *nk;

			if (n >= SPACE_SIGNER_KEYS_MAX) {
				signing_key_wipe(&k);
				log_warnx("signer: more than %d signing keys in %s; the rest ignored",
				    SPACE_SIGNER_KEYS_MAX, s->keydir);
				break;
			}
			cap = cap ? cap * 2 : 8;
			if ((nk = sodium_allocarray(cap, sizeof(*nk))) == NULL) {
				signing_key_wipe(&k);
				rc = -ENOMEM;
				break;
			}
			if (n)
				memcpy(nk, keys, n * sizeof(*nk));
			if (keys) {
				sodium_memzero(keys, n * sizeof(*keys));
				sodium_free(keys);
			}
			keys = nk;
		}
		keys[n++] = k;
		sodium_memzero(&k, sizeof(k));
	}
	closedir(d);
	if (rc < 0) {
		if (keys) {
			sodium_memzero(keys, n * sizeof(*keys));
			sodium_free(keys);
		}
		return rc;
	}
	keys_drop(s);
	s->keys = keys;
	s->n = n;
	return 0;
}

static void
maybe_rescan(struct signer *s)
{
	struct stat st;

	/* keys are written to a temporary and renamed: the directory's mtime
	 * moves with every new key */
	if (stat(s->keydir, &st) == 0 && (st.st_mtim.tv_sec != s->dir_mtime.tv_sec ||
	    st.st_mtim.tv_nsec != s->dir_mtime.tv_nsec))
		(void)keys_scan(s, false);
}

static const struct signing_key *
find_by(struct signer *s, const char *kid, const uint8_t *pk)
{
	size_t i, pass;

	/* a key named before we saw its file: look once more */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < s->n; i++)
			if ((kid && strcmp(s->keys[i].kid, kid) == 0) ||
			    (pk && sodium_memcmp(s->keys[i].pk, pk, 32) == 0))
				return &s->keys[i];
		if (pass == 0)
			(void)keys_scan(s, false);
	}
	return NULL;
}

static int
send_msg(struct signer *s, uint8_t *m, size_t len)
{
	ssize_t w;

	if (m == NULL)
		return -ENOMEM;
	w = send(s->fd, m, len, MSG_NOSIGNAL);
	free(m);
	return w == (ssize_t)len ? 0 : -EIO;
}

static int
reply_error(struct signer *s, int err, const char *reason)
{
	uint8_t *m = NULL;
	size_t len;

	log_warnx("signer: refused: %s", reason);
	(void)sigmsg_encode_error(err, reason, &m, &len);
	return send_msg(s, m, len);
}

static int
reply_token(struct signer *s, char *tok)
{
	uint8_t *m = NULL;
	size_t len;
	int rc = sigmsg_encode(SIG_TOKEN, tok, strlen(tok), &m, &len);

	free(tok);
	if (rc < 0)
		return reply_error(s, -rc, "token too large");
	return send_msg(s, m, len);
}

static int
sign_cap(struct signer *s, const struct sig_request *q)
{
	const struct signing_key *k;
	char *claims = NULL, *tok = NULL, footer[16 + PASERK_K4_PID_LEN];
	int64_t now = now_unix();
	int rc;

	/* an iat away from now would let a caller mint tokens valid later
	 * (or already expired ones that slip past a receiver's skew) */
	if (q->cap.iat < now - SPACE_CLOCK_SKEW || q->cap.iat > now + SPACE_CLOCK_SKEW)
		return reply_error(s, ERANGE, "iat is not now");
	if ((k = find_by(s, q->kid, NULL)) == NULL)
		return reply_error(s, ENOKEY, "no such signing key");
	/* sign our own encoding of the decoded claims, never the caller's bytes */
	if ((rc = claims_encode(&q->cap, &claims)) < 0)
		return reply_error(s, -rc, "claims do not encode");
	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", k->kid);
	rc = paseto_v4_sign(k->sk, claims, strlen(claims), footer, CAPABILITY_IMPLICIT, &tok);
	free(claims);
	if (rc < 0)
		return reply_error(s, -rc, "signing failed");
	return reply_token(s, tok);
}

static int
sign_bundle(struct signer *s, const struct sig_request *q)
{
	char *tok = NULL;
	size_t i;
	int rc;

	for (i = 0; i < q->bundle.n; i++)
		if (find_by(s, NULL, q->bundle.keys[i].pk) == NULL)
			return reply_error(s, ENOKEY, "bundle lists a key this signer does not hold");
	if ((rc = bundle_sign(&q->bundle, &s->root, &tok)) < 0)
		return reply_error(s, -rc, "signing failed");
	return reply_token(s, tok);
}

static int
new_key(struct signer *s)
{
	struct signing_key k;
	char path[PATH_MAX];
	uint8_t *m = NULL;
	size_t len;
	int rc;

	if ((rc = signing_key_generate(&k)) < 0)
		return reply_error(s, -rc, "key generation failed");
	if ((size_t)snprintf(path, sizeof(path), "%s/%s.key", s->keydir,
	    k.kid + strlen("k4.pid.")) >= sizeof(path))
		rc = -ENAMETOOLONG;
	else
		rc = signing_key_save(path, &k);
	if (rc == 0)
		rc = keys_scan(s, false);
	if (rc == 0 && find_by(s, k.kid, NULL) == NULL)
		rc = -ENOSPC;
	if (rc < 0) {
		signing_key_wipe(&k);
		return reply_error(s, -rc, "cannot store the new key");
	}
	log_info("signer: generated signing key %s", k.kid);
	rc = sigmsg_encode(SIG_KEY, k.pk, sizeof(k.pk), &m, &len);
	signing_key_wipe(&k);
	return rc < 0 ? rc : send_msg(s, m, len);
}

/* root key: loaded, or made on the first start, under the directory lock
 * that the subcommands take too */
static int
root_load(struct signer *s)
{
	char path[PATH_MAX];
	int fd, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/root.key", s->keydir) >= sizeof(path))
		return -ENAMETOOLONG;
	if ((fd = keydir_lock(s->keydir)) < 0)
		return fd;
	if (access(path, F_OK) == 0) {
		if ((rc = signing_key_load(path, &s->root)) < 0)
			log_warnx("signer: root key %s: %s", path, load_error(rc));
	} else if ((rc = signing_key_generate(&s->root)) == 0 &&
	    (rc = signing_key_save(path, &s->root)) == 0) {
		log_info("signer: generated root key %s", s->root.kid);
	}
	close(fd);
	return rc;
}

static int
serve(struct signer *s)
{
	uint8_t *buf;
	int rc = 0;

	if ((buf = malloc(SIGMSG_MAX + 1)) == NULL)
		return -ENOMEM;
	for (;;) {
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		struct sig_request q;
		const char *why;
		ssize_t n;

		rc = poll(&p, 1, 1000);
		if (rc < 0 && errno == EINTR)
			continue;
		maybe_rescan(s);
		if (rc == 0)
			continue;
		n = recv(s->fd, buf, SIGMSG_MAX + 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n == 0 ? 0 : -errno;     /* the HTTP process is gone */
			break;
		}
		rc = sigmsg_decode_request(buf, (size_t)n, &q, &why);
		if (rc == -EINVAL) {
			rc = reply_error(s, EINVAL, why);
		} else if (rc < 0) {
			/* a frame we cannot read means the peer does not speak our
			 * protocol: stop talking to it */
			log_warnx("signer: %s; closing", why ? why : "bad frame");
			break;
		} else if (q.type == SIG_SIGN_CAP) {
			rc = sign_cap(s, &q);
		} else if (q.type == SIG_SIGN_BUNDLE) {
			rc = sign_bundle(s, &q);
		} else {
			rc = new_key(s);
		}
		sodium_memzero(&q, sizeof(q));
		if (rc < 0)
			break;
	}
	free(buf);
	return rc;
}

int
signer_main(int fd, const char *data_dir)
{
	struct signer s;
	struct stat st;
	uint8_t *m = NULL;
	size_t len;
	int type = 0, rc;
	socklen_t tl = sizeof(type);

	memset(&s, 0, sizeof(s));
	/* only a socketpair end on fd 3 makes this the signer; run by hand,
	 * it says so instead of waiting on a terminal */
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET) {
		fprintf(stderr, "space-control: signer is started by space-control itself\n");
		return 2;
	}
	s.fd = fd;
	/* another process of our user (the HTTP process among them) may not
	 * ptrace us or read our memory; we die with the process that made us */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() == 1)
		return 1;
	if ((size_t)snprintf(s.keydir, sizeof(s.keydir), "%s/keys", data_dir) >= sizeof(s.keydir))
		return 1;
	if ((rc = mkdir_p(s.keydir, 0700)) < 0 || chmod(s.keydir, 0700) < 0) {
		log_warnx("signer: %s: %s", s.keydir, strerror(rc < 0 ? -rc : errno));
		return 1;
	}
	if ((rc = root_load(&s)) < 0 || (rc = keys_scan(&s, true)) < 0) {
		signing_key_wipe(&s.root);
		keys_drop(&s);
		return 1;
	}
	if (sigmsg_encode(SIG_HELLO, s.root.pk, sizeof(s.root.pk), &m, &len) == 0 &&
	    send_msg(&s, m, len) == 0)
		rc = serve(&s);
	signing_key_wipe(&s.root);
	keys_drop(&s);
	return rc < 0 ? 1 : 0;
}
