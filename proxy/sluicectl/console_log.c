/*
 * console_log.c: log queries and chain verification in a child process.
 *
 * The child's answer is "STATUS\n" then one JSON text.  It runs with
 * alarm(2) as its time limit and leaves through _exit(2), so nothing of
 * the parent (atexit handlers, stdio buffers, the event loop) runs in
 * it.  The parent reads the pipe from its event loop and reaps the
 * child when the pipe ends.
 */
#ifdef HAVE_CONFIG_H
#include "sluice-config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include <jansson.h>

#include "proxy/lib/clog.h"
#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"
#include "proxy/sluicectl/console_log.h"
#include "proxy/sluicectl/ctl_http.h"

#define LINE_MAX_BYTES (1024 * 1024)    /* longer lines are not records */

struct clj {
	pid_t pid;
	int fd;
	struct event *rd;
	struct event *timer;
	struct evbuffer *out;
	clj_done_fn done;
	void *arg;
};

/* ---- in the child ---- */

char *
clj_error_vtext(const char *code, const char *fmt, va_list ap)
{
	char msg[600];
	json_t *j;
	char *s;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}

static char *
error_text(const char *code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static char *
error_text(const char *code, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = clj_error_vtext(code, fmt, ap);
	va_end(ap);
	return s;
}

/* A file the caller cannot open: 404 or 403 with the reason. */
static char *
open_error(const char *path, int e, int *status)
{
	*status = e == ENOENT ? 404 : e == EACCES || e == EPERM ? 403 : 500;
	return error_text(e == ENOENT ? "not_found" : e == EACCES ||
	    e == EPERM ? "forbidden" : "internal", "%s: %s", path,
	    strerror(e));
}

char *
clj_query_text(const char *path, const struct ctlog_filter *f, size_t limit,
    int *status)
{
	json_t **ring = NULL, *rec, *arr = NULL, *doc;
	uint64_t matched = 0, bad = 0;
	size_t cap = 0, i, n;
	ssize_t len;
	char *line = NULL, *text = NULL;
	FILE *in;

	if (limit < 1)
		limit = 1;
	if (limit > CLJ_LIMIT_MAX)
		limit = CLJ_LIMIT_MAX;
	if ((in = fopen(path, "r")) == NULL)
		return open_error(path, errno, status);
	*status = 500;
	if ((ring = calloc(limit, sizeof(*ring))) == NULL)
		goto done;
	for (;;) {
		errno = 0;
		len = getline(&line, &cap, in);
		if (len < 0) {
			if (errno != 0) {
				text = error_text("internal", "%s: %s", path,
				    strerror(errno));
				goto done;
			}
			break;
		}
		while (len > 0 && (line[len - 1] == '\n' ||
		    line[len - 1] == '\r'))
			len--;
		if (len == 0)
			continue;
		rec = len <= LINE_MAX_BYTES ? jsonstrict_load(line,
		    (size_t)len, NULL) : NULL;
		if (!json_is_object(rec)) {
			json_decref(rec);
			bad++;
			continue;
		}
		if (!ctlog_match(rec, f)) {
			json_decref(rec);
			continue;
		}
		/* the newest limit matches, in a ring */
		i = (size_t)(matched % limit);
		json_decref(ring[i]);
		ring[i] = rec;
		matched++;
	}
	if ((arr = json_array()) == NULL)
		goto done;
	n = matched < limit ? (size_t)matched : limit;
	for (i = 0; i < n; i++) {
		size_t k = (size_t)((matched - n + i) % limit);
		json_array_append(arr, ring[k]);
	}
	doc = json_pack("{s:s,s:I,s:I,s:o,s:I}", "file", path,
	    "matched", (json_int_t)matched, "limit", (json_int_t)limit,
	    "records", arr, "bad_lines", (json_int_t)bad);
	arr = NULL;
	if (doc != NULL) {
		text = json_dumps(doc, JSON_COMPACT);
		json_decref(doc);
		if (text != NULL)
			*status = 200;
	}
done:
	if (ring != NULL)
		for (i = 0; i < limit; i++)
			json_decref(ring[i]);
	free(ring);
	json_decref(arr);
	free(line);
	fclose(in);
	return text;
}

/* What sluiced's health says of its log, when the path came from it. */
struct head {
	int known;               /* health named the path */
	int have_anchor;         /* and a last record */
	struct clog_anchor a;
	int keyed;               /* its records carry macs */
};

static char *
verify_text(const char *path, const struct head *h, int *status)
{
	struct clog_verify_opts o;
	struct clog_verify_result res;
	char err[512];
	json_t *doc;
	char *text;
	int fd, r;

	/* open first: a log we may not read is 403, not a broken chain */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return open_error(path, errno, status);
	close(fd);
	memset(&o, 0, sizeof(o));
	memset(&res, 0, sizeof(res));
	/* the record sluiced reports as its last must be in the file: a cut
	 * tail (or a rewrite up to it) fails */
	if (h->have_anchor) {
		o.anchors = &h->a;
		o.nanchors = 1;
	}
	r = clog_verify(path, &o, &res, err, sizeof(err));
	doc = json_pack("{s:s,s:b,s:I,s:I,s:I}", "file", path, "ok", r == 0,
	    "records", (json_int_t)res.records, "fragments",
	    (json_int_t)res.fragments, "last_seq", (json_int_t)res.last_seq);
	if (doc != NULL) {
		json_object_set_new(doc, "last_hash", res.last_hash[0] ?
		    json_string(res.last_hash) : json_null());
		json_object_set_new(doc, "line", r != 0 && res.bad_line ?
		    json_integer((json_int_t)res.bad_line) : json_null());
		json_object_set_new(doc, "error", r != 0 ? json_string(err) :
		    json_null());
		json_object_set_new(doc, "anchor", h->have_anchor ?
		    json_pack("{s:I,s:s,s:b}", "seq", (json_int_t)h->a.seq,
		    "hash", h->a.hash, "found", res.anchors > 0) : json_null());
		/* the key is not the console's to read: macs are left to
		 * sluicectl log verify --key */
		json_object_set_new(doc, "keyed", json_boolean(h->keyed));
	}
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	*status = text ? 200 : 500;
	return text;
}

static int
hex64(const char *s)
{
	return s != NULL && strlen(s) == 64 &&
	    strspn(s, "0123456789abcdef") == 64;
}

/* The log's path: given, else from sluiced's health (with what health
 * says of its head), else fallback. */
static const char *
where_path(const struct clj_where *w, char *buf, size_t buflen,
    struct head *h)
{
	struct ctlh_target t = { .socket = w->socket, .timeout_ms = 5000 };
	struct ctlh_resp r;
	char err[256];
	json_t *doc, *log, *seq;
	const char *p, *hash;

	memset(h, 0, sizeof(*h));
	if (w->path != NULL)
		return w->path;
	if (w->socket != NULL && ctlh_request(&t, "GET", "/v1/health", NULL,
	    &r, err, sizeof(err)) == CTLH_OK) {
		doc = r.status == 200 ? jsonstrict_load(r.body, r.body_len,
		    NULL) : NULL;
		log = json_object_get(doc, "log");
		p = json_string_value(json_object_get(log, "path"));
		if (p != NULL && *p == '/' && strlen(p) < buflen) {
			snprintf(buf, buflen, "%s", p);
			h->known = 1;
			h->keyed = json_is_true(json_object_get(log, "keyed"));
			seq = json_object_get(log, "seq");
			hash = json_string_value(json_object_get(log, "hash"));
			if (json_is_integer(seq) && json_integer_value(seq) > 0 &&
			    hex64(hash)) {
				h->have_anchor = 1;
				h->a.seq = (uint64_t)json_integer_value(seq);
				snprintf(h->a.hash, sizeof(h->a.hash), "%s", hash);
			}
			json_decref(doc);
			ctlh_resp_free(&r);
			return buf;
		}
		json_decref(doc);
		ctlh_resp_free(&r);
	}
	return w->fallback;
}

static void
write_all(int fd, const char *p, size_t n)
{
	ssize_t k;

	while (n > 0) {
		k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

/* ---- in the parent ---- */

static void
clj_free(struct clj *j)
{
	if (j->rd != NULL)
		event_free(j->rd);
	if (j->timer != NULL)
		event_free(j->timer);
	if (j->out != NULL)
		evbuffer_free(j->out);
	if (j->fd >= 0)
		close(j->fd);
	free(j);
}

/* Wait for the child (after sig, if any); its wait status, or 0. */
static int
reap(struct clj *j, int sig)
{
	int st = 0;

	if (j->pid <= 0)
		return 0;
	if (sig)
		kill(j->pid, sig);
	while (waitpid(j->pid, &st, 0) < 0 && errno == EINTR)
		;
	j->pid = -1;
	return st;
}

static void
complete(struct clj *j, int status, const char *json, size_t len)
{
	j->done(j->arg, status, json, len);
	clj_free(j);
}

static const char too_long[] = "{\"error\":{\"code\":\"timeout\","
    "\"message\":\"reading the log took too long\"}}";

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct clj *j = arg;

	(void)fd;
	(void)what;
	reap(j, SIGKILL);
	complete(j, 504, too_long, sizeof(too_long) - 1);
}

static void
on_pipe(evutil_socket_t fd, short what, void *arg)
{
	struct clj *j = arg;
	static const char bad[] = "{\"error\":{\"code\":\"internal\","
	    "\"message\":\"the log reader failed\"}}";
	const char *p, *nl;
	size_t len;
	int n, st, status = 0;

	(void)what;
	n = evbuffer_read(j->out, fd, 65536);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && evbuffer_get_length(j->out) <= CLJ_OUT_MAX)
		return;
	/* the end, an error or too much: the child is done either way */
	st = reap(j, n > 0 ? SIGKILL : 0);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
		complete(j, 504, too_long, sizeof(too_long) - 1);
		return;
	}
	len = evbuffer_get_length(j->out);
	p = len > 0 ? (const char *)evbuffer_pullup(j->out, -1) : NULL;
	nl = p ? memchr(p, '\n', len < 8 ? len : 8) : NULL;
	/* "NNN\n" then the body */
	if (n == 0 && nl == p + 3 && p[0] >= '1' && p[0] <= '5' &&
	    p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9' &&
	    len > 4) {
		status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
		complete(j, status, nl + 1, len - 4);
		return;
	}
	complete(j, 500, bad, sizeof(bad) - 1);
}

/* Fork a child that runs work and writes its answer. */
static struct clj *
spawn(struct event_base *base, const struct clj_where *w,
    const struct ctlog_filter *f, size_t limit, int verify,
    clj_done_fn done, void *arg, char *err, size_t errlen)
{
	struct timeval tv = { CLJ_TIME_LIMIT_S + 5, 0 };
	struct clj *j;
	int p[2];

	if ((j = calloc(1, sizeof(*j))) == NULL) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	j->fd = -1;
	j->pid = -1;
	j->done = done;
	j->arg = arg;
	if ((j->out = evbuffer_new()) == NULL) {
		clj_free(j);
		errf(err, errlen, "out of memory");
		return NULL;
	}
	if (pipe2(p, O_CLOEXEC) != 0) {
		errf(err, errlen, "pipe: %s", strerror(errno));
		clj_free(j);
		return NULL;
	}
	fflush(NULL);
	j->pid = fork();
	if (j->pid < 0) {
		errf(err, errlen, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		clj_free(j);
		return NULL;
	}
	if (j->pid == 0) {
		char pathbuf[4096], head[16], *text;
		struct head h;
		const char *path;
		int status = 500;

		close(p[0]);
		/* the parent's handlers (libevent's signal pipe among them)
		 * are not the child's: a signal to it must not stop the
		 * console */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGALRM, SIG_DFL);
		alarm(CLJ_TIME_LIMIT_S);
		path = where_path(w, pathbuf, sizeof(pathbuf), &h);
		text = verify ? verify_text(path, &h, &status) :
		    clj_query_text(path, f, limit, &status);
		if (text == NULL) {
			status = 500;
			text = error_text("internal", "out of memory");
		}
		snprintf(head, sizeof(head), "%d\n", status);
		write_all(p[1], head, strlen(head));
		if (text != NULL)
			write_all(p[1], text, strlen(text));
		_exit(0);
	}
	close(p[1]);
	j->fd = p[0];
	evutil_make_socket_nonblocking(j->fd);
	j->rd = event_new(base, j->fd, EV_READ | EV_PERSIST, on_pipe, j);
	j->timer = evtimer_new(base, on_timeout, j);
	if (j->rd == NULL || j->timer == NULL || event_add(j->rd, NULL) != 0 ||
	    evtimer_add(j->timer, &tv) != 0) {
		reap(j, SIGKILL);
		clj_free(j);
		errf(err, errlen, "out of memory");
		return NULL;
	}
	return j;
}

struct clj *
clj_query(struct event_base *base, const struct clj_where *w,
    const struct ctlog_filter *f, size_t limit, clj_done_fn done, void *arg,
    char *err, size_t errlen)
{
	return spawn(base, w, f, limit, 0, done, arg, err, errlen);
}

struct clj *
clj_verify(struct event_base *base, const struct clj_where *w,
    clj_done_fn done, void *arg, char *err, size_t errlen)
{
	return spawn(base, w, NULL, 0, 1, done, arg, err, errlen);
}

void
clj_cancel(struct clj *j)
{
	if (j == NULL)
		return;
	reap(j, SIGKILL);
	clj_free(j);
}
