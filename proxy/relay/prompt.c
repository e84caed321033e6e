/*
 * prompt.c: prompts that hold the connection until the user answers.
 *
 * A request the ceiling admits but the chat's tier does not raises a
 * prompt (DESIGN.md, "Prompts").  The connection waits: a CONNECT gets
 * no 200 and a plain request no answer until the prompt is answered,
 * expires, or its client goes away.  Requests of one chat for the same
 * host and port share one prompt; prompts are independent of each other.
 * Nothing here ever defaults to allow: a timeout, a vanished session, a
 * lowered ceiling or a shutdown all resolve as deny.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "proxy/px.h"
#include "proxy/control/ctl.h"
#include "proxy/control/events.h"
#include "proxy/control/webhook.h"

/* A chat may not pile up prompts without end: each holds connections
 * and asks a person. */
#define PROMPTS_PER_SESSION 32
/* Answered prompts kept so a late second answer gets 409, not 404. */
#define PROMPTS_DONE_KEPT 256
#define QUIET_MAX 1024

enum prompt_state { PR_PENDING, PR_ANSWERED };

struct px_prompt {
	char id[20];                     /* "p-" + 16 hex digits */
	struct px_session *s;
	char session[65];
	char tenant[65];
	char user[257];
	char host[POL_HOST_MAX + 1];
	uint16_t port;
	char method[24];
	char *path;                      /* sanitised, NULL for CONNECT */
	enum pol_tier tier, ceiling;
	time_t created, expires;
	struct timespec t0;
	enum prompt_state state;
	const char *answer;              /* allow_once, ..., timeout */
	char by[96];
	TAILQ_HEAD(, px_conn) waiters;
	int nwaiters;
	struct event *timer;
	TAILQ_ENTRY(px_prompt) entry;
};

TAILQ_HEAD(prompt_list, px_prompt);
static struct prompt_list pending = TAILQ_HEAD_INITIALIZER(pending);
static struct prompt_list done = TAILQ_HEAD_INITIALIZER(done);
static int ndone;

/* "deny" answers: new requests to the same place are refused without a
 * new prompt until the quiet period ends. */
struct quiet {
	char session[65];
	char host[POL_HOST_MAX + 1];
	uint16_t port;
	time_t until;
};
static struct quiet quiet[QUIET_MAX];
static int nquiet;

static void
rfc3339(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *
prompt_json(const struct px_prompt *p)
{
	char created[32], expires[32];
	long left = (long)(p->expires - time(NULL));

	rfc3339(p->created, created, sizeof(created));
	rfc3339(p->expires, expires, sizeof(expires));
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:o,s:s,s:s,s:s,s:s,"
	    "s:i,s:i,s:s}",
	    "id", p->id, "session", p->session, "tenant", p->tenant,
	    "user", p->user, "host", p->host, "port", (int)p->port,
	    "method", p->method,
	    "path", p->path ? json_string(p->path) : json_null(),
	    "tier", pol_tier_name(p->tier),
	    "ceiling", pol_tier_name(p->ceiling),
	    "created", created, "expires", expires,
	    "expires_in_s", (int)(p->state == PR_PENDING && left > 0 ? left : 0),
	    "waiting", p->nwaiters,
	    "state", p->state == PR_PENDING ? "pending" : p->answer);
}

static void
prompt_free(struct px_prompt *p)
{
	if (p->timer != NULL)
		event_free(p->timer);
	free(p->path);
	free(p);
}

/* ------------------------------------------------------------------ */
/* Quiet periods. */

static struct quiet *
quiet_find(const char *session, const char *host, uint16_t port)
{
	time_t now = time(NULL);
	int i;

	for (i = 0; i < nquiet; i++) {
		if (quiet[i].until <= now) {
			quiet[i--] = quiet[--nquiet];   /* expired */
			continue;
		}
		if (quiet[i].port == port && strcmp(quiet[i].host, host) == 0 &&
		    strcmp(quiet[i].session, session) == 0)
			return &quiet[i];
	}
	return NULL;
}

static void
quiet_add(const struct px_prompt *p)
{
	struct quiet *q = quiet_find(p->session, p->host, p->port);

	if (px.cfg->prompt_deny_quiet_s <= 0)
		return;
	if (q == NULL) {
		if (nquiet == QUIET_MAX)
			return;   /* full: the next request asks again */
		q = &quiet[nquiet++];
		snprintf(q->session, sizeof(q->session), "%s", p->session);
		snprintf(q->host, sizeof(q->host), "%s", p->host);
		q->port = p->port;
	}
	q->until = time(NULL) + px.cfg->prompt_deny_quiet_s;
}

/* ------------------------------------------------------------------ */
/* Resolving. */

static void
log_prompt(const struct px_prompt *p, const char *event)
{
	struct clog_rec *r = clog_rec_new(event);

	clog_rec_str(r, "prompt", p->id);
	clog_rec_str(r, "session", p->session);
	clog_rec_str(r, "tenant", p->tenant);
	clog_rec_str(r, "user", p->user);
	clog_rec_ustr(r, "method", p->method, strlen(p->method));
	clog_rec_str(r, "host", p->host);
	clog_rec_int(r, "port", p->port);
	if (p->path != NULL)
		clog_rec_str(r, "path", p->path);
	clog_rec_str(r, "tier", pol_tier_name(p->tier));
	clog_rec_str(r, "ceiling", pol_tier_name(p->ceiling));
	clog_rec_int(r, "waiting", p->nwaiters);
	if (p->state == PR_ANSWERED) {
		clog_rec_str(r, "answer", p->answer);
		clog_rec_str(r, "who", p->by);
		clog_rec_int(r, "latency_ms", px_elapsed_ms(&p->t0));
	} else
		clog_rec_int(r, "timeout_s", (int64_t)(p->expires - p->created));
	if (clog_write(px.log, r) != 0)
		px_log(PX_ERR, "%s: cannot write the %s record of %s", __func__,
		    event, p->id);
}

static void
count_answer(const struct px_prompt *p)
{
	int k;

	if (strcmp(p->by, "sluiced") == 0)
		k = strcmp(p->answer, "timeout") == 0 ? 3 : 4;
	else if (strcmp(p->answer, "allow_once") == 0)
		k = 0;
	else if (strcmp(p->answer, "allow_chat") == 0)
		k = 1;
	else
		k = 2;
	px.m.prompts_answered[k]++;
	if (k <= 2) {
		px.m.prompt_latency_sum_s += px_elapsed_ms(&p->t0) / 1e3;
		px.m.prompt_latency_count++;
	}
}

static void
keep_done(struct px_prompt *p)
{
	struct px_prompt *old;

	TAILQ_INSERT_TAIL(&done, p, entry);
	if (++ndone > PROMPTS_DONE_KEPT) {
		old = TAILQ_FIRST(&done);
		TAILQ_REMOVE(&done, old, entry);
		prompt_free(old);
		ndone--;
	}
}

/*
 * Answer a pending prompt and release its waiters: allowed ones go on
 * to resolve and dial, denied ones get their refusal with why.
 */
static void
resolve(struct px_prompt *p, const char *answer, const char *by,
    enum pol_reason why)
{
	int allow = strcmp(answer, "allow_once") == 0 ||
	    strcmp(answer, "allow_chat") == 0;
	struct px_conn *c;

	p->state = PR_ANSWERED;
	p->answer = answer;
	snprintf(p->by, sizeof(p->by), "%s", by);
	count_answer(p);
	evtimer_del(p->timer);
	TAILQ_REMOVE(&pending, p, entry);
	log_prompt(p, "prompt_answer");
	ev_publish("prompt_resolved", json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:I}",
	    "id", p->id, "session", p->session, "host", p->host,
	    "port", (int)p->port, "answer", answer, "by", p->by,
	    "latency_ms", (json_int_t)px_elapsed_ms(&p->t0)));
	wh_prompt_done(p->id);
	/* only a person's "deny" means "do not ask again for a while";
	 * denies sluiced makes on its own (a lowered ceiling, a shutdown)
	 * must not silence the next question */
	if (strcmp(answer, "deny") == 0 && strcmp(by, "sluiced") != 0)
		quiet_add(p);
	keep_done(p);

	while ((c = TAILQ_FIRST(&p->waiters)) != NULL) {
		TAILQ_REMOVE(&p->waiters, c, pentry);
		p->nwaiters--;
		c->prompt = NULL;
		snprintf(c->prompt_id, sizeof(c->prompt_id), "%s", p->id);
		c->prompt_answer = answer;
		if (allow) {
			c->dec.verdict = POL_ALLOW;
			c->dec.reason = POL_R_NONE;
			c->dec.rule = POL_RULE_PROMPT;
			bufferevent_setcb(c->cli, NULL, NULL, NULL, c);
			bufferevent_disable(c->cli, EV_READ);
			px_upstream_start(c);
		} else {
			c->dec.verdict = POL_DENY;
			px_conn_refuse(c, why, NULL);
		}
	}
}

static void
on_expire(evutil_socket_t fd, short ev, void *arg)
{
	resolve(arg, "timeout", "sluiced", POL_R_PROMPT_TIMEOUT);
}

static struct px_prompt *
find_pending(const char *session, const char *host, uint16_t port,
    int *count)
{
	struct px_prompt *p, *hit = NULL;

	*count = 0;
	TAILQ_FOREACH(p, &pending, entry) {
		if (strcmp(p->session, session) != 0)
			continue;
		(*count)++;
		if (p->port == port && strcmp(p->host, host) == 0)
			hit = p;
	}
	return hit;
}

static struct px_prompt *
prompt_new(struct px_conn *c)
{
	struct px_session *s = c->session;
	struct px_prompt *p = calloc(1, sizeof(*p));
	unsigned char rnd[8];
	struct timeval tv = { px.cfg->prompt_timeout_s, 0 };
	size_t i;

	if (p == NULL)
		return NULL;
	/* ids are not secrets (answering needs the app role), but they
	 * must not be guessable across chats either */
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		free(p);
		return NULL;
	}
	memcpy(p->id, "p-", 2);
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(p->id + 2 + 2 * i, 3, "%02x", rnd[i]);
	p->s = s;
	snprintf(p->session, sizeof(p->session), "%s", pol_session_id(s->pol));
	snprintf(p->tenant, sizeof(p->tenant), "%s",
	    pol_session_tenant(s->pol));
	snprintf(p->user, sizeof(p->user), "%s", pol_session_user(s->pol));
	snprintf(p->host, sizeof(p->host), "%s", c->target.host);
	p->port = c->target.port;
	snprintf(p->method, sizeof(p->method), "%s", c->method);
	if (c->path != NULL) {
		char buf[CLOG_STR_CAP + 4];

		clog_sanitize(c->path, c->path_len, buf, sizeof(buf),
		    CLOG_STR_CAP);
		p->path = strdup(buf);
	}
	p->tier = c->dec.tier;
	p->ceiling = c->dec.ceiling;
	p->created = time(NULL);
	p->expires = p->created + px.cfg->prompt_timeout_s;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
	p->state = PR_PENDING;
	TAILQ_INIT(&p->waiters);
	p->timer = evtimer_new(px.base, on_expire, p);
	if (p->timer == NULL) {
		prompt_free(p);
		return NULL;
	}
	evtimer_add(p->timer, &tv);
	TAILQ_INSERT_TAIL(&pending, p, entry);
	px.m.prompts_raised++;
	return p;
}

/* ------------------------------------------------------------------ */
/* Waiting connections. */

static void
waiter_read(struct bufferevent *bev, void *arg)
{
	/* bytes sent ahead (a ClientHello after CONNECT) wait in the
	 * buffer, bounded by the read watermark */
}

static void
waiter_event(struct bufferevent *bev, short what, void *arg)
{
	/* the client went away: it withdraws from its prompt, which stays
	 * answerable (an allow_chat still grants) */
	px_conn_close(arg, POL_R_NONE);
}

void
px_prompt_leave(struct px_conn *c)
{
	struct px_prompt *p = c->prompt;

	if (p == NULL)
		return;
	TAILQ_REMOVE(&p->waiters, c, pentry);
	p->nwaiters--;
	c->prompt = NULL;
}

void
px_prompt_request(struct px_conn *c)
{
	struct px_prompt *p;
	int count;
	json_t *j;

	if (quiet_find(pol_session_id(c->session->pol), c->target.host,
	    c->target.port) != NULL) {
		px_conn_refuse(c, POL_R_USER_DENIED, "It was denied a moment "
		    "ago; it is refused without asking again for a while.");
		return;
	}
	if (px.draining) {
		px_conn_refuse(c, POL_R_SHUTTING_DOWN, NULL);
		return;
	}
	if (ev_approvers() == 0 && !wh_configured()) {
		px_conn_refuse(c, POL_R_NO_APPROVER, NULL);
		return;
	}
	p = find_pending(pol_session_id(c->session->pol), c->target.host,
	    c->target.port, &count);
	if (p == NULL) {
		if (count >= PROMPTS_PER_SESSION) {
			px_conn_refuse(c, POL_R_TOO_MANY_CONNECTIONS,
			    "This chat has too many questions pending.");
			return;
		}
		p = prompt_new(c);
		if (p == NULL) {
			px_conn_refuse(c, POL_R_NO_APPROVER, NULL);
			return;
		}
		p->nwaiters = 1;   /* counted in the record and event */
		log_prompt(p, "prompt");
		j = prompt_json(p);
		wh_prompt(p->id, j);
		ev_publish("prompt", j);
		p->nwaiters = 0;
	}
	/* the connection waits: no deadline of its own, the prompt's */
	c->state = PX_S_PROMPT;
	c->prompt = p;
	TAILQ_INSERT_TAIL(&p->waiters, c, pentry);
	p->nwaiters++;
	evtimer_del(c->timer);
	bufferevent_setwatermark(c->cli, EV_READ, 0, px.cfg->max_head);
	bufferevent_setcb(c->cli, waiter_read, NULL, waiter_event, c);
	bufferevent_enable(c->cli, EV_READ);
}

/*
 * Policy changed (ceiling, tier, grant, session gone): pending prompts of
 * the session (or all) are decided again.  One now refused resolves as a
 * deny with the new reason; one now admitted lets its waiters through.
 */
void
px_prompts_recheck(struct px_session *only)
{
	struct px_prompt *p, *tmp;

	TAILQ_FOREACH_SAFE(p, &pending, entry, tmp) {
		struct pol_target t;
		struct pol_decision d;

		if (only != NULL && p->s != only)
			continue;
		memset(&t, 0, sizeof(t));
		snprintf(t.host, sizeof(t.host), "%s", p->host);
		t.port = p->port;
		if (pol_addr_parse(t.host, strlen(t.host), &t.addr) == 0)
			t.kind = t.addr.family == AF_INET ? POL_HOST_V4 :
			    POL_HOST_V6;
		pol_decide(px.pol, px.state, p->s->pol, &t, &d);
		if (d.verdict == POL_DENY)
			resolve(p, "deny", "sluiced", d.reason);
		else if (d.verdict == POL_ALLOW)
			resolve(p, "allow_once", "sluiced", POL_R_NONE);
	}
}

/* The chat's tier went down: its prompts end as denied (DESIGN.md),
 * even where the ceiling alone would still ask. */
void
px_prompts_deny_session(struct px_session *s, enum pol_reason why)
{
	struct px_prompt *p, *tmp;

	TAILQ_FOREACH_SAFE(p, &pending, entry, tmp)
		if (p->s == s)
			resolve(p, "deny", "sluiced", why);
}

/* The session is going: its prompts end as denied and forget it. */
void
px_prompts_session_gone(struct px_session *s, enum pol_reason why)
{
	struct px_prompt *p;

	px_prompts_deny_session(s, why);
	TAILQ_FOREACH(p, &done, entry)
		if (p->s == s)
			p->s = NULL;
}

/* Shutting down: nobody will be there to act on an answer. */
void
px_prompts_shutdown(void)
{
	struct px_prompt *p;

	while ((p = TAILQ_FIRST(&pending)) != NULL)
		resolve(p, "deny", "sluiced", POL_R_SHUTTING_DOWN);
	while ((p = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, p, entry);
		prompt_free(p);
	}
	ndone = 0;
}

/* ------------------------------------------------------------------ */
/* The control plane's view. */

static struct px_prompt *
find_id(struct prompt_list *l, const char *id)
{
	struct px_prompt *p;

	TAILQ_FOREACH(p, l, entry)
		if (strcmp(p->id, id) == 0)
			return p;
	return NULL;
}

static const char *const answer_names[] = {
	[CTL_ALLOW_ONCE] = "allow_once",
	[CTL_ALLOW_CHAT] = "allow_chat",
	[CTL_DENY] = "deny",
};

int
ctl_answer_parse(const char *s, enum ctl_answer *out)
{
	size_t i;

	for (i = 0; i < sizeof(answer_names) / sizeof(answer_names[0]); i++)
		if (strcmp(s, answer_names[i]) == 0) {
			*out = (enum ctl_answer)i;
			return 0;
		}
	return -1;
}

const char *
ctl_answer_name(enum ctl_answer a)
{
	return (unsigned)a < sizeof(answer_names) / sizeof(answer_names[0]) ?
	    answer_names[a] : "unknown";
}

int
ctl_prompt_answer(const struct ctl_actor *a, const char *id,
    enum ctl_answer ans, struct ctl_err *e)
{
	struct px_prompt *p = find_id(&pending, id);

	if (p == NULL) {
		if (e != NULL) {
			p = find_id(&done, id);
			e->code = p ? CTL_CONFLICT : CTL_NOT_FOUND;
			snprintf(e->msg, sizeof(e->msg), p ?
			    "prompt %s was already answered (%s)" :
			    "no prompt %s", id, p ? p->answer : "");
		}
		return -1;
	}
	if (ans == CTL_ALLOW_CHAT && p->s != NULL &&
	    ctl_grant_add(a, p->session, p->host, p->port, e) != 0)
		return -1;   /* not granted: the prompt stays pending */
	resolve(p, answer_names[ans], a ? a->who : "sluiced",
	    POL_R_USER_DENIED);
	return 0;
}

void *
ctl_json_prompts(void)
{
	json_t *a = json_array();
	struct px_prompt *p;

	TAILQ_FOREACH(p, &pending, entry)
		json_array_append_new(a, prompt_json(p));
	return json_pack("{s:o}", "prompts", a);
}

void *
ctl_json_prompt(const char *id)
{
	struct px_prompt *p = find_id(&pending, id);

	if (p == NULL)
		p = find_id(&done, id);
	return p ? prompt_json(p) : NULL;
}

size_t
px_prompts_pending(void)
{
	struct px_prompt *p;
	size_t n = 0;

	TAILQ_FOREACH(p, &pending, entry)
		n++;
	return n;
}
