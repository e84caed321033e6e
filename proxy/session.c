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

/* The session of a TCP client is its source address (sessions.source):
 * on the TCP listener and on the transparent one, where the firewall
 * redirected it and transparent.c finds where it was going. */
static struct px_session *
session_of_source(struct sockaddr *sa, int salen)
{
	struct peer_id id;

	if (peer_identify(sa, (socklen_t)salen, &id) == 0 && id.kind == PEER_IP)
		return px_session_by_source(&id.ip);
	return NULL;
}

static void
on_accept_tcp(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	px_conn_accept(fd, sa, salen, PX_T_TCP, session_of_source(sa, salen));
}

static void
on_accept_transparent(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	px_conn_accept(fd, sa, salen, PX_T_TRANSPARENT, session_of_source(sa,
	    salen));
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
	/* only the socket made, if that is still what the path names */
	if (l->kind == PX_T_UNIX && l->path != NULL)
		usock_unlink(l->path, &l->sock);
	free(l->path);
	free(l->spec);
	free(l);
}

/* Create the session's socket before anything could try to connect. */
static int
px_session_listen(struct px_session *s, enum px_refusal *why, char *err,
    size_t errlen)
{
	struct evconnlistener *evl;
	struct px_listener *l;
	struct usock_id id;
	gid_t gid = (gid_t)-1;
	int fd;

	if (px.cfg->socket_group != NULL) {
		struct group *gr = getgrnam(px.cfg->socket_group);

		if (gr == NULL)
			px_log(PX_WARN, "%s: unknown group %s", __func__,
			    px.cfg->socket_group);
		else
			gid = gr->gr_gid;
	}
	fd = usock_listen(s->socket_canon, (mode_t)px.cfg->socket_mode, gid,
	    0755, 128, &id, err, errlen);
	if (fd < 0) {
		/* EEXIST: a file that is not a socket, or a socket someone
		 * serves; ENOTDIR, ELOOP: a symlink or a file on the way */
		*why = errno == EEXIST ? PX_REF_TAKEN : errno == ENOTDIR ||
		    errno == ELOOP ? PX_REF_BAD : PX_REF_INTERNAL;
		px_log(PX_ERR, "%s: %s", __func__, err);
		return -1;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL || (l->path = strdup(s->socket_canon)) == NULL ||
	    (evl = evconnlistener_new(px.base, on_accept_unix, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd)) == NULL) {
		usock_unlink(s->socket_canon, &id);
		close(fd);
		if (l != NULL)
			free(l->path);
		free(l);
		*why = PX_REF_INTERNAL;
		return errf(err, errlen, "%s: out of memory", s->socket_path);
	}
	l->kind = PX_T_UNIX;
	l->evl = evl;
	l->sock = id;
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

/* Keep a TCP or vsock listener bound to spec (named so
 * px_listeners_sync can match it to the configuration); on failure
 * evl is freed. */
static int
listener_add_bound(enum px_transport kind, const char *spec,
    struct evconnlistener *evl)
{
	struct px_listener *l = listener_new(kind, evl);

	if (l == NULL) {
		evconnlistener_free(evl);
		return -1;
	}
	l->spec = strdup(spec);
	TAILQ_INSERT_TAIL(&px.listeners, l, entry);
	return 0;
}

static int
listen_tcp(enum px_transport kind, const char *spec)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct evconnlistener *evl;

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
	return listener_add_bound(kind, spec, evl);
}

static int
listen_vsock(int port)
{
	struct sockaddr_vm vm;
	struct evconnlistener *evl;
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
	return listener_add_bound(PX_T_VSOCK, spec, evl);
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

/* <runtime_dir>/sessions/<id>/proxy.sock into out (PATH_MAX). */
static int
default_socket(const char *id, char *out)
{
	int n = snprintf(out, PATH_MAX, "%s/sessions/%s/proxy.sock",
	    px.cfg->runtime_dir, id);

	return n < 0 || n >= PATH_MAX ? -1 : 0;
}

/* A prefix directory, resolved whole (its own last component too). */
static int
prefix_canon(const char *prefix, char *out)
{
	char p[PATH_MAX];
	size_t n;

	if (snprintf(p, sizeof(p), "%s/x", prefix) >= (int)sizeof(p) ||
	    usock_canon(p, out, PATH_MAX, NULL, 0) != 0)
		return -1;
	n = strlen(out);
	out[n - 2] = '\0';      /* the "/x" */
	if (out[0] == '\0')
		strcpy(out, "/");
	return 0;
}

/* What of sluiced's own canon names, or NULL: a socket never goes
 * there, whoever asks. */
static const char *
own_file(const char *canon)
{
	const struct cfg *c = px.cfg;
	const struct {
		const char *what, *path, *suffix;
	} f[] = {
		{ "the connection log", c->log_path, "" },
		{ "the state file", c->state_file, "" },
		{ "the state file's temporary file", c->state_file, ".tmp" },
		{ "the control socket", c->control.socket, "" },
		{ "the runtime lock", c->runtime_dir, "/sluiced.lock" },
	};
	char p[PATH_MAX], cp[PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (f[i].path == NULL || f[i].path[0] != '/' ||
		    snprintf(p, sizeof(p), "%s%s", f[i].path, f[i].suffix) >=
		    (int)sizeof(p))
			continue;
		if (usock_canon(p, cp, sizeof(cp), NULL, 0) == 0 &&
		    strcmp(cp, canon) == 0)
			return f[i].what;
	}
	return NULL;
}

/*
 * Where a session's socket goes (sluiced(8), "Session sockets"), into
 * path (as given) and canon (PATH_MAX each): the default for everyone;
 * another path for the configuration file anywhere, for an admin or the
 * state file only under listen.socket_prefixes, for the app role never.
 * Compared canonical, so no spelling makes two sessions share a socket
 * or puts one on the log, the state file or the control socket.
 */
static int
socket_place(const struct cfg_session *cs, enum px_origin origin,
    char *path, char *canon, enum px_refusal *why, char *err, size_t errlen)
{
	char dflt[PATH_MAX], dcanon[PATH_MAX], pc[PATH_MAX], e[160];
	const struct px_session *o;
	const char *own;
	size_t i;

	*why = PX_REF_INTERNAL;
	if (default_socket(cs->id, dflt) != 0 ||
	    usock_canon(dflt, dcanon, sizeof(dcanon), e, sizeof(e)) != 0)
		return errf(err, errlen, "socket: the default %s: %s", dflt,
		    e);
	*why = PX_REF_BAD;
	if (cs->socket == NULL) {
		snprintf(path, PATH_MAX, "%s", dflt);
		snprintf(canon, PATH_MAX, "%s", dcanon);
	} else {
		if (usock_path_check(cs->socket, e, sizeof(e)) != 0 ||
		    usock_canon(cs->socket, canon, PATH_MAX, e, sizeof(e)) != 0)
			return errf(err, errlen, "socket: %s", e);
		snprintf(path, PATH_MAX, "%s", cs->socket);
	}
	/* clients connect by this name */
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return errf(err, errlen, "socket: %s is longer than a socket "
		    "path can be (%zu bytes)", path,
		    sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	*why = PX_REF_FORBIDDEN;
	if (strcmp(canon, dcanon) != 0 && origin == PX_ORIGIN_APP)
		return errf(err, errlen, "socket: the app role gets the "
		    "default socket %s; leave socket out (other paths are for "
		    "admins, under listen.socket_prefixes)", dflt);
	if (strcmp(canon, dcanon) != 0 && origin == PX_ORIGIN_ADMIN) {
		for (i = 0; i < px.cfg->nsocket_prefixes; i++)
			if (prefix_canon(px.cfg->socket_prefixes[i], pc) == 0 &&
			    usock_under(canon, pc))
				break;
		if (i == px.cfg->nsocket_prefixes)
			return errf(err, errlen, "socket: %s is not under "
			    "listen.socket_prefixes%s", path,
			    px.cfg->nsocket_prefixes == 0 ?
			    " (none are configured)" : "");
	}
	if ((own = own_file(canon)) != NULL)
		return errf(err, errlen, "socket: %s is %s", path, own);
	*why = PX_REF_TAKEN;
	TAILQ_FOREACH(o, &px.sessions, entry)
		if (o->transport == PX_T_UNIX &&
		    strcmp(o->socket_canon, canon) == 0)
			return errf(err, errlen, "socket: %s belongs to session "
			    "%s", path, pol_session_id(o->pol));
	return 0;
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
px_session_create(const struct cfg_session *cs, enum px_origin origin,
    enum px_refusal *why, char *err, size_t errlen)
{
	struct px_session *s;
	enum px_refusal ignored;
	char path[PATH_MAX], canon[PATH_MAX], user[SESSION_USER_CAP + 4];

	if (why == NULL)
		why = &ignored;
	*why = PX_REF_BAD;
	if (!pol_id_valid(cs->id)) {
		errf(err, errlen, "bad session id");
		return NULL;
	}
	if (cs->source == NULL && cs->vsock_cid < 0 &&
	    socket_place(cs, origin, path, canon, why, err, errlen) != 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		*why = PX_REF_INTERNAL;
		errf(err, errlen, "out of memory");
		return NULL;
	}
	TAILQ_INIT(&s->conns);
	s->vsock_cid = -1;
	s->from_config = origin == PX_ORIGIN_FILE;
	if (cs->source != NULL) {
		s->transport = PX_T_TCP;
		s->source = cs->source_addr;
	} else if (cs->vsock_cid >= 0) {
		s->transport = PX_T_VSOCK;
		s->vsock_cid = cs->vsock_cid;
	} else {
		s->transport = PX_T_UNIX;
		s->socket_path = strdup(path);
		s->socket_canon = strdup(canon);
		if (s->socket_path == NULL || s->socket_canon == NULL) {
			*why = PX_REF_INTERNAL;
			errf(err, errlen, "out of memory");
			goto fail;
		}
	}
	s->pol = pol_session_add(px.state, cs->id, cs->tenant,
	    session_user(cs->user, user, sizeof(user)), cs->tier);
	if (s->pol == NULL) {
		*why = PX_REF_BAD;
		errf(err, errlen, "cannot add session (bad or duplicate id)");
		goto fail;
	}
	if (s->transport == PX_T_UNIX &&
	    px_session_listen(s, why, err, errlen) != 0)
		goto fail;
	TAILQ_INSERT_TAIL(&px.sessions, s, entry);
	return s;
fail:
	if (s->pol != NULL)
		pol_session_remove(px.state, s->pol);
	free(s->socket_path);
	free(s->socket_canon);
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
	free(s->socket_canon);
	free(s);
}

static int
same_transport(const struct px_session *s, const struct cfg_session *cs)
{
	char path[PATH_MAX], canon[PATH_MAX];

	if (cs->source != NULL)
		return s->transport == PX_T_TCP &&
		    memcmp(&s->source, &cs->source_addr, sizeof(s->source)) == 0;
	if (cs->vsock_cid >= 0)
		return s->transport == PX_T_VSOCK && s->vsock_cid == cs->vsock_cid;
	if (s->transport != PX_T_UNIX)
		return 0;
	if (cs->socket != NULL)
		snprintf(path, sizeof(path), "%s", cs->socket);
	else if (default_socket(cs->id, path) != 0)
		return 0;
	return usock_canon(path, canon, sizeof(canon), NULL, 0) == 0 &&
	    strcmp(s->socket_canon, canon) == 0;
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
	char err[512], user[SESSION_USER_CAP + 4];
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
		if (cs == NULL || !same_transport(s, cs) ||
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
		if (px_session_create(&px.cfg->sessions[i], PX_ORIGIN_FILE,
		    NULL, err, sizeof(err)) == NULL) {
			px_log(PX_ERR, "%s: session %s: %s", __func__,
			    px.cfg->sessions[i].id, err);
			rc = -1;
		}
	}
	return rc;
}

int
px_session_transport_taken(const struct cfg_session *cs)
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
