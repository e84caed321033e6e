/*
 * records.c: the connection log's records of connections, one builder
 * per record type (DESIGN.md "Connection log").  The fields each record
 * carries, and their order, are pinned by tests/scenario/t_log_keys.py.
 */
#include "sluice-config.h"

#include <string.h>

#include "proxy/relay/relay-int.h"
#include "proxy/lib/tproxy.h"

/*
 * Close records are queued (clog_queue) and written together at the end
 * of the loop's pass over its active events, or with the next decision
 * record, which is written at once: with many connections a turn's
 * records cost one write(2).  Nothing waits on a close record; a
 * decision record is in the file before the proxy acts on it.
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

static struct clog_rec *
rec_decision(struct px_conn *c, enum pol_verdict v, enum pol_reason why)
{
	struct clog_rec *r = clog_rec_new("decision");
	struct px_session *s = c->session;

	px_count_decision(c, v, why);

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
	return r;
}

int
px_rec_decision(struct px_conn *c, enum pol_verdict v, enum pol_reason why)
{
	return clog_write(px.log, rec_decision(c, v, why));
}

int
px_rec_allow_queued(struct px_conn *c)
{
	return rec_queue(rec_decision(c, POL_ALLOW, POL_R_NONE));
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
