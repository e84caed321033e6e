/*
 * webhook.h: prompts delivered to the app by an HTTPS POST.
 *
 * The body is the prompt's JSON.  Headers: Content-Type
 * application/json, X-Sluice-Event: prompt, X-Sluice-Delivery: the prompt
 * id (an idempotency key), X-Sluice-Timestamp: Unix seconds, and
 * X-Sluice-Signature: "sha256=" + hex HMAC-SHA256 over
 * "<timestamp>.<body>" with the configured secret.  TLS is verified
 * (certificate chain and host name), with the system store or the
 * configured CA file.  Failed deliveries are retried with exponential
 * backoff and jitter while the prompt is pending; each attempt writes a
 * diagnostic line.  A 2xx answer whose body is one JSON object
 * (jsonstrict.h) carrying {"decision": "allow_once"|"allow_chat"|"deny"}
 * answers the prompt at once, through the answer function given to
 * wh_init (sluiced's is ctl_prompt_answer with the actor "webhook"):
 * webhook.c itself knows nothing of the control plane.  The header
 * section, the body, each attempt and all attempts in flight have bounds
 * on what they may hold (webhook.c).
 */
#ifndef SLUICE_WEBHOOK_H
#define SLUICE_WEBHOOK_H

#include <stddef.h>

#include "policy/policy.h"

struct event_base;
struct cfg;

/* Answer prompt id with ans; 0, or -1 with why in msg (not pending,
 * already answered, ...). */
typedef int (*wh_answer_fn)(const char *id, enum pol_answer ans, char *msg,
    size_t msglen);
int wh_init(struct event_base *base, const struct cfg *c, wh_answer_fn answer,
    char *err, size_t errlen) SLUICE_MUSTCHECK;
int wh_reload(const struct cfg *c);   /* -1: logged, old settings kept */
void wh_shutdown(void);
/* 1 when a webhook is configured (it counts as an approver). */
int wh_configured(void);
/* Deliver a new prompt (json_t *, borrowed).  id as in the prompt. */
void wh_prompt(const char *id, const void *prompt_json);
/* The prompt was answered or expired: stop retrying it. */
void wh_prompt_done(const char *id);

/* "sha256=" + 64 hex digits + NUL. */
#define WH_SIG_LEN 72
/* The X-Sluice-Signature value: HMAC-SHA256 with key over
 * "<timestamp>.<body>".  0, or -1 when OpenSSL fails. */
int wh_sign(const void *key, size_t keylen, const char *timestamp,
    const char *body, size_t bodylen, char out[WH_SIG_LEN]) SLUICE_MUSTCHECK;

#endif /* SLUICE_WEBHOOK_H */
