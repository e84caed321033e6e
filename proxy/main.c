/*
 * main.c: sluiced start-up, signals, reload and drain.
 */
#include "sluice-config.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <limits.h>
#include <pwd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "proxy/daemon.h"
#include "proxy/fwctl.h"
#include "proxy/lib/notify.h"
#include "proxy/priv.h"
#include "proxy/signer.h"
#include "proxy/lib/tlsca.h"

#include <openssl/pem.h>
#include "proxy/relay/relay.h"
#include "proxy/control/ctl.h"
#include "proxy/control/api.h"
#include "proxy/control/events.h"
#include "proxy/control/webhook.h"


static void
usage(FILE *f)
{
	fprintf(f,
"usage: sluiced [-v] [-c FILE]\n"
"       sluiced --check-config FILE\n"
"       sluiced --print-config [-c FILE]\n"
"       sluiced --print-firewall [-c FILE]\n"
"       sluiced --print-inspect-ca [-c FILE]\n"
"       sluiced --remove-firewall [-c FILE]\n"
"\n"
"sluiced is the egress policy proxy of code-execution sandboxes: each\n"
"chat's sandbox reaches it over its own Unix socket (or TCP by source\n"
"address, or vsock by CID, or redirected to listen.transparent when the\n"
"sandbox has a network device) and gets what its network tier admits.\n"
"\n"
"  -c, --config FILE     configuration (default " CFG_DEFAULT_PATH
" if it exists,\n"
"                        else the embedded defaults)\n"
"      --check-config FILE  check FILE, print FILE:LINE:COL: errors, exit\n"
"      --print-config    print the effective configuration as JSON, exit\n"
"      --print-firewall  print the firewall table as nft text, exit\n"
"      --print-inspect-ca  print the TLS inspection CA (PEM), exit\n"
"      --remove-firewall delete the firewall table from the kernel, exit\n"
"  -v, --verbose         debug diagnostics on stderr\n"
"  -V, --version         print the version and exit\n"
"  -h, --help            this text\n"
"\n"
"Started as root, sluiced drops its proxy process to the configured\n"
"\"user\" (default sluice) with no capabilities; with the firewall enabled\n"
"a helper process keeps CAP_NET_ADMIN alone for the netlink work.\n"
"\n"
"Signals: SIGHUP reopens the connection log and reloads the\n"
"configuration (a bad one is refused and the old one kept); SIGTERM and\n"
"SIGINT stop accepting, drain open connections, and exit.\n"
"See sluiced(8) and sluiced.json(5).\n");
}

/* Host addresses are a refused class of their own: a "public" name that
 * resolves to the broker's own public address must not reach its
 * services. */
static int
add_host_addrs(struct pol_config *pc)
{
	struct ifaddrs *ifa, *i;
	struct pol_addr a;

	if (getifaddrs(&ifa) != 0) {
		px_log(PX_WARN, "%s: getifaddrs: %s", __func__,
		    strerror(errno));
		return 0;
	}
	for (i = ifa; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL)
			continue;
		memset(&a, 0, sizeof(a));
		if (i->ifa_addr->sa_family == AF_INET) {
			a.family = AF_INET;
			memcpy(a.a, &((struct sockaddr_in *)(void *)
			    i->ifa_addr)->sin_addr, 4);
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			a.family = AF_INET6;
			memcpy(a.a, &((struct sockaddr_in6 *)(void *)
			    i->ifa_addr)->sin6_addr, 16);
		} else
			continue;
		if (pol_config_add_host_addr(pc, &a) != 0) {
			/* the host-own guard would miss an address */
			freeifaddrs(ifa);
			return -1;
		}
	}
	freeifaddrs(ifa);
	return 0;
}

static struct dns *
make_dns(const struct cfg *c, char *err, size_t errlen)
{
	struct dns_host *hosts;
	struct dns *d;
	size_t i;

	hosts = calloc(c->ndns_hosts + 1, sizeof(*hosts));
	if (hosts == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (i = 0; i < c->ndns_hosts; i++) {
		hosts[i].name = c->dns_hosts[i].name;
		hosts[i].addrs = c->dns_hosts[i].addrs;
		hosts[i].naddrs = c->dns_hosts[i].naddrs;
	}
	d = dns_new(px.base, (const char *const *)c->dns_servers,
	    c->ndns_servers, hosts, c->ndns_hosts, c->dns_timeout_ms, err,
	    errlen);
	free(hosts);
	return d;
}

/*
 * Started as root with an unprivileged "user": what the proxy needs
 * after the drop is made or given to that user now.  runtime_dir and
 * everything in it (sluiced's own) is the user's; the directories of
 * the log and the state file are the user's when sluiced makes them, and
 * otherwise must be writable by the user (checked after the drop by
 * check_dirs); the log and state files are given to the user.
 */
static int
prepare_dirs(const struct cfg *c, const struct priv_user *u)
{
	char dir[PATH_MAX], err[512];

	if (priv_mkdir(c->runtime_dir, 0755, u, err, sizeof(err)) != 0)
		goto fail;
	if (util_parent_dir(c->state_file, dir, sizeof(dir)) != 0)
		dir[0] = '\0';
	if (dir[0] != '\0' && priv_mkdir(dir, 0750, u, err, sizeof(err)) != 0)
		goto fail;
	if (strcmp(c->log_path, "-") != 0) {
		if (util_parent_dir(c->log_path, dir, sizeof(dir)) != 0)
			dir[0] = '\0';
		if (dir[0] != '\0' &&
		    priv_mkdir(dir, 0750, u, err, sizeof(err)) != 0)
			goto fail;
	}
	return 0;
fail:
	px_log(PX_ERR, "%s: %s", __func__, err);
	return -1;
}

static int
give_files(const struct cfg *c, const struct priv_user *u)
{
	char err[512], tmp[PATH_MAX];

	/* a <state_file>.tmp left by a crash would stop every save */
	snprintf(tmp, sizeof(tmp), "%s.tmp", c->state_file);
	if (priv_give_tree(c->runtime_dir, u, err, sizeof(err)) != 0 ||
	    priv_give_file(c->state_file, u, err, sizeof(err)) != 0 ||
	    priv_give_file(tmp, u, err, sizeof(err)) != 0 ||
	    priv_give_file(c->credentials.file, u, err, sizeof(err)) != 0 ||
	    (strcmp(c->log_path, "-") != 0 &&
	    priv_give_file(c->log_path, u, err, sizeof(err)) != 0)) {
		px_log(PX_ERR, "%s: %s", __func__, err);
		return -1;
	}
	return 0;
}

/*
 * The groups the configuration gives its sockets (control.socket_group,
 * listen.socket_group): the proxy keeps them after the drop, since an
 * unprivileged process may give a file only a group it is in, and it
 * makes session sockets (and the control socket on a reload) after the
 * drop.  Without them README's control-plane example stopped the start
 * with "control.sock: Operation not permitted" (issue 24).  Unknown
 * names are left to the listeners, which name them in their error.
 */
static size_t
socket_groups(const struct cfg *c, gid_t *gids)
{
	const char *names[2] = { c->control.socket_group, c->socket_group };
	struct group *g;
	size_t i, n = 0;

	for (i = 0; i < 2; i++)
		if (names[i] != NULL && (g = getgrnam(names[i])) != NULL &&
		    (n == 0 || gids[0] != g->gr_gid))
			gids[n++] = g->gr_gid;
	return n;
}

/* After the drop: what the proxy writes later is writable by it. */
static int
check_dirs(const struct cfg *c, const char *user)
{
	char dir[PATH_MAX];

	if (access(c->runtime_dir, W_OK | X_OK) != 0) {
		px_log(PX_ERR, "runtime_dir %s is not writable by user %s: %s",
		    c->runtime_dir, user, strerror(errno));
		return -1;
	}
	if (util_parent_dir(c->state_file, dir, sizeof(dir)) != 0)
		dir[0] = '\0';
	if (access(dir, W_OK | X_OK) != 0) {
		px_log(PX_ERR, "state_file: the directory %s is not writable "
		    "by user %s (%s): the state is saved by renaming a new "
		    "file over the old; chown the directory to %s or choose a "
		    "state_file in one the user owns", dir, user,
		    strerror(errno), user);
		return -1;
	}
	if (strcmp(c->log_path, "-") != 0) {
		if (util_parent_dir(c->log_path, dir, sizeof(dir)) != 0)
			dir[0] = '\0';
		if (access(c->log_path, W_OK) != 0) {
			px_log(PX_ERR, "log.path %s is not writable by user "
			    "%s: %s", c->log_path, user, strerror(errno));
			return -1;
		}
		if (access(dir, W_OK | X_OK) != 0)
			px_log(PX_WARN, "log.path: the directory %s is not "
			    "writable by user %s: after a rotation that moves "
			    "the log away, SIGHUP cannot create it again", dir,
			    user);
	}
	return 0;
}

/* One broker per runtime directory: two would fight over socket paths. */
static int
lock_runtime_dir(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (util_mkdir_p(dir, 0755) != 0) {
		px_log(PX_ERR, "%s: cannot create %s: %s", __func__, dir,
		    strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/sluiced.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
		px_log(PX_ERR, "%s: %s: %s (is another sluiced running?)",
		    __func__, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;   /* held open for the life of the process */
}

/* The log's file system ran low (or has room again): said once each. */
static void
log_space(const char *path, int low, uint64_t free_bytes, uint64_t min_free)
{
	if (low)
		px_log(PX_WARN, "connection log %s: %llu bytes free on its file "
		    "system, below log.min_free_bytes (%llu): when it is full "
		    "every connection is refused (log_unavailable)", path,
		    (unsigned long long)free_bytes,
		    (unsigned long long)min_free);
	else
		px_log(PX_INFO, "connection log %s: %llu bytes free again", path,
		    (unsigned long long)free_bytes);
}

/* The log signer (signer.h): fd -1 when log.mac_key_file is unset. */
static struct signer signer = { -1, 0 };
static pid_t signer_pid = -1;
/* The inspection CA helper (tlsca.h): fd -1 when inspect.hosts is empty. */
static int ca_fd = -1;
static pid_t ca_pid = -1;

static void
log_admin(const char *what, const char *detail)
{
	struct clog_rec *r = clog_rec_new("admin");

	clog_rec_str(r, "action", what);
	clog_rec_str(r, "who", "sluiced");
	clog_rec_str(r, "detail", detail);
	if (clog_write(px.log, r) != 0)
		px_log(PX_ERR, "%s: cannot write the connection log", __func__);
}

/*
 * A start or a reopen (rotation): the record names the head of the chain
 * it follows, the last record of the file before (seq 0 and 64 zeros for
 * none), so the files of a rotated log are tied together and a cut
 * between them shows; and whether the records carry macs.
 */
static void
log_admin_anchor(const char *what, const char *detail, uint64_t seq,
    const char *hash)
{
	struct clog_rec *r = clog_rec_new("admin");

	clog_rec_str(r, "action", what);
	clog_rec_str(r, "who", "sluiced");
	clog_rec_str(r, "detail", detail);
	clog_rec_int(r, "anchor_seq", (int64_t)seq);
	clog_rec_str(r, "anchor_hash", hash);
	clog_rec_bool(r, "keyed", signer.fd >= 0);
	if (clog_write(px.log, r) != 0)
		px_log(PX_ERR, "%s: cannot write the connection log", __func__);
}

static int
strv_equal(char *const *a, size_t na, char *const *b, size_t nb)
{
	size_t i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return 0;
	return 1;
}

/* A reload keeps the resolver (and its queries in flight) unless the
 * dns section changed. */
static int
str_eq(const char *a, const char *b)
{
	return (a == NULL && b == NULL) ||
	    (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int
inspect_cfg_equal(const struct cfg_inspect *a, const struct cfg_inspect *b)
{
	size_t i;

	if (a->nhosts != b->nhosts || !str_eq(a->ca_cert, b->ca_cert) ||
	    !str_eq(a->ca_key, b->ca_key) ||
	    !str_eq(a->upstream_ca_file, b->upstream_ca_file) ||
	    a->leaf_cache != b->leaf_cache || a->leaf_days != b->leaf_days)
		return 0;
	for (i = 0; i < a->nhosts; i++)
		if (strcmp(a->hosts[i], b->hosts[i]) != 0)
			return 0;
	return 1;
}

static int
dns_cfg_equal(const struct cfg *a, const struct cfg *b)
{
	size_t i;

	if (a->dns_timeout_ms != b->dns_timeout_ms ||
	    !strv_equal(a->dns_servers, a->ndns_servers, b->dns_servers,
	    b->ndns_servers) || a->ndns_hosts != b->ndns_hosts)
		return 0;
	for (i = 0; i < a->ndns_hosts; i++) {
		const struct cfg_hostmap *x = &a->dns_hosts[i];
		const struct cfg_hostmap *y = &b->dns_hosts[i];

		if (strcmp(x->name, y->name) != 0 || x->naddrs != y->naddrs ||
		    memcmp(x->addrs, y->addrs, x->naddrs * sizeof(*x->addrs)))
			return 0;
	}
	return 1;
}

/* Load, build and swap a configuration; on any error the old one stays. */
static int
reload(const char *path)
{
	char err[512];
	struct cfg *nc;
	struct pol_config *np;
	struct dns *nd = NULL;
	struct clog *nl = NULL;
	int dns_changed;

	nc = cfg_load(path, err, sizeof(err));
	if (nc == NULL) {
		px_log(PX_ERR, "%s: keeping the running configuration: %s",
		    __func__, err);
		return -1;
	}
	if (strcmp(nc->user, px.cfg->user) != 0)
		px_log(PX_WARN, "%s: user: \"%s\" takes effect at the next "
		    "start (the privileges to switch users are gone)",
		    __func__, nc->user);
	if ((nc->log_mac_key_file == NULL) != (px.cfg->log_mac_key_file ==
	    NULL) || (nc->log_mac_key_file != NULL &&
	    strcmp(nc->log_mac_key_file, px.cfg->log_mac_key_file) != 0))
		px_log(PX_WARN, "%s: log.mac_key_file takes effect at the next "
		    "start (only root may read the key)", __func__);
	if (strcmp(nc->credentials.file, px.cfg->credentials.file) != 0)
		px_log(PX_WARN, "%s: credentials.file takes effect at the next "
		    "start", __func__);
	if (!inspect_cfg_equal(&nc->inspect, &px.cfg->inspect))
		px_log(PX_WARN, "%s: inspect takes effect at the next start "
		    "(only root may read the CA key)", __func__);
	if (signer.fd >= 0 && strcmp(nc->log_path, px.cfg->log_path) != 0) {
		/* the signer signs the chain it started on */
		px_log(PX_ERR, "%s: keeping the running configuration: "
		    "log.path cannot change while the log is keyed "
		    "(log.mac_key_file); restart sluiced", __func__);
		cfg_free(nc);
		return -1;
	}
	np = cfg_build_policy(nc, err, sizeof(err));
	if (np == NULL) {
		px_log(PX_ERR, "%s: keeping the running configuration: %s",
		    __func__, err);
		cfg_free(nc);
		return -1;
	}
	if (add_host_addrs(np) != 0) {
		px_log(PX_ERR, "%s: keeping the running configuration: out of "
		    "memory", __func__);
		pol_config_free(np);
		cfg_free(nc);
		return -1;
	}
	/* the control API's request rules follow the file's again */
	if (ctl_rules_apply(np, nc, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "%s: keeping the running configuration: %s",
		    __func__, err);
		pol_config_free(np);
		cfg_free(nc);
		return -1;
	}
	dns_changed = !dns_cfg_equal(px.cfg, nc);
	if (dns_changed) {
		nd = make_dns(nc, err, sizeof(err));
		if (nd == NULL) {
			px_log(PX_ERR, "%s: keeping the running configuration: "
			    "dns: %s", __func__, err);
			pol_config_free(np);
			cfg_free(nc);
			return -1;
		}
	}
	if (strcmp(nc->log_path, px.cfg->log_path) != 0) {
		nl = clog_open(nc->log_path, err, sizeof(err));
		if (nl == NULL) {
			px_log(PX_ERR, "%s: keeping the running configuration: "
			    "log: %s", __func__, err);
			if (nd)
				dns_free(nd);
			pol_config_free(np);
			cfg_free(nc);
			return -1;
		}
	}
	/* the firewall last: nothing after it may fail */
	if (fwctl_reload(nc, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "%s: keeping the running configuration and "
		    "firewall: firewall: %s", __func__, err);
		if (nl)
			clog_close(nl);
		if (nd)
			dns_free(nd);
		pol_config_free(np);
		cfg_free(nc);
		return -1;
	}
	if (nl != NULL) {
		clog_close(px.log);
		px.log = nl;
	}
	if (nd != NULL)
		px_relay_dns_swap(nd);
	pol_config_free(px.pol);
	px.pol = np;
	cfg_free(px.cfg);
	px.cfg = nc;
	clog_set_min_free(px.log, nc->log_min_free_bytes, log_space);
	if (ctl_apply_file_ceilings(nc) != 0)
		px_log(PX_ERR, "%s: a tenant ceiling could not be set (out of "
		    "memory)", __func__);
	ctl_apply_api_ceilings();
	px_sessions_sync_config();
	px_prompts_recheck(NULL);
	px_listeners_sync();
	api_reload(nc);     /* control API: logs and keeps its own on error */
	wh_reload(nc);      /* webhook: logs and keeps its own on error */
	log_admin("reload", nc->source_path ? nc->source_path : "(defaults)");
	px_log(PX_INFO, "%s: configuration reloaded", __func__);
	(void)px_notify("READY=1\nSTATUS=configuration reloaded");
	return 0;
}

static const char *config_path;

/* ------------------------------------------------------------------ */
/* The seam: the relay's events go to the event stream and the webhook,
 * and the webhook's answers to the control plane. */

static void
hook_denied(const char *session, const char *host, int port,
    const char *method, enum pol_reason why)
{
	/* building the event costs nothing while nobody listens */
	if (ev_subscribers() == 0)
		return;
	ev_publish("denied", json_pack("{s:s,s:s,s:i,s:s,s:s}",
	    "session", session, "host", host, "port", port,
	    "method", method, "reason", pol_reason_name(why)));
}

static size_t
hook_approvers(void)
{
	return ev_approvers() + (wh_configured() ? 1 : 0);
}

static void
hook_prompt_raised(const char *id, void *prompt)
{
	wh_prompt(id, prompt);
	ev_publish("prompt", prompt);
}

static void
hook_prompt_done(const char *id, void *resolved)
{
	ev_publish("prompt_resolved", resolved);
	wh_prompt_done(id);
}

static int
webhook_answer(const char *id, enum pol_answer ans, char *msg, size_t msglen)
{
	struct ctl_actor a = { .who = "webhook", .role = "app" };
	struct ctl_err e = { CTL_OK, "" };

	if (ctl_prompt_answer(&a, id, ans, &e) != 0)
		return errf(msg, msglen, "%s", e.msg);
	return 0;
}

static const struct relay_hooks hooks = {
	.denied = hook_denied,
	.approvers = hook_approvers,
	.prompt_raised = hook_prompt_raised,
	.prompt_done = hook_prompt_done,
	.cred_find = ctl_cred_find,
};

static void
on_sighup(evutil_socket_t fd, short ev, void *arg)
{
	char hash[65];
	uint64_t seq = clog_last_seq(px.log);

	snprintf(hash, sizeof(hash), "%s", clog_last_hash(px.log));
	if (clog_reopen(px.log) != 0)
		px_log(PX_ERR, "%s: cannot reopen the connection log %s",
		    __func__, clog_path(px.log));
	else
		log_admin_anchor("reopen", clog_path(px.log), seq, hash);
	if (px.draining)
		return;   /* no new listeners while stopping */
	reload(config_path);
}

static void
on_drain_deadline(evutil_socket_t fd, short ev, void *arg)
{
	px_log(PX_INFO, "%s: drain deadline: closing %d connection(s)",
	    __func__, px_relay_nconns());
	px_relay_close_all(POL_R_SHUTTING_DOWN);
	event_base_loopexit(px.base, NULL);
}

static void
on_sigterm(evutil_socket_t fd, short ev, void *arg)
{
	struct timeval tv = { px.cfg->drain_timeout_s, 0 };

	if (px.draining)
		return;
	px.draining = 1;
	px_prompts_shutdown();
	px_log(PX_INFO, "%s: stopping: draining %d connection(s), at most "
	    "%d s", __func__, px_relay_nconns(), px.cfg->drain_timeout_s);
	/* closed, not just paused: new clients are refused at once
	 * instead of waiting in a backlog nobody reads */
	px_listeners_close();
	/* idle keep-alive connections have nothing to drain */
	px_relay_close_idle(POL_R_SHUTTING_DOWN);
	px.drain_ev = evtimer_new(px.base, on_drain_deadline, NULL);
	evtimer_add(px.drain_ev, &tv);
	px_relay_drain_check();
}

/* The configuration for a one-shot option (--print-*, --check-config);
 * NULL with why on stderr. */
static struct cfg *
load_or_say(const char *path)
{
	char err[512];
	struct cfg *c = cfg_load(path, err, sizeof(err));

	if (c == NULL)
		fprintf(stderr, "%s\n", err);
	return c;
}

/* --print-inspect-ca: the CA sandboxes must trust, as PEM. */
static int
print_inspect_ca(const char *path)
{
	char err[512];
	struct cfg *c = load_or_say(path);
	X509 *ca;

	if (c == NULL)
		return 1;
	ca = tlsca_load_cert(c->inspect.ca_cert, err, sizeof(err));
	if (ca == NULL) {
		fprintf(stderr, "%s%s\n", err, access(c->inspect.ca_cert,
		    F_OK) != 0 ? " (sluiced makes the CA at its first start "
		    "with inspect.hosts)" : "");
		cfg_free(c);
		return 1;
	}
	PEM_write_X509(stdout, ca);
	X509_free(ca);
	cfg_free(c);
	return fflush(stdout) == 0 ? 0 : 1;
}

static int
print_config(const char *path)
{
	struct cfg *c = load_or_say(path);
	char *s;

	if (c == NULL)
		return 1;
	s = cfg_dump(c);
	if (s == NULL) {
		cfg_free(c);
		return 1;
	}
	printf("%s\n", s);
	free(s);
	cfg_free(c);
	return 0;
}

static int
check_config(const char *path)
{
	char err[512];
	struct cfg *c = load_or_say(path);
	struct pol_config *p;

	if (c == NULL)
		return 1;
	p = cfg_build_policy(c, err, sizeof(err));
	if (p == NULL) {
		fprintf(stderr, "%s\n", err);
		cfg_free(c);
		return 1;
	}
	/* started as root, sluiced runs its proxy as user: a start would
	 * fail without it, so the check does too */
	if (strcmp(c->user, "root") != 0 && getpwnam(c->user) == NULL) {
		fprintf(stderr, "%s: user: \"%s\" does not exist; sluiced "
		    "started as root runs its proxy as that user: create it "
		    "(the Debian package does, through sysusers.d; by hand: "
		    "useradd --system --no-create-home --shell "
		    "/usr/sbin/nologin %s) or name another unprivileged user\n",
		    path ? path : "(defaults)", c->user, c->user);
		pol_config_free(p);
		cfg_free(c);
		return 1;
	}
	printf("%s: configuration OK (%zu sessions, %zu registry entries)\n",
	    path, c->nsessions, pol_config_registry_count(p));
	pol_config_free(p);
	cfg_free(c);
	return 0;
}

/* Leave room for relays: a tunnel holds up to six descriptors (client,
 * upstream, two pipes when spliced). */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Say so when the limits cannot all be reached (sluiced.json(5),
 * "limits"): a warning, since most configurations never get there. */
static void
check_nofile(const struct cfg *c)
{
	struct rlimit rl;
	unsigned long long need = 6ULL * (unsigned)c->max_conns_total +
	    (unsigned)c->control.max_conns + (unsigned)c->fd_reserve + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < need)
		px_log(PX_WARN, "open files limited to %llu, below the %llu "
		    "that limits.max_conns_total %d may need: raise the hard "
		    "limit or lower max_conns_total",
		    (unsigned long long)rl.rlim_cur, need, c->max_conns_total);
}

/*
 * Who the proxy process runs as: started as root, the configuration's
 * user (*as_user set to *u), or root itself when that user is root
 * (*keep_root); started as another user, that user.  0, or -1 logged.
 */
static int
run_user_pick(struct priv_user *u, const struct priv_user **as_user,
    int *keep_root)
{
	char err[512];

	if (geteuid() == 0 && strcmp(px.cfg->user, "root") == 0) {
		*keep_root = 1;
		px_log(PX_WARN, "user is \"root\": the proxy process keeps "
		    "root and every capability");
	} else if (geteuid() == 0) {
		if (priv_user_lookup(px.cfg->user, u, err, sizeof(err)) != 0) {
			px_log(PX_ERR, "%s; sluiced will not run its proxy as "
			    "root: create the user (useradd --system --no-"
			    "create-home --shell /usr/sbin/nologin %s) or name "
			    "another unprivileged user in \"user\"",
			    err, px.cfg->user);
			return -1;
		}
		*as_user = u;
	}
	return 0;
}

static struct event_base *
new_event_base(void)
{
	struct event_config *ec = event_config_new();
	struct event_base *b;

	/* coalesce the add/del churn of every request into one epoll_ctl
	 * per descriptor and loop turn; sluiced never dup()s a
	 * descriptor, the case the changelist gets wrong */
	if (ec != NULL && getenv("SLUICE_NO_CHANGELIST") == NULL)
		event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	b = ec ? event_base_new_with_config(ec) : NULL;
	if (ec != NULL)
		event_config_free(ec);
	return b;
}

/* The log signer (log.mac_key_file), before the drop: it reads the key
 * as root, and starts from the chain head found before any untrusted
 * byte was read.  0, or -1 logged. */
static int
start_signer(const struct priv_user *as_user, int keep_root,
    uint64_t open_seq, const char *open_hash)
{
	char err[512];

	if (px.cfg->log_mac_key_file == NULL)
		return 0;
	if (keep_root)
		px_log(PX_WARN, "log.mac_key_file: the proxy runs as root and "
		    "could read the key: the macs show only edits made by "
		    "others");
	signer.fd = priv_signer_spawn(px.cfg->log_mac_key_file, as_user,
	    open_seq, open_hash, &signer_pid, err, sizeof(err));
	if (signer.fd < 0) {
		px_log(PX_ERR, "log signer: %s", err);
		return -1;
	}
	clog_set_signer(px.log, signer_sign, &signer);
	return 0;
}

/* The inspection CA's helper (inspect.hosts), before the drop: it reads
 * (or makes) the key as root; the proxy gets only the certificate.  0,
 * or -1 logged. */
static int
start_inspect_ca(const struct priv_user *as_user, int keep_root)
{
	char err[512], *ca_pem = NULL;
	int rc;

	if (px.cfg->inspect.nhosts == 0)
		return 0;
	if (keep_root)
		px_log(PX_WARN, "inspect: the proxy runs as root and could "
		    "read the CA key");
	ca_fd = priv_ca_spawn(px.cfg->inspect.ca_cert, px.cfg->inspect.ca_key,
	    px.cfg->inspect.hosts, px.cfg->inspect.nhosts,
	    px.cfg->inspect.leaf_days, as_user, &ca_pid, &ca_pem, err,
	    sizeof(err));
	if (ca_fd < 0) {
		px_log(PX_ERR, "inspect: %s", err);
		return -1;
	}
	rc = px_inspect_init(px.cfg, ca_fd, ca_pem, err, sizeof(err));
	free(ca_pem);
	if (rc != 0) {
		px_log(PX_ERR, "inspect: %s", err);
		return -1;
	}
	px_log(PX_INFO, "inspect: %zu host pattern(s), CA %s",
	    px.cfg->inspect.nhosts, px.cfg->inspect.ca_cert);
	return 0;
}

/* The drop: everything after it (the resolver, the session sockets,
 * the state file, the control API) is the user's.  0, or -1 logged. */
static int
drop_root(const struct priv_user *as_user, int keep_root)
{
	char err[512];
	gid_t sock_gids[2];
	size_t nsock_gids;

	if (keep_root)
		return 0;
	nsock_gids = socket_groups(px.cfg, sock_gids);
	if (priv_drop(as_user, sock_gids, nsock_gids, err, sizeof(err)) !=
	    0) {
		px_log(PX_ERR, "dropping privileges: %s", err);
		return -1;
	}
	if (as_user != NULL) {
		if (check_dirs(px.cfg, as_user->name) != 0)
			return -1;
		px_log(PX_INFO, "proxy process running as user %s (uid %u), "
		    "no capabilities", as_user->name, (unsigned)as_user->uid);
	}
	return 0;
}

/* After the drop, in this order: the resolver, the sessions (the
 * configuration's, then the state file's), the credentials, the
 * listeners, the event stream, the control API and the webhook.  0, or
 * -1 logged. */
static int
start_services(void)
{
	char err[512];

	px.dns = make_dns(px.cfg, err, sizeof(err));
	if (px.dns == NULL) {
		px_log(PX_ERR, "dns: %s", err);
		return -1;
	}
	if (ctl_apply_file_ceilings(px.cfg) != 0) {
		px_log(PX_ERR, "ceilings: out of memory");
		return -1;
	}
	if (px_sessions_sync_config() != 0)
		return -1;
	/* sessions, grants and ceilings the API made, listeners included,
	 * are back before anything reports ready */
	if (ctl_state_load(px.cfg->state_file, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "state file: %s; sluiced will not start on a "
		    "state it cannot read: to start empty, move the file away "
		    "(mv %s %s.bad)", err, px.cfg->state_file,
		    px.cfg->state_file);
		return -1;
	}
	/* the request rules the API made, after the file's */
	if (ctl_rules_apply(px.pol, px.cfg, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "state file: %s", err);
		return -1;
	}
	/* credentials: the values the relay puts in, apart from the state */
	if (ctl_creds_load(px.cfg->credentials.file, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "credentials: %s", err);
		return -1;
	}
	if (px_listeners_sync() != 0)
		return -1;
	/* event stream: before the API that serves it */
	if (ev_init(px.base, px.cfg->events_ring, px.cfg->events_max_pending,
	    px.cfg->events_heartbeat_s) != 0) {
		px_log(PX_ERR, "events: out of memory");
		return -1;
	}
	/* control API: after the sessions are back, before "ready" */
	if (api_start(px.base, px.cfg, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "control API: %s", err);
		return -1;
	}
	/* webhook: an approver, so up before "ready" */
	if (wh_init(px.base, px.cfg, webhook_answer, err, sizeof(err)) != 0) {
		px_log(PX_ERR, "webhook: %s", err);
		return -1;
	}
	return 0;
}

/* Everything started, stopped and freed in an order that holds however
 * far the start got. */
static void
shut_down(void)
{
	struct px_session *s;
	struct px_listener *l;

	api_stop();         /* before the sessions go */
	ev_shutdown();      /* its streams went with the API */
	wh_shutdown();
	while ((s = TAILQ_FIRST(&px.sessions)) != NULL)
		px_session_destroy(s, POL_R_SHUTTING_DOWN);
	while ((l = TAILQ_FIRST(&px.listeners)) != NULL) {
		TAILQ_REMOVE(&px.listeners, l, entry);
		px_listener_free(l);
	}
	if (px.drain_ev)
		event_free(px.drain_ev);
	if (px.accept_pause_ev)
		event_free(px.accept_pause_ev);
	px_relay_reap();
	px_splice_cleanup();
	px_rec_cleanup();
	if (px.dns)
		dns_free(px.dns);
	if (px.log)
		clog_close(px.log);
	if (signer.fd >= 0) {
		close(signer.fd);       /* the signer ends with its socket */
		priv_helper_reap(signer_pid, 1000);
	}
	px_inspect_cleanup();
	ctl_creds_free();
	ctl_rules_free();
	if (ca_fd >= 0) {
		close(ca_fd);           /* the CA helper ends with its socket */
		priv_helper_reap(ca_pid, 1000);
	}
	if (px.state)
		pol_state_free(px.state);
	if (px.pol)
		pol_config_free(px.pol);
	cfg_free(px.cfg);
	fwctl_shutdown();
	if (px.base)
		event_base_free(px.base);
}

/* What the command line asks for, beside running the daemon. */
enum act { ACT_RUN, ACT_PRINT_CONFIG, ACT_PRINT_CA, ACT_FW_PRINT,
    ACT_FW_REMOVE };

/* The options: -1 to go on with *act, else the exit status (--help,
 * --version, --check-config, a usage error). */
static int
options(int argc, char **argv, enum act *act)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", required_argument, NULL, 'C' },
		{ "print-config", no_argument, NULL, 'P' },
		{ "print-firewall", no_argument, NULL, 'F' },
		{ "print-inspect-ca", no_argument, NULL, 'I' },
		{ "remove-firewall", no_argument, NULL, 'R' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	*act = ACT_RUN;
	while ((ch = getopt_long(argc, argv, "c:vVh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			config_path = optarg;
			break;
		case 'C':
			return check_config(optarg);
		case 'P':
			*act = ACT_PRINT_CONFIG;
			break;
		case 'I':
			*act = ACT_PRINT_CA;
			break;
		case 'F':
			*act = ACT_FW_PRINT;
			break;
		case 'R':
			*act = ACT_FW_REMOVE;
			break;
		case 'v':
			px_verbose = 1;
			break;
		case 'V':
			printf("sluiced %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/* Ready: the signals, then the loop until a stop has drained. */
static void
serve(uint64_t open_seq, const char *open_hash)
{
	struct event *ev_hup, *ev_term, *ev_int;

	ev_hup = evsignal_new(px.base, SIGHUP, on_sighup, NULL);
	ev_term = evsignal_new(px.base, SIGTERM, on_sigterm, NULL);
	ev_int = evsignal_new(px.base, SIGINT, on_sigterm, NULL);
	evsignal_add(ev_hup, NULL);
	evsignal_add(ev_term, NULL);
	evsignal_add(ev_int, NULL);

	log_admin_anchor("start", config_path ? config_path : "(defaults)",
	    open_seq, open_hash);
	px_log(PX_INFO, "ready: %zu session(s), ceiling %s, log %s",
	    pol_session_count(px.state),
	    pol_tier_name(pol_state_global_ceiling(px.state)),
	    clog_path(px.log));
	/* systemd (Type=notify): the listeners, the firewall and the
	 * control API are up */
	if (px_notify("READY=1\nSTATUS=ready") < 0)
		px_log(PX_WARN, "NOTIFY_SOCKET: %s", strerror(errno));
	event_base_dispatch(px.base);
	px_refusals_flush(NULL);    /* what was folded, before the stop */
	(void)px_notify("STOPPING=1");
	log_admin("stop", "drained");
	px_log(PX_INFO, "stopped");

	event_free(ev_hup);
	event_free(ev_term);
	event_free(ev_int);
}

int
main(int argc, char **argv)
{
	struct priv_user run_user;
	const struct priv_user *as_user = NULL;
	char err[512], open_hash[65];
	uint64_t open_seq = 0;
	enum act act;
	int lockfd, rc, keep_root = 0;

	if ((rc = options(argc, argv, &act)) >= 0)
		return rc;
	if (config_path == NULL && access(CFG_DEFAULT_PATH, F_OK) == 0)
		config_path = CFG_DEFAULT_PATH;
	switch (act) {
	case ACT_PRINT_CONFIG:
		return print_config(config_path);
	case ACT_PRINT_CA:
		return print_inspect_ca(config_path);
	case ACT_FW_PRINT:
	case ACT_FW_REMOVE:
		return fwctl_command(config_path, act == ACT_FW_REMOVE);
	case ACT_RUN:
		break;
	}
	rc = 1;

	signal(SIGPIPE, SIG_IGN);
	/* a file size limit under the log: a failed write (fail closed),
	 * not the end of the process */
	signal(SIGXFSZ, SIG_IGN);
	raise_nofile();
	memset(&px, 0, sizeof(px));
	TAILQ_INIT(&px.sessions);
	TAILQ_INIT(&px.listeners);
	px.started = time(NULL);

	px.cfg = cfg_load(config_path, err, sizeof(err));
	if (px.cfg == NULL) {
		px_log(PX_ERR, "%s", err);
		return 1;
	}
	px.pol = cfg_build_policy(px.cfg, err, sizeof(err));
	if (px.pol == NULL) {
		px_log(PX_ERR, "%s", err);
		goto out;
	}
	if (add_host_addrs(px.pol) != 0) {
		px_log(PX_ERR, "%s: out of memory", __func__);
		goto out;
	}
	check_nofile(px.cfg);
	/*
	 * Privilege separation (sluiced(8), PROCESS MODEL): before any
	 * untrusted byte is read, the firewall helper is forked with the
	 * table named by this (trusted) configuration.
	 */
	if (run_user_pick(&run_user, &as_user, &keep_root) != 0 ||
	    fwctl_spawn_helper(px.cfg, as_user) != 0)
		goto out;
	px_relay_set_hooks(&hooks);
	px.state = pol_state_new();
	px.base = new_event_base();
	if (px.state == NULL || px.base == NULL) {
		px_log(PX_ERR, "%s: out of memory", __func__);
		goto out;
	}
	if (as_user != NULL && prepare_dirs(px.cfg, as_user) != 0)
		goto out;
	if ((lockfd = lock_runtime_dir(px.cfg->runtime_dir)) < 0)
		goto out;
	px.log = clog_open(px.cfg->log_path, err, sizeof(err));
	if (px.log == NULL) {
		px_log(PX_ERR, "connection log: %s", err);
		goto out;
	}
	clog_set_min_free(px.log, px.cfg->log_min_free_bytes, log_space);
	open_seq = clog_last_seq(px.log);
	snprintf(open_hash, sizeof(open_hash), "%s", clog_last_hash(px.log));
	/* the helpers that read keys, before the drop; the firewall before
	 * any listener, and before "ready" */
	if (start_signer(as_user, keep_root, open_seq, open_hash) != 0 ||
	    start_inspect_ca(as_user, keep_root) != 0 ||
	    (as_user != NULL && give_files(px.cfg, as_user) != 0) ||
	    fwctl_start(px.cfg) != 0 || drop_root(as_user, keep_root) != 0 ||
	    start_services() != 0)
		goto out;
	serve(open_seq, open_hash);
	rc = 0;
out:
	shut_down();
	return rc;
}
