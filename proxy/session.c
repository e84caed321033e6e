/*
 * session.c: the one sessions registry, and the listeners and the
 * identity they give a connection (daemon.h).
 *
 * A sandbox never names its chat: the Unix socket that accepted, the TCP
 * source address or the vsock peer CID does (DESIGN.md, "Transports and
 * identity").  Sessions come from the configuration file (synced on
 * start and reload) and from the control API (proxy/control/ctl.c).
 */
#include "sluice-config.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "proxy/daemon.h"
#include "proxy/relay/relay.h"
#include "proxy/lib/peer.h"

static void px_listeners_enable(int on);

static void
pause_expired(evutil_socket_t fd, short ev, void *arg)
{
	px.accept_paused = 0;
	if (!px.draining)
		px_listeners_enable(1);
}

/*
 * Out of descriptors: libevent would report the listener readable again
 * at once and spin.  Stop accepting for a second instead; connections
 * closing meanwhile give descriptors back.
 */
static void
accept_error(struct evconnlistener *evl, void *arg)
{
	int e = EVUTIL_SOCKET_ERROR();
	struct timeval tv = { 1, 0 };

	if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != ENOMEM) {
		px_log(PX_WARN, "%s: accept: %s", __func__, strerror(e));
		return;
	}
	if (px.accept_paused)
		return;
	px_log(PX_WARN, "%s: accept: %s: pausing listeners for 1 s",
	    __func__, strerror(e));
	px.accept_paused = 1;
	px_listeners_enable(0);
	if (px.accept_pause_ev == NULL)
		px.accept_pause_ev = evtimer_new(px.base, pause_expired, NULL);
	evtimer_add(px.accept_pause_ev, &tv);
}

static void
px_listeners_enable(int on)
{
	struct px_listener *l;

	TAILQ_FOREACH(l, &px.listeners, entry) {
		if (on)
			evconnlistener_enable(l->evl);
		else
			evconnlistener_disable(l->evl);
	}
}

struct px_session *
px_session_find(const char *id)
{
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry)
		if (strcmp(pol_session_id(s->pol), id) == 0)
			return s;
	return NULL;
}

static struct px_session *
px_session_by_source(const struct pol_addr *a)
{
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry)
		if (s->transport == PX_T_TCP &&
		    memcmp(&s->source, a, sizeof(*a)) == 0)
			return s;
	return NULL;
}

static struct px_session *
px_session_by_cid(int64_t cid)
{
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry)
		if (s->transport == PX_T_VSOCK && s->vsock_cid == cid)
			return s;
	return NULL;
}

static void
on_accept_unix(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct px_listener *l = arg;

	px_conn_accept(fd, sa, salen, PX_T_UNIX, l->session);
}

static void
on_accept_tcp(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct peer_id id;
	struct px_session *s = NULL;

	if (peer_identify(sa, (socklen_t)salen, &id) == 0 && id.kind == PEER_IP)
		s = px_session_by_source(&id.ip);
	px_conn_accept(fd, sa, salen, PX_T_TCP, s);
}

/* Redirected by the firewall: the source address is the session, as on
 * the TCP listener; transparent.c finds where the client was going. */
static void
on_accept_transparent(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct peer_id id;
	struct px_session *s = NULL;

	if (peer_identify(sa, (socklen_t)salen, &id) == 0 && id.kind == PEER_IP)
		s = px_session_by_source(&id.ip);
	px_conn_accept(fd, sa, salen, PX_T_TRANSPARENT, s);
}

static void
on_accept_vsock(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct peer_id id;
	struct px_session *s = NULL;

	/* the host kernel stamps the CID: the guest cannot choose it */
	if (peer_identify(sa, (socklen_t)salen, &id) == 0 &&
	    id.kind == PEER_VSOCK)
		s = px_session_by_cid(id.cid);
	px_conn_accept(fd, sa, salen, PX_T_VSOCK, s);
}

static struct px_listener *
listener_new(enum px_transport kind, struct evconnlistener *evl)
{
	struct px_listener *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->kind = kind;
	l->evl = evl;
	evconnlistener_set_error_cb(evl, accept_error);
	if (px.draining || px.accept_paused)
		evconnlistener_disable(evl);
	return l;
}

void
px_listener_free(struct px_listener *l)
{
	if (l == NULL)
		return;
	if (l->evl)
		evconnlistener_free(l->evl);
	if (l->kind == PX_T_UNIX && l->path != NULL)
		unlink(l->path);
	free(l->path);
	free(l->spec);
	free(l);
}

/* Create the session's socket before anything could try to connect. */
static int
px_session_listen(struct px_session *s)
{
	struct sockaddr_un sun;
	struct evconnlistener *evl;
	struct px_listener *l;
	char dir[PATH_MAX], *slash;
	gid_t gid = (gid_t)-1;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(s->socket_path) >= sizeof(sun.sun_path)) {
		px_log(PX_ERR, "%s: %s: path longer than %zu bytes", __func__,
		    s->socket_path, sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, s->socket_path, strlen(s->socket_path));
	snprintf(dir, sizeof(dir), "%s", s->socket_path);
	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if (util_mkdir_p(dir, 0755) != 0) {
			px_log(PX_ERR, "%s: %s: %s", __func__, dir,
			    strerror(errno));
			return -1;
		}
	}
	/* a stale socket from an earlier run; the runtime lock says it
	 * is not another broker's */
	if (unlink(s->socket_path) != 0 && errno != ENOENT) {
		px_log(PX_ERR, "%s: %s: %s", __func__, s->socket_path,
		    strerror(errno));
		return -1;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -1;
	evl = evconnlistener_new_bind(px.base, on_accept_unix, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128,
	    (struct sockaddr *)&sun, sizeof(sun));
	if (evl == NULL) {
		px_log(PX_ERR, "%s: bind %s: %s", __func__, s->socket_path,
		    strerror(errno));
		free(l);
		return -1;
	}
	if (px.cfg->socket_group != NULL) {
		struct group *gr = getgrnam(px.cfg->socket_group);

		if (gr == NULL)
			px_log(PX_WARN, "%s: unknown group %s", __func__,
			    px.cfg->socket_group);
		else
			gid = gr->gr_gid;
	}
	if (chmod(s->socket_path, px.cfg->socket_mode) != 0 ||
	    (gid != (gid_t)-1 && chown(s->socket_path, (uid_t)-1, gid) != 0))
		px_log(PX_WARN, "%s: %s: %s", __func__, s->socket_path,
		    strerror(errno));
	l->kind = PX_T_UNIX;
	l->evl = evl;
	l->path = strdup(s->socket_path);
	l->session = s;
	evconnlistener_set_error_cb(evl, accept_error);
	if (px.draining || px.accept_paused)
		evconnlistener_disable(evl);
	s->listener = l;
	TAILQ_INSERT_TAIL(&px.listeners, l, entry);
	return 0;
}

static struct px_listener *
find_listener(enum px_transport kind, const char *spec)
{
	struct px_listener *l;

	TAILQ_FOREACH(l, &px.listeners, entry)
		if (l->kind == kind && l->spec != NULL &&
		    strcmp(l->spec, spec) == 0)
			return l;
	return NULL;
}

/* Listeners are opened after the proxy process dropped its privileges
 * (sluiced(8), Process model): ports below 1024 need one it gave up. */
#define DROPPED_HINT " (ports below 1024 need a privilege the proxy " \
	"process no longer has: see Process model in sluiced(8))"

static int
listen_tcp(enum px_transport kind, const char *spec)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct evconnlistener *evl;
	struct px_listener *l;

	memset(&ss, 0, sizeof(ss));
	if (evutil_parse_sockaddr_port(spec, (struct sockaddr *)&ss,
	    &sslen) != 0) {
		px_log(PX_ERR, "%s: bad listen address %s", __func__, spec);
		return -1;
	}
	evl = evconnlistener_new_bind(px.base, kind == PX_T_TRANSPARENT ?
	    on_accept_transparent : on_accept_tcp, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
	    512, (struct sockaddr *)&ss, sslen);
	if (evl == NULL) {
		px_log(PX_ERR, "%s: listen %s: %s%s", __func__, spec,
		    strerror(errno), errno == EACCES ? DROPPED_HINT : "");
		return -1;
	}
	l = listener_new(kind, evl);
	if (l == NULL) {
		evconnlistener_free(evl);
		return -1;
	}
	l->spec = strdup(spec);
	TAILQ_INSERT_TAIL(&px.listeners, l, entry);
	return 0;
}

static int
listen_vsock(int port)
{
	struct sockaddr_vm vm;
	struct evconnlistener *evl;
	struct px_listener *l;
	char spec[32];

	snprintf(spec, sizeof(spec), "vsock:%d", port);
	if (find_listener(PX_T_VSOCK, spec) != NULL)
		return 0;
	memset(&vm, 0, sizeof(vm));
	vm.svm_family = AF_VSOCK;
	vm.svm_cid = VMADDR_CID_ANY;
	vm.svm_port = (unsigned)port;
	evl = evconnlistener_new_bind(px.base, on_accept_vsock, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128,
	    (struct sockaddr *)&vm, sizeof(vm));
	if (evl == NULL) {
		px_log(PX_ERR, "%s: vsock port %d: %s%s", __func__, port,
		    strerror(errno), errno == EACCES ? DROPPED_HINT : "");
		return -1;
	}
	l = listener_new(PX_T_VSOCK, evl);
	if (l == NULL) {
		evconnlistener_free(evl);
		return -1;
	}
	l->spec = strdup(spec);
	TAILQ_INSERT_TAIL(&px.listeners, l, entry);
	return 0;
}

/* Make the TCP and vsock listeners match the configuration. */
int
px_listeners_sync(void)
{
	struct px_listener *l, *tmp;
	size_t i;
	int rc = 0;

	TAILQ_FOREACH_SAFE(l, &px.listeners, entry, tmp) {
		int keep = 0;

		if (l->kind == PX_T_UNIX)
			continue;
		if (l->kind == PX_T_TCP) {
			for (i = 0; i < px.cfg->nlisten_tcp; i++)
				if (strcmp(px.cfg->listen_tcp[i], l->spec) == 0)
					keep = 1;
		} else if (l->kind == PX_T_TRANSPARENT) {
			for (i = 0; i < px.cfg->nlisten_transparent; i++)
				if (strcmp(px.cfg->listen_transparent[i],
				    l->spec) == 0)
					keep = 1;
		} else if (px.cfg->vsock_port >= 0) {
			char spec[32];

			snprintf(spec, sizeof(spec), "vsock:%d",
			    px.cfg->vsock_port);
			keep = strcmp(spec, l->spec) == 0;
		}
		if (!keep) {
			TAILQ_REMOVE(&px.listeners, l, entry);
			px_listener_free(l);
		}
	}
	for (i = 0; i < px.cfg->nlisten_tcp; i++)
		if (find_listener(PX_T_TCP, px.cfg->listen_tcp[i]) == NULL &&
		    listen_tcp(PX_T_TCP, px.cfg->listen_tcp[i]) != 0)
			rc = -1;
	for (i = 0; i < px.cfg->nlisten_transparent; i++)
		if (find_listener(PX_T_TRANSPARENT,
		    px.cfg->listen_transparent[i]) == NULL &&
		    listen_tcp(PX_T_TRANSPARENT,
		    px.cfg->listen_transparent[i]) != 0)
			rc = -1;
	if (px.cfg->vsock_port >= 0 && listen_vsock(px.cfg->vsock_port) != 0)
		rc = -1;
	return rc;
}

/*
 * The user a session is shown as comes from the app (or the file): it
 * reaches log records, prompts and approvers' terminals, so it gets the
 * sandbox strings' sanitising (controls, bidi and zero-width characters,
 * invalid UTF-8 become '?') and cap, once, where every session is made.
 */
#define SESSION_USER_CAP 256

static const char *
session_user(const char *u, char *buf, size_t len)
{
	u = u != NULL ? u : "";
	return clog_sanitize(u, strlen(u), buf, len, SESSION_USER_CAP);
}

struct px_session *
px_session_create(const struct cfg_session *cs, int from_config, char *err,
    size_t errlen)
{
	struct px_session *s;
	char path[PATH_MAX], user[SESSION_USER_CAP + 4];

	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	TAILQ_INIT(&s->conns);
	s->vsock_cid = -1;
	s->from_config = from_config;
	if (cs->source != NULL) {
		s->transport = PX_T_TCP;
		s->source = cs->source_addr;
	} else if (cs->vsock_cid >= 0) {
		s->transport = PX_T_VSOCK;
		s->vsock_cid = cs->vsock_cid;
	} else {
		s->transport = PX_T_UNIX;
		if (cs->socket != NULL)
			snprintf(path, sizeof(path), "%s", cs->socket);
		else
			snprintf(path, sizeof(path), "%s/sessions/%s/proxy.sock",
			    px.cfg->runtime_dir, cs->id);
		s->socket_path = strdup(path);
	}
	s->pol = pol_session_add(px.state, cs->id, cs->tenant,
	    session_user(cs->user, user, sizeof(user)), cs->tier);
	if (s->pol == NULL) {
		snprintf(err, errlen, "cannot add session (bad or duplicate id)");
		goto fail;
	}
	if (s->transport == PX_T_UNIX && px_session_listen(s) != 0) {
		snprintf(err, errlen, "cannot listen on %s", s->socket_path);
		goto fail;
	}
	TAILQ_INSERT_TAIL(&px.sessions, s, entry);
	return s;
fail:
	if (s->pol != NULL)
		pol_session_remove(px.state, s->pol);
	free(s->socket_path);
	free(s);
	return NULL;
}

void
px_session_destroy(struct px_session *s, enum pol_reason why)
{
	px_prompts_session_gone(s, why);
	px_refusals_flush(s);
	px_relay_close_session(s, why);
	if (s->listener != NULL) {
		TAILQ_REMOVE(&px.listeners, s->listener, entry);
		px_listener_free(s->listener);
	}
	TAILQ_REMOVE(&px.sessions, s, entry);
	pol_session_remove(px.state, s->pol);
	free(s->socket_path);
	free(s);
}

static int
same_transport(const struct px_session *s, const struct cfg_session *cs,
    const char *runtime_dir)
{
	char path[PATH_MAX];

	if (cs->source != NULL)
		return s->transport == PX_T_TCP &&
		    memcmp(&s->source, &cs->source_addr, sizeof(s->source)) == 0;
	if (cs->vsock_cid >= 0)
		return s->transport == PX_T_VSOCK && s->vsock_cid == cs->vsock_cid;
	if (s->transport != PX_T_UNIX)
		return 0;
	if (cs->socket != NULL)
		return strcmp(s->socket_path, cs->socket) == 0;
	snprintf(path, sizeof(path), "%s/sessions/%s/proxy.sock", runtime_dir,
	    cs->id);
	return strcmp(s->socket_path, path) == 0;
}

/*
 * Bring the sessions in line with the configuration: new ones are
 * created, missing ones destroyed (closing their connections), changed
 * tiers applied.  Returns -1 if a new session could not be created.
 */
int
px_sessions_sync_config(void)
{
	struct px_session *s, *tmp;
	char err[256], user[SESSION_USER_CAP + 4];
	size_t i;
	int rc = 0;

	TAILQ_FOREACH_SAFE(s, &px.sessions, entry, tmp) {
		const struct cfg_session *cs = NULL;

		if (!s->from_config)
			continue;
		for (i = 0; i < px.cfg->nsessions; i++)
			if (strcmp(px.cfg->sessions[i].id,
			    pol_session_id(s->pol)) == 0)
				cs = &px.cfg->sessions[i];
		if (cs == NULL || !same_transport(s, cs, px.cfg->runtime_dir) ||
		    strcmp(cs->tenant, pol_session_tenant(s->pol)) != 0 ||
		    strcmp(session_user(cs->user, user, sizeof(user)),
		    pol_session_user(s->pol)) != 0)
			px_session_destroy(s, POL_R_SESSION_CLOSED);
		else
			pol_session_set_tier(s->pol, cs->tier);
	}
	for (i = 0; i < px.cfg->nsessions; i++) {
		if (px_session_find(px.cfg->sessions[i].id) != NULL)
			continue;
		if (px_session_create(&px.cfg->sessions[i], 1, err,
		    sizeof(err)) == NULL) {
			px_log(PX_ERR, "%s: session %s: %s", __func__,
			    px.cfg->sessions[i].id, err);
			rc = -1;
		}
	}
	return rc;
}

int
px_session_transport_taken(const struct cfg_session *cs, const char *path)
{
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry) {
		if (cs->source != NULL && s->transport == PX_T_TCP &&
		    memcmp(&s->source, &cs->source_addr,
		    sizeof(s->source)) == 0)
			return 1;
		if (cs->vsock_cid >= 0 && s->transport == PX_T_VSOCK &&
		    s->vsock_cid == cs->vsock_cid)
			return 1;
		if (path != NULL && s->transport == PX_T_UNIX &&
		    strcmp(s->socket_path, path) == 0)
			return 1;
	}
	return 0;
}

void
px_listeners_close(void)
{
	struct px_listener *l;
	struct px_session *s;

	TAILQ_FOREACH(s, &px.sessions, entry)
		s->listener = NULL;
	while ((l = TAILQ_FIRST(&px.listeners)) != NULL) {
		TAILQ_REMOVE(&px.listeners, l, entry);
		px_listener_free(l);
	}
}
