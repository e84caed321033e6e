/*
 * fwmsg.c: the proxy <-> firewall helper messages (fwmsg.h), the
 * helper's request loop and the proxy's call.
 *
 * The decoder is the whole of the helper's input parsing: it walks the
 * packet with a bounds-checked cursor, copies every string into storage
 * of its own (checked against a small alphabet), and refuses anything
 * left over.  Meaning is checked after it, by fw_build.
 */
#include "sluice-config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "firewall/fwmsg.h"

/* ------------------------------------------------------------------ */
/* Encoding */

struct wbuf {
	uint8_t *p;
	size_t cap, at;
	int over;
};

static void
put(struct wbuf *w, const void *v, size_t n)
{
	if (w->over || n > w->cap - w->at) {
		w->over = 1;
		return;
	}
	memcpy(w->p + w->at, v, n);
	w->at += n;
}

static void
put8(struct wbuf *w, unsigned v)
{
	uint8_t b = (uint8_t)v;

	put(w, &b, 1);
}

static void
put16(struct wbuf *w, unsigned v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	put(w, b, 2);
}

static void
put32(struct wbuf *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16),
	    (uint8_t)(v >> 8), (uint8_t)v };

	put(w, b, 4);
}

static void
put_hdr(struct wbuf *w, int type)
{
	put16(w, FW_MSG_MAGIC);
	put8(w, FW_MSG_VERSION);
	put8(w, (unsigned)type);
	put32(w, 0);            /* length, set by finish() */
}

static size_t
finish(struct wbuf *w)
{
	uint32_t n = (uint32_t)(w->at - FW_MSG_HDR);

	w->p[4] = (uint8_t)(n >> 24);
	w->p[5] = (uint8_t)(n >> 16);
	w->p[6] = (uint8_t)(n >> 8);
	w->p[7] = (uint8_t)n;
	return w->at;
}

static int
addr_char(int c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	    (c >= 'A' && c <= 'F') || c == '.' || c == ':' || c == '/' ||
	    c == '[' || c == ']';
}

/* interface names: printable ASCII but for the bytes pol_ifname_check
 * refuses anywhere; length and '*' placement are fw_build's to check */
static int
ifname_char(int c)
{
	return c > 0x20 && c < 0x7f && c != '/' && c != ':' && c != '"' &&
	    c != '\\';
}

enum alphabet { A_ADDR, A_TABLE, A_IFNAME };

static int
alphabet_char(enum alphabet a, int c)
{
	switch (a) {
	case A_ADDR:
		return addr_char(c);
	case A_TABLE:
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '-';
	case A_IFNAME:
		return ifname_char(c);
	}
	return 0;
}

static int
put_list(struct wbuf *w, const char *what, enum alphabet a,
    const char *const *v, size_t n, char *err, size_t errlen)
{
	size_t i, j, len;

	if (n > FW_MSG_LIST_MAX) {
		snprintf(err, errlen, "%s: more than %d entries", what,
		    FW_MSG_LIST_MAX);
		return -1;
	}
	put16(w, (unsigned)n);
	for (i = 0; i < n; i++) {
		len = strlen(v[i]);
		for (j = 0; j < len &&
		    alphabet_char(a, (unsigned char)v[i][j]); j++)
			;
		if (len == 0 || len > 255 || j < len) {
			snprintf(err, errlen, "%s: bad entry \"%.64s\"", what,
			    v[i]);
			return -1;
		}
		put8(w, (unsigned)len);
		put(w, v[i], len);
	}
	return 0;
}

int
fw_msg_encode_apply(const struct fw_config *fc, uint8_t *buf, size_t cap,
    size_t *len, char *err, size_t errlen)
{
	struct wbuf w = { buf, cap, 0, 0 };
	const char *table = fc->table ? fc->table : FW_DEFAULT_TABLE;
	size_t i, tl = strlen(table);

	put_hdr(&w, FW_MSG_APPLY);
	if (tl == 0 || tl > 255) {
		snprintf(err, errlen, "table: bad name");
		return -1;
	}
	put8(&w, (unsigned)tl);
	put(&w, table, tl);
	if (fc->uid < -1 || fc->uid > (int64_t)UINT32_MAX - 1) {
		snprintf(err, errlen, "uid: out of range");
		return -1;
	}
	put8(&w, fc->uid >= 0);
	put32(&w, fc->uid >= 0 ? (uint32_t)fc->uid : 0);
	if (put_list(&w, "allow_cidrs", A_ADDR, fc->allow_cidrs,
	    fc->nallow_cidrs, err, errlen) != 0 ||
	    put_list(&w, "deny_cidrs", A_ADDR, fc->deny_cidrs,
	    fc->ndeny_cidrs, err, errlen) != 0 ||
	    put_list(&w, "resolvers", A_ADDR, fc->resolvers, fc->nresolvers,
	    err, errlen) != 0 ||
	    put_list(&w, "sandbox_subnets", A_ADDR, fc->sandbox_subnets,
	    fc->nsandbox_subnets, err, errlen) != 0 ||
	    put_list(&w, "sandbox_interfaces", A_IFNAME,
	    fc->sandbox_interfaces, fc->nsandbox_interfaces, err,
	    errlen) != 0 ||
	    put_list(&w, "broker_addrs", A_ADDR, fc->broker_addrs,
	    fc->nbroker_addrs, err, errlen) != 0)
		return -1;
	if (fc->nbroker_ports > FW_MSG_PORTS_MAX) {
		snprintf(err, errlen, "broker_ports: more than %d",
		    FW_MSG_PORTS_MAX);
		return -1;
	}
	put16(&w, (unsigned)fc->nbroker_ports);
	for (i = 0; i < fc->nbroker_ports; i++)
		put16(&w, fc->broker_ports[i]);
	put16(&w, fc->transparent_port);
	if (w.over || w.at > FW_MSG_MAX) {
		snprintf(err, errlen, "the firewall configuration does not "
		    "fit in one message of %d bytes", FW_MSG_MAX);
		return -1;
	}
	*len = finish(&w);
	return 0;
}

size_t
fw_msg_encode_reply(uint8_t *buf, size_t cap, int ok, const char *text)
{
	struct wbuf w = { buf, cap, 0, 0 };
	size_t n = text ? strnlen(text, FW_MSG_TEXT_MAX) : 0, i;

	put_hdr(&w, ok ? FW_MSG_OK : FW_MSG_ERR);
	put16(&w, (unsigned)n);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)text[i];

		put8(&w, c >= 0x20 && c < 0x7f ? c : '?');
	}
	if (w.over)
		return 0;
	return finish(&w);
}

/* ------------------------------------------------------------------ */
/* Decoding */

struct rbuf {
	const uint8_t *p;
	size_t len, at;
};

static int
get(struct rbuf *r, size_t n, const uint8_t **out)
{
	if (n > r->len - r->at)
		return -1;
	*out = r->p + r->at;
	r->at += n;
	return 0;
}

/* A big-endian number of n bytes (1 to 4). */
static int
get_be(struct rbuf *r, size_t n, uint32_t *v)
{
	const uint8_t *b;
	size_t i;

	if (get(r, n, &b) != 0)
		return -1;
	*v = 0;
	for (i = 0; i < n; i++)
		*v = *v << 8 | b[i];
	return 0;
}

/* The header of a packet of len bytes; the type in *type. */
static int
get_hdr(struct rbuf *r, unsigned *type, char *err, size_t errlen)
{
	unsigned magic = 0, version = 0;
	uint32_t n = 0;

	if (r->len < FW_MSG_HDR || r->len > FW_MSG_MAX) {
		snprintf(err, errlen, "bad message length %zu", r->len);
		return -1;
	}
	get_be(r, 2, &magic);
	get_be(r, 1, &version);
	get_be(r, 1, type);
	get_be(r, 4, &n);
	if (magic != FW_MSG_MAGIC || version != FW_MSG_VERSION) {
		snprintf(err, errlen, "bad magic or version");
		return -1;
	}
	if (n != r->len - FW_MSG_HDR) {
		snprintf(err, errlen, "length field %u, packet holds %zu",
		    (unsigned)n, r->len - FW_MSG_HDR);
		return -1;
	}
	return 0;
}

/* One str8 copied to *sp (advanced past its NUL), every byte in the
 * alphabet (table names, addresses or interface names). */
static int
get_str8(struct rbuf *r, char **sp, enum alphabet a, const char **out)
{
	const uint8_t *b;
	unsigned n, i;

	if (get_be(r, 1, &n) != 0 || n == 0 || get(r, n, &b) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (!alphabet_char(a, b[i]))
			return -1;
	}
	memcpy(*sp, b, n);
	(*sp)[n] = '\0';
	*out = *sp;
	*sp += n + 1;
	return 0;
}

static int
get_list(struct rbuf *r, const char *what, enum alphabet a, char **sp,
    const char ***pp, const char *const **list, size_t *n, char *err,
    size_t errlen)
{
	unsigned count, i;

	if (get_be(r, 2, &count) != 0) {
		snprintf(err, errlen, "%s: truncated", what);
		return -1;
	}
	if (count > FW_MSG_LIST_MAX) {
		snprintf(err, errlen, "%s: %u entries, at most %d", what,
		    count, FW_MSG_LIST_MAX);
		return -1;
	}
	*list = *pp;
	*n = count;
	for (i = 0; i < count; i++) {
		if (get_str8(r, sp, a, *pp) != 0) {
			snprintf(err, errlen, "%s[%u]: truncated or bad "
			    "bytes", what, i);
			return -1;
		}
		(*pp)++;
	}
	return 0;
}

int
fw_msg_decode_apply(const uint8_t *buf, size_t len, struct fw_msg_apply *out,
    char *err, size_t errlen)
{
	struct rbuf r = { buf, len, 0 };
	unsigned type, has_uid, nports, i, tport;
	uint32_t uid;
	char *sp;
	const char **pp;

	memset(out, 0, sizeof(*out));
	if (get_hdr(&r, &type, err, errlen) != 0)
		return -1;
	if (type != FW_MSG_APPLY) {
		snprintf(err, errlen, "unknown message type %u", type);
		return -1;
	}
	/* every string is shorter than the packet, and every list entry
	 * takes at least two bytes of it: storage bounded by len */
	out->strings = malloc(len + 1);
	out->ptrs = calloc(len / 2 + 1, sizeof(*out->ptrs));
	out->ports = calloc(FW_MSG_PORTS_MAX + 1, sizeof(*out->ports));
	if (out->strings == NULL || out->ptrs == NULL || out->ports == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	sp = out->strings;
	pp = out->ptrs;
	if (get_str8(&r, &sp, A_TABLE, &out->fc.table) != 0 ||
	    strlen(out->fc.table) >= FW_TABLE_MAX) {
		snprintf(err, errlen, "table: truncated or bad name");
		return -1;
	}
	if (get_be(&r, 1, &has_uid) != 0 || get_be(&r, 4, &uid) != 0 ||
	    has_uid > 1 || (has_uid == 0 && uid != 0) || uid == UINT32_MAX) {
		snprintf(err, errlen, "uid: truncated or bad");
		return -1;
	}
	out->fc.uid = has_uid ? (int64_t)uid : -1;
	if (get_list(&r, "allow_cidrs", A_ADDR, &sp, &pp,
	    &out->fc.allow_cidrs, &out->fc.nallow_cidrs, err, errlen) != 0 ||
	    get_list(&r, "deny_cidrs", A_ADDR, &sp, &pp, &out->fc.deny_cidrs,
	    &out->fc.ndeny_cidrs, err, errlen) != 0 ||
	    get_list(&r, "resolvers", A_ADDR, &sp, &pp, &out->fc.resolvers,
	    &out->fc.nresolvers, err, errlen) != 0 ||
	    get_list(&r, "sandbox_subnets", A_ADDR, &sp, &pp,
	    &out->fc.sandbox_subnets, &out->fc.nsandbox_subnets, err,
	    errlen) != 0 ||
	    get_list(&r, "sandbox_interfaces", A_IFNAME, &sp, &pp,
	    &out->fc.sandbox_interfaces, &out->fc.nsandbox_interfaces, err,
	    errlen) != 0 ||
	    get_list(&r, "broker_addrs", A_ADDR, &sp, &pp,
	    &out->fc.broker_addrs, &out->fc.nbroker_addrs, err,
	    errlen) != 0)
		return -1;
	if (get_be(&r, 2, &nports) != 0 || nports > FW_MSG_PORTS_MAX) {
		snprintf(err, errlen, "broker_ports: truncated or too many");
		return -1;
	}
	for (i = 0; i < nports; i++) {
		unsigned p;

		if (get_be(&r, 2, &p) != 0 || p == 0) {
			snprintf(err, errlen, "broker_ports[%u]: truncated or "
			    "zero", i);
			return -1;
		}
		out->ports[i] = (uint16_t)p;
	}
	out->fc.broker_ports = out->ports;
	out->fc.nbroker_ports = nports;
	if (get_be(&r, 2, &tport) != 0) {
		snprintf(err, errlen, "transparent_port: truncated");
		return -1;
	}
	out->fc.transparent_port = (uint16_t)tport;
	if (r.at != r.len) {
		snprintf(err, errlen, "%zu bytes after the last field",
		    r.len - r.at);
		return -1;
	}
	return 0;
}

void
fw_msg_apply_clear(struct fw_msg_apply *a)
{
	free(a->strings);
	free(a->ptrs);
	free(a->ports);
	memset(a, 0, sizeof(*a));
}

int
fw_msg_decode_reply(const uint8_t *buf, size_t len, char *text,
    size_t textlen)
{
	struct rbuf r = { buf, len, 0 };
	const uint8_t *b;
	unsigned type, n, i;
	char e[64];

	if (textlen == 0 || get_hdr(&r, &type, e, sizeof(e)) != 0 ||
	    (type != FW_MSG_OK && type != FW_MSG_ERR) ||
	    get_be(&r, 2, &n) != 0 || n > FW_MSG_TEXT_MAX ||
	    get(&r, n, &b) != 0 || r.at != r.len)
		return -1;
	for (i = 0; i < n; i++)
		if (b[i] < 0x20 || b[i] >= 0x7f)
			return -1;
	if (n >= textlen)
		n = (unsigned)textlen - 1;
	memcpy(text, b, n);
	text[n] = '\0';
	return type == FW_MSG_OK;
}

/* ------------------------------------------------------------------ */
/* The helper */

struct helper {
	const struct fw_helper_ops *ops;
	char table[FW_TABLE_MAX];       /* may be replaced */
	struct fw_ruleset *cur;         /* last applied; NULL: none yet */
};

static void
hlog(const struct helper *h, int prio, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
hlog(const struct helper *h, int prio, const char *fmt, ...)
{
	char buf[768];
	va_list ap;

	if (h->ops->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	h->ops->log(prio, buf);
}

/* One APPLY: 0 / -1 with err for the reply; *refilled when the sets
 * were refilled in place. */
static int
helper_apply(struct helper *h, const uint8_t *buf, size_t len, int *refilled,
    char *err, size_t errlen)
{
	struct fw_msg_apply m;
	struct fw_ruleset *rs = NULL;
	char e2[512];
	const char *name;
	int rc = -1, ex;

	if (fw_msg_decode_apply(buf, len, &m, e2, sizeof(e2)) != 0) {
		snprintf(err, errlen, "malformed request refused: %s", e2);
		goto out;
	}
	if ((rs = fw_build(&m.fc, err, errlen)) == NULL)
		goto out;
	name = fw_table_name(rs);
	if (strcmp(name, h->table) != 0) {
		/* a new name: only a table nobody has */
		ex = h->ops->exists(name, e2, sizeof(e2));
		if (ex != 0) {
			if (ex > 0)
				snprintf(err, errlen, "table inet %s exists "
				    "and is not sluiced's: not replacing it",
				    name);
			else
				snprintf(err, errlen, "table inet %s: %s",
				    name, e2);
			goto out;
		}
	}
	*refilled = 0;
	if (h->cur != NULL && strcmp(name, h->table) == 0 &&
	    h->ops->update != NULL ? h->ops->update(h->cur, rs, refilled, err,
	    errlen) != 0 : h->ops->apply(rs, err, errlen) != 0) {
		/* the batch is atomic, but a read-back difference leaves
		 * the new table: under a new name it is one this helper has
		 * just made (there was none), so it goes, or a retry would
		 * find it "not sluiced's"; under the running name the
		 * running table is put back */
		if (strcmp(name, h->table) != 0) {
			if (h->ops->exists(name, e2, sizeof(e2)) == 1 &&
			    h->ops->remove(name, e2, sizeof(e2)) != 0)
				hlog(h, LOG_ERR, "cannot remove the half-applied "
				    "table inet %s: %s", name, e2);
		} else if (h->cur != NULL && h->ops->verify(h->cur, e2,
		    sizeof(e2)) != 0 && h->ops->apply(h->cur, e2,
		    sizeof(e2)) != 0)
			hlog(h, LOG_ERR, "cannot restore the running table "
			    "inet %s: %s", fw_table_name(h->cur), e2);
		goto out;
	}
	if (h->cur != NULL && strcmp(fw_table_name(h->cur), name) != 0 &&
	    h->ops->remove(fw_table_name(h->cur), e2, sizeof(e2)) != 0)
		hlog(h, LOG_WARNING, "cannot remove the old table inet %s: %s",
		    fw_table_name(h->cur), e2);
	fw_free(h->cur);
	h->cur = rs;
	rs = NULL;
	snprintf(h->table, sizeof(h->table), "%s", name);
	rc = 0;
out:
	fw_free(rs);
	fw_msg_apply_clear(&m);
	return rc;
}

int
fw_helper_run(int fd, const char *start_table,
    const struct fw_helper_ops *ops)
{
	struct helper h;
	uint8_t *buf = malloc(FW_MSG_MAX + 1), reply[FW_MSG_HDR + 2 +
	    FW_MSG_TEXT_MAX];
	char err[FW_MSG_TEXT_MAX];
	int rc = -1;

	memset(&h, 0, sizeof(h));
	h.ops = ops;
	snprintf(h.table, sizeof(h.table), "%s", start_table);
	if (buf == NULL)
		return -1;
	for (;;) {
		ssize_t n = recv(fd, buf, FW_MSG_MAX + 1, MSG_TRUNC);
		size_t rl;
		int ok, refilled = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			hlog(&h, LOG_ERR, "receive: %s", strerror(errno));
			break;
		}
		if (n == 0) {           /* the proxy is gone */
			rc = 0;
			break;
		}
		err[0] = '\0';
		if ((size_t)n > FW_MSG_MAX) {
			snprintf(err, sizeof(err), "malformed request refused: "
			    "%zd bytes, at most %d", n, FW_MSG_MAX);
			ok = 0;
		} else
			ok = helper_apply(&h, buf, (size_t)n, &refilled, err,
			    sizeof(err)) == 0;
		if (!ok)
			hlog(&h, LOG_ERR, "%s", err);
		rl = fw_msg_encode_reply(reply, sizeof(reply), ok,
		    ok ? (refilled ? "refilled" : "applied") : err);
		if (send(fd, reply, rl, MSG_NOSIGNAL) != (ssize_t)rl) {
			hlog(&h, LOG_ERR, "send: %s", strerror(errno));
			break;
		}
	}
	fw_free(h.cur);
	free(buf);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The proxy's call */

int
fw_helper_apply(int fd, const struct fw_config *fc, int timeout_ms,
    char *err, size_t errlen)
{
	uint8_t *buf = malloc(FW_MSG_MAX), reply[FW_MSG_HDR + 2 +
	    FW_MSG_TEXT_MAX + 1];
	struct pollfd pfd = { fd, POLLIN, 0 };
	size_t len;
	ssize_t n;
	int rc = -2, r;

	if (buf == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (fd < 0) {
		snprintf(err, errlen, "no firewall helper");
		goto out;
	}
	if (fw_msg_encode_apply(fc, buf, FW_MSG_MAX, &len, err, errlen) != 0) {
		rc = -1;
		goto out;
	}
	if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) {
		snprintf(err, errlen, "the firewall helper is gone (send: %s)",
		    strerror(errno));
		goto out;
	}
	do
		r = poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0) {
		snprintf(err, errlen, "no answer from the firewall helper in "
		    "%d ms", timeout_ms);
		goto out;
	}
	do
		n = recv(fd, reply, sizeof(reply), MSG_TRUNC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		snprintf(err, errlen, "the firewall helper is gone%s%s",
		    n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
		goto out;
	}
	if ((size_t)n > sizeof(reply) ||
	    (r = fw_msg_decode_reply(reply, (size_t)n, err, errlen)) < 0) {
		snprintf(err, errlen, "a malformed reply from the firewall "
		    "helper");
		goto out;
	}
	rc = r == 1 ? 0 : -1;
out:
	free(buf);
	return rc;
}
