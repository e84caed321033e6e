/*
 * events.c: the control API's event stream (Server-Sent Events).
 *
 * Every published event becomes one frame, kept in a ring whose slot is
 * the event id modulo its size, so that a Last-Event-ID replay is an
 * index walk.  Each subscriber has a cursor (the next id it gets) and
 * is sent frames from the ring while its unsent bytes stay within
 * max_pending; the write callback sends more as they go out.  So a
 * subscriber's own buffer never passes max_pending (plus one frame),
 * replays are paced the same way, and one that stops reading is dropped
 * when the ring has overwritten a frame it has yet to get, or when its
 * writes make no progress for EV_WRITE_TIMEOUT_S.
 *
 * evhttp 2.1.12 notes (tech.md 7): its one timeout covers reads too,
 * and a subscriber never sends anything after its request, so a stream
 * keeps only a write timeout; the write callback fires when the
 * connection's whole output has gone, which is when pending is zero; a
 * connection that fails leaves its request to us (freed in on_close).
 */
#include "sluice-config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include <jansson.h>

#include "proxy/lib/clog.h"
#include "proxy/lib/log.h"
#include "proxy/lib/util.h"
#include "proxy/control/events.h"

/* A stream whose pending bytes make no progress for this long is
 * dropped (evhttp_set_timeout's value for the API is 30 s too). */
#define EV_WRITE_TIMEOUT_S 30

struct ev_frame {
	char *text;
	size_t len;
};

struct ev_sub {
	TAILQ_ENTRY(ev_sub) entry;
	struct evhttp_request *req;
	struct evhttp_connection *evcon;
	struct event *kill;      /* deferred drop: never free a connection
	                          * from inside evhttp's own call stack */
	uint64_t cursor;         /* next event id to send */
	size_t pending;          /* bytes queued and not yet written */
	int approver;
	int dead;                /* dropped; waiting for kill */
	char why[96];
};

TAILQ_HEAD(ev_subs, ev_sub);

static struct {
	struct event_base *base;
	struct ev_frame *ring;
	size_t ring_size;
	size_t max_pending;
	uint64_t next_id;        /* ids start at 1 */
	struct event *ping;
	struct ev_subs subs;
	size_t nsubs, napprovers;
} ev;

/* ------------------------------------------------------------------ */
/* The ring. */

static uint64_t
ring_oldest(void)
{
	uint64_t kept = ev.next_id - 1;

	return kept > ev.ring_size ? ev.next_id - ev.ring_size : 1;
}

static const struct ev_frame *
ring_get(uint64_t id)
{
	if (id < ring_oldest() || id >= ev.next_id)
		return NULL;
	return &ev.ring[id % ev.ring_size];
}

/* ------------------------------------------------------------------ */
/* Subscribers. */

static void
sub_free(struct ev_sub *s)
{
	TAILQ_REMOVE(&ev.subs, s, entry);
	if (!s->dead) {
		ev.nsubs--;
		if (s->approver)
			ev.napprovers--;
	}
	if (s->kill != NULL)
		event_free(s->kill);
	free(s);
}

/* Marks s dropped at once (it no longer counts, gets nothing more) and
 * closes its connection from the loop. */
static void
sub_drop(struct ev_sub *s, const char *why)
{
	if (s->dead)
		return;
	s->dead = 1;
	ev.nsubs--;
	if (s->approver)
		ev.napprovers--;
	snprintf(s->why, sizeof(s->why), "%s", why);
	px_log(PX_WARN, "%s: dropping an event subscriber: %s", __func__,
	    why);
	event_active(s->kill, EV_TIMEOUT, 0);
}

static void
on_kill(evutil_socket_t fd, short what, void *arg)
{
	struct ev_sub *s = arg;
	struct evhttp_connection *evcon = s->evcon;

	(void)fd;
	(void)what;
	/* the request is still queued on the connection, which frees it */
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	sub_free(s);
	evhttp_connection_free(evcon);
}

/* The connection is going: a client that left, a write error or
 * timeout, or the API shutting down. */
static void
on_close(struct evhttp_connection *evcon, void *arg)
{
	struct ev_sub *s = arg;

	(void)evcon;
	/* a failed connection has let go of the request: it is ours now */
	if (evhttp_request_get_connection(s->req) == NULL)
		evhttp_request_free(s->req);
	sub_free(s);
}

static int
sub_send(struct ev_sub *s, const char *text, size_t len);

static void pump(struct ev_sub *s);

/* All that was queued has been written. */
static void
on_flushed(struct evhttp_connection *evcon, void *arg)
{
	struct ev_sub *s = arg;
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);

	s->pending = bev ? evbuffer_get_length(bufferevent_get_output(bev)) :
	    0;
	if (!s->dead)
		pump(s);
}

static int
sub_send(struct ev_sub *s, const char *text, size_t len)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL || evbuffer_add(b, text, len) != 0) {
		if (b != NULL)
			evbuffer_free(b);
		sub_drop(s, "out of memory");
		return -1;
	}
	s->pending += len;
	evhttp_send_reply_chunk_with_cb(s->req, b, on_flushed, s);
	evbuffer_free(b);
	return 0;
}

/*
 * Sends s what it has yet to get, while its unsent bytes stay within
 * max_pending (one frame always goes, however large).  The rest waits
 * in the ring for on_flushed: a burst of events from one call (a
 * ceiling PUT naming many tenants) must not cost a reader that keeps
 * up its stream.  A subscriber that does not keep up loses its place
 * in the ring, and is dropped then.
 */
static void
pump(struct ev_sub *s)
{
	const struct ev_frame *f;
	char why[128];

	while (!s->dead && s->cursor < ev.next_id) {
		if ((f = ring_get(s->cursor)) == NULL) {
			snprintf(why, sizeof(why), "%" PRIu64 " event(s) "
			    "behind, more than events.ring %zu, with %zu "
			    "bytes unsent (events.max_pending %zu)",
			    ev.next_id - s->cursor, ev.ring_size, s->pending,
			    ev.max_pending);
			sub_drop(s, why);
			return;
		}
		if (s->pending > 0 && s->pending + f->len > ev.max_pending)
			return;
		if (sub_send(s, f->text, f->len) != 0)
			return;
		s->cursor++;
	}
}

static void
on_ping(evutil_socket_t fd, short what, void *arg)
{
	static const char ping[] = ": ping\n\n";
	struct ev_sub *s, *tmp;

	(void)fd;
	(void)what;
	(void)arg;
	/* a stream with bytes in flight needs no ping: the write timeout
	 * watches it */
	TAILQ_FOREACH_SAFE(s, &ev.subs, entry, tmp)
		if (!s->dead && s->pending == 0)
			sub_send(s, ping, sizeof(ping) - 1);
}

/* The id after which to replay, or 0 for a live start. */
static uint64_t
replay_from(const char *last_id)
{
	uint64_t v = 0;
	const char *p = last_id;

	if (p == NULL)
		return ev.next_id;
	while (*p == ' ')
		p++;
	if (*p == '\0')
		return ev.next_id;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return ev.next_id;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	while (*p == ' ')
		p++;
	/* unparsable, or an id this process never gave: live */
	if (*p != '\0' || v >= ev.next_id)
		return ev.next_id;
	/* older than the ring: all that is kept */
	return v + 1 < ring_oldest() ? ring_oldest() : v + 1;
}

/* ------------------------------------------------------------------ */
/* Contract. */

int
ev_init(struct event_base *base, size_t ring, size_t max_pending,
    int heartbeat_s)
{
	struct timeval tv = { heartbeat_s > 0 ? heartbeat_s : 15, 0 };

	memset(&ev, 0, sizeof(ev));
	TAILQ_INIT(&ev.subs);
	if (ring == 0)
		ring = 1;
	ev.ring = calloc(ring, sizeof(*ev.ring));
	ev.ping = event_new(base, -1, EV_PERSIST, on_ping, NULL);
	if (ev.ring == NULL || ev.ping == NULL || event_add(ev.ping, &tv)) {
		free(ev.ring);
		if (ev.ping != NULL)
			event_free(ev.ping);
		memset(&ev, 0, sizeof(ev));
		return -1;
	}
	ev.base = base;
	ev.ring_size = ring;
	ev.max_pending = max_pending;
	ev.next_id = 1;
	return 0;
}

void
ev_shutdown(void)
{
	struct ev_sub *s;
	size_t i;

	if (ev.base == NULL)
		return;
	while ((s = TAILQ_FIRST(&ev.subs)) != NULL) {
		struct evhttp_connection *evcon = s->evcon;
		struct evhttp_request *req = s->req;
		int dead = s->dead;

		evhttp_connection_set_closecb(evcon, NULL, NULL);
		sub_free(s);
		/* the last chunk; evhttp owns the request from here */
		if (dead)
			evhttp_connection_free(evcon);
		else
			evhttp_send_reply_end(req);
	}
	event_free(ev.ping);
	for (i = 0; i < ev.ring_size; i++)
		free(ev.ring[i].text);
	free(ev.ring);
	memset(&ev, 0, sizeof(ev));
	TAILQ_INIT(&ev.subs);
}

uint64_t
ev_publish(const char *type, void *data)
{
	json_t *j = data;
	struct ev_frame *f;
	struct ev_sub *s, *tmp;
	char *raw = NULL, *json = NULL, *text = NULL;
	uint64_t id;
	int n;

	if (ev.base == NULL || j == NULL)
		goto fail;
	if ((raw = json_dumps(j, JSON_COMPACT)) == NULL)
		goto fail;
	/* an approver's terminal shows these strings: escaped, not raw */
	json = clog_json_escape(raw, strlen(raw), NULL);
	free(raw);
	if (json == NULL)
		goto fail;
	id = ev.next_id;
	/* compact JSON has no raw newlines: one data line */
	n = asprintf(&text, "id: %" PRIu64 "\nevent: %s\ndata: %s\n\n", id,
	    type, json);
	if (n < 0) {
		text = NULL;
		goto fail;
	}
	f = &ev.ring[id % ev.ring_size];
	free(f->text);
	f->text = text;
	f->len = (size_t)n;
	ev.next_id++;
	TAILQ_FOREACH_SAFE(s, &ev.subs, entry, tmp)
		if (!s->dead)
			pump(s);
	free(json);
	json_decref(j);
	return id;
fail:
	px_log(PX_ERR, "%s: cannot publish a %s event", __func__, type);
	free(json);
	json_decref(j);
	return 0;
}

void
ev_subscribe(struct evhttp_request *req, int approver, const char *last_id)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const struct timeval wtv = { EV_WRITE_TIMEOUT_S, 0 };
	struct bufferevent *bev;
	struct ev_sub *s;

	if (ev.base == NULL || evcon == NULL) {
		evhttp_send_error(req, 503, "the event stream is not running");
		return;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->kill = event_new(ev.base, -1, 0, on_kill, s)) == NULL) {
		free(s);
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	s->req = req;
	s->evcon = evcon;
	s->approver = approver != 0;
	s->cursor = replay_from(last_id);
	TAILQ_INSERT_TAIL(&ev.subs, s, entry);
	ev.nsubs++;
	if (s->approver)
		ev.napprovers++;

	evhttp_remove_header(h, "Content-Type");
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_send_reply_start(req, 200, "OK");
	evhttp_connection_set_closecb(evcon, on_close, s);
	/* the subscriber sends nothing more: no read timeout, which the
	 * API's one timeout would otherwise end the stream with */
	if ((bev = evhttp_connection_get_bufferevent(evcon)) != NULL)
		bufferevent_set_timeouts(bev, NULL, &wtv);
	pump(s);
}

size_t
ev_approvers(void)
{
	return ev.napprovers;
}

size_t
ev_subscribers(void)
{
	return ev.nsubs;
}
