/*
 * ctl_log.c: tail and query on the connection log file.
 *
 * The log may be written while we read it: only complete lines (ending
 * in '\n') count as records, so a record being appended is never shown
 * half-written.  A log could also have been tampered with, so nothing
 * from it reaches the terminal unsanitised in text mode.
 */
#ifdef HAVE_CONFIG_H
#include "sluice-config.h"
#endif

#include "proxy/sluicectl/ctl_log.h"
#include "proxy/lib/clog.h"
#include "proxy/lib/util.h"
#include "proxy/lib/jsonstrict.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define CTLOG_LINE_MAX (1024 * 1024)   /* as clog.c's verifier */
#define CTLOG_FOLLOW_MS 200            /* poll period of tail -f */
#define CTLOG_CELL 160                 /* bytes shown of one field */

/* ---- filters ---- */

int
ctlog_ts_valid(const char *s)
{
	/* the shape of 2024-05-01T10:00:00.123Z, cut anywhere */
	static const char shape[] = "dddd-dd-ddTdd:dd:dd";
	size_t i, n = strlen(s);

	if (n < 4 || n > 40)
		return 0;
	for (i = 0; i < n && i < sizeof(shape) - 1; i++) {
		if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') :
		    s[i] != shape[i])
			return 0;
	}
	if (i < n && s[i] == '.') {
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
	}
	if (i < n && s[i] == 'Z')
		i++;
	return i == n;
}

static const char *
str_field(const json_t *rec, const char *key)
{
	return json_string_value(json_object_get(rec, key));
}

static int
field_is(const json_t *rec, const char *key, const char *want)
{
	const char *v;

	if (want == NULL)
		return 1;
	v = str_field(rec, key);
	return v != NULL && strcmp(v, want) == 0;
}

int
ctlog_match(const void *record, const struct ctlog_filter *f)
{
	const json_t *rec = record;
	const char *ts, *host;

	if (!json_is_object(rec))
		return 0;
	if (!field_is(rec, "session", f->session) ||
	    !field_is(rec, "tenant", f->tenant) ||
	    !field_is(rec, "decision", f->decision) ||
	    !field_is(rec, "reason", f->reason) ||
	    !field_is(rec, "event", f->event) ||
	    !field_is(rec, "request_rule", f->rule) ||
	    !field_is(rec, "credential", f->credential))
		return 0;
	if (f->host != NULL) {
		/* hosts are logged canonical (lower case); users type any */
		host = str_field(rec, "host");
		if (host == NULL || strcasecmp(host, f->host) != 0)
			return 0;
	}
	if (f->since != NULL || f->until != NULL) {
		ts = str_field(rec, "ts");
		if (ts == NULL)
			return 0;
		if (f->since != NULL && strcmp(ts, f->since) < 0)
			return 0;
		if (f->until != NULL &&
		    strncmp(ts, f->until, strlen(f->until)) > 0)
			return 0;
	}
	return 1;
}

/* ---- text output ---- */

/* A field as safe text: strings sanitised, numbers printed, "-" for
 * absent or null. */
static const char *
cell(const json_t *rec, const char *key, char *buf, size_t buflen)
{
	const json_t *v = json_object_get(rec, key);
	const char *s;

	if (v == NULL || json_is_null(v))
		return "-";
	if (json_is_string(v)) {
		s = json_string_value(v);
		if (*s == '\0')
			return "-";
		return clog_sanitize(s, json_string_length(v), buf, buflen,
		    CTLOG_CELL);
	}
	if (json_is_integer(v)) {
		snprintf(buf, buflen, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		return buf;
	}
	if (json_is_true(v))
		return "true";
	if (json_is_false(v))
		return "false";
	return "?";
}

static void
print_header(FILE *out)
{
	fprintf(out, "%-24s %7s %-9s %-16s %-8s %-20s %s\n", "TIME", "SEQ",
	    "EVENT", "SESSION", "DECISION", "REASON", "DETAIL");
}

/* What the event is about: the target, byte counts, an admin action. */
static void
print_detail(FILE *out, const json_t *rec)
{
	char a[CTLOG_CELL + 8], b[CTLOG_CELL + 8];
	const json_t *port = json_object_get(rec, "port");
	static const char *const extra[] = { "action", "who", "prompt",
	    "answer", "bytes_up", "bytes_down", "duration_ms", NULL };
	size_t i;
	int sp = 0;

	if (json_object_get(rec, "host") != NULL &&
	    !json_is_null(json_object_get(rec, "host"))) {
		if (json_object_get(rec, "method") != NULL &&
		    !json_is_null(json_object_get(rec, "method"))) {
			fprintf(out, "%s ", cell(rec, "method", a, sizeof(a)));
		}
		fputs(cell(rec, "host", b, sizeof(b)), out);
		if (json_is_integer(port))
			fprintf(out, ":%" JSON_INTEGER_FORMAT,
			    json_integer_value(port));
		sp = 1;
	}
	for (i = 0; extra[i] != NULL; i++) {
		const json_t *v = json_object_get(rec, extra[i]);
		if (v == NULL || json_is_null(v))
			continue;
		fprintf(out, "%s%s=%s", sp ? " " : "", extra[i],
		    cell(rec, extra[i], a, sizeof(a)));
		sp = 1;
	}
}

static void
print_text(FILE *out, const json_t *rec)
{
	char t[64], s[CTLOG_CELL + 8], e[64], se[CTLOG_CELL + 8],
	    d[64], r[64];
	const char *dec;

	dec = cell(rec, "decision", d, sizeof(d));
	if (strcmp(dec, "-") == 0)
		dec = cell(rec, "answer", d, sizeof(d));
	fprintf(out, "%-24s %7s %-9s %-16s %-8s %-20s ",
	    cell(rec, "ts", t, sizeof(t)), cell(rec, "seq", s, sizeof(s)),
	    cell(rec, "event", e, sizeof(e)), cell(rec, "session", se,
	    sizeof(se)), dec, cell(rec, "reason", r, sizeof(r)));
	print_detail(out, rec);
	fputc('\n', out);
}

/* One complete line (without its '\n').  Returns 1 printed, 0 not. */
static int
emit_line(const char *line, size_t len, uint64_t lineno,
    const struct ctlog_filter *f, const struct ctlog_opts *o)
{
	json_t *rec;
	json_error_t je;
	int shown = 0;

	rec = jsonstrict_load(line, len, &je);
	if (rec == NULL || !json_is_object(rec)) {
		if (o->diag != NULL)
			fprintf(o->diag, "sluicectl: line %" PRIu64 ": not a "
			    "log record, skipped\n", lineno);
		json_decref(rec);
		return 0;
	}
	if (f == NULL || ctlog_match(rec, f)) {
		if (o->json) {
			/* byte for byte as sluiced writes it (it escapes
			 * what a terminal would act on); a line that still
			 * holds such a character raw (edited, or older) is
			 * escaped here too, and no longer verifies as shown */
			size_t n = 0;
			char *safe = clog_json_escape(line, len, &n);

			if (safe == NULL) {
				json_decref(rec);
				return 0;
			}
			fwrite(safe, 1, n, o->out);
			fputc('\n', o->out);
			free(safe);
		} else {
			print_text(o->out, rec);
		}
		shown = 1;
	}
	json_decref(rec);
	return shown;
}

/* ---- query ---- */

int
ctlog_query(const char *path, const struct ctlog_filter *f,
    const struct ctlog_opts *o, uint64_t *matched, char *err, size_t errlen)
{
	FILE *in;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	uint64_t lineno = 0, hits = 0;
	int rc = -1;

	in = fopen(path, "r");
	if (in == NULL) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!o->json)
		print_header(o->out);
	for (;;) {
		errno = 0;
		n = getline(&line, &cap, in);
		if (n < 0) {
			if (errno != 0) {
				errf(err, errlen, "%s: %s", path,
				    strerror(errno));
				goto done;
			}
			break;
		}
		lineno++;
		if (line[n - 1] != '\n')
			break;          /* being written: not a record yet */
		if ((size_t)n > CTLOG_LINE_MAX) {
			if (o->diag != NULL)
				fprintf(o->diag, "sluicectl: line %" PRIu64
				    ": longer than %d bytes, skipped\n",
				    lineno, CTLOG_LINE_MAX);
			continue;
		}
		hits += (uint64_t)emit_line(line, (size_t)n - 1, lineno, f, o);
		if (ferror(o->out)) {
			errf(err, errlen, "output: %s", strerror(errno));
			goto done;
		}
	}
	rc = 0;
done:
	if (matched != NULL)
		*matched = hits;
	free(line);
	fclose(in);
	return rc;
}

/* ---- tail ---- */

/*
 * Offsets of the last n complete lines: [*start, *end).  Reads backwards
 * in blocks so a large log costs only its tail.
 */
static int
find_tail(int fd, off_t size, long n, off_t *start, off_t *end)
{
	char buf[65536];
	off_t pos = size, p;
	long seen = 0;
	ssize_t got;
	size_t chunk, i;

	*start = *end = 0;
	while (pos > 0) {
		chunk = pos > (off_t)sizeof(buf) ? sizeof(buf) : (size_t)pos;
		pos -= (off_t)chunk;
		got = pread(fd, buf, chunk, pos);
		if (got != (ssize_t)chunk)
			return -1;
		for (i = chunk; i-- > 0; ) {
			if (buf[i] != '\n')
				continue;
			p = pos + (off_t)i + 1;
			if (seen == 0)
				*end = p;
			if (seen == n) {
				*start = p;
				return 0;
			}
			seen++;
		}
	}
	*start = 0;
	if (n == 0)
		*start = *end;
	return 0;
}

struct follower {
	int fd;
	dev_t dev;
	ino_t ino;
	off_t off;              /* next byte to read */
	char *pend;             /* a line not yet complete */
	size_t plen, pcap;
	uint64_t lineno;
	int overlong;           /* dropping the rest of an oversized line */
};

static int
pend_add(struct follower *fl, const char *p, size_t n)
{
	char *nb;
	size_t want;

	if (fl->overlong)
		return 0;
	if (fl->plen + n > CTLOG_LINE_MAX) {
		fl->overlong = 1;
		fl->plen = 0;
		return 0;
	}
	if (fl->plen + n > fl->pcap) {
		want = fl->pcap ? fl->pcap : 4096;
		while (want < fl->plen + n)
			want *= 2;
		nb = realloc(fl->pend, want);
		if (nb == NULL)
			return -1;
		fl->pend = nb;
		fl->pcap = want;
	}
	memcpy(fl->pend + fl->plen, p, n);
	fl->plen += n;
	return 0;
}

/* Feed bytes; print each line completed by them. */
static int
feed(struct follower *fl, const char *p, size_t n,
    const struct ctlog_opts *o)
{
	const char *nl;
	size_t k;

	while (n > 0) {
		nl = memchr(p, '\n', n);
		k = nl ? (size_t)(nl - p) : n;
		if (pend_add(fl, p, k) != 0)
			return -1;
		if (nl == NULL)
			break;
		fl->lineno++;
		if (fl->overlong) {
			if (o->diag != NULL)
				fprintf(o->diag, "sluicectl: a line longer "
				    "than %d bytes, skipped\n", CTLOG_LINE_MAX);
		} else {
			emit_line(fl->pend, fl->plen, fl->lineno, NULL, o);
		}
		fl->plen = 0;
		fl->overlong = 0;
		p += k + 1;
		n -= k + 1;
	}
	return 0;
}

/* Read what is there now.  0, or -1 on a read error. */
static int
drain(struct follower *fl, const struct ctlog_opts *o)
{
	char buf[65536];
	ssize_t got;
	int i;

	for (i = 0; i < 100000; i++) {
		got = pread(fl->fd, buf, sizeof(buf), fl->off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -1;
		if (got == 0)
			break;
		fl->off += got;
		if (feed(fl, buf, (size_t)got, o) != 0)
			return -1;
	}
	fflush(o->out);
	return 0;
}

static int
follower_open(struct follower *fl, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	if (fl->fd >= 0)
		close(fl->fd);
	fl->fd = fd;
	fl->dev = st.st_dev;
	fl->ino = st.st_ino;
	fl->off = 0;
	fl->plen = 0;
	fl->overlong = 0;
	return 0;
}

/* Look at the path: replaced (rotation) or truncated?  Reopen from the
 * start when so; a path that is briefly missing is waited for. */
static void
check_rotation(struct follower *fl, const char *path,
    const struct ctlog_opts *o)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return;
	if (st.st_dev != fl->dev || st.st_ino != fl->ino) {
		/* the old file may have got its last records after our read */
		drain(fl, o);
		if (follower_open(fl, path) == 0)
			fl->lineno = 0;
		return;
	}
	if (st.st_size < fl->off) {
		fl->off = 0;
		fl->plen = 0;
		fl->lineno = 0;
	}
}

int
ctlog_tail(const char *path, long n, int follow,
    const volatile sig_atomic_t *stop, const struct ctlog_opts *o,
    char *err, size_t errlen)
{
	struct follower fl = { .fd = -1 };
	struct stat st;
	off_t start, end;
	int rc = -1;

	if (follower_open(&fl, path) != 0 || fstat(fl.fd, &st) != 0) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		goto done;
	}
	if (find_tail(fl.fd, st.st_size, n, &start, &end) != 0) {
		errf(err, errlen, "%s: read: %s", path, strerror(errno));
		goto done;
	}
	if (!o->json)
		print_header(o->out);
	/* line numbers are unknown this far into the file: count from the
	 * start of the tail for warnings */
	fl.off = start;
	{
		char buf[65536];
		ssize_t got;
		while (fl.off < end) {
			size_t want = (size_t)(end - fl.off);
			if (want > sizeof(buf))
				want = sizeof(buf);
			got = pread(fl.fd, buf, want, fl.off);
			if (got <= 0) {
				errf(err, errlen, "%s: read: %s", path,
				    got == 0 ? "file shrank" : strerror(errno));
				goto done;
			}
			fl.off += got;
			if (feed(&fl, buf, (size_t)got, o) != 0)
				goto done;
		}
	}
	fflush(o->out);
	while (follow && (stop == NULL || !*stop) && !ferror(o->out)) {
		if (drain(&fl, o) != 0) {
			errf(err, errlen, "%s: read: %s", path,
			    strerror(errno));
			goto done;
		}
		check_rotation(&fl, path, o);
		poll(NULL, 0, CTLOG_FOLLOW_MS);
	}
	if (ferror(o->out) && (stop == NULL || !*stop)) {
		/* a closed pipe (| head) is how a follow usually ends */
		if (errno != EPIPE) {
			errf(err, errlen, "output: %s", strerror(errno));
			goto done;
		}
	}
	rc = 0;
done:
	if (fl.fd >= 0)
		close(fl.fd);
	free(fl.pend);
	return rc;
}
