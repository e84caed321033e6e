/*
 * events.h: the control API's event stream (GET /v1/events).
 *
 * Server-Sent Events: each event has an "id:" (a counter that survives
 * nothing but the process), an "event:" name (prompt, prompt_resolved,
 * denied, session, ceiling) and one line of JSON as "data:".  A bounded
 * ring of recent events serves Last-Event-ID replays; a subscriber whose
 * unsent bytes pass a bound is dropped rather than buffered without end;
 * heartbeats (": ping") keep idle streams alive and find vanished
 * clients.  Subscribers with the app or admin role count as approvers.
 */
#ifndef SLUICE_EVENTS_H
#define SLUICE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evhttp_request;

/* ring: events kept for replay; max_pending: bytes a subscriber may
 * have unsent before it is dropped; heartbeat_s: ping interval. */
int ev_init(struct event_base *base, size_t ring, size_t max_pending,
    int heartbeat_s) SLUICE_MUSTCHECK;
void ev_shutdown(void);           /* ends every stream */

/* Publish an event to every subscriber; data is a jansson json_t *,
 * reference stolen.  Returns the event id. */
uint64_t ev_publish(const char *type, void *data);

/* Hand a GET /v1/events request over (api.c has authorised it).
 * approver: the caller's role may answer prompts.  last_id: the
 * Last-Event-ID header or NULL. */
void ev_subscribe(struct evhttp_request *req, int approver,
    const char *last_id);

/* Connected subscribers that may answer prompts. */
size_t ev_approvers(void);
size_t ev_subscribers(void);

#endif /* SLUICE_EVENTS_H */
