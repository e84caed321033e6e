/*
 * exec_events.c: what GET /v1/events streams and GET /v1/metrics
 * counts.  The sandboxes and commands say what happened here
 * (xd_event); the API's subscribers hear it.  A subscriber's callback
 * gets the frame ready to send; it may unsubscribe itself (a slow
 * reader is dropped there).  A subscriber bound to a tenant gets that
 * tenant's events only: the stream crossed tenants before (issue 20).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "sandbox-glue/executor/execd/execd-int.h"

void
xd_event_sub(struct xd *xd, struct xd_sub *s)
{
	TAILQ_INSERT_TAIL(&xd->subs, s, link);
	s->on = 1;
}

void
xd_event_unsub(struct xd *xd, struct xd_sub *s)
{
	if (s->on)
		TAILQ_REMOVE(&xd->subs, s, link);
	s->on = 0;
}

void
xd_event_argv(json_t *argv, char *program, size_t plen, char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char d[32];
	char *buf = NULL;
	size_t n = 0, i;
	const char *a0 = NULL, *slash;
	FILE *f;
	json_t *v;

	snprintf(program, plen, "%s", "");
	hex[0] = '\0';
	if ((f = open_memstream(&buf, &n)) == NULL)
		return;
	json_array_foreach(argv, i, v) {
		const char *a = json_string_value(v);

		if (a == NULL)
			continue;
		if (a0 == NULL)
			a0 = a;
		fwrite(a, 1, json_string_length(v), f);
		fputc('\0', f);
	}
	if (fclose(f) != 0) {
		free(buf);
		return;
	}
	xd_sha256(buf, n, d);
	free(buf);
	for (i = 0; i < sizeof(d); i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[64] = '\0';
	if (a0 != NULL) {
		slash = strrchr(a0, '/');
		snprintf(program, plen, "%s", slash != NULL && slash[1] ?
		    slash + 1 : a0);
	}
}

void
xd_event(struct xd *xd, const char *type, const char *what,
    const char *tenant, json_t *data)
{
	struct xd_sub *s, *next;
	struct timespec ts;
	char *js, *frame = NULL;
	int n;

	if (data == NULL)
		return;
	if (TAILQ_EMPTY(&xd->subs)) {
		json_decref(data);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	json_object_set_new(data, "what", json_string(what));
	json_object_set_new(data, "ts_ms", json_integer((json_int_t)ts.tv_sec *
	    1000 + ts.tv_nsec / 1000000));
	js = json_dumps(data, JSON_COMPACT);
	json_decref(data);
	if (js == NULL || (n = asprintf(&frame, "event: %s\ndata: %s\n\n",
	    type, js)) < 0) {
		free(js);
		return;
	}
	free(js);
	for (s = TAILQ_FIRST(&xd->subs); s != NULL; s = next) {
		next = TAILQ_NEXT(s, link);
		if (s->tenant[0] && strcmp(s->tenant, tenant != NULL ? tenant :
		    "") != 0)
			continue;
		s->fn(s->arg, frame, (size_t)n);
	}
	free(frame);
}
