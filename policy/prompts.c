/*
 * prompts.c: prompt bookkeeping (policy.h, "Prompt bookkeeping").
 *
 * Linear tables: a host holds at most a few thousand pending prompts
 * (32 per chat by default) and a request asks once, so a scan costs less
 * than keeping an index in step.
 */
#include "sluice-config.h"

#include <stdlib.h>
#include <string.h>

#include "policy/policy-int.h"

static const char *const answer_names[POL_ANSWER__COUNT] = {
	[POL_ANSWER_ALLOW_ONCE] = "allow_once",
	[POL_ANSWER_ALLOW_CHAT] = "allow_chat",
	[POL_ANSWER_DENY] = "deny",
	[POL_ANSWER_TIMEOUT] = "timeout",
};

const char *
pol_answer_name(enum pol_answer a)
{
	return (unsigned)a < POL_ANSWER__COUNT ? answer_names[a] : "unknown";
}

int
pol_answer_parse(const char *s, enum pol_answer *out)
{
	int i;

	for (i = 0; i < POL_ANSWER_TIMEOUT; i++)
		if (strcmp(s, answer_names[i]) == 0) {
			*out = (enum pol_answer)i;
			return 0;
		}
	return -1;
}

int
pol_answer_allows(enum pol_answer a)
{
	return a == POL_ANSWER_ALLOW_ONCE || a == POL_ANSWER_ALLOW_CHAT;
}

struct pp_place {
	char session[POL_ID_MAX + 1];
	char host[POL__HOSTBUF];
	uint16_t port;
	char rule[POL_RULE_NAME_MAX + 1];   /* "": the host's own prompt */
};

struct pp_pending {
	struct pp_place at;
	void *owner;
};

struct pp_quiet {
	struct pp_place at;
	int64_t until;
};

struct pol_prompts {
	size_t per_session;
	struct pp_pending *pending;
	size_t npending, cap;
	struct pp_quiet *quiet;
	size_t nquiet, quiet_max;
};

struct pol_prompts *
pol_prompts_new(size_t per_session, size_t quiet_max)
{
	struct pol_prompts *pp = calloc(1, sizeof(*pp));

	if (pp == NULL)
		return NULL;
	pp->per_session = per_session > 0 ? per_session : 1;
	pp->quiet_max = quiet_max;
	if (quiet_max > 0) {
		pp->quiet = calloc(quiet_max, sizeof(*pp->quiet));
		if (pp->quiet == NULL) {
			free(pp);
			return NULL;
		}
	}
	return pp;
}

void
pol_prompts_free(struct pol_prompts *pp)
{
	if (pp == NULL)
		return;
	free(pp->pending);
	free(pp->quiet);
	free(pp);
}

static int
place_set(struct pp_place *pl, const char *session, const char *host,
    uint16_t port, const char *rule)
{
	size_t ls = strlen(session), lh = strlen(host), lr = strlen(rule);

	if (ls >= sizeof(pl->session) || lh >= sizeof(pl->host) ||
	    lr >= sizeof(pl->rule))
		return -1;
	memcpy(pl->session, session, ls + 1);
	memcpy(pl->host, host, lh + 1);
	memcpy(pl->rule, rule, lr + 1);
	pl->port = port;
	return 0;
}

static int
place_is(const struct pp_place *pl, const char *session, const char *host,
    uint16_t port, const char *rule)
{
	return pl->port == port && strcmp(pl->host, host) == 0 &&
	    strcmp(pl->session, session) == 0 && strcmp(pl->rule, rule) == 0;
}

static struct pp_quiet *
quiet_find(struct pol_prompts *pp, const char *session, const char *host,
    uint16_t port, const char *rule, int64_t now)
{
	size_t i;

	for (i = 0; i < pp->nquiet; i++) {
		if (pp->quiet[i].until <= now) {
			/* expired: the last one takes its place */
			pp->quiet[i--] = pp->quiet[--pp->nquiet];
			continue;
		}
		if (place_is(&pp->quiet[i].at, session, host, port, rule))
			return &pp->quiet[i];
	}
	return NULL;
}

enum pol_prompt_join
pol_prompts_join(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, int64_t now, void **owner)
{
	return pol_prompts_join_rule(pp, session, host, port, "", now, owner);
}

enum pol_prompt_join
pol_prompts_join_rule(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, const char *rule, int64_t now,
    void **owner)
{
	size_t i, count = 0;

	*owner = NULL;
	if (quiet_find(pp, session, host, port, rule, now) != NULL)
		return POL_PJ_QUIET;
	for (i = 0; i < pp->npending; i++) {
		const struct pp_pending *e = &pp->pending[i];

		if (strcmp(e->at.session, session) != 0)
			continue;
		count++;
		if (place_is(&e->at, session, host, port, rule)) {
			*owner = e->owner;
			return POL_PJ_JOIN;
		}
	}
	return count >= pp->per_session ? POL_PJ_FULL : POL_PJ_NEW;
}

int
pol_prompts_add(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, void *owner)
{
	return pol_prompts_add_rule(pp, session, host, port, "", owner);
}

int
pol_prompts_add_rule(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, const char *rule, void *owner)
{
	struct pp_pending *e;

	if (pp->npending == pp->cap) {
		size_t ncap = pp->cap ? pp->cap * 2 : 16;
		struct pp_pending *n = realloc(pp->pending,
		    ncap * sizeof(*n));

		if (n == NULL)
			return -1;
		pp->pending = n;
		pp->cap = ncap;
	}
	e = &pp->pending[pp->npending];
	if (place_set(&e->at, session, host, port, rule) != 0)
		return -1;
	e->owner = owner;
	pp->npending++;
	return 0;
}

void
pol_prompts_remove(struct pol_prompts *pp, void *owner)
{
	size_t i;

	for (i = 0; i < pp->npending; i++)
		if (pp->pending[i].owner == owner) {
			/* keep the order: the oldest is found first */
			memmove(&pp->pending[i], &pp->pending[i + 1],
			    (pp->npending - i - 1) * sizeof(*pp->pending));
			pp->npending--;
			return;
		}
}

size_t
pol_prompts_pending(const struct pol_prompts *pp)
{
	return pp->npending;
}

void
pol_prompts_quiet(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, int64_t now, int64_t until)
{
	pol_prompts_quiet_rule(pp, session, host, port, "", now, until);
}

void
pol_prompts_quiet_rule(struct pol_prompts *pp, const char *session,
    const char *host, uint16_t port, const char *rule, int64_t now,
    int64_t until)
{
	struct pp_quiet *q = quiet_find(pp, session, host, port, rule, now);

	if (q == NULL) {
		if (pp->nquiet == pp->quiet_max)
			return;   /* full: the next request asks again */
		q = &pp->quiet[pp->nquiet];
		if (place_set(&q->at, session, host, port, rule) != 0)
			return;
		pp->nquiet++;
	}
	q->until = until;
}
