/*
 * execd.c: sluice-execd, the session executor service (sluice-execd(8)).
 *
 * Start: options, the configuration (embedded defaults, then -c FILE),
 * the sandboxes already under state_dir adopted, the listeners, then
 * the loop.  SIGHUP reads the file again and swaps the whole
 * configuration in only when all of it is good (a bad file keeps the
 * old one; the paths and listeners that only a restart changes are
 * kept and said so).  SIGTERM drains: no new connections, no new
 * sandboxes or commands, the answers under way are given (foreground
 * commands are cancelled after drain_s), then exit.  Sandboxes and
 * their background processes outlive the daemon.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

static const char *opt_config;
static struct xd XD;
static struct event *ev_drain;
static int64_t drain_start;
static int drain_killed;

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: " XD_NAME " [-c FILE] [-v] [--check-config | --print-config "
	    "| --doctor]\n"
	    "       " XD_NAME " --help | --version\n"
	    "  -c, --config FILE   the configuration (JSON; defaults built in)\n"
	    "  --check-config      check the configuration and exit\n"
	    "  --print-config      print the effective configuration and exit\n"
	    "  --doctor            print what GET /v1/health says and exit\n"
	    "                      (0 when the default backend and sluiced "
	    "are usable)\n"
	    "  -v, --verbose       debug lines on stderr\n");
}

static struct xd_cfg *
cfg_read(char *err, size_t errlen)
{
	struct xd_cfg *c = malloc(sizeof(*c));

	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	xd_cfg_defaults(c);
	if (opt_config != NULL && xd_cfg_load(c, opt_config, err, errlen) !=
	    0) {
		free(c);
		return NULL;
	}
	/* its ELF header, once per configuration: a shim rebuilt in place
	 * is seen at the next reload */
	c->shim_static_ok = sbx_elf_static(c->shim_static);
	return c;
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct xd *xd = arg;
	struct xd_cfg *n, *old = xd->cfg;
	char err[XD_ERR_MAX];

	(void)sig;
	(void)what;
	if ((n = cfg_read(err, sizeof(err))) == NULL) {
		xd_log(XD_LOG_ERR, "reload: %s (the old configuration stays)",
		    err);
		return;
	}
	/* what the running daemon is built on stays until a restart */
	if (strcmp(n->runtime_dir, old->runtime_dir) ||
	    strcmp(n->state_dir, old->state_dir) || strcmp(n->tcp, old->tcp) ||
	    n->tcp_plain != old->tcp_plain ||
	    n->uid_base != old->uid_base || n->slots != old->slots ||
	    strcmp(n->audit_log, old->audit_log) ||
	    strcmp(n->archive_dir, old->archive_dir))
		xd_log(XD_LOG_WARN, "reload: runtime_dir, state_dir, tcp.listen, "
		    "tcp.plain_http, uid_base, slots, log.path and "
		    "lifecycle.archive_dir change on restart only");
	snprintf(n->audit_log, sizeof(n->audit_log), "%s", old->audit_log);
	/* the archives of the sandboxes are where they were written (and
	 * the default one is under the old state_dir, which stays) */
	snprintf(n->archive_dir, sizeof(n->archive_dir), "%s",
	    old->archive_dir);
	snprintf(n->runtime_dir, sizeof(n->runtime_dir), "%s",
	    old->runtime_dir);
	snprintf(n->state_dir, sizeof(n->state_dir), "%s", old->state_dir);
	snprintf(n->tcp, sizeof(n->tcp), "%s", old->tcp);
	n->tcp_plain = old->tcp_plain;
	n->uid_base = old->uid_base;
	n->slots = old->slots;
	/* archive_dir is the running one, checked at start: an archive that
	 * cannot be written there later fails that sandbox's removal (state
	 * stopped), not the reload */
	xd->cfg = n;
	if (xd_api_reload(xd, err, sizeof(err)) != 0) {
		xd->cfg = old;
		free(n);
		xd_log(XD_LOG_ERR, "reload: %s (the old configuration stays)",
		    err);
		return;
	}
	free(old);
	/* a lower ring_budget_bytes lets go of finished output now */
	xd_cmd_ring_budget(xd);
	/* the pools as now configured */
	xd_pool_reload(xd);
	if (xd_box_sweep_start(xd) != 0)
		xd_log(XD_LOG_WARN, "reload: the lifecycle timer could not be "
		    "set to the new ages");
	/* after logrotate moved it: the chain goes on in a new file */
	xd_audit_reopen(xd);
	/* sluiced's inspection CA may have changed with its restart */
	xd_box_trust_refresh(xd);
	xd_log(XD_LOG_INFO, "reload: configuration %s applied",
	    opt_config ? opt_config : "(defaults)");
}

static void
drain_tick(evutil_socket_t fd, short what, void *arg)
{
	struct xd *xd = arg;
	int64_t waited = sbx_now_ms() - drain_start;
	struct xd_box *b;

	(void)fd;
	(void)what;
	if (!xd_api_pending(xd) && !xd_os_pending(xd) &&
	    TAILQ_EMPTY(&xd->jobs)) {
		event_base_loopexit(xd->base, NULL);
		return;
	}
	if (!drain_killed && waited >= xd->cfg->drain_s * 1000) {
		/* the commands that would hold the exit: cancel them */
		drain_killed = 1;
		xd_log(XD_LOG_INFO, "drain: %ld s passed: cancelling the "
		    "foreground commands", xd->cfg->drain_s);
		TAILQ_FOREACH(b, &xd->boxes, link)
			if (b->fg != NULL)
				xd_cmd_kill(b->fg, "cancel");
		/* and the port proxy's answers still coming */
		xd_port_proxy_drain(1);
	}
	if (waited >= xd->cfg->drain_s * 1000 + 15000) {
		xd_log(XD_LOG_WARN, "drain: giving up on what is still under "
		    "way");
		event_base_loopexit(xd->base, NULL);
	}
}

static void
on_term(evutil_socket_t sig, short what, void *arg)
{
	struct xd *xd = arg;
	struct timeval tv = { 0, 50000 };

	(void)what;
	if (xd->draining)
		return;
	xd->draining = 1;
	xd_log(XD_LOG_INFO, "signal %d: draining", (int)sig);
	xd_api_stop_accepting(xd);
	xd_os_stop_accepting(xd);
	/* a WebSocket through the port proxy is no answer under way */
	xd_port_proxy_drain(0);
	/* no pool sandbox outlives the run: dropped, the drain waits */
	xd_pool_stop(xd);
	drain_start = sbx_now_ms();
	if ((ev_drain = event_new(xd->base, -1, EV_PERSIST, drain_tick, xd)) ==
	    NULL || event_add(ev_drain, &tv) != 0)
		event_base_loopexit(xd->base, NULL);
}

static void
doctor_cb(void *arg, json_t *h)
{
	json_t **out = arg;

	*out = h;
}

static int
doctor(struct xd *xd)
{
	json_t *h = NULL;
	int rc;

	if (xd_health(xd, doctor_cb, &h) != 0)
		h = xd_health_json(xd, NULL, 0, "cannot start a worker");
	while (h == NULL && event_base_loop(xd->base, EVLOOP_ONCE) == 0)
		;
	if (h == NULL)
		return 1;
	rc = json_is_true(json_object_get(h, "ok")) ? 0 : 1;
	json_dumpf(h, stdout, JSON_INDENT(2));
	printf("\n");
	json_decref(h);
	return rc;
}

/* The state directory, the audit log, the records of the last run
 * (archives and sandboxes adopted), the pools', node's and lifecycle's
 * timers and the listeners: everything before "ready".  0, or -1 said
 * in the log. */
static int
start_daemon(struct xd *xd)
{
	char err[XD_ERR_MAX];

	if (geteuid() != 0)
		xd_log(XD_LOG_WARN, "not root: the backends need root, every "
		    "create will fail");
	umask(022);
	if (util_mkdir_p(xd->cfg->state_dir, 0711) != 0) {
		xd_log(XD_LOG_ERR, "%s: %s", xd->cfg->state_dir,
		    strerror(errno));
		return -1;
	}
	if (xd_arch_dir_check(xd->cfg, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_ERR, "%s", err);
		return -1;
	}
	if (xd_audit_open(xd, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_ERR, "audit log: %s", err);
		return -1;
	}
	xd_arch_adopt(xd->cfg);
	xd_box_load_all(xd);
	xd_box_trust_refresh(xd);
	if (xd_pool_start(xd) != 0) {
		xd_log(XD_LOG_ERR, "cannot start the pools' timer");
		return -1;
	}
	(void)!xd_node_start(xd);
	if (xd_box_sweep_start(xd) != 0) {
		xd_log(XD_LOG_ERR, "cannot start the lifecycle timer");
		return -1;
	}
	if (xd_api_listen(xd, err, sizeof(err)) != 0 ||
	    xd_os_listen(xd, err, sizeof(err)) != 0) {
		xd_log(XD_LOG_ERR, "%s", err);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "print-config", no_argument, NULL, 'P' },
		{ "doctor", no_argument, NULL, 'D' },
		{ "routes", no_argument, NULL, 'R' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct event *ev_hup = NULL, *ev_term = NULL, *ev_int = NULL;
	char err[XD_ERR_MAX];
	int ch, check = 0, print = 0, doc = 0, rc = 1, fd;
	json_t *j;

	px_log_set_name(XD_NAME);
	/* hidden: the restore's child (exec_arch.c), before anything of the
	 * daemon is read or set up */
	if (argc == 2 && strcmp(argv[1], "--restore-helper") == 0)
		return xd_arch_restore_helper();
	/* hidden: the archive calls' child (exec_tar.c), the same way */
	if (argc >= 2 && strcmp(argv[1], "--tar-helper") == 0) {
		/* its status is the call's: a helper ends with what it wrote
		 * flushed and nothing run at exit (a sanitizer's leak report
		 * at exit would turn a whole tar into a failed one) */
		rc = xd_tar_helper(argc, argv);
		fflush(NULL);
		_exit(rc);
	}
	while ((ch = getopt_long(argc, argv, "c:vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': opt_config = optarg; break;
		case 'C': check = 1; break;
		case 'P': print = 1; break;
		case 'D': doc = 1; break;
		case 'R':
			/* hidden: the route table, for the OpenAPI test */
			xd_api_print_routes();
			return 0;
		case 'v': px_verbose = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf(XD_NAME " " PACKAGE_VERSION "\n"); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	/* 0-2 open, so that no socket or pipe of ours becomes one */
	while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
		(void)fcntl(fd, F_SETFD, 0);
	if (fd > 2)
		close(fd);
	if ((XD.cfg = cfg_read(err, sizeof(err))) == NULL) {
		fprintf(stderr, XD_NAME ": %s\n", err);
		return 1;
	}
	if (check) {
		printf("%s: configuration ok\n", opt_config ? opt_config :
		    "(defaults)");
		rc = 0;
		goto out;
	}
	if (print) {
		j = xd_cfg_json(XD.cfg);
		json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		printf("\n");
		json_decref(j);
		rc = 0;
		goto out;
	}
	TAILQ_INIT(&XD.boxes);
	TAILQ_INIT(&XD.pool);
	TAILQ_INIT(&XD.jobs);
	TAILQ_INIT(&XD.calls);
	TAILQ_INIT(&XD.subs);
	signal(SIGPIPE, SIG_IGN);
	if ((XD.base = event_base_new()) == NULL) {
		fprintf(stderr, XD_NAME ": cannot make the event loop\n");
		goto out;
	}
	if (doc) {
		rc = doctor(&XD);
		goto out;
	}
	if (start_daemon(&XD) != 0)
		goto out;
	ev_hup = evsignal_new(XD.base, SIGHUP, on_hup, &XD);
	ev_term = evsignal_new(XD.base, SIGTERM, on_term, &XD);
	ev_int = evsignal_new(XD.base, SIGINT, on_term, &XD);
	if (ev_hup == NULL || ev_term == NULL || ev_int == NULL ||
	    event_add(ev_hup, NULL) || event_add(ev_term, NULL) ||
	    event_add(ev_int, NULL)) {
		xd_log(XD_LOG_ERR, "cannot watch signals");
		goto out;
	}
	xd_log(XD_LOG_INFO, "ready: %s%s%s (backend %s, state %s)",
	    XD.sock_path, !XD.cfg->tcp[0] ? "" : XD.cfg->tcp_plain ?
	    ", PLAIN HTTP " : ", tls ", XD.cfg->tcp,
	    XD.cfg->backend, XD.cfg->state_dir);
	event_base_dispatch(XD.base);
	xd_job_wait_all(&XD, 5000);
	xd_log(XD_LOG_INFO, "exiting");
	rc = 0;
out:
	if (ev_hup != NULL)
		event_free(ev_hup);
	if (ev_term != NULL)
		event_free(ev_term);
	if (ev_int != NULL)
		event_free(ev_int);
	if (ev_drain != NULL)
		event_free(ev_drain);
	if (XD.base != NULL && !check && !print && !doc) {
		/* before the calls they answer go */
		xd_port_proxy_drain(1);
		xd_os_close(&XD);
		xd_api_close(&XD);
		xd_box_sweep_stop(&XD);
		xd_node_stop(&XD);
		xd_box_free_all(&XD);
		xd_pool_free(&XD);
		xd_audit_close(&XD);
	}
	if (XD.base != NULL)
		event_base_free(XD.base);
	free(XD.cfg);
	return rc;
}
