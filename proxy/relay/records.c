/*
 * records.c: the connection log's records of connections, one builder
 * per record type (DESIGN.md "Connection log").  The fields each record
 * carries, and their order, are pinned by tests/scenario/t_log_keys.py.
 *
 * Refusals cost a sandbox nothing but cost the log a record each: one
 * connection wrote 44k a second.  So the refusal records of a session
 * (and of connections that name none, together) go through a token
 * bucket (log.refusals_per_s, log.refusal_burst); those it has no token
 * for are folded: counted by reason, and said in one "refusals_folded"
 * record, at most one a second per session while it goes on, and at the
 * latest when the session ends or sluiced stops.  The refusals
 * themselves, their answers and their counters are unchanged.
 */
#include "sluice-config.h"

#include <string.h>

#include <jansson.h>

#include "proxy/relay/relay-int.h"
#include "proxy/lib/tproxy.h"

/* Refusals of connections that name no session share one bucket. */
static struct px_refusals nobody;
static struct event *fold_timer;
uint64_t px_refusals_folded_total;

/*
 * Close records and the allow records of requests without a body are
 * queued (clog_queue) and written together at the end of the loop's pass
 * over its active events, or with the next record written at once: with
 * many connections a pass's records cost one write(2).  Nothing waits on
 * a close record; a queued allow record's request goes upstream only
 * after the write (px_forward_log_written).
 */
static struct event *flush_ev;
static int flush_armed;

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	int rc;

	flush_armed = 0;
	rc = clog_flush(px.log);
	if (rc != 0)
		px_log(PX_ERR, "%s: cannot write the queued records", __func__);
	/* the requests whose allow records went in this write */
	px_forward_log_written(rc == 0);
}

/* Queue r, and have the loop write it before it next sleeps: 0, or 1
 * when it was written at once (no event to be had), -1 on failure. */
static int
rec_queue(struct clog_rec *r)
{
	if (clog_queue(px.log, r) != 0)
		return -1;
	if (flush_armed)
		return 0;
	if (flush_ev == NULL &&
	    (flush_ev = event_new(px.base, -1, 0, flush_cb, NULL)) == NULL)
		return clog_flush(px.log) == 0 ? 1 : -1;
	/* active now: runs after the callbacks already due in this pass */
	event_active(flush_ev, EV_TIMEOUT, 1);
	flush_armed = 1;
	return 0;
}

void
px_rec_cleanup(void)
{
	if (flush_ev != NULL)
		event_free(flush_ev);
	flush_ev = NULL;
	flush_armed = 0;
}

static void
rec_common(struct px_conn *c, struct clog_rec *r)
{
	struct px_session *s = c->session;

	clog_rec_int(r, "conn", (int64_t)c->id);
	clog_rec_str(r, "session", s ? pol_session_id(s->pol) : NULL);
	clog_rec_str(r, "tenant", s ? pol_session_tenant(s->pol) : NULL);
	clog_rec_str(r, "user", s ? pol_session_user(s->pol) : NULL);
	clog_rec_str(r, "transport", c->peer);
	if (c->tp_port != 0) {
		char d[64];

		tp_format_dst(&c->tp_dst, c->tp_port, d, sizeof(d));
		clog_rec_str(r, "orig_dst", d);
	}
	clog_rec_ustr(r, "method", c->method, strlen(c->method));
	if (c->target.host[0] != '\0') {
		clog_rec_str(r, "host", c->target.host);
		clog_rec_int(r, "port", c->target.port);
	} else {
		clog_rec_str(r, "host", NULL);
		clog_rec_str(r, "port", NULL);
	}
	/* an inspected CONNECT, or a request read inside one */
	if (c->inspect)
		clog_rec_bool(r, "inspected", 1);
}

static void
rec_addrs(struct px_conn *c, struct clog_rec *r)
{
	char bufs[DNS_MAX_ADDRS][48];
	const char *v[DNS_MAX_ADDRS];
	size_t i;

	for (i = 0; i < c->naddrs; i++) {
		pol_addr_format(&c->addrs[i], bufs[i], sizeof(bufs[i]));
		v[i] = bufs[i];
	}
	clog_rec_strv(r, "addrs", v, c->naddrs);
	if (c->dialed_idx >= 0) {
		char d[48];

		pol_addr_format(&c->checked[c->dialed_idx], d, sizeof(d));
		clog_rec_str(r, "dialed", d);
	} else
		clog_rec_str(r, "dialed", NULL);
}

static uint64_t
now_ms(void)
{
	struct timeval tv;

	event_base_gettimeofday_cached(px.base, &tv);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* A token for one refusal record of b; 0 when there is none. */
static int
refusal_token(struct px_refusals *b)
{
	double rate = px.cfg->log_refusals_per_s;
	double burst = px.cfg->log_refusal_burst;
	uint64_t now = now_ms();

	if (rate <= 0)
		return 1;
	if (b->refilled_ms == 0)
		b->tokens = burst;
	else if (now > b->refilled_ms) {
		b->tokens += (double)(now - b->refilled_ms) * rate / 1000.0;
		if (b->tokens > burst)
			b->tokens = burst;
	}
	b->refilled_ms = now;
	if (b->tokens < 1.0)
		return 0;
	b->tokens -= 1.0;
	return 1;
}

static void on_fold_timer(evutil_socket_t fd, short ev, void *arg);

static void
fold_timer_arm(void)
{
	struct timeval tv = { 1, 0 };

	if (fold_timer == NULL &&
	    (fold_timer = evtimer_new(px.base, on_fold_timer, NULL)) == NULL)
		return;         /* the session's end still says it */
	if (!evtimer_pending(fold_timer, NULL))
		evtimer_add(fold_timer, &tv);
}

static void
fold(struct px_refusals *b, enum pol_reason why)
{
	if (b->folded++ == 0) {
		b->since = time(NULL);
		if (b->summary_ms == 0)
			b->summary_ms = now_ms();
	}
	b->reasons[(unsigned)why < POL_R__COUNT ? why : POL_R_NONE]++;
	px_refusals_folded_total++;
	fold_timer_arm();
}

/* The refusals_folded record of b (s: its session, NULL for nobody's);
 * b starts afresh. */
static void
rec_folded(struct px_session *s, struct px_refusals *b)
{
	struct clog_rec *r;
	json_t *reasons;
	char since[32];
	size_t i;

	if (b->folded == 0)
		return;
	reasons = json_object();
	for (i = 0; i < POL_R__COUNT; i++)
		if (b->reasons[i] > 0)
			json_object_set_new(reasons, i == POL_R_NONE ? "none" :
			    pol_reason_name((enum pol_reason)i),
			    json_integer((json_int_t)b->reasons[i]));
	util_rfc3339(b->since, since, sizeof(since));
	r = clog_rec_new("refusals_folded");
	clog_rec_str(r, "session", s ? pol_session_id(s->pol) : NULL);
	clog_rec_str(r, "tenant", s ? pol_session_tenant(s->pol) : NULL);
	clog_rec_str(r, "user", s ? pol_session_user(s->pol) : NULL);
	clog_rec_int(r, "folded", (int64_t)b->folded);
	clog_rec_json(r, "reasons", reasons);
	clog_rec_str(r, "since", since);
	if (clog_write(px.log, r) != 0)
		px_log(PX_ERR, "%s: cannot write the refusals_folded record "
		    "(%llu refusals of %s)", __func__,
		    (unsigned long long)b->folded,
		    s ? pol_session_id(s->pol) : "no session");
	b->folded = 0;
	memset(b->reasons, 0, sizeof(b->reasons));
	b->summary_ms = now_ms();
}

/* Once a second while refusals are folded: the summary of each bucket
 * whose last one is a second old. */
static void
on_fold_timer(evutil_socket_t fd, short ev, void *arg)
{
	struct px_session *s;
	uint64_t now = now_ms();
	int more = 0;

	(void)fd;
	(void)ev;
	(void)arg;
	TAILQ_FOREACH(s, &px.sessions, entry) {
		if (s->refusals.folded == 0)
			continue;
		if (now - s->refusals.summary_ms >= 1000)
			rec_folded(s, &s->refusals);
		else
			more = 1;
	}
	if (nobody.folded > 0) {
		if (now - nobody.summary_ms >= 1000)
			rec_folded(NULL, &nobody);
		else
			more = 1;
	}
	if (more)
		fold_timer_arm();
}

void
px_refusals_flush(struct px_session *s)
{
	if (s != NULL) {
		rec_folded(s, &s->refusals);
		return;
	}
	TAILQ_FOREACH(s, &px.sessions, entry)
		rec_folded(s, &s->refusals);
	rec_folded(NULL, &nobody);
	if (fold_timer != NULL) {
		event_free(fold_timer);
		fold_timer = NULL;
	}
}

static struct clog_rec *rec_decision(struct px_conn *c, enum pol_verdict v,
    enum pol_reason why);

int
px_rec_decision(struct px_conn *c, enum pol_verdict v, enum pol_reason why)
{
	struct px_session *s = c->session;

	px_count_decision(c, v, why);
	if (v != POL_ALLOW &&
	    !refusal_token(s != NULL ? &s->refusals : &nobody)) {
		fold(s != NULL ? &s->refusals : &nobody, why);
		return 0;
	}
	return clog_write(px.log, rec_decision(c, v, why));
}

int
px_rec_allow_queued(struct px_conn *c)
{
	px_count_decision(c, POL_ALLOW, POL_R_NONE);
	return rec_queue(rec_decision(c, POL_ALLOW, POL_R_NONE));
}

static struct clog_rec *
rec_decision(struct px_conn *c, enum pol_verdict v, enum pol_reason why)
{
	struct px_session *s = c->session;
	struct clog_rec *r = clog_rec_new("decision");

	rec_common(c, r);
	if (c->path != NULL)
		clog_rec_ustr(r, "path", c->path, c->path_len);
	if (c->sni[0] != '\0')
		clog_rec_ustr(r, "sni", c->sni, strlen(c->sni));
	rec_addrs(c, r);
	clog_rec_str(r, "tier", s ? pol_tier_name(c->dec.tier) : NULL);
	clog_rec_str(r, "ceiling", s ? pol_tier_name(c->dec.ceiling) : NULL);
	clog_rec_str(r, "decision", pol_verdict_name(v));
	clog_rec_str(r, "reason", why == POL_R_NONE ? NULL :
	    pol_reason_name(why));
	clog_rec_str(r, "rule", v == POL_ALLOW ? pol_rule_name(c->dec.rule) :
	    NULL);
	clog_rec_str(r, "prompt", c->prompt_id[0] ? c->prompt_id : NULL);
	clog_rec_str(r, "answer", c->answered ? pol_answer_name(c->answer) :
	    NULL);
	/* the request rule that matched (allow, deny or prompt) */
	if (c->rule[0] != '\0')
		clog_rec_str(r, "request_rule", c->rule);
	/* a credential's name, never its value */
	if (c->cred[0] != '\0')
		clog_rec_str(r, "credential", c->cred);
	if (c->cred_removed > 0)
		clog_rec_int(r, "placeholders_removed", c->cred_removed);
	return r;
}

int
px_rec_close(struct px_conn *c, enum pol_reason why)
{
	struct clog_rec *r = clog_rec_new("close");

	rec_common(c, r);
	/* a CONNECT's allow record is written before its ClientHello
	 * arrives: the name the tunnel was checked against is told here */
	if (c->sni[0] != '\0')
		clog_rec_ustr(r, "sni", c->sni, strlen(c->sni));
	rec_addrs(c, r);
	clog_rec_int(r, "bytes_up", (int64_t)c->bytes_up);
	clog_rec_int(r, "bytes_down", (int64_t)c->bytes_down);
	clog_rec_int(r, "duration_ms", px_elapsed_ms(&c->t_start));
	clog_rec_str(r, "reason", why == POL_R_NONE ? NULL :
	    pol_reason_name(why));
	return rec_queue(r) < 0 ? -1 : 0;
}
