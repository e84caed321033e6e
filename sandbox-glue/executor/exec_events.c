/*
 * exec_events.c: what GET /v1/events streams and GET /v1/metrics
 * counts.  The sandboxes and commands say what happened here
 * (xd_event); the API's subscribers hear it.  A subscriber's callback
 * gets the frame ready to send; it may unsubscribe itself (a slow
 * reader is dropped there).
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "sandbox-glue/executor/execd-int.h"

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
xd_event(struct xd *xd, const char *type, const char *what, json_t *data)
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
		s->fn(s->arg, frame, (size_t)n);
	}
	free(frame);
}
