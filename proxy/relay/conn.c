/*
 * conn.c: one client connection of sluiced.
 *
 * A connection reads a request head under a deadline, is decided by
 * policy/, and is refused here or handed to upstream.c.  Every
 * connection ends in px_conn_close(), which writes the close record and
 * says why on the diagnostic log.
 */
#include "sluice-config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/vm_sockets.h>

#include <event2/bufferevent_ssl.h>

#include "proxy/relay/relay-int.h"
#include "proxy/lib/tproxy.h"
#include "proxy/lib/util.h"

/* Every connection, for the walkers; the count bounds max_conns_total. */
static TAILQ_HEAD(, px_conn) conns = TAILQ_HEAD_INITIALIZER(conns);
static int nconns;
/* Closed connections whose struct is freed at the end of the loop's
 * pass (reap), when no callback further up the stack can hold it. */
static TAILQ_HEAD(, px_conn) dead = TAILQ_HEAD_INITIALIZER(dead);
static struct event *reap_ev;
static uint64_t next_conn_id;

/* Under pressure a session may hold at least this many, whatever its
 * fair share comes to. */
#define PX_FAIR_FLOOR 4

struct relay_counters px_counters;
struct relay_hooks px_hooks;

void
px_relay_set_hooks(const struct relay_hooks *h)
{
	px_hooks = *h;
}

long
px_elapsed_ms(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)((now.tv_sec - since->tv_sec) * 1000 +
	    (now.tv_nsec - since->tv_nsec) / 1000000);
}

void
px_conn_touch(struct px_conn *c)
{
	struct timeval tv;

	event_base_gettimeofday_cached(px.base, &tv);
	c->last_active_ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/*
 * Write what bev has queued now, in this callback, instead of on the
 * next writable event.  A socket bufferevent writes only when epoll says
 * the socket is writable: for a keep-alive request that is a loop turn
 * and an epoll_ctl pair per direction, on sockets that almost always
 * have room.  What a short write leaves is handed back to libevent
 * (EV_WRITE on), so a slow reader is still waited for; an error stays
 * queued for libevent to find and report through the event callback.
 * Returns 1 when nothing is left queued.
 */
int
px_out_flush(struct bufferevent *bev)
{
	struct evbuffer *out = bufferevent_get_output(bev);

	if (evbuffer_get_length(out) == 0)
		return 1;
	if (bufferevent_openssl_get_ssl(bev) != NULL) {
		/* an inspected leg: only OpenSSL may write its socket */
		bufferevent_enable(bev, EV_WRITE);
		return 0;
	}
	/* libevent keeps the front of its output frozen while it owns
	 * the writing; take it for one write, as bufferevent_writecb does */
	evbuffer_unfreeze(out, 1);
	(void)evbuffer_write(out, bufferevent_getfd(bev));
	evbuffer_freeze(out, 1);
	if (evbuffer_get_length(out) > 0) {
		bufferevent_enable(bev, EV_WRITE);
		return 0;
	}
	return 1;
}

static void
arm_timer_ms(struct px_conn *c, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(c->timer, &tv);
}

/* Above this many connections in all (limits.pressure_pct of
 * limits.max_conns_total) sluiced is under pressure: sessions are held
 * to their fair share and kept connections wait less for their next
 * request. */
static int
pressure_mark(void)
{
	return (int)((long)px.cfg->max_conns_total * px.cfg->pressure_pct /
	    100);
}

/*
 * How much longer a kept client connection, idle since last_active_ms,
 * may wait for its next request (<= 0: it is closed now): idle_timeout_s,
 * or head_timeout_ms under pressure.  Never more than head_timeout_ms
 * at a time, so that one kept idle before the pressure began is looked
 * at again soon after it begins.
 */
static long
idle_left_ms(const struct px_conn *c)
{
	struct timeval now;
	long limit, left;

	limit = nconns > pressure_mark() ? (long)px.cfg->head_timeout_ms :
	    (long)px.cfg->idle_timeout_s * 1000;
	event_base_gettimeofday_cached(px.base, &now);
	left = limit - (long)((uint64_t)now.tv_sec * 1000 +
	    (uint64_t)now.tv_usec / 1000 - c->last_active_ms);
	return left < px.cfg->head_timeout_ms ? left :
	    px.cfg->head_timeout_ms;
}

const long px_dns_bucket_us[PX_DNS_BUCKETS] = {
	1000, 5000, 10000, 50000, 100000, 500000, 1000000, 2500000, 5000000
};

void
px_count_decision(struct px_conn *c, enum pol_verdict v, enum pol_reason why)
{
	if ((unsigned)why >= POL_R__COUNT)
		why = POL_R_NONE;
	px_counters.decisions[v][why]++;
	if (c->session != NULL) {
		if (v == POL_ALLOW)
			c->session->n_allowed++;
		else
			c->session->n_denied++;
	}
}

void
px_count_dns(long elapsed_us)
{
	size_t i;

	for (i = 0; i < PX_DNS_BUCKETS; i++)
		if (elapsed_us <= px_dns_bucket_us[i])
			break;
	px_counters.dns[i]++;
	px_counters.dns_count++;
	px_counters.dns_sum_s += elapsed_us / 1e6;
}

int
px_conn_log_allow(struct px_conn *c)
{
	if (px_rec_decision(c, POL_ALLOW, POL_R_NONE) != 0)
		return -1;
	c->logged_decision = 1;
	return 0;
}

void
px_conn_log_close(struct px_conn *c, enum pol_reason why)
{
	if (!c->logged_decision)
		return;
	c->logged_decision = 0;
	px_counters.bytes_up += c->bytes_up;
	px_counters.bytes_down += c->bytes_down;
	px_counters.closes[(unsigned)why < POL_R__COUNT ? why : POL_R_NONE]++;
	if (c->session != NULL) {
		c->session->bytes_up += c->bytes_up;
		c->session->bytes_down += c->bytes_down;
	}
	if (px_rec_close(c, why) != 0)
		px_log(PX_ERR, "%s: conn %llu: cannot write the close record",
		    __func__, (unsigned long long)c->id);
}

/* ------------------------------------------------------------------ */
/* Close: the one way out. */

static void
reap(evutil_socket_t fd, short ev, void *arg)
{
	struct px_conn *c;

	while ((c = TAILQ_FIRST(&dead)) != NULL) {
		TAILQ_REMOVE(&dead, c, entry);
		free(c);
	}
}

void
px_relay_reap(void)
{
	reap(-1, 0, NULL);
	if (reap_ev != NULL) {
		event_free(reap_ev);
		reap_ev = NULL;
	}
}

/*
 * Close c and release all it holds.  A close often happens deep inside
 * a callback chain (a body's framing error found while the upstream
 * connect completes, a refusal while a prompt is answered): everything
 * that could call back into c is cancelled here, but the struct stays
 * valid, marked closed, until the loop's pass ends, so the callers above
 * can see PX_GONE(c) and stop instead of using freed memory.
 */
void
px_conn_close(struct px_conn *c, enum pol_reason why)
{
	if (c->closed)
		return;
	c->closed = 1;
	px_conn_log_close(c, why);
	px_prompt_leave(c);
	px_log(PX_DEBUG, "%s: conn %llu (%s): %s", __func__,
	    (unsigned long long)c->id, c->peer,
	    why == POL_R_NONE ? "done" : pol_reason_name(why));
	px_upstream_cancel(c);
	px_splice_free(c->spl);
	c->spl = NULL;
	px_upstream_drop(c);
	if (c->cli != NULL)
		bufferevent_free(c->cli);
	c->cli = NULL;
	if (c->timer != NULL)
		event_free(c->timer);
	c->timer = NULL;
	free(c->head);
	c->head = NULL;
	free(c->req);
	c->req = NULL;
	TAILQ_REMOVE(&conns, c, entry);
	nconns--;
	if (c->session != NULL) {
		TAILQ_REMOVE(&c->session->conns, c, sentry);
		c->session->nconns--;
		c->session = NULL;
	}
	TAILQ_INSERT_TAIL(&dead, c, entry);
	if (reap_ev == NULL)
		reap_ev = event_new(px.base, -1, 0, reap, NULL);
	if (reap_ev != NULL)
		event_active(reap_ev, EV_TIMEOUT, 0);
	px_relay_drain_check();
}

/* ------------------------------------------------------------------ */
/* Walkers: the rest of sluiced acts on connections only through these. */

void
px_relay_drain_check(void)
{
	if (px.draining && nconns == 0)
		event_base_loopexit(px.base, NULL);
}

int
px_relay_nconns(void)
{
	return nconns;
}

int
px_relay_count_tunnels(void)
{
	struct px_conn *c;
	int n = 0;

	TAILQ_FOREACH(c, &conns, entry)
		if (c->state == PX_S_TUNNEL)
			n++;
	return n;
}

void
px_relay_close_session(struct px_session *s, enum pol_reason why)
{
	struct px_conn *c;

	while ((c = TAILQ_FIRST(&s->conns)) != NULL)
		px_conn_close(c, why);
}

void
px_relay_close_all(enum pol_reason why)
{
	struct px_conn *c;

	while ((c = TAILQ_FIRST(&conns)) != NULL)
		px_conn_close(c, why);
}

void
px_relay_close_idle(enum pol_reason why)
{
	struct px_conn *c, *tmp;

	TAILQ_FOREACH_SAFE(c, &conns, entry, tmp)
		if (c->state == PX_S_HEAD &&
		    evbuffer_get_length(bufferevent_get_input(c->cli)) == 0)
			px_conn_close(c, why);
}

size_t
px_relay_close_exceeding(struct px_session *only)
{
	struct px_conn *c, *tmp;
	struct pol_decision d;
	size_t n = 0;

	TAILQ_FOREACH_SAFE(c, &conns, entry, tmp) {
		if (c->session == NULL || (only && c->session != only) ||
		    c->target.host[0] == '\0' || c->state == PX_S_HEAD ||
		    c->state == PX_S_FLUSH)
			continue;
		pol_decide(px.pol, px.state, c->session->pol, &c->target, &d);
		if (d.verdict == POL_ALLOW)
			continue;
		px_conn_close(c, POL_R_CEILING_LOWERED);
		n++;
	}
	return n;
}

void
px_relay_dns_swap(struct dns *nd)
{
	struct px_conn *c;

	/* queries in flight restart on the new resolver */
	TAILQ_FOREACH(c, &conns, entry)
		if (c->state == PX_S_RESOLVE)
			px_upstream_cancel(c);
	dns_free(px.dns);
	px.dns = nd;
	TAILQ_FOREACH(c, &conns, entry)
		if (c->state == PX_S_RESOLVE)
			px_upstream_start(c);
}

/* ------------------------------------------------------------------ */
/* Refusals. */


static void
flush_then_close(struct bufferevent *bev, void *arg)
{
	struct px_conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		px_conn_close(c, c->close_why);
}

static void
flush_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	px_conn_close(c, c->close_why);
}

/* Write what is queued and close; a client that stops reading cannot
 * keep us past the head deadline. */
void
px_conn_flush_close(struct px_conn *c, enum pol_reason why)
{
	if (PX_GONE(c))
		return;
	c->close_why = why;
	c->state = PX_S_FLUSH;
	bufferevent_disable(c->cli, EV_READ);
	bufferevent_setcb(c->cli, NULL, flush_then_close, flush_event, c);
	bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
	evtimer_del(c->timer);
	arm_timer_ms(c, px.cfg->head_timeout_ms);
	/* the answer usually fits the socket: close now, no loop turn */
	if (px_out_flush(c->cli))
		px_conn_close(c, why);
}

static int
refusal_keeps_connection(const struct px_conn *c, enum pol_reason why)
{
	if (c->req == NULL || c->req->m == HTTP_M_CONNECT ||
	    c->req->method == NULL ||
	    !c->req->keep_alive || c->req->body != HTTP_BODY_NONE || px.draining)
		return 0;
	switch (why) {
	case POL_R_BAD_REQUEST: case POL_R_HEAD_TOO_LARGE:
	case POL_R_HEAD_TIMEOUT: case POL_R_SESSION_UNKNOWN:
	case POL_R_TOO_MANY_CONNECTIONS: case POL_R_LOG_UNAVAILABLE:
	case POL_R_SHUTTING_DOWN: case POL_R_TOO_MANY_REFUSALS:
		return 0;
	default:
		return 1;
	}
}

int
px_conn_decide(struct px_conn *c, struct px_session *s)
{
	if (PX_GONE(c) || s == NULL)
		return 0;
	pol_decide(px.pol, px.state, s->pol, &c->target, &c->dec);
	if (c->dec.verdict == POL_DENY) {
		px_conn_refuse(c, c->dec.reason, NULL);
		return 0;
	}
	if (c->dec.verdict == POL_PROMPT) {
		px_prompt_request(c);
		return 0;
	}
	return 1;
}

int
px_conn_admissible(struct px_conn *c, const struct px_session *s)
{
	if (s == NULL)
		px_conn_refuse(c, POL_R_SESSION_UNKNOWN, NULL);
	else if (px.draining)
		px_conn_refuse(c, POL_R_SHUTTING_DOWN, NULL);
	else
		return 1;
	return 0;
}

void
px_conn_refuse(struct px_conn *c, enum pol_reason why, const char *detail)
{
	px_conn_answer(c, why, detail, 1);
}

void
px_conn_answer(struct px_conn *c, enum pol_reason why, const char *detail,
    int log)
{
	int status = pol_reason_status(why);
	int keep;
	char what[POL_HOST_MAX + 64], body[1024];
	int n;

	if (PX_GONE(c))
		return;
	keep = refusal_keeps_connection(c, why);
	px_upstream_cancel(c);
	if (c->state == PX_S_CONNECT || c->state == PX_S_FWD)
		px_upstream_drop(c);
	/* the app hears of refusals as they happen */
	if (px_hooks.denied != NULL && c->session != NULL)
		px_hooks.denied(pol_session_id(c->session->pol),
		    c->target.host, (int)c->target.port, c->method, why);
	if (log && px_rec_decision(c, c->dec.verdict == POL_PROMPT ?
	    POL_PROMPT : POL_DENY, why) != 0)
		px_log(PX_ERR, "%s: conn %llu: cannot write the decision record",
		    __func__, (unsigned long long)c->id);
	if (log)
		c->nrefused++;
	c->logged_decision = 0;
	if (c->tp_tls) {
		/* a redirected TLS client expects a ServerHello: nothing
		 * sluiced could say would reach it, so the close is the
		 * answer and the record says why */
		px_upstream_drop(c);
		px_conn_flush_close(c, POL_R_NONE);
		return;
	}

	if (c->target.host[0] != '\0')
		snprintf(what, sizeof(what), "%s %s%s%s:%u", c->method,
		    c->target.kind == POL_HOST_V6 ? "[" : "", c->target.host,
		    c->target.kind == POL_HOST_V6 ? "]" : "",
		    c->target.port);
	else
		snprintf(what, sizeof(what), "this request");
	n = snprintf(body, sizeof(body), "sluice refused %s (%s): %s%s%s\n",
	    what, pol_reason_name(why), pol_reason_hint(why),
	    detail ? " " : "", detail ? detail : "");
	if (n < 0 || (size_t)n >= sizeof(body)) {
		n = (int)sizeof(body) - 1;
		body[n - 1] = '\n';
	}
	if (c->rule[0] != '\0' && (why == POL_R_RULE_DENIED || c->rule_held))
		evbuffer_add_printf(bufferevent_get_output(c->cli),
		    "HTTP/1.1 %d %s\r\nX-Sluice-Rule: %s\r\n", status,
		    util_http_phrase(status), c->rule);
	else
		evbuffer_add_printf(bufferevent_get_output(c->cli),
		    "HTTP/1.1 %d %s\r\n", status, util_http_phrase(status));
	evbuffer_add_printf(bufferevent_get_output(c->cli),
	    "X-Sluice-Reason: %s\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: %d\r\n"
	    "Connection: %s\r\n"
	    "\r\n%s",
	    pol_reason_name(why), n,
	    keep ? "keep-alive" : "close", body);
	px_log(PX_DEBUG, "%s: conn %llu: %d %s", __func__,
	    (unsigned long long)c->id, status, pol_reason_name(why));
	if (keep) {
		px_out_flush(c->cli);
		px_conn_next_request(c);
	} else
		px_conn_flush_close(c, POL_R_NONE);
}

/* ------------------------------------------------------------------ */
/* Reading and deciding a request. */

static void cli_read(struct bufferevent *bev, void *arg);
static void cli_event(struct bufferevent *bev, short what, void *arg);
static void up_idle_event(struct bufferevent *bev, short what, void *arg);

static void
handle_request(struct px_conn *c)
{
	struct px_session *s = c->session;
	enum pol_reason r;

	clock_gettime(CLOCK_MONOTONIC, &c->t_start);
	px_conn_touch(c);    /* a head is traffic: no longer idle */
	c->bytes_up = c->bytes_down = 0;
	c->naddrs = c->nchecked = c->next_try = 0;
	c->dialed_idx = -1;
	c->sni[0] = '\0';
	c->prompt_id[0] = '\0';
	c->answered = 0;
	c->rule[0] = '\0';
	c->rule_held = 0;
	c->rule_done = 0;
	c->cred[0] = '\0';
	c->cred_removed = 0;
	c->path = NULL;
	memset(&c->target, 0, sizeof(c->target));
	memset(&c->dec, 0, sizeof(c->dec));
	snprintf(c->method, sizeof(c->method), "%.*s",
	    (int)c->req->method_len, c->req->method);
	c->nrequests++;

	if (s != NULL) {
		c->dec.tier = pol_session_tier(s->pol);
		c->dec.ceiling = pol_state_ceiling(px.state,
		    pol_session_tenant(s->pol));
	}
	/* a keep-alive connection refused again and again is closed: the
	 * client must fix its requests, not loop on them */
	if (c->nrefused >= px.cfg->max_refusals_per_conn) {
		px_conn_refuse(c, POL_R_TOO_MANY_REFUSALS, NULL);
		return;
	}
	if (c->req->m == HTTP_M_TRACE || c->req->m == HTTP_M_TRACK ||
	    c->req->m == HTTP_M_UNKNOWN)
		r = POL_R_METHOD_NOT_ALLOWED;
	else if (c->cli_tls) {
		/* inside an inspected tunnel: origin-form requests to the
		 * tunnel's host; no CONNECT in a CONNECT */
		r = POL_R_NONE;
		if (c->req->m == HTTP_M_CONNECT || c->req->target_len == 0 ||
		    c->req->target[0] != '/')
			r = POL_R_BAD_TARGET;
		c->target = c->insp;
		c->path = c->req->target;
		c->path_len = c->req->target_len;
	} else if (c->transport == PX_T_TRANSPARENT)
		/* Host (or the URI) names it, the redirect gave the port; a
		 * CONNECT here is refused (bad_target): it would open a
		 * tunnel to a port the client never dialled */
		r = tp_http_target(c->req, c->tp_port, &c->target, &c->path,
		    &c->path_len);
	else if (c->req->m == HTTP_M_CONNECT)
		r = pol_target_parse_authority(c->req->target,
		    c->req->target_len, &c->target);
	else
		r = pol_target_parse_uri(c->req->target, c->req->target_len,
		    &c->target, &c->path, &c->path_len);
	if (r != POL_R_NONE) {
		memset(&c->target, 0, sizeof(c->target));
		px_conn_refuse(c, r, NULL);
		return;
	}
	if (!px_conn_admissible(c, s))
		return;
	if (c->req->m == HTTP_M_CONNECT && cfg_port_in(px.cfg->plain_ports,
	    px.cfg->nplain_ports, c->target.port)) {
		/* the requests in such a tunnel would name any virtual host
		 * of the admitted name's front end, and nobody checks their
		 * Host: plain HTTP goes through the forwarder, which checks
		 * every request.  Refused before the decision, so no prompt
		 * asks about a tunnel that could not be opened anyway. */
		px_conn_refuse(c, POL_R_CONNECT_PLAIN_PORT, NULL);
		return;
	}
	if (c->req->m != HTTP_M_CONNECT && c->transport != PX_T_TRANSPARENT) {
		struct pol_target h;
		const struct http_header *hh;

		if (c->req->host_idx < 0) {
			px_conn_refuse(c, POL_R_BAD_REQUEST,
			    "The request has no Host header.");
			return;
		}
		hh = &c->req->headers[c->req->host_idx];
		if (pol_target_parse_hostport(hh->value, hh->value_len,
		    c->cli_tls ? 443 : 80, &h) != POL_R_NONE || strcmp(h.host, c->target.host) != 0 ||
		    h.port != c->target.port) {
			px_conn_refuse(c, POL_R_HOST_MISMATCH, NULL);
			return;
		}
	}
	c->inspect = c->cli_tls || (c->req->m == HTTP_M_CONNECT &&
	    px_inspect_host(&c->target));
	if (c->cli_tls) {
		/* each request is decided on its own; a tunnel a person
		 * allowed (once, or for the chat) carries that answer to
		 * the requests in it, which would otherwise ask again */
		pol_decide(px.pol, px.state, s->pol, &c->target, &c->dec);
		if (c->dec.verdict == POL_PROMPT && c->insp_answered &&
		    pol_answer_allows(c->insp_answer)) {
			c->dec.verdict = POL_ALLOW;
			c->dec.rule = POL_RULE_PROMPT;
			c->answered = 1;
			c->answer = c->insp_answer;
		}
		if (c->dec.verdict == POL_DENY) {
			px_conn_refuse(c, c->dec.reason, NULL);
			return;
		}
		if (c->dec.verdict == POL_PROMPT) {
			px_prompt_request(c);
			return;
		}
	} else if (!px_conn_decide(c, s) || PX_GONE(c))
		return;
	px_conn_proceed(c);
}

void
px_conn_proceed(struct px_conn *c)
{
	if (!px_rules_check(c) || PX_GONE(c))
		return;
	/* a redirected TLS connection has no request (c->req NULL): it
	 * dials, as a CONNECT does */
	if (c->req != NULL && c->req->m != HTTP_M_CONNECT && c->up != NULL &&
	    strcmp(c->up_host, c->target.host) == 0 &&
	    c->up_port == c->target.port) {
		/* same origin on a kept upstream connection: its address
		 * was checked when it was dialed */
		c->dialed_idx = 0;
		c->naddrs = 1;
		c->addrs[0] = c->checked[0];
		px_forward_start(c);
		return;
	}
	/* nothing more is read while the upstream is dialed (a kept one
	 * reads on at once: a disable and enable in one turn would cost
	 * an epoll_ctl) */
	bufferevent_disable(c->cli, EV_READ);
	px_upstream_drop(c);
	px_upstream_start(c);
}

static void
parse_head(struct px_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->cli);
	struct http_limits lim;
	size_t len = evbuffer_get_length(in), n;
	const char *why = NULL;
	unsigned char *data;
	enum http_status st;

	lim.max_head = px.cfg->max_head;
	lim.max_line = px.cfg->max_line;
	lim.max_headers = px.cfg->max_headers;
	if (len == 0)
		return;
	if (c->req == NULL && (c->req = malloc(sizeof(*c->req))) == NULL) {
		px_conn_close(c, POL_R_NONE);
		return;
	}
	n = len < lim.max_head ? len : lim.max_head;
	data = evbuffer_pullup(in, (ev_ssize_t)n);
	/* resumed: lines of earlier reads are not scanned again */
	st = http_parse_request_resume((const char *)data, n, &lim,
	    &c->req_ps, c->req, &why);
	if (st == HTTP_PARSE_INCOMPLETE)
		return;
	memset(&c->req_ps, 0, sizeof(c->req_ps));
	if (st == HTTP_PARSE_OK) {
		/* keep our own copy: the input buffer moves on */
		free(c->head);
		c->head_len = c->req->head_len;
		c->head = malloc(c->head_len + 1);
		if (c->head == NULL) {
			px_conn_close(c, POL_R_NONE);
			return;
		}
		memcpy(c->head, data, c->head_len);
		c->head[c->head_len] = '\0';
		/* the parse points into the input buffer: move it onto the
		 * copy, before the drain frees those bytes */
		http_msg_rebase(c->req, (const char *)data, c->head);
		evbuffer_drain(in, c->head_len);
	}
	evtimer_del(c->timer);
	/* bytes after the head belong to the body or the tunnel; whoever
	 * goes on from here says whether the client is read further */
	bufferevent_setwatermark(c->cli, EV_READ, 0, 0);
	if (st != HTTP_PARSE_OK) {
		/* nothing of a previous request may leak into this record */
		c->method[0] = '\0';
		memset(&c->target, 0, sizeof(c->target));
		c->path = NULL;
		c->naddrs = 0;
		c->dialed_idx = -1;
	}
	switch (st) {
	case HTTP_PARSE_OK:
		handle_request(c);
		break;
	case HTTP_PARSE_TOO_LARGE:
		if (c->req != NULL)
			memset(c->req, 0, sizeof(*c->req));
		px_conn_refuse(c, POL_R_HEAD_TOO_LARGE, why);
		break;
	default:
		if (c->req != NULL)
			memset(c->req, 0, sizeof(*c->req));
		px_conn_refuse(c, POL_R_BAD_REQUEST, why);
		break;
	}
}

static void
cli_read(struct bufferevent *bev, void *arg)
{
	struct px_conn *c = arg;

	if (c->state != PX_S_HEAD)
		return;
	if (!c->head_armed) {
		/* the first byte of a request starts its head deadline */
		evtimer_del(c->timer);
		arm_timer_ms(c, px.cfg->head_timeout_ms);
		c->head_armed = 1;
	}
	parse_head(c);
}

static void
cli_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	/* EOF or error while waiting for a head: nothing to answer */
	px_conn_close(c, POL_R_NONE);
}

static void
on_timer(evutil_socket_t fd, short ev, void *arg)
{
	struct px_conn *c = arg;
	struct timeval now;
	long idle_left;

	switch (c->state) {
	case PX_S_HEAD:
		if (evbuffer_get_length(bufferevent_get_input(c->cli)) == 0 &&
		    c->nrequests > 0) {
			if ((idle_left = idle_left_ms(c)) > 0) {
				arm_timer_ms(c, idle_left);
				return;
			}
			px_conn_close(c, POL_R_IDLE_TIMEOUT);
			return;
		}
		if (c->req != NULL)
			memset(c->req, 0, sizeof(*c->req));
		memset(&c->target, 0, sizeof(c->target));
		c->method[0] = '\0';
		px_conn_refuse(c, POL_R_HEAD_TIMEOUT, NULL);
		return;
	case PX_S_SNI:
		if (c->tp_tls && !c->logged_decision) {
			/* no ClientHello yet: nothing was decided */
			px_conn_refuse(c, POL_R_SNI_MISSING, NULL);
			return;
		}
		px_conn_close(c, POL_R_SNI_MISSING);
		return;
	case PX_S_FLUSH:
		px_conn_close(c, c->close_why);
		return;
	case PX_S_TUNNEL:
	case PX_S_FWD:
		event_base_gettimeofday_cached(px.base, &now);
		idle_left = (long)px.cfg->idle_timeout_s * 1000 - (long)
		    ((uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_usec / 1000 -
		    c->last_active_ms);
		if (idle_left <= 0) {
			px_conn_close(c, POL_R_IDLE_TIMEOUT);
			return;
		}
		arm_timer_ms(c, idle_left);
		return;
	default:
		return;
	}
}

static void
up_idle_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_conn *c = arg;

	/* the kept upstream connection went away between requests */
	px_upstream_drop(c);
}

static void
up_idle_read(struct bufferevent *bev, void *arg)
{
	/* bytes nobody asked for: this upstream cannot be trusted to frame
	 * the next answer */
	up_idle_event(bev, BEV_EVENT_ERROR, arg);
}

void
px_conn_next_request(struct px_conn *c)
{
	if (PX_GONE(c))
		return;
	c->state = PX_S_HEAD;
	c->path = NULL;
	memset(&c->req_ps, 0, sizeof(c->req_ps));
	bufferevent_setcb(c->cli, cli_read, NULL, cli_event, c);
	/* bound what a client can queue before its head is judged */
	bufferevent_setwatermark(c->cli, EV_READ, 0, px.cfg->max_head + 1);
	/* EV_WRITE only for what is still queued: enabling it on an empty
	 * output costs a wake-up for nothing */
	bufferevent_enable(c->cli, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->cli)) > 0)
		bufferevent_enable(c->cli, EV_WRITE);
	if (c->up != NULL) {
		bufferevent_setcb(c->up, up_idle_read, NULL, up_idle_event, c);
		bufferevent_enable(c->up, EV_READ);
	}
	evtimer_del(c->timer);
	if (evbuffer_get_length(bufferevent_get_input(c->cli)) > 0) {
		arm_timer_ms(c, px.cfg->head_timeout_ms);
		c->head_armed = 1;
		parse_head(c);
	} else {
		px_conn_touch(c);    /* idle from now */
		arm_timer_ms(c, idle_left_ms(c));
		c->head_armed = 0;
	}
}

static void
describe_peer(struct px_conn *c, const struct sockaddr *sa, int salen,
    enum px_transport t)
{
	char ip[INET6_ADDRSTRLEN + 8];

	switch (t) {
	case PX_T_UNIX:
		snprintf(c->peer, sizeof(c->peer), "unix");
		break;
	case PX_T_TCP:
		if (sa->sa_family == AF_INET) {
			const struct sockaddr_in *in =
			    (const struct sockaddr_in *)(const void *)sa;

			inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
			snprintf(c->peer, sizeof(c->peer), "tcp:%s:%u", ip,
			    ntohs(in->sin_port));
		} else {
			const struct sockaddr_in6 *in6 =
			    (const struct sockaddr_in6 *)(const void *)sa;

			inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
			snprintf(c->peer, sizeof(c->peer), "tcp:[%s]:%u", ip,
			    ntohs(in6->sin6_port));
		}
		break;
	case PX_T_VSOCK:
		snprintf(c->peer, sizeof(c->peer), "vsock:%u",
		    ((const struct sockaddr_vm *)(const void *)sa)->svm_cid);
		break;
	case PX_T_TRANSPARENT: {
		struct pol_addr a;
		uint16_t port = 0;

		if (tp_addr_from_sockaddr(sa, (socklen_t)salen, &a, &port) != 0)
			memset(&a, 0, sizeof(a));
		if (a.family == 0)
			snprintf(c->peer, sizeof(c->peer), "transparent");
		else {
			tp_format_dst(&a, port, ip, sizeof(ip));
			snprintf(c->peer, sizeof(c->peer), "transparent:%s",
			    ip);
		}
		break;
	}
	}
}

/* The fair share of one of nactive sessions when mark connections are
 * divided among them: at least PX_FAIR_FLOOR. */
static int
fair_share(int mark, int nactive)
{
	int share = nactive > 0 ? mark / nactive : mark;

	return share > PX_FAIR_FLOOR ? share : PX_FAIR_FLOOR;
}

/*
 * Close the kept client connection, idle longest, of the session that
 * holds the most connections above share (not c's; of tenant only, when
 * tenant is not NULL): room for c when a cap is full.  0 when there is
 * none to close.
 */
static int
evict_idle(const struct px_conn *c, int share, const char *tenant)
{
	struct px_conn *v, *best = NULL;

	TAILQ_FOREACH(v, &conns, entry) {
		if (v == c || v->session == NULL || v->session == c->session ||
		    v->session->nconns <= share || v->state != PX_S_HEAD ||
		    v->nrequests == 0 || v->head_armed ||
		    evbuffer_get_length(bufferevent_get_input(v->cli)) != 0)
			continue;
		if (tenant != NULL &&
		    strcmp(pol_session_tenant(v->session->pol), tenant) != 0)
			continue;
		if (best == NULL || v->session->nconns > best->session->nconns ||
		    (v->session == best->session &&
		    v->last_active_ms < best->last_active_ms))
			best = v;
	}
	if (best == NULL)
		return 0;
	px_log(PX_DEBUG, "%s: conn %llu closed to make room for conn %llu",
	    __func__, (unsigned long long)best->id,
	    (unsigned long long)c->id);
	px_conn_close(best, POL_R_IDLE_TIMEOUT);
	return 1;
}

/*
 * The tenant's part of admit(): its sessions together may hold
 * limits.max_conns_per_tenant; above limits.pressure_pct of that each
 * of them is held to its fair share among the tenant's sessions that
 * hold connections, so a few chats of a tenant cannot take what its
 * other chats need (issue 20: four chats of a tenant held the whole cap
 * and a fifth got 429).  One within its share that finds the cap full
 * makes room by closing an idle kept connection of the tenant's biggest
 * holder.
 */
static enum pol_reason
admit_tenant(struct px_conn *c, const char *tenant, char *detail, size_t len)
{
	const struct px_session *s = c->session, *t;
	int n = 0, active = 0, share, cap = px.cfg->max_conns_per_tenant;
	int mark = (int)((long)cap * px.cfg->pressure_pct / 100);

	TAILQ_FOREACH(t, &px.sessions, entry)
		if (strcmp(pol_session_tenant(t->pol), tenant) == 0 &&
		    t->nconns > 0) {
			n += t->nconns;
			active++;
		}
	if (n <= mark)
		return POL_R_NONE;
	share = fair_share(mark, active);
	if (s->nconns > share) {
		snprintf(detail, len, "The sessions of tenant %s hold %d of "
		    "%d connections (above limits.pressure_pct of "
		    "limits.max_conns_per_tenant) and this session holds more "
		    "than its fair share of %d.", tenant, n - 1, cap, share);
		return POL_R_TOO_MANY_CONNECTIONS;
	}
	if (n <= cap || evict_idle(c, share, tenant))
		return POL_R_NONE;
	snprintf(detail, len, "The sessions of tenant %s hold %d connections "
	    "(limits.max_conns_per_tenant).", tenant, n - 1);
	return POL_R_TOO_MANY_CONNECTIONS;
}

/*
 * May c, just accepted and counted, stay?  Its session's cap, its
 * tenant's cap and fair shares (admit_tenant; a session without a
 * tenant is alone), then the total.  Above the pressure mark a session
 * is held to its fair share: the mark divided among the sessions that
 * hold connections, at least PX_FAIR_FLOOR.  So sessions that filled
 * sluiced up to the mark cannot take the rest, which is left to those
 * within their share; and one within its share that finds the total
 * full makes room by closing an idle kept connection of the biggest
 * holder.  POL_R_NONE, or the refusal with its detail for the answer.
 */
static enum pol_reason
admit(struct px_conn *c, char *detail, size_t len)
{
	const struct px_session *s = c->session, *t;
	const char *tenant;
	enum pol_reason r;
	int active = 0, share, mark = pressure_mark();

	if (s != NULL && s->nconns > px.cfg->max_conns_per_session) {
		snprintf(detail, len, "Its session holds %d connections "
		    "(limits.max_conns_per_session).", s->nconns - 1);
		return POL_R_TOO_MANY_CONNECTIONS;
	}
	if (s != NULL && *(tenant = pol_session_tenant(s->pol)) != '\0' &&
	    (r = admit_tenant(c, tenant, detail, len)) != POL_R_NONE)
		return r;
	if (nconns <= mark)
		return POL_R_NONE;
	share = PX_FAIR_FLOOR;
	if (s != NULL) {
		TAILQ_FOREACH(t, &px.sessions, entry)
			if (t->nconns > 0)
				active++;
		share = fair_share(mark, active);
		if (s->nconns > share) {
			snprintf(detail, len, "sluiced holds %d of %d "
			    "connections (above limits.pressure_pct) and its "
			    "session holds more than its fair share of %d.",
			    nconns - 1, px.cfg->max_conns_total, share);
			return POL_R_TOO_MANY_CONNECTIONS;
		}
	}
	if (nconns <= px.cfg->max_conns_total ||
	    (s != NULL && evict_idle(c, share, NULL)))
		return POL_R_NONE;
	snprintf(detail, len, "sluiced holds %d connections "
	    "(limits.max_conns_total).", nconns - 1);
	return POL_R_TOO_MANY_CONNECTIONS;
}

void
px_conn_accept(evutil_socket_t fd, const struct sockaddr *sa, int salen,
    enum px_transport t, struct px_session *s)
{
	struct px_conn *c;
	int one = 1;
	enum pol_reason limit = POL_R_NONE, tp_why = POL_R_NONE;
	char detail[256] = "";

	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	c->id = ++next_conn_id;
	px_counters.accepted++;
	c->transport = t;
	c->session = s;
	c->dialed_idx = -1;
	describe_peer(c, sa, salen, t);
	if (t == PX_T_UNIX && s != NULL)
		snprintf(c->peer, sizeof(c->peer), "unix:%s", s->socket_path);
	if (t == PX_T_TCP || t == PX_T_TRANSPARENT)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (t == PX_T_TRANSPARENT)
		tp_why = px_tp_setup(c, fd);
	c->cli = bufferevent_socket_new(px.base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timer = evtimer_new(px.base, on_timer, c);
	if (c->cli == NULL || c->timer == NULL) {
		if (c->cli)
			bufferevent_free(c->cli);
		else
			close(fd);
		if (c->timer)
			event_free(c->timer);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&conns, c, entry);
	nconns++;
	if (s != NULL) {
		TAILQ_INSERT_TAIL(&s->conns, c, sentry);
		s->nconns++;
	}
	px_conn_touch(c);
	limit = admit(c, detail, sizeof(detail));
	if (limit == POL_R_NONE)
		limit = tp_why;
	if (limit != POL_R_NONE) {
		/* answer at once: reading the head would spend what the
		 * limit protects */
		px_conn_refuse(c, limit, detail[0] != '\0' ? detail : NULL);
		return;
	}
	if (c->tp_tls) {
		px_tp_tls_start(c);
		return;
	}
	c->state = PX_S_HEAD;
	bufferevent_setcb(c->cli, cli_read, NULL, cli_event, c);
	bufferevent_setwatermark(c->cli, EV_READ, 0, px.cfg->max_head + 1);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	arm_timer_ms(c, px.cfg->head_timeout_ms);
	c->head_armed = 1;
}
