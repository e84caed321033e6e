/*
 * apireply.h: how both daemons' APIs answer (DESIGN.md, "Control API"
 * and "Executor API": one error shape, {"error": {"code", "message"}}).
 *
 * Every JSON answer leaves through apireply_json, so both APIs escape
 * what a caller stored the same way (bidi and C1 characters reach no
 * terminal raw), say Cache-Control: no-store and end in a newline.
 */
#ifndef SLUICE_APIREPLY_H
#define SLUICE_APIREPLY_H

#include <stdarg.h>
#include <stddef.h>

#include <jansson.h>

struct evhttp_request;

/* The error code a status says when the caller has none of its own. */
const char *apireply_status_code(int status);
/* Sends len bytes of text as type, through the sink when one is set. */
void apireply_text(struct evhttp_request *req, int status, const char *type,
    const char *text, size_t len);
/* The same, at once, whatever the sink. */
void apireply_text_now(struct evhttp_request *req, int status,
    const char *type, const char *text, size_t len);
/* Where every answer goes (NULL: apireply_text_now): sluiced holds the
 * answer of a request that changed its state until the state is saved
 * (group commit), then sends it with apireply_text_now. */
typedef void (*apireply_sink_fn)(struct evhttp_request *req, int status,
    const char *type, const char *text, size_t len);
void apireply_set_sink(apireply_sink_fn sink);
/* Sends j (a new reference, consumed; NULL: out of memory, a 500). */
void apireply_json(struct evhttp_request *req, int status, json_t *j);
/* Sends {"error": {"code": code, "message": ..., extra's members}};
 * extra (may be NULL) is consumed.  A message that is not UTF-8 (it
 * came from somewhere) is sent as "?". */
void apireply_error(struct evhttp_request *req, int status, const char *code,
    json_t *extra, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The same with its arguments in ap. */
void apireply_verror(struct evhttp_request *req, int status, const char *code,
    json_t *extra, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
/* The error answer at once, whatever the sink (sluiced's sink itself
 * answers with it a change that could not be saved). */
void apireply_error_now(struct evhttp_request *req, int status,
    const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with the code the status says (apireply_status_code). */
void apireply_fail(struct evhttp_request *req, int status,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* SLUICE_APIREPLY_H */
