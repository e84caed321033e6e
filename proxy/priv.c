/*
 * priv.c: the firewall helper process, the log signer process and the
 * proxy's privilege drop (priv.h).  Capabilities through the raw capget/capset system calls:
 * the three sets sluiced needs do not justify a libcap dependency.
 */
#include "sluice-config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#include "proxy/lib/log.h"
#include "proxy/lib/util.h"
#include "proxy/priv.h"
#include "proxy/signer.h"
#include "proxy/lib/tlsca.h"
#include "firewall/fwmsg.h"

#include <openssl/crypto.h>
#include <openssl/pem.h>

int
priv_user_lookup(const char *name, struct priv_user *u, char *err,
    size_t errlen)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwnam(name);
	if (pw == NULL) {
		snprintf(err, errlen, "user \"%s\" does not exist%s%s", name,
		    errno ? ": " : "", errno ? strerror(errno) : "");
		return -1;
	}
	if (pw->pw_uid == 0) {
		snprintf(err, errlen, "user \"%s\" has uid 0", name);
		return -1;
	}
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Capabilities */

static int
cap_last(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r");
	int n = CAP_LAST_CAP;

	if (f != NULL) {
		if (fscanf(f, "%d", &n) != 1 || n < 0 || n > 63)
			n = CAP_LAST_CAP;
		fclose(f);
	}
	return n;
}

static int
caps_get(uint64_t *eff, uint64_t *perm, uint64_t *inh)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) != 0)
		return -1;
	*eff = (uint64_t)d[1].effective << 32 | d[0].effective;
	*perm = (uint64_t)d[1].permitted << 32 | d[0].permitted;
	*inh = (uint64_t)d[1].inheritable << 32 | d[0].inheritable;
	return 0;
}

static int
caps_set(uint64_t eff, uint64_t perm)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	d[0].effective = (uint32_t)eff;
	d[1].effective = (uint32_t)(eff >> 32);
	d[0].permitted = (uint32_t)perm;
	d[1].permitted = (uint32_t)(perm >> 32);
	return (int)syscall(SYS_capset, &h, d);
}

/*
 * Leave this process with the capabilities in keep alone (less if it
 * does not hold them), in every set, bounding included; with u, as u
 * (groups: the user's with all_groups, none otherwise); then
 * no_new_privs.  Started as another user than root, the bounding set
 * may be out of reach (no CAP_SETPCAP): no_new_privs covers that.
 */
/* u's groups (initgroups) and the nextra of extra besides. */
static int
user_groups(const struct priv_user *u, const gid_t *extra, size_t nextra)
{
	gid_t g[NGROUPS_MAX + 1];
	int n;
	size_t i;

	if (initgroups(u->name, u->gid) != 0)
		return -1;
	if (nextra == 0)
		return 0;
	if ((n = getgroups(NGROUPS_MAX, g)) < 0)
		return -1;
	for (i = 0; i < nextra && n < NGROUPS_MAX; i++)
		g[n++] = extra[i];
	return setgroups((size_t)n, g);
}

static int
caps_limit(uint64_t keep, const struct priv_user *u, int all_groups,
    const gid_t *extra, size_t nextra, char *err, size_t errlen)
{
	uint64_t eff, perm, inh;
	int c, last = cap_last(), root = geteuid() == 0;

	for (c = 0; c <= last; c++) {
		if (keep & (UINT64_C(1) << c))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL &&
		    (root || errno != EPERM)) {
			snprintf(err, errlen, "bounding set: drop %d: %s", c,
			    strerror(errno));
			return -1;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 &&
	    errno != EINVAL) {
		snprintf(err, errlen, "ambient set: %s", strerror(errno));
		return -1;
	}
	if (u != NULL) {
		if (keep != 0 && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) {
			snprintf(err, errlen, "keepcaps: %s", strerror(errno));
			return -1;
		}
		if ((all_groups ? user_groups(u, extra, nextra) :
		    setgroups(0, NULL)) != 0) {
			snprintf(err, errlen, "groups of %s: %s", u->name,
			    strerror(errno));
			return -1;
		}
		if (setresgid(u->gid, u->gid, u->gid) != 0 ||
		    setresuid(u->uid, u->uid, u->uid) != 0) {
			snprintf(err, errlen, "setting uid %u, gid %u: %s",
			    (unsigned)u->uid, (unsigned)u->gid,
			    strerror(errno));
			return -1;
		}
		if (keep != 0)
			prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	}
	/* inheritable goes with the rest: caps_set leaves it zero */
	if (caps_get(&eff, &perm, &inh) != 0 ||
	    caps_set(perm & keep, perm & keep) != 0) {
		snprintf(err, errlen, "capset: %s", strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	/* check rather than trust: nothing beyond keep, root for good */
	if (caps_get(&eff, &perm, &inh) != 0 || (perm & ~keep) != 0 ||
	    (eff & ~keep) != 0 || inh != 0) {
		snprintf(err, errlen, "capabilities still held after the "
		    "drop");
		return -1;
	}
	if (u != NULL && (setuid(0) == 0 || geteuid() == 0 || getuid() == 0)) {
		snprintf(err, errlen, "root regained after the drop");
		return -1;
	}
	return 0;
}

int
priv_drop(const struct priv_user *u, const gid_t *extra, size_t nextra,
    char *err, size_t errlen)
{
	return caps_limit(0, u, 1, extra, nextra, err, errlen);
}

/* ------------------------------------------------------------------ */
/* The firewall helper */

static void
helper_log(int prio, const char *msg)
{
	px_log(prio, "firewall helper: %s", msg);
}

/* Every descriptor but 0, 1, 2 and keep: the helper holds no listener,
 * log or lock of the proxy's. */
static int
close_others(int keep)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int fds[256], n = 0, i, more = 1;

	if (d == NULL)
		return -1;
	/* closing while reading the directory is not safe: in rounds */
	while (more) {
		more = 0;
		n = 0;
		rewinddir(d);
		while ((e = readdir(d)) != NULL) {
			char *end;
			long fd = strtol(e->d_name, &end, 10);

			if (*end != '\0' || e->d_name[0] == '\0' || fd < 3 ||
			    fd == keep || fd == dirfd(d))
				continue;
			if (n == (int)(sizeof(fds) / sizeof(fds[0]))) {
				more = 1;
				break;
			}
			fds[n++] = (int)fd;
		}
		for (i = 0; i < n; i++)
			close(fds[i]);
	}
	closedir(d);
	return 0;
}

static const struct fw_helper_ops helper_ops = {
	fw_apply, fw_verify, fw_remove, fw_table_exists, helper_log, fw_update
};

/*
 * In a helper, once what it needs as root is done: only fd stays open,
 * it becomes u keeping the capabilities in keep, and (a change of uid
 * makes a process dumpable again) nothing may attach.  0, or -1 with
 * err.
 */
static int
helper_confine(int fd, uint64_t keep, const struct priv_user *u,
    char *err, size_t errlen)
{
	if (close_others(fd) != 0) {
		snprintf(err, errlen, "cannot close descriptors");
		return -1;
	}
	if (caps_limit(keep, u, 0, NULL, 0, err, errlen) != 0)
		return -1;
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	return 0;
}

/* What the firewall helper is started with. */
struct fw_helper_args {
	const char *table;
	const struct priv_user *u;
};

static void
helper_main(int fd, const void *arg)
{
	const struct fw_helper_args *a = arg;
	char err[256];
	int rc;

	/* the proxy's signals are the proxy's: the helper ends when its
	 * socket does (SIGTERM still ends it at once) */
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "sluiced-fw", 0, 0, 0);
	if (helper_confine(fd, UINT64_C(1) << CAP_NET_ADMIN, a->u, err,
	    sizeof(err)) != 0) {
		px_log(PX_ERR, "firewall helper: %s", err);
		_exit(1);
	}
	rc = fw_helper_run(fd, a->table, &helper_ops);
	px_log(PX_DEBUG, "firewall helper: the proxy closed its socket; "
	    "exiting, the table stays");
	_exit(rc == 0 ? 0 : 1);
}

/*
 * Fork a helper joined to the proxy by a socket pair: the child runs
 * child(its end, arg), which never returns; the proxy gets its own end,
 * or -1 with err.  All three helpers start this way.
 */
static int
helper_fork(void (*child)(int fd, const void *arg), const void *arg,
    pid_t *pid, char *err, size_t errlen)
{
	int sv[2];
	pid_t p;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(stderr);
	p = fork();
	if (p < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (p == 0) {
		close(sv[0]);
		child(sv[1], arg);
		_exit(1);
	}
	close(sv[1]);
	*pid = p;
	return sv[0];
}

/*
 * A helper's first word on its socket: 'R' (ready, maybe with more) or
 * 'E' and why not.  Waits up to 10 s; the length read, or -1.
 */
static ssize_t
helper_first_word(int fd, char *msg, size_t size)
{
	return util_wait_readable(fd, 10000) > 0 ? recv(fd, msg, size, 0) :
	    -1;
}

/* A helper that did not start: close its socket and reap it. */
static void
helper_abandon(int fd, pid_t *pid)
{
	close(fd);
	priv_helper_reap(*pid, 1000);
	*pid = -1;
}

/*
 * In a helper holding a key: nothing may attach, and the proxy's
 * signals are not its own (it ends when the proxy's socket does).
 */
static void
helper_key_holder(const char *name)
{
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, name, 0, 0, 0);
}

int
priv_helper_spawn(const char *start_table, const struct priv_user *u,
    pid_t *pid, char *err, size_t errlen)
{
	struct fw_helper_args a = { start_table, u };

	return helper_fork(helper_main, &a, pid, err, errlen);
}

/* ------------------------------------------------------------------ */
/* The log signer */

/* Tell the proxy how the start went: 'R', or 'E' and why. */
static void
signer_say(int fd, const char *err)
{
	char msg[512];
	size_t n = 1;

	msg[0] = err ? 'E' : 'R';
	if (err != NULL)
		n += (size_t)snprintf(msg + 1, sizeof(msg) - 1, "%s", err);
	if (n > sizeof(msg))
		n = sizeof(msg);
	if (send(fd, msg, n, MSG_NOSIGNAL) < 0)
		px_log(PX_ERR, "log signer: %s", err ? err : "cannot say ready");
}

/* What the log signer is started with. */
struct signer_args {
	const char *key_file;
	const struct priv_user *u;
	uint64_t seq;
	const char *hash;
};

static void
signer_main(int fd, const void *arg)
{
	const struct signer_args *a = arg;
	static unsigned char key[SIGNER_KEY_MAX];
	size_t keylen = 0;
	char err[512] = "";
	int rc;

	/* it stays to write the stop record */
	helper_key_holder("sluiced-sign");
	/* read while still the user sluiced started as (root): the key is
	 * not the proxy's user's to read */
	if (signer_load_key(a->key_file, key, &keylen, err, sizeof(err)) != 0)
		goto fail;
	if (helper_confine(fd, 0, a->u, err, sizeof(err)) != 0)
		goto fail;
	signer_say(fd, NULL);
	rc = signer_serve(fd, key, keylen, a->seq, a->hash);
	OPENSSL_cleanse(key, sizeof(key));
	_exit(rc == 0 ? 0 : 1);
fail:
	OPENSSL_cleanse(key, sizeof(key));
	signer_say(fd, err);
	_exit(1);
}

int
priv_signer_spawn(const char *key_file, const struct priv_user *u,
    uint64_t seq, const char *hash, pid_t *pid, char *err, size_t errlen)
{
	struct signer_args a = { key_file, u, seq, hash };
	char msg[513];
	ssize_t n;
	int fd;

	if ((fd = helper_fork(signer_main, &a, pid, err, errlen)) < 0)
		return -1;
	n = helper_first_word(fd, msg, sizeof(msg) - 1);
	if (n >= 1 && msg[0] == 'R')
		return fd;
	if (n > 1 && msg[0] == 'E') {
		msg[n] = '\0';
		snprintf(err, errlen, "%s", msg + 1);
	} else
		snprintf(err, errlen, "the log signer did not start");
	helper_abandon(fd, pid);
	return -1;
}

/* ------------------------------------------------------------------ */
/* The inspection CA helper */

static void
ca_say(int fd, char kind, const char *text)
{
	static char msg[TLSCA_MSG_MAX];
	size_t n = strlen(text);

	if (n > sizeof(msg) - 1)
		n = sizeof(msg) - 1;
	msg[0] = kind;
	memcpy(msg + 1, text, n);
	if (send(fd, msg, n + 1, MSG_NOSIGNAL) < 0)
		px_log(PX_ERR, "inspection CA: cannot say %s",
		    kind == 'R' ? "ready" : "why not");
}

/* What the inspection CA helper is started with. */
struct ca_args {
	const char *cert_path, *key_path;
	char *const *hosts;
	size_t nhosts;
	int days;
	const struct priv_user *u;
};

static void
ca_main(int fd, const void *arg)
{
	const struct ca_args *a = arg;
	struct pol_hostset *hs = pol_hostset_new();
	char err[512] = "", *pem = NULL;
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	BIO *b = NULL;
	size_t i;
	long n;
	int made, rc;

	helper_key_holder("sluiced-ca");
	if (hs == NULL) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	for (i = 0; i < a->nhosts; i++)
		if (pol_hostset_add(hs, a->hosts[i]) != 0) {
			snprintf(err, sizeof(err), "inspect.hosts: bad %s",
			    a->hosts[i]);
			goto fail;
		}
	/* as root: the key is not the proxy's user's to read */
	if (tlsca_ensure(a->cert_path, a->key_path, &cert, &key, &made, err,
	    sizeof(err)) != 0)
		goto fail;
	if (made)
		px_log(PX_INFO, "inspection CA made: %s (key %s); sandboxes "
		    "trust it through sluiced --print-inspect-ca", a->cert_path,
		    a->key_path);
	if (helper_confine(fd, 0, a->u, err, sizeof(err)) != 0)
		goto fail;
	if ((b = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_X509(b, cert) != 1 ||
	    (n = BIO_get_mem_data(b, &pem)) <= 0 ||
	    (size_t)n >= TLSCA_MSG_MAX - 1) {
		snprintf(err, sizeof(err), "cannot encode the CA certificate");
		goto fail;
	}
	{
		char ready[TLSCA_MSG_MAX];

		memcpy(ready, pem, (size_t)n);
		ready[n] = '\0';
		ca_say(fd, 'R', ready);
	}
	BIO_free(b);
	rc = tlsca_serve(fd, cert, key, hs, a->days);
	EVP_PKEY_free(key);
	_exit(rc == 0 ? 0 : 1);
fail:
	BIO_free(b);
	EVP_PKEY_free(key);
	ca_say(fd, 'E', err);
	_exit(1);
}

int
priv_ca_spawn(const char *cert_path, const char *key_path,
    char *const *hosts, size_t nhosts, int leaf_days,
    const struct priv_user *u, pid_t *pid, char **pem, char *err,
    size_t errlen)
{
	struct ca_args a = { cert_path, key_path, hosts, nhosts, leaf_days,
	    u };
	static char msg[TLSCA_MSG_MAX + 1];
	ssize_t n;
	int fd;

	*pem = NULL;
	if ((fd = helper_fork(ca_main, &a, pid, err, errlen)) < 0)
		return -1;
	n = helper_first_word(fd, msg, sizeof(msg) - 1);
	if (n > 1 && msg[0] == 'R') {
		msg[n] = '\0';
		if ((*pem = strdup(msg + 1)) != NULL)
			return fd;
		snprintf(err, errlen, "out of memory");
	} else if (n > 1 && msg[0] == 'E') {
		msg[n] = '\0';
		snprintf(err, errlen, "%s", msg + 1);
	} else
		snprintf(err, errlen, "the inspection CA helper did not "
		    "start");
	helper_abandon(fd, pid);
	return -1;
}

void
priv_helper_reap(pid_t pid, int ms)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int i, st;

	if (pid <= 0)
		return;
	for (i = 0; i <= ms / 10; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR))
			return;
		nanosleep(&ts, NULL);
	}
	px_log(PX_WARN, "firewall helper (pid %ld) still running",
	    (long)pid);
}

/* ------------------------------------------------------------------ */
/* Files */

int
priv_mkdir(const char *dir, mode_t mode, const struct priv_user *u,
    char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	char *p;

	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", dir);
		return -1;
	}
	for (p = tmp + 1; ; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) == 0) {
			if (u != NULL && chown(tmp, u->uid, u->gid) != 0) {
				snprintf(err, errlen, "chown %s: %s", tmp,
				    strerror(errno));
				return -1;
			}
		} else if (errno != EEXIST) {
			snprintf(err, errlen, "mkdir %s: %s", tmp,
			    strerror(errno));
			return -1;
		}
		*p = c;
		if (c == '\0' || p[1] == '\0')
			break;
	}
	return 0;
}

static const struct priv_user *give_to;

static int
give_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)flag;
	(void)f;
	if ((st->st_uid != give_to->uid || st->st_gid != give_to->gid) &&
	    lchown(path, give_to->uid, give_to->gid) != 0)
		return errno ? errno : EPERM;
	return 0;
}

int
priv_give_tree(const char *dir, const struct priv_user *u, char *err,
    size_t errlen)
{
	struct stat st;
	int r;

	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "runtime_dir %s: not a directory", dir);
		return -1;
	}
	if ((st.st_mode & (S_IWOTH | S_ISVTX)) != 0 || strcmp(dir, "/") == 0) {
		snprintf(err, errlen, "runtime_dir %s is shared (writable by "
		    "others or sticky): sluiced gives its runtime_dir to user "
		    "%s, so it must be a directory of its own", dir, u->name);
		return -1;
	}
	give_to = u;
	r = nftw(dir, give_one, 16, FTW_PHYS | FTW_MOUNT);
	give_to = NULL;
	if (r != 0) {
		snprintf(err, errlen, "giving %s to user %s: %s", dir, u->name,
		    strerror(r > 0 ? r : errno));
		return -1;
	}
	return 0;
}

int
priv_give_file(const char *path, const struct priv_user *u, char *err,
    size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : (snprintf(err, errlen, "%s: %s",
		    path, strerror(errno)), -1);
	if (!S_ISREG(st.st_mode) ||
	    (st.st_uid == u->uid && st.st_gid == u->gid))
		return 0;
	if (lchown(path, u->uid, u->gid) != 0) {
		snprintf(err, errlen, "chown %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}
