/*
 * console_up.c: non-blocking control-API calls for the console.
 *
 * The request goes out whole on connect; the answer is collected until
 * the server closes (we asked it to) or until it parses complete, then
 * handed to the callback from a deferred event, never from inside
 * cup_request(), so a caller never sees its callback before the call
 * returns.
 */
#ifdef HAVE_CONFIG_H
#include "sluice-config.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "proxy/lib/util.h"
#include "proxy/sluicectl/console_up.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0"
#endif

struct cup {
	struct bufferevent *bev;
	struct event *fire;      /* deferred completion */
	cup_done_fn done;
	void *arg;
	struct ctlh_resp resp;
	int have_resp;
	char sock[108];
	char err[512];
};

static void
cup_free(struct cup *u)
{
	if (u->bev != NULL)
		bufferevent_free(u->bev);
	if (u->fire != NULL)
		event_free(u->fire);
	ctlh_resp_free(&u->resp);
	free(u);
}

static void
on_fire(evutil_socket_t fd, short what, void *arg)
{
	struct cup *u = arg;

	(void)fd;
	(void)what;
	u->done(u->arg, u->have_resp ? &u->resp : NULL, u->err);
	cup_free(u);
}

/* Stop reading and report from the loop. */
static void
finish(struct cup *u)
{
	if (u->bev != NULL) {
		bufferevent_free(u->bev);
		u->bev = NULL;
	}
	event_active(u->fire, EV_TIMEOUT, 0);
}

/* Try to parse what has come; eof says the server has closed. */
static void
try_parse(struct cup *u, int eof)
{
	struct evbuffer *in = bufferevent_get_input(u->bev);
	size_t len = evbuffer_get_length(in);
	const char *buf;
	char err[128];
	int k;

	if (len > CUP_MAX) {
		snprintf(u->err, sizeof(u->err), "%s: the answer is larger "
		    "than %d bytes", u->sock, CUP_MAX);
		finish(u);
		return;
	}
	buf = (const char *)evbuffer_pullup(in, -1);
	if (buf == NULL && len > 0) {
		snprintf(u->err, sizeof(u->err), "out of memory");
		finish(u);
		return;
	}
	k = ctlh_parse_response(buf ? buf : "", len, eof, &u->resp, err,
	    sizeof(err));
	if (k == 0)
		return;
	if (k == 1)
		u->have_resp = 1;
	else
		snprintf(u->err, sizeof(u->err), "bad answer on %s: %s",
		    u->sock, err);
	finish(u);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	try_parse(arg, 0);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	struct cup *u = arg;
	int e = EVUTIL_SOCKET_ERROR();

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & BEV_EVENT_EOF) {
		try_parse(u, 1);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		snprintf(u->err, sizeof(u->err), "%s: no answer in time",
		    u->sock);
	else
		snprintf(u->err, sizeof(u->err), "cannot reach %s: %s",
		    u->sock, e ? strerror(e) : "connection failed");
	finish(u);
}

struct cup *
cup_request(struct event_base *base, const char *sock, const char *method,
    const char *path, const char *body, size_t bodylen, int timeout_s,
    cup_done_fn done, void *arg, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct timeval tv = { timeout_s > 0 ? timeout_s : 30, 0 };
	struct cup *u;
	struct evbuffer *out;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(sock) >= sizeof(sun.sun_path)) {
		errf(err, errlen, "%s: socket path too long", sock);
		return NULL;
	}
	memcpy(sun.sun_path, sock, strlen(sock));
	if ((u = calloc(1, sizeof(*u))) == NULL) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	u->done = done;
	u->arg = arg;
	snprintf(u->sock, sizeof(u->sock), "%s", sock);
	u->fire = event_new(base, -1, 0, on_fire, u);
	u->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (u->fire == NULL || u->bev == NULL)
		goto oom;
	out = bufferevent_get_output(u->bev);
	if (evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nHost: localhost\r\n"
	    "User-Agent: sluicectl-console/%s\r\nAccept: application/json\r\n"
	    "Connection: close\r\n%sContent-Length: %zu\r\n\r\n", method,
	    path, PACKAGE_VERSION, body ? "Content-Type: application/json\r\n"
	    : "", body ? bodylen : 0) < 0 ||
	    (body != NULL && evbuffer_add(out, body, bodylen) != 0))
		goto oom;
	bufferevent_setcb(u->bev, on_read, NULL, on_event, u);
	bufferevent_set_timeouts(u->bev, &tv, &tv);
	if (bufferevent_enable(u->bev, EV_READ | EV_WRITE) != 0)
		goto oom;
	/* a refused connect is reported through on_event as well */
	if (bufferevent_socket_connect(u->bev, (struct sockaddr *)&sun,
	    (int)sizeof(sun)) != 0) {
		/* libevent has freed nothing; the socket may be gone */
		snprintf(u->err, sizeof(u->err), "cannot reach %s: %s", sock,
		    strerror(errno ? errno : ECONNREFUSED));
		finish(u);
	}
	return u;
oom:
	cup_free(u);
	errf(err, errlen, "out of memory");
	return NULL;
}

void
cup_cancel(struct cup *u)
{
	if (u != NULL)
		cup_free(u);
}
