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

#include "proxy/relay/relay-int.h"

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
	char session[POL_ID_MAX + 1];
	char tenant[POL_ID_MAX + 1];
	char user[257];
	char host[POL_HOST_MAX + 1];
	uint16_t port;
	char method[24];
	char rule[POL_RULE_NAME_MAX + 1];/* a request rule's prompt: its name;
	                                  * "" for the host's own */
	char *path;                      /* sanitised, NULL for CONNECT */
	/* the request the approver is shown, byte for byte: allow_once
	 * releases only waiters that sent exactly this */
	char *shown_path;                /* NULL for CONNECT */
	size_t shown_path_len;
	enum pol_tier tier, ceiling;
	time_t created, expires;
	struct timespec t0;
	enum prompt_state state;
	enum pol_answer answer;          /* PR_ANSWERED */
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

/* Coalescing, the per-chat cap and the deny quiet periods (policy.h);
 * made at the first prompt. */
static struct pol_prompts *book;

static int
book_ready(void)
{
	if (book == NULL)
		book = pol_prompts_new(PROMPTS_PER_SESSION, QUIET_MAX);
	return book != NULL;
}

static json_t *
prompt_json(const struct px_prompt *p)
{
	char created[32], expires[32];
	long left = (long)(p->expires - time(NULL));

	util_rfc3339(p->created, created, sizeof(created));
	util_rfc3339(p->expires, expires, sizeof(expires));
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:o,s:o,s:s,s:s,s:s,"
	    "s:s,s:i,s:i,s:s}",
	    "id", p->id, "session", p->session, "tenant", p->tenant,
	    "user", p->user, "host", p->host, "port", (int)p->port,
	    "method", p->method,
	    "path", p->path ? json_string(p->path) : json_null(),
	    "rule", p->rule[0] ? json_string(p->rule) : json_null(),
	    "tier", pol_tier_name(p->tier),
	    "ceiling", pol_tier_name(p->ceiling),
	    "created", created, "expires", expires,
	    "expires_in_s", (int)(p->state == PR_PENDING && left > 0 ? left : 0),
	    "waiting", p->nwaiters,
	    "state", p->state == PR_PENDING ? "pending" :
		pol_answer_name(p->answer));
}

static void
prompt_free(struct px_prompt *p)
{
	if (p->timer != NULL)
		event_free(p->timer);
	free(p->path);
	free(p->shown_path);
	free(p);
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
	if (p->rule[0] != '\0')
		clog_rec_str(r, "request_rule", p->rule);
	clog_rec_str(r, "tier", pol_tier_name(p->tier));
	clog_rec_str(r, "ceiling", pol_tier_name(p->ceiling));
	clog_rec_int(r, "waiting", p->nwaiters);
	if (p->state == PR_ANSWERED) {
		clog_rec_str(r, "answer", pol_answer_name(p->answer));
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
		k = p->answer == POL_ANSWER_TIMEOUT ? 3 : 4;
	else
		k = (int)p->answer;   /* allow_once 0, allow_chat 1, deny 2 */
	px_counters.prompts_answered[k]++;
	if (k <= 2) {
		px_counters.prompt_latency_sum_s += px_elapsed_ms(&p->t0) / 1e3;
		px_counters.prompt_latency_count++;
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

/* c asks for exactly what p shows: the same method and path (none for
 * CONNECT, whose host and port are the prompt's own). */
static int
prompt_shows(const struct px_prompt *p, const struct px_conn *c)
{
	if (strcmp(p->method, c->method) != 0)
		return 0;
	if (p->shown_path == NULL || c->path == NULL)
		return p->shown_path == NULL && c->path == NULL;
	return p->shown_path_len == c->path_len &&
	    memcmp(p->shown_path, c->path, c->path_len) == 0;
}

/*
 * Answer a pending prompt and release its waiters: allowed ones go on
 * to resolve and dial, denied ones get their refusal with why.
 */
static void
resolve(struct px_prompt *p, enum pol_answer answer, const char *by,
    enum pol_reason why)
{
	int allow = pol_answer_allows(answer);
	struct px_conn *c;

	p->state = PR_ANSWERED;
	p->answer = answer;
	snprintf(p->by, sizeof(p->by), "%s", by);
	count_answer(p);
	evtimer_del(p->timer);
	TAILQ_REMOVE(&pending, p, entry);
	pol_prompts_remove(book, p);
	log_prompt(p, "prompt_answer");
	if (px_hooks.prompt_done != NULL)
		px_hooks.prompt_done(p->id, json_pack(
		    "{s:s,s:s,s:s,s:i,s:s,s:s,s:I}",
		    "id", p->id, "session", p->session, "host", p->host,
		    "port", (int)p->port, "answer", pol_answer_name(answer),
		    "by", p->by,
		    "latency_ms", (json_int_t)px_elapsed_ms(&p->t0)));
	/* only a person's "deny" means "do not ask again for a while";
	 * denies sluiced makes on its own (a lowered ceiling, a shutdown)
	 * must not silence the next question */
	if (answer == POL_ANSWER_DENY && strcmp(by, "sluiced") != 0 &&
	    px.cfg->prompt_deny_quiet_s > 0)
		pol_prompts_quiet_rule(book, p->session, p->host, p->port,
		    p->rule, (int64_t)time(NULL),
		    (int64_t)time(NULL) + px.cfg->prompt_deny_quiet_s);
	/* "for this chat" on a rule's prompt: the rule's scope, not the
	 * host (the host was allowed already) */
	if (answer == POL_ANSWER_ALLOW_CHAT && p->rule[0] != '\0')
		px_rules_grant(p->s, p->rule);
	keep_done(p);

	while ((c = TAILQ_FIRST(&p->waiters)) != NULL) {
		TAILQ_REMOVE(&p->waiters, c, pentry);
		p->nwaiters--;
		c->prompt = NULL;
		snprintf(c->prompt_id, sizeof(c->prompt_id), "%s", p->id);
		c->answered = 1;
		c->answer = answer;
		if (PX_GONE(c))
			continue;
		if (answer == POL_ANSWER_ALLOW_ONCE && !prompt_shows(p, c)) {
			/* allowed was the request the approver saw, not this
			 * one: it is decided again, and asks on its own */
			c->prompt_id[0] = '\0';
			c->answered = 0;
			if (p->rule[0] != '\0') {
				/* the host was allowed: its rules again */
				c->rule_held = 0;
				c->dec.verdict = POL_ALLOW;
				px_conn_proceed(c);
			} else if (px_conn_decide(c, c->session))
				px_conn_proceed(c);
			continue;
		}
		if (allow && p->rule[0] != '\0') {
			/* the rule let it through; the host's decision (and
			 * its rule) stands */
			c->dec.verdict = POL_ALLOW;
			c->dec.reason = POL_R_NONE;
			c->rule_done = 1;
			bufferevent_setcb(c->cli, NULL, NULL, NULL, c);
			bufferevent_disable(c->cli, EV_READ);
			px_conn_proceed(c);
		} else if (allow) {
			c->dec.verdict = POL_ALLOW;
			c->dec.reason = POL_R_NONE;
			c->dec.rule = POL_RULE_PROMPT;
			bufferevent_setcb(c->cli, NULL, NULL, NULL, c);
			bufferevent_disable(c->cli, EV_READ);
			/* a request (not a CONNECT) still meets its rules */
			px_conn_proceed(c);
		} else {
			c->dec.verdict = POL_DENY;
			px_conn_refuse(c, why, NULL);
		}
	}
}

static void
on_expire(evutil_socket_t fd, short ev, void *arg)
{
	resolve(arg, POL_ANSWER_TIMEOUT, "sluiced", POL_R_PROMPT_TIMEOUT);
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
	if (c->rule_held)
		snprintf(p->rule, sizeof(p->rule), "%s", c->rule);
	if (c->path != NULL) {
		char buf[CLOG_STR_CAP + 4];

		clog_sanitize(c->path, c->path_len, buf, sizeof(buf),
		    CLOG_STR_CAP);
		p->path = strdup(buf);
		p->shown_path = malloc(c->path_len + 1);
		if (p->path == NULL || p->shown_path == NULL) {
			prompt_free(p);
			return NULL;
		}
		memcpy(p->shown_path, c->path, c->path_len);
		p->shown_path[c->path_len] = '\0';
		p->shown_path_len = c->path_len;
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
	if (pol_prompts_add_rule(book, p->session, p->host, p->port, p->rule,
	    p) != 0) {
		prompt_free(p);
		return NULL;
	}
	evtimer_add(p->timer, &tv);
	TAILQ_INSERT_TAIL(&pending, p, entry);
	px_counters.prompts_raised++;
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
	struct px_prompt *p = NULL;
	enum pol_prompt_join join;
	void *owner;

	if (PX_GONE(c) || c->session == NULL)
		return;
	if (!book_ready()) {
		px_conn_refuse(c, POL_R_NO_APPROVER, NULL);
		return;
	}
	join = pol_prompts_join_rule(book, pol_session_id(c->session->pol),
	    c->target.host, c->target.port, c->rule_held ? c->rule : "",
	    (int64_t)time(NULL), &owner);
	if (join == POL_PJ_QUIET) {
		px_conn_refuse(c, POL_R_USER_DENIED, "It was denied a moment "
		    "ago; it is refused without asking again for a while.");
		return;
	}
	if (px.draining) {
		px_conn_refuse(c, POL_R_SHUTTING_DOWN, NULL);
		return;
	}
	if (px_hooks.approvers == NULL || px_hooks.approvers() == 0) {
		px_conn_refuse(c, POL_R_NO_APPROVER, NULL);
		return;
	}
	if (join == POL_PJ_FULL) {
		px_conn_refuse(c, POL_R_TOO_MANY_CONNECTIONS,
		    "This chat has too many questions pending.");
		return;
	}
	if (join == POL_PJ_JOIN)
		p = owner;
	else {
		p = prompt_new(c);
		if (p == NULL) {
			px_conn_refuse(c, POL_R_NO_APPROVER, NULL);
			return;
		}
		p->nwaiters = 1;   /* counted in the record and event */
		log_prompt(p, "prompt");
		if (px_hooks.prompt_raised != NULL)
			px_hooks.prompt_raised(p->id, prompt_json(p));
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
		if (p->rule[0] != '\0') {
			/* a rule's question stands while its host is
			 * allowed (the host may well ask by itself: its
			 * requests were allowed by a person) */
			if (d.verdict == POL_DENY)
				resolve(p, POL_ANSWER_DENY, "sluiced",
				    d.reason);
			continue;
		}
		if (d.verdict == POL_DENY)
			resolve(p, POL_ANSWER_DENY, "sluiced", d.reason);
		else if (d.verdict == POL_ALLOW)
			resolve(p, POL_ANSWER_ALLOW_ONCE, "sluiced",
			    POL_R_NONE);
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
			resolve(p, POL_ANSWER_DENY, "sluiced", why);
}

/* The session is going: its prompts end as denied and forget it. */
void
px_prompts_session_gone(struct px_session *s, enum pol_reason why)
{
	struct px_prompt *p;

	px_prompts_deny_session(s, why);
	px_rules_forget(s);
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
		resolve(p, POL_ANSWER_DENY, "sluiced", POL_R_SHUTTING_DOWN);
	while ((p = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, p, entry);
		prompt_free(p);
	}
	ndone = 0;
	px_rules_forget(NULL);
	pol_prompts_free(book);
	book = NULL;
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

enum px_prompt_state
px_prompt_lookup(const char *id, struct px_prompt_view *out)
{
	struct px_prompt *p = find_id(&pending, id);
	enum px_prompt_state st = PX_PROMPT_PENDING;

	if (p == NULL) {
		p = find_id(&done, id);
		st = PX_PROMPT_DONE;
	}
	if (p == NULL)
		return PX_PROMPT_NONE;
	snprintf(out->session, sizeof(out->session), "%s", p->session);
	snprintf(out->host, sizeof(out->host), "%s", p->host);
	out->port = p->port;
	out->session_alive = p->s != NULL;
	out->answer = p->answer;
	return st;
}

int
px_prompt_resolve(const char *id, enum pol_answer ans, const char *by)
{
	struct px_prompt *p = find_id(&pending, id);

	if (p == NULL)
		return -1;
	resolve(p, ans, by, POL_R_USER_DENIED);
	return 0;
}

void *
px_prompts_json(void)
{
	json_t *a = json_array();
	struct px_prompt *p;

	TAILQ_FOREACH(p, &pending, entry)
		json_array_append_new(a, prompt_json(p));
	return json_pack("{s:o}", "prompts", a);
}

void *
px_prompt_json(const char *id)
{
	struct px_prompt *p = find_id(&pending, id);

	if (p == NULL)
		p = find_id(&done, id);
	return p ? prompt_json(p) : NULL;
}

size_t
px_prompts_pending(void)
{
	return book != NULL ? pol_prompts_pending(book) : 0;
}
