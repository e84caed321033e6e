/*
 * clog.c: the connection log (see clog.h for the record layout and the
 * chain rule).
 *
 * Torn tails.  A crash in the middle of write(2) can leave a last line
 * without its newline.  clog_open() ignores such a partial tail for chain
 * purposes (seq and prev continue from the last complete line) and
 * prefixes the next record with a newline, in the same write, so that
 * record starts on a line of its own.  The torn line stays in the file as
 * evidence: clog_verify_file() reports it as a line that is not a record.
 */
#ifdef HAVE_CONFIG_H
#include "sluice-config.h"

#include "proxy/lib/config.h"
#endif

#include "proxy/lib/clog.h"
#include "proxy/lib/util.h"
#include "proxy/lib/jsonstrict.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define CLOG_HEX_LEN 64
/* A record line longer than this is refused by the verifier and at open. */
#define CLOG_LINE_MAX (1024 * 1024)
/* ,"hash":"<64 hex>"} */
#define CLOG_HASH_PREFIX ",\"hash\":\""
#define CLOG_HASH_PREFIX_LEN (sizeof(CLOG_HASH_PREFIX) - 1)
#define CLOG_SUFFIX_LEN (CLOG_HASH_PREFIX_LEN + CLOG_HEX_LEN + 2)
/* ","mac":"<64 hex> between the hash's hex and its closing "} */
#define CLOG_MAC_PREFIX "\",\"mac\":\""
#define CLOG_MAC_PREFIX_LEN (sizeof(CLOG_MAC_PREFIX) - 1)
#define CLOG_MAC_LEN (CLOG_MAC_PREFIX_LEN + CLOG_HEX_LEN)
#define CLOG_ZERO_HASH \
	"0000000000000000000000000000000000000000000000000000000000000000"

struct clog {
	char *path;
	int fd;
	int is_stdout;
	int healthy;
	int need_nl;            /* file ends in a torn line */
	clog_sign_fn sign;      /* NULL: records carry no mac */
	void *sign_arg;
	uint64_t seq;           /* seq of the last record written */
	char prev[CLOG_HEX_LEN + 1];
	uint64_t written;
	uint64_t failed;
	uint64_t truncated;     /* short writes cut back off the file */
	uint64_t min_free;      /* warn below this many free bytes; 0: never */
	uint64_t free_bytes;    /* at the last look; UINT64_MAX: unknown */
	int low;                /* free_bytes < min_free */
	clog_space_fn on_space; /* told when low changes */
	time_t space_checked;   /* last look: at most one a second */
	time_t last_try;        /* last failed reopen: retry once a second */
	/*
	 * Records queued by clog_queue, chained on from seq/prev into
	 * pseq/pprev, that the next write takes along: the lines of one
	 * loop turn cost one write(2).  Empty (npend 0) after every write.
	 */
	char *pend;
	size_t pend_len, pend_cap;
	size_t npend;
	uint64_t pseq;
	char pprev[CLOG_HEX_LEN + 1];
	int pneed_nl;           /* need_nl as the queued lines leave it */
};

/*
 * A record is built as JSON text directly: ",\"key\":value" per field,
 * in order.  Going through jansson objects cost about a seventh of the
 * broker's CPU on short requests (two records each).  Nested values
 * (clog_rec_json) still go through json_dumps.
 */
#define CLOG_REC_KEYS 48      /* keys a record tells apart by offset */

struct clog_rec {
	char *event;
	char *buf;              /* the fields, each starting with ',' */
	size_t len, cap;
	int bad;                /* a field could not be added: refuse to write */
	/* where each field's ,"key": starts in buf, for the duplicate check
	 * (past CLOG_REC_KEYS fields it searches buf) */
	uint32_t koff[CLOG_REC_KEYS];
	uint16_t klen[CLOG_REC_KEYS];
	size_t nkeys;
};

/* What one line of the log says about itself. */
struct clog_line {
	uint64_t seq;
	char prev[CLOG_HEX_LEN + 1];
	char hash[CLOG_HEX_LEN + 1];
	char mac[CLOG_HEX_LEN + 1];     /* "" when the line has none */
};

/* ---- sanitiser ---- */

/* Code points that must not reach a log line or a terminal as they are. */
static int
cp_is_unsafe(uint32_t cp)
{
	if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
		return 1;
	switch (cp) {
	case 0x061c:            /* ARABIC LETTER MARK */
	case 0x200b: case 0x200c: case 0x200d:  /* zero width sp/nj/j */
	case 0x200e: case 0x200f:               /* LRM, RLM */
	case 0x2028: case 0x2029:               /* line/paragraph sep */
	case 0x2060:            /* WORD JOINER */
	case 0xfeff:            /* ZWNBSP / BOM */
		return 1;
	}
	if (cp >= 0x202a && cp <= 0x202e)       /* LRE..RLO */
		return 1;
	if (cp >= 0x2066 && cp <= 0x2069)       /* LRI..PDI */
		return 1;
	/* Tag characters: invisible, used to smuggle text past readers. */
	if (cp >= 0xe0000 && cp <= 0xe007f)
		return 1;
	return 0;
}

/* One UTF-8 sequence (util_utf8_seq): its length, or 0 with *bad the
 * ill-formed (or cut) prefix that becomes a single '?'. */
static size_t
utf8_decode(const unsigned char *s, size_t n, uint32_t *cp, size_t *bad)
{
	int k = util_utf8_seq(s, n, cp, bad);

	return k > 0 ? (size_t)k : 0;
}

char *
clog_sanitize(const char *in, size_t len, char *out, size_t outlen,
    size_t cap)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0, limit;
	int cut = 0;

	if (out == NULL || outlen == 0)
		return out;
	limit = cap < outlen - 1 ? cap : outlen - 1;
	while (i < len) {
		uint32_t cp;
		size_t bad = 0, n, w;
		const unsigned char *src;

		n = utf8_decode(s + i, len - i, &cp, &bad);
		if (n == 0 || cp_is_unsafe(cp)) {
			src = (const unsigned char *)"?";
			w = 1;
			n = n ? n : bad;
		} else {
			src = s + i;
			w = n;
		}
		if (o + w > limit) {
			cut = 1;
			break;
		}
		memcpy(out + o, src, w);
		o += w;
		i += n;
	}
	if (cut) {
		/* Make room for "..." by dropping whole characters. */
		while (o > 0 && o + 4 > outlen) {
			o--;
			while (o > 0 && ((unsigned char)out[o] & 0xc0) == 0x80)
				o--;
		}
		for (i = 0; i < 3 && o + 1 < outlen; i++)
			out[o++] = '.';
	}
	out[o] = '\0';
	return out;
}

int
clog_text_safe(const char *in, size_t len)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, n, bad;
	uint32_t cp;

	while (i < len) {
		n = utf8_decode(s + i, len - i, &cp, &bad);
		if (n == 0 || cp_is_unsafe(cp))
			return 0;
		i += n;
	}
	return 1;
}

static size_t json_u_escape(uint32_t cp, char esc[16]);

/* One pass of clog_json_escape: the length out (NULL: only counted). */
static size_t
json_escape_pass(const unsigned char *s, size_t len, char *out)
{
	size_t i = 0, o = 0, n, bad, k;
	char esc[16];
	uint32_t cp;

	while (i < len) {
		n = utf8_decode(s + i, len - i, &cp, &bad);
		if (n == 0) {
			n = bad;
			cp = 0xfffd;
		} else if (!cp_is_unsafe(cp) || cp == '\t' || cp == '\n' ||
		    cp == '\r') {
			/* JSON's own whitespace stays: raw, it is only ever
			 * between tokens */
			if (out != NULL)
				memcpy(out + o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		k = json_u_escape(cp, esc);
		if (out != NULL)
			memcpy(out + o, esc, k);
		o += k;
		i += n;
	}
	return o;
}

char *
clog_json_escape(const char *in, size_t len, size_t *outlen)
{
	size_t n = json_escape_pass((const unsigned char *)in, len, NULL);
	char *out = malloc(n + 1);

	if (out == NULL)
		return NULL;
	json_escape_pass((const unsigned char *)in, len, out);
	out[n] = '\0';
	if (outlen != NULL)
		*outlen = n;
	return out;
}

/* ---- hashing and the line format ---- */

/*
 * One SHA-256 per record.  EVP_Digest() looks the algorithm up and makes
 * a context on every call, which cost more than the hashing of a short
 * record: both are made once and kept (sluiced is single-threaded).
 */
static EVP_MD *sha256_md;
static EVP_MD_CTX *sha256_ctx;

static int
sha256_hex(const void *data, size_t len, char hex[CLOG_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	if (sha256_md == NULL &&
	    (sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL)
		return -1;
	if (sha256_ctx == NULL && (sha256_ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	if (!EVP_DigestInit_ex2(sha256_ctx, sha256_md, NULL) ||
	    !EVP_DigestUpdate(sha256_ctx, data, len) ||
	    !EVP_DigestFinal_ex(sha256_ctx, md, &mdlen) ||
	    mdlen * 2 != CLOG_HEX_LEN)
		return -1;
	for (i = 0; i < mdlen; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 0x0f];
	}
	hex[CLOG_HEX_LEN] = '\0';
	return 0;
}

int
clog_mac(const void *key, size_t keylen, const char *hash, char mac[65])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	if (key == NULL || keylen == 0 || keylen > INT32_MAX ||
	    HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)hash,
	    CLOG_HEX_LEN, md, &mdlen) == NULL || mdlen * 2 != CLOG_HEX_LEN)
		return -1;
	for (i = 0; i < mdlen; i++) {
		mac[2 * i] = digits[md[i] >> 4];
		mac[2 * i + 1] = digits[md[i] & 0x0f];
	}
	mac[CLOG_HEX_LEN] = '\0';
	OPENSSL_cleanse(md, sizeof(md));
	return 0;
}

static int
is_hex64(const char *s, size_t len)
{
	size_t i;

	if (len != CLOG_HEX_LEN)
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

enum clog_line_err {
	CLOG_LINE_OK,
	CLOG_LINE_FORMAT,       /* not a record; err says why */
	CLOG_LINE_HASH,         /* well formed, but hash != SHA-256(body) */
};

/*
 * Check one line (without its newline) against the chain rule and pull
 * out seq, prev and hash.  Reused by clog_open() for the tail and by the
 * verifier, so both agree on what a record is.
 */
static enum clog_line_err
parse_line(const char *line, size_t len, struct clog_line *out, char *err,
    size_t errlen)
{
	const char *suffix;
	char body_hash[CLOG_HEX_LEN + 1];
	json_error_t jerr;
	json_t *root = NULL, *v;
	size_t core, body;
	enum clog_line_err rc = CLOG_LINE_FORMAT;

	out->mac[0] = '\0';
	if (len < CLOG_SUFFIX_LEN + 1 || line[len - 1] != '}' ||
	    line[len - 2] != '"') {
		errf(err, errlen, "not a record (torn by a crash?)");
		goto done;
	}
	/* core: <body>,"hash":"<hex>" (what the brace closes) */
	core = len - 1;
	if (len > CLOG_SUFFIX_LEN + CLOG_MAC_LEN &&
	    memcmp(line + len - 2 - CLOG_MAC_LEN, CLOG_MAC_PREFIX,
	    CLOG_MAC_PREFIX_LEN) == 0 &&
	    is_hex64(line + len - 2 - CLOG_HEX_LEN, CLOG_HEX_LEN)) {
		memcpy(out->mac, line + len - 2 - CLOG_HEX_LEN, CLOG_HEX_LEN);
		out->mac[CLOG_HEX_LEN] = '\0';
		core = len - 1 - CLOG_MAC_LEN;
	}
	body = core + 1 - CLOG_SUFFIX_LEN;
	suffix = line + body;
	if (memcmp(suffix, CLOG_HASH_PREFIX, CLOG_HASH_PREFIX_LEN) != 0 ||
	    !is_hex64(suffix + CLOG_HASH_PREFIX_LEN, CLOG_HEX_LEN) ||
	    line[core - 1] != '"') {
		errf(err, errlen, "record does not end with its hash");
		goto done;
	}
	/* Duplicates rejected: a second "hash", "mac" or "prev" inside the
	 * body could otherwise say something other than the text we hash. */
	root = jsonstrict_load(line, len, &jerr);
	if (root == NULL || !json_is_object(root)) {
		errf(err, errlen, "not valid JSON (%s)",
		    root == NULL ? jerr.text : "not an object");
		goto done;
	}
	if ((out->mac[0] == '\0') != (json_object_get(root, "mac") == NULL)) {
		errf(err, errlen, "a mac that is not the last field");
		goto done;
	}
	v = json_object_get(root, "seq");
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		errf(err, errlen, "record has no valid seq");
		goto done;
	}
	out->seq = (uint64_t)json_integer_value(v);
	v = json_object_get(root, "prev");
	if (!json_is_string(v) ||
	    !is_hex64(json_string_value(v), json_string_length(v))) {
		errf(err, errlen, "record has no valid prev");
		goto done;
	}
	memcpy(out->prev, json_string_value(v), CLOG_HEX_LEN + 1);
	if (!json_is_string(json_object_get(root, "event")) ||
	    !json_is_string(json_object_get(root, "ts"))) {
		errf(err, errlen, "record lacks ts or event");
		goto done;
	}
	memcpy(out->hash, suffix + CLOG_HASH_PREFIX_LEN, CLOG_HEX_LEN);
	out->hash[CLOG_HEX_LEN] = '\0';
	if (sha256_hex(line, body, body_hash) < 0) {
		errf(err, errlen, "SHA-256 unavailable");
		goto done;
	}
	if (strcmp(body_hash, out->hash) != 0) {
		errf(err, errlen, "hash does not match its record (edited?)");
		rc = CLOG_LINE_HASH;
		goto done;
	}
	rc = CLOG_LINE_OK;
done:
	json_decref(root);
	return rc;
}

static int write_queue(struct clog *l);

/* ---- open, tail, reopen ---- */

static int
read_exact_at(int fd, char *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/*
 * Continue seq and prev from the last complete line of the file open on
 * rfd (size bytes).  A partial last line is skipped and remembered in
 * need_nl.  At most two maximal lines are read from the end.
 */
static int
load_tail(struct clog *l, int rfd, off_t size, char *err, size_t errlen)
{
	size_t win, end, start;
	off_t base;
	char *buf = NULL;
	struct clog_line info;
	char why[160];
	int rc = -1;

	if (size == 0)
		return 0;
	win = (size_t)size < 2 * (size_t)CLOG_LINE_MAX + 2 ?
	    (size_t)size : 2 * (size_t)CLOG_LINE_MAX + 2;
	base = size - (off_t)win;
	buf = malloc(win);
	if (buf == NULL) {
		errf(err, errlen, "out of memory");
		goto done;
	}
	if (read_exact_at(rfd, buf, win, base) < 0) {
		errf(err, errlen, "%s: cannot read the tail", l->path);
		goto done;
	}
	/* end: index of the newline that closes the last complete line. */
	end = win;
	while (end > 0 && buf[end - 1] != '\n')
		end--;
	if (end != win)
		l->need_nl = 1;
	if (end == 0) {
		if (base > 0) {
			errf(err, errlen, "%s: last line is too long",
			    l->path);
			goto done;
		}
		/* Only a torn first record: the chain starts afresh. */
		rc = 0;
		goto done;
	}
	end--;
	start = end;
	while (start > 0 && buf[start - 1] != '\n')
		start--;
	if (start == 0 && base > 0) {
		errf(err, errlen, "%s: last line is too long", l->path);
		goto done;
	}
	if (parse_line(buf + start, end - start, &info, why, sizeof(why)) !=
	    CLOG_LINE_OK) {
		errf(err, errlen, "%s: last record: %s", l->path, why);
		goto done;
	}
	l->seq = info.seq;
	memcpy(l->prev, info.hash, sizeof(l->prev));
	rc = 0;
done:
	free(buf);
	return rc;
}

static int
open_fd(const char *path, char *err, size_t errlen)
{
	int fd;

	/* mkdir -p of its directory, 0750 for what is made */
	if (util_mkdir_parent(path, 0750) != 0)
		return errf(err, errlen, "mkdir for %s: %s", path,
		    strerror(errno));
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		errf(err, errlen, "open %s: %s", path, strerror(errno));
	return fd;
}

/*
 * Read the tail through a second, read-only descriptor (the log's own is
 * write-only) and make sure both name the same file.  Only regular files
 * have a tail: reading a device such as /dev/full would never end.
 */
static int
read_existing(struct clog *l, char *err, size_t errlen)
{
	struct stat ws, rs;
	int rfd = -1, rc = -1;

	if (fstat(l->fd, &ws) < 0) {
		errf(err, errlen, "fstat %s: %s", l->path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(ws.st_mode))
		return 0;
	rfd = open(l->path, O_RDONLY | O_CLOEXEC);
	if (rfd < 0) {
		errf(err, errlen, "open %s for reading: %s", l->path,
		    strerror(errno));
		goto done;
	}
	if (fstat(rfd, &rs) < 0 || rs.st_dev != ws.st_dev ||
	    rs.st_ino != ws.st_ino) {
		errf(err, errlen, "%s changed while opening", l->path);
		goto done;
	}
	rc = load_tail(l, rfd, rs.st_size, err, errlen);
done:
	if (rfd >= 0)
		close(rfd);
	return rc;
}

struct clog *
clog_open(const char *path, char *err, size_t errlen)
{
	struct clog *l;

	if (path == NULL || *path == '\0') {
		errf(err, errlen, "no log path");
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL || (l->path = strdup(path)) == NULL) {
		errf(err, errlen, "out of memory");
		free(l);
		return NULL;
	}
	l->fd = -1;
	l->healthy = 1;
	l->free_bytes = UINT64_MAX;
	memcpy(l->prev, CLOG_ZERO_HASH, sizeof(l->prev));
	if (strcmp(path, "-") == 0) {
		l->is_stdout = 1;
		l->fd = STDOUT_FILENO;
		return l;
	}
	l->fd = open_fd(path, err, errlen);
	if (l->fd < 0 || read_existing(l, err, errlen) < 0)
		goto fail;
	return l;
fail:
	clog_close(l);
	return NULL;
}

static void space_check(struct clog *l, int force);

/* Whether the file on fd ends in a partial line (someone else's, or a
 * torn write of ours before rotation copied it). */
static int
ends_torn(int fd)
{
	struct stat st;
	char c;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	if (pread(fd, &c, 1, st.st_size - 1) != 1)
		return 0;
	return c != '\n';
}

int
clog_reopen(struct clog *l)
{
	int fd, rfd;
	char err[256];

	if (l == NULL)
		return -1;
	if (l->is_stdout)
		return 0;
	/*
	 * On failure the log is closed, not left on the rotated file:
	 * logrotate may compress or delete that file, and auditors look
	 * at the configured path.  Writes fail (so connections are
	 * refused) and each one retries the open, at most once a second.
	 */
	/* queued records were chained before the rotation: they end the
	 * old file */
	if (l->fd >= 0) {
		(void)write_queue(l);
		close(l->fd);
	}
	l->fd = -1;
	fd = open_fd(l->path, err, sizeof(err));
	if (fd < 0) {
		l->healthy = 0;
		l->last_try = time(NULL);
		return -1;
	}
	l->fd = fd;
	rfd = open(l->path, O_RDONLY | O_CLOEXEC);
	l->need_nl = rfd >= 0 && ends_torn(rfd);
	if (rfd >= 0)
		close(rfd);
	space_check(l, 1);
	return 0;
}

void
clog_close(struct clog *l)
{
	if (l == NULL)
		return;
	(void)write_queue(l);
	if (!l->is_stdout && l->fd >= 0)
		close(l->fd);
	free(l->pend);
	free(l->path);
	free(l);
}

int
clog_healthy(const struct clog *l)
{
	return l != NULL && l->healthy;
}

uint64_t
clog_last_seq(const struct clog *l)
{
	return l ? l->seq : 0;
}

const char *
clog_last_hash(const struct clog *l)
{
	return l ? l->prev : CLOG_ZERO_HASH;
}

int
clog_keyed(const struct clog *l)
{
	return l != NULL && l->sign != NULL;
}

void
clog_set_signer(struct clog *l, clog_sign_fn fn, void *arg)
{
	if (l == NULL)
		return;
	l->sign = fn;
	l->sign_arg = arg;
}

const char *
clog_path(const struct clog *l)
{
	return l ? l->path : NULL;
}

uint64_t
clog_written(const struct clog *l)
{
	return l ? l->written : 0;
}

uint64_t
clog_failed(const struct clog *l)
{
	return l ? l->failed : 0;
}

/*
 * The free space of the log's file system, looked at once a second at
 * most (on writes): below min_free a warning is logged once, and again
 * once there is room, so the operator hears of it before the disk is
 * full and every connection is refused (fail closed).
 */
static void
space_check(struct clog *l, int force)
{
	struct statvfs sv;
	time_t now = time(NULL);
	int low;

	if (l->is_stdout || l->fd < 0 || (!force && now == l->space_checked))
		return;
	l->space_checked = now;
	if (fstatvfs(l->fd, &sv) != 0) {
		l->free_bytes = UINT64_MAX;
		return;
	}
	l->free_bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	low = l->min_free > 0 && l->free_bytes < l->min_free;
	if (low != l->low && l->on_space != NULL)
		l->on_space(l->path, low, l->free_bytes, l->min_free);
	l->low = low;
}

void
clog_set_min_free(struct clog *l, uint64_t bytes, clog_space_fn fn)
{
	if (l == NULL)
		return;
	l->min_free = bytes;
	l->on_space = fn;
	space_check(l, 1);
}

uint64_t
clog_free_bytes(const struct clog *l)
{
	return l ? l->free_bytes : UINT64_MAX;
}

int
clog_low_space(const struct clog *l)
{
	return l != NULL && l->low;
}

/* ---- record builder ---- */

/* Keys the writer owns; a caller setting them would break the chain or
 * the field order. */
static int
key_reserved(const char *key)
{
	/* by first letter: five strcmp per field showed in profiles */
	switch (key[0]) {
	case 't': return strcmp(key, "ts") == 0;
	case 's': return strcmp(key, "seq") == 0;
	case 'e': return strcmp(key, "event") == 0;
	case 'p': return strcmp(key, "prev") == 0;
	case 'h': return strcmp(key, "hash") == 0;
	default: return 0;
	}
}

static int
rec_grow(struct clog_rec *r, size_t more)
{
	char *nb;
	size_t cap;

	if (r->len + more + 1 <= r->cap)
		return 0;
	cap = r->cap ? r->cap : 512;
	while (cap < r->len + more + 1)
		cap *= 2;
	if (cap > CLOG_LINE_MAX || (nb = realloc(r->buf, cap)) == NULL) {
		r->bad = 1;
		return -1;
	}
	r->buf = nb;
	r->cap = cap;
	return 0;
}

/* v in decimal into buf (24 bytes), no NUL; its length.  snprintf was a
 * fifth of a record's cost. */
static size_t
fmt_u64(char *buf, uint64_t v)
{
	char tmp[24];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

static size_t
fmt_i64(char *buf, int64_t v)
{
	if (v >= 0)
		return fmt_u64(buf, (uint64_t)v);
	buf[0] = '-';
	return 1 + fmt_u64(buf + 1, (uint64_t)0 - (uint64_t)v);
}

static inline void
rec_raw(struct clog_rec *r, const char *s, size_t n)
{
	if (r->bad || (r->len + n + 1 > r->cap && rec_grow(r, n) != 0))
		return;
	memcpy(r->buf + r->len, s, n);
	r->len += n;
	r->buf[r->len] = '\0';
}

/* \uXXXX (a surrogate pair above the BMP) for cp into esc; its length. */
static size_t
json_u_escape(uint32_t cp, char esc[16])
{
	if (cp < 0x10000)
		return (size_t)snprintf(esc, 16, "\\u%04x", (unsigned)cp);
	cp -= 0x10000;
	return (size_t)snprintf(esc, 16, "\\u%04x\\u%04x",
	    (unsigned)(0xd800 + (cp >> 10)), (unsigned)(0xdc00 + (cp & 0x3ff)));
}

/*
 * A JSON string of valid UTF-8 (the callers made sure of it).  Code
 * points that must not reach a terminal as they are (cp_is_unsafe: C0,
 * DEL, C1, bidi and zero-width format characters) are written as
 * \uXXXX escapes, whoever supplied the string: the line stays inert for
 * cat and tail, and says exactly what it was given.
 */
static void
rec_quoted(struct clog_rec *r, const char *s)
{
	const char *p = s, *end = s + strlen(s);
	char esc[16];

	rec_raw(r, "\"", 1);
	while (p < end) {
		unsigned char c = (unsigned char)*p;
		uint32_t cp = c;
		size_t n = 1, bad = 0, k = 0;

		/* printable ASCII, the common byte, needs nothing: one
		 * test for it */
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			p++;
			continue;
		}
		if (c >= 0x80 && (n = utf8_decode((const unsigned char *)p,
		    (size_t)(end - p), &cp, &bad)) == 0) {
			/* not promised, but never copied raw */
			n = bad;
			cp = 0xfffd;
			k = json_u_escape(cp, esc);
		} else if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			k = 2;
		} else if (cp_is_unsafe(cp))
			k = json_u_escape(cp, esc);
		if (k > 0) {
			rec_raw(r, s, (size_t)(p - s));
			rec_raw(r, esc, k);
			s = p + n;
		}
		p += n;
	}
	rec_raw(r, s, (size_t)(p - s));
	rec_raw(r, "\"", 1);
}

static int
utf8_valid(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n, i = 0, k, bad = 0;
	uint32_t cp;

	/* ASCII, what names and codes are, without the decoder */
	while (u[i] != '\0' && u[i] < 0x80)
		i++;
	if (u[i] == '\0')
		return 1;
	n = i + strlen(s + i);
	while (i < n) {
		k = utf8_decode(u + i, n - i, &cp, &bad);
		if (k == 0)
			return 0;
		i += k;
	}
	return 1;
}

/* Starts a field; 0 when the value should follow.  A key set twice
 * keeps its first value: a record never holds a key twice (the
 * verifier refuses duplicates). */
static int
rec_key(struct clog_rec *r, const char *key)
{
	char pat[80];
	size_t kl, pl, i;

	if (r == NULL || key == NULL || r->bad || key_reserved(key))
		return -1;
	kl = strlen(key);
	if (kl + 4 >= sizeof(pat)) {
		r->bad = 1;
		return -1;
	}
	/* ,"key": as the record holds it (keys are our own names: no
	 * escapes to mind here, rec_quoted adds none to them) */
	pat[0] = ',';
	pat[1] = '"';
	memcpy(pat + 2, key, kl);
	pat[kl + 2] = '"';
	pat[kl + 3] = ':';
	pl = kl + 4;
	for (i = 0; i < r->nkeys && i < CLOG_REC_KEYS; i++)
		if (r->klen[i] == pl && memcmp(r->buf + r->koff[i], pat, pl) == 0)
			return -1;
	if (r->nkeys >= CLOG_REC_KEYS && r->buf != NULL &&
	    memmem(r->buf, r->len, pat, pl) != NULL)
		return -1;
	if (r->nkeys < CLOG_REC_KEYS) {
		r->koff[r->nkeys] = (uint32_t)r->len;
		r->klen[r->nkeys] = (uint16_t)pl;
	}
	r->nkeys++;
	rec_raw(r, ",", 1);
	rec_quoted(r, key);
	rec_raw(r, ":", 1);
	return r->bad ? -1 : 0;
}

/* A trusted string that still is not valid UTF-8 is sanitised rather
 * than dropped. */
static void
rec_trusted(struct clog_rec *r, const char *val)
{
	char buf[CLOG_STR_CAP + 4];

	if (val == NULL) {
		rec_raw(r, "null", 4);
		return;
	}
	if (utf8_valid(val)) {
		rec_quoted(r, val);
		return;
	}
	clog_sanitize(val, strlen(val), buf, sizeof(buf), CLOG_STR_CAP);
	rec_quoted(r, buf);
}

struct clog_rec *
clog_rec_new(const char *event)
{
	struct clog_rec *r;
	char buf[CLOG_STR_CAP + 4];

	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	event = event ? event : "";
	if (!utf8_valid(event)) {
		clog_sanitize(event, strlen(event), buf, sizeof(buf),
		    CLOG_STR_CAP);
		event = buf;
	}
	r->event = strdup(event);
	if (r->event == NULL) {
		free(r);
		return NULL;
	}
	return r;
}

void
clog_rec_free(struct clog_rec *r)
{
	if (r == NULL)
		return;
	free(r->event);
	free(r->buf);
	free(r);
}

void
clog_rec_str(struct clog_rec *r, const char *key, const char *val)
{
	if (rec_key(r, key) == 0)
		rec_trusted(r, val);
}

void
clog_rec_ustr(struct clog_rec *r, const char *key, const char *val,
    size_t len)
{
	char buf[CLOG_STR_CAP + 4];

	if (rec_key(r, key) != 0)
		return;
	if (val == NULL) {
		rec_raw(r, "null", 4);
		return;
	}
	clog_sanitize(val, len, buf, sizeof(buf), CLOG_STR_CAP);
	rec_quoted(r, buf);
}

void
clog_rec_int(struct clog_rec *r, const char *key, int64_t v)
{
	char num[24];
	size_t n;

	if (rec_key(r, key) != 0)
		return;
	n = fmt_i64(num, v);
	rec_raw(r, num, n);
}

void
clog_rec_bool(struct clog_rec *r, const char *key, int v)
{
	if (rec_key(r, key) == 0)
		rec_raw(r, v ? "true" : "false", v ? 4 : 5);
}

void
clog_rec_strv(struct clog_rec *r, const char *key,
    const char *const *vals, size_t n)
{
	size_t i;

	if (rec_key(r, key) != 0)
		return;
	rec_raw(r, "[", 1);
	for (i = 0; i < n; i++) {
		if (i > 0)
			rec_raw(r, ",", 1);
		rec_trusted(r, vals[i]);
	}
	rec_raw(r, "]", 1);
}

void
clog_rec_json(struct clog_rec *r, const char *key, void *json)
{
	json_t *v = json ? (json_t *)json : json_null();
	char *text, *safe;
	size_t n;

	if (rec_key(r, key) != 0) {
		json_decref(v);
		return;
	}
	text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER |
	    JSON_ENCODE_ANY);
	json_decref(v);
	if (text == NULL) {
		r->bad = 1;
		return;
	}
	/* the same escapes as rec_quoted's for what jansson left raw */
	safe = clog_json_escape(text, strlen(text), &n);
	free(text);
	if (safe == NULL) {
		r->bad = 1;
		return;
	}
	rec_raw(r, safe, n);
	free(safe);
}

/* ---- writing ---- */

static int
format_ts(char *buf, size_t len)
{
	/* the seconds part changes once a second: kept, not made again
	 * for every record */
	static time_t last_sec = (time_t)-1;
	static char last[32];
	static size_t last_n;
	struct timespec ts;
	struct tm tm;
	long ms;

	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return -1;
	if (ts.tv_sec != last_sec) {
		if (gmtime_r(&ts.tv_sec, &tm) == NULL)
			return -1;
		last_n = strftime(last, sizeof(last), "%Y-%m-%dT%H:%M:%S", &tm);
		if (last_n == 0)
			return -1;
		last_sec = ts.tv_sec;
	}
	if (last_n + 6 > len)
		return -1;
	ms = ts.tv_nsec / 1000000L;
	memcpy(buf, last, last_n);
	buf[last_n] = '.';
	buf[last_n + 1] = (char)('0' + ms / 100);
	buf[last_n + 2] = (char)('0' + ms / 10 % 10);
	buf[last_n + 3] = (char)('0' + ms % 10);
	buf[last_n + 4] = 'Z';
	buf[last_n + 5] = '\0';
	return 0;
}

/*
 * Serialise r as the next record: ts, seq and prev filled in, the hash
 * appended after the body.  Returns a malloc'd line ending in "\n" (with
 * a leading "\n" when the file ends in a torn line).
 */
static char *
build_line(struct clog *l, struct clog_rec *r, char hash[CLOG_HEX_LEN + 1],
    size_t *lenp)
{
	char ts[40], mac[CLOG_HEX_LEN + 1];
	struct clog_rec head;
	char *line = NULL;
	/* chained on from the last queued record, if any */
	int need_nl = l->npend ? l->pneed_nl : l->need_nl;
	uint64_t seq = l->npend ? l->pseq : l->seq;
	const char *prev = l->npend ? l->pprev : l->prev;
	size_t lead = need_nl ? 1 : 0, n, body, maclen;

	if (r->bad || format_ts(ts, sizeof(ts)) < 0)
		return NULL;
	/* {"ts":..,"seq":..,"event":..<fields>,"prev":".."  (the body) */
	memset(&head, 0, sizeof(head));
	rec_raw(&head, "{\"ts\":", 6);
	rec_quoted(&head, ts);
	{
		char num[24];

		rec_raw(&head, ",\"seq\":", 7);
		rec_raw(&head, num, fmt_u64(num, seq + 1));
		rec_raw(&head, ",\"event\":", 9);
	}
	rec_quoted(&head, r->event);
	if (r->len > 0)
		rec_raw(&head, r->buf, r->len);
	rec_raw(&head, ",\"prev\":", 8);
	rec_quoted(&head, prev);
	if (head.bad)
		goto done;
	body = head.len;
	if (sha256_hex(head.buf, body, hash) < 0)
		goto done;
	maclen = l->sign != NULL ? CLOG_MAC_LEN : 0;
	/* Never write what the verifier (and the next open) would refuse. */
	if (body + CLOG_SUFFIX_LEN + maclen > CLOG_LINE_MAX)
		goto done;
	/* the signer keeps the key and the chain it signed: no mac, no
	 * record */
	if (l->sign != NULL && l->sign(l->sign_arg, seq + 1, prev, hash,
	    mac) != 0)
		goto done;
	n = lead + body + CLOG_SUFFIX_LEN + maclen + 1;
	line = malloc(n + 1);
	if (line == NULL)
		goto done;
	/* [\n]<body>,"hash":"<hex>"[,"mac":"<hex>"]"}\n */
	{
		char *p = line;

		if (lead)
			*p++ = '\n';
		memcpy(p, head.buf, body);
		p += body;
		memcpy(p, CLOG_HASH_PREFIX, CLOG_HASH_PREFIX_LEN);
		p += CLOG_HASH_PREFIX_LEN;
		memcpy(p, hash, CLOG_HEX_LEN);
		p += CLOG_HEX_LEN;
		if (maclen) {
			memcpy(p, CLOG_MAC_PREFIX, CLOG_MAC_PREFIX_LEN);
			p += CLOG_MAC_PREFIX_LEN;
			memcpy(p, mac, CLOG_HEX_LEN);
			p += CLOG_HEX_LEN;
		}
		memcpy(p, "\"}\n", 4);   /* and the NUL */
	}
	*lenp = n;
done:
	free(head.buf);
	return line;
}

static ssize_t
write_once(int fd, const char *buf, size_t len)
{
	ssize_t n;

	do
		n = write(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

/*
 * A short write (the disk filled up, a file size limit) left the first n
 * bytes of buf at the end of the file.  Cut the file back to where it
 * was, so no torn fragment stays for the verifier to trip over; where
 * that is impossible (not a regular file, or ftruncate refused) the next
 * record starts on a fresh line instead, and the verifier reports the
 * fragment.
 */
static void
drop_partial(struct clog *l, const char *buf, size_t n)
{
	struct stat st;

	if (fstat(l->fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size >= (off_t)n && ftruncate(l->fd, st.st_size -
	    (off_t)n) == 0) {
		l->truncated++;
		return;
	}
	l->need_nl = buf[n - 1] != '\n';
}

/* Append r's line to the queue; -1 (nothing queued) when it cannot be
 * built. */
static int
queue_line(struct clog *l, struct clog_rec *r)
{
	char hash[CLOG_HEX_LEN + 1];
	char *line, *nb;
	size_t len = 0, cap;

	line = build_line(l, r, hash, &len);
	if (line == NULL)
		return -1;
	if (l->pend_len + len > l->pend_cap) {
		cap = l->pend_cap ? l->pend_cap : 4096;
		while (cap < l->pend_len + len)
			cap *= 2;
		if ((nb = realloc(l->pend, cap)) == NULL) {
			free(line);
			return -1;
		}
		l->pend = nb;
		l->pend_cap = cap;
	}
	memcpy(l->pend + l->pend_len, line, len);
	l->pend_len += len;
	free(line);
	l->pseq = (l->npend ? l->pseq : l->seq) + 1;
	memcpy(l->pprev, hash, sizeof(l->pprev));
	l->pneed_nl = 0;
	l->npend++;
	return 0;
}

/*
 * Write the queued lines in one write(2).  All or nothing for the chain:
 * a short or failed write counts none of them (seq and prev stay), and
 * the next line starts on a fresh one.
 */
static int
write_queue(struct clog *l)
{
	ssize_t n;
	size_t k = l->npend;
	int rc = -1;

	if (k == 0)
		return 0;
	if (l->fd < 0 && (time(NULL) == l->last_try || clog_reopen(l) != 0))
		goto done;
	if (l->fd < 0)
		goto done;
	n = write_once(l->fd, l->pend, l->pend_len);
	if (n != (ssize_t)l->pend_len) {
		/* seq and prev stay: none of these records counts */
		if (n > 0)
			drop_partial(l, l->pend, (size_t)n);
		goto done;
	}
	l->need_nl = 0;
	l->seq = l->pseq;
	memcpy(l->prev, l->pprev, sizeof(l->prev));
	space_check(l, 0);
	rc = 0;
done:
	l->npend = 0;
	l->pend_len = 0;
	l->healthy = rc == 0;
	if (rc == 0)
		l->written += k;
	else
		l->failed += k;
	return rc;
}

int
clog_queue(struct clog *l, struct clog_rec *r)
{
	int rc = -1;

	/* a signer signs only the record after the one it signed last, or
	 * that one again: a queue it signed whose write failed could not be
	 * signed anew.  Signed logs write each record as it comes. */
	if (l != NULL && l->sign != NULL)
		return clog_write(l, r);
	if (l != NULL && r != NULL && queue_line(l, r) == 0)
		rc = 0;
	else if (l != NULL)
		l->failed++;
	clog_rec_free(r);
	return rc;
}

int
clog_flush(struct clog *l)
{
	return l == NULL ? -1 : write_queue(l);
}

int
clog_write(struct clog *l, struct clog_rec *r)
{
	int rc = -1;

	if (l == NULL)
		goto done;
	if (r == NULL)
		goto fail;
	/* the fd is looked at before the line is built: a log that is
	 * closed after a failed reopen refuses at once */
	if (l->fd < 0 && (time(NULL) == l->last_try || clog_reopen(l) != 0))
		goto fail;
	if (queue_line(l, r) != 0)
		goto fail;
	rc = write_queue(l);
	goto done;
fail:
	/* what was queued goes with this record: it cannot reach the
	 * file before it */
	l->failed += 1;
	if (l->npend > 0)
		(void)write_queue(l);
	l->healthy = 0;
done:
	clog_rec_free(r);
	return rc;
}

/* ---- verification ---- */

/* Read one line (newline dropped) into buf; *len is its length.
 * Returns 1 for a line, 0 at EOF, -1 when longer than max, -2 when the
 * last line has no newline. */
static int
read_line(FILE *f, char *buf, size_t max, size_t *len)
{
	size_t n = 0;
	int c;

	while ((c = getc_unlocked(f)) != EOF) {
		if (c == '\n') {
			*len = n;
			return 1;
		}
		if (n == max)
			return -1;
		buf[n++] = (char)c;
	}
	*len = n;
	return n == 0 ? 0 : -2;
}

/* One verification in progress. */
struct verifier {
	const struct clog_verify_opts *o;
	struct clog_verify_result *res;
	struct clog_line last;
	uint64_t last_line;     /* where last is */
	uint64_t pending_line;  /* first of a run of fragments, 0: none */
	uint64_t pending_n;
	char pending_why[160];
};

static void
note(struct verifier *v, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
note(struct verifier *v, uint64_t line, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (v->o == NULL || v->o->note == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	v->o->note(v->o->arg, line, msg);
}

/* The run of fragments before line lineno was torn writes: counted,
 * reported, skipped. */
static void
fragments_skipped(struct verifier *v, uint64_t lineno, const char *why)
{
	if (v->pending_n == 0)
		return;
	v->res->fragments += v->pending_n;
	note(v, v->pending_line, "%" PRIu64 " torn fragment(s) (%s), "
	    "skipped: %s", v->pending_n, v->pending_why, why);
	(void)lineno;
	v->pending_n = 0;
	v->pending_line = 0;
}

/* cur (line lineno) must continue the chain from v->last. */
static int
check_link(struct verifier *v, const struct clog_line *cur, uint64_t lineno,
    char *err, size_t errlen)
{
	const char *start_prev = v->o ? v->o->start_prev : NULL;

	if (v->res->records > 0 && cur->seq != v->last.seq + 1)
		return errf(err, errlen, "line %" PRIu64 ": seq %" PRIu64
		    " follows %" PRIu64 " (%s?)", lineno, cur->seq,
		    v->last.seq, cur->seq > v->last.seq ? "record removed" :
		    "records reordered or duplicated");
	if (v->res->records > 0 && strcmp(cur->prev, v->last.hash) != 0)
		return errf(err, errlen, "line %" PRIu64 ": prev does not "
		    "match the hash of line %" PRIu64, lineno, v->last_line);
	if (v->res->records == 0 && start_prev != NULL &&
	    strcmp(cur->prev, start_prev) != 0)
		return errf(err, errlen, "line %" PRIu64 ": prev does not "
		    "match the expected start of the chain", lineno);
	return 0;
}

/* With a key, every record carries the mac of its hash. */
static int
check_mac(struct verifier *v, const struct clog_line *cur, uint64_t lineno,
    char *err, size_t errlen)
{
	char want[CLOG_HEX_LEN + 1];

	if (v->o == NULL || v->o->key == NULL)
		return 0;
	if (cur->mac[0] == '\0')
		return errf(err, errlen, "line %" PRIu64 ": no mac (written "
		    "without the key, or the mac was removed)", lineno);
	if (clog_mac(v->o->key, v->o->keylen, cur->hash, want) != 0)
		return errf(err, errlen, "HMAC-SHA256 unavailable");
	if (CRYPTO_memcmp(want, cur->mac, CLOG_HEX_LEN) != 0)
		return errf(err, errlen, "line %" PRIu64 ": mac does not match "
		    "(rewritten without the key, or another key)", lineno);
	v->res->macs++;
	return 0;
}

/* A record with an anchor's seq must have the anchor's hash. */
static int
check_anchor(struct verifier *v, const struct clog_line *cur,
    uint64_t lineno, char *err, size_t errlen)
{
	size_t i;

	if (v->o == NULL)
		return 0;
	for (i = 0; i < v->o->nanchors; i++) {
		const struct clog_anchor *a = &v->o->anchors[i];

		if (a->seq != cur->seq)
			continue;
		if (strcmp(a->hash, cur->hash) != 0)
			return errf(err, errlen, "line %" PRIu64 ": seq %" PRIu64
			    " does not have the anchor's hash: the log was "
			    "rewritten at or before it", lineno, cur->seq);
		v->res->anchors++;
	}
	return 0;
}

/* At the end: an anchor no record had is a cut. */
static int
anchors_missing(struct verifier *v, char *err, size_t errlen)
{
	const struct clog_verify_result *r = v->res;
	size_t i, j;

	if (v->o == NULL)
		return 0;
	for (i = 0; i < v->o->nanchors; i++) {
		const struct clog_anchor *a = &v->o->anchors[i];
		int seen = 0;

		for (j = 0; j < i; j++)
			seen |= v->o->anchors[j].seq == a->seq;
		if (seen || (r->records > 0 && a->seq >= r->first_seq &&
		    a->seq <= r->last_seq))
			continue;
		if (r->records == 0)
			return errf(err, errlen, "anchor seq %" PRIu64 ": the "
			    "file holds no record", a->seq);
		if (a->seq < r->first_seq)
			return errf(err, errlen, "anchor seq %" PRIu64 ": the "
			    "file begins at seq %" PRIu64 " (its head was cut, or "
			    "the anchor is in an older file)", a->seq,
			    r->first_seq);
		return errf(err, errlen, "anchor seq %" PRIu64 ": the file "
		    "ends at seq %" PRIu64 " (records after it were cut)",
		    a->seq, r->last_seq);
	}
	return 0;
}

int
clog_verify(const char *path, const struct clog_verify_opts *o,
    struct clog_verify_result *res, char *err, size_t errlen)
{
	struct verifier v;
	FILE *f = NULL;
	char *buf = NULL;
	char why[160];
	struct clog_line cur;
	uint64_t lineno = 0;
	size_t len;
	int rc = -1, r;

	memset(&v, 0, sizeof(v));
	memset(res, 0, sizeof(*res));
	v.o = o;
	v.res = res;
	f = fopen(path, "r");
	if (f == NULL) {
		errf(err, errlen, "open %s: %s", path, strerror(errno));
		goto done;
	}
	buf = malloc(CLOG_LINE_MAX);
	if (buf == NULL) {
		errf(err, errlen, "out of memory");
		goto done;
	}
	for (;;) {
		r = read_line(f, buf, CLOG_LINE_MAX, &len);
		if (r == 0)
			break;
		lineno++;
		res->bad_line = lineno;
		if (r == -1) {
			errf(err, errlen, "line %" PRIu64 ": longer than "
			    "%d bytes", lineno, CLOG_LINE_MAX);
			goto done;
		}
		if (r == -2) {
			/* a write cut short by a crash: sluiced continues
			 * the chain from the line before it */
			res->fragments++;
			note(&v, lineno, "last line has no newline (%zu bytes, "
			    "a write cut short), skipped", len);
			fragments_skipped(&v, lineno, "at the end of the file");
			break;
		}
		switch (parse_line(buf, len, &cur, why, sizeof(why))) {
		case CLOG_LINE_OK:
			break;
		case CLOG_LINE_FORMAT:
			/* what a torn write leaves: the start of a record,
			 * the next one on a line of its own */
			if (len > 0 && buf[0] == '{') {
				if (v.pending_n++ == 0) {
					v.pending_line = lineno;
					snprintf(v.pending_why,
					    sizeof(v.pending_why), "%s", why);
				}
				continue;
			}
			/* FALLTHROUGH */
		default:
			errf(err, errlen, "line %" PRIu64 ": %s", lineno, why);
			goto done;
		}
		if (check_link(&v, &cur, lineno, err, errlen) != 0) {
			if (v.pending_n > 0) {
				/* not a torn write: it stands where a record
				 * is missing */
				res->bad_line = v.pending_line;
				errf(err, errlen, "line %" PRIu64 ": %s",
				    v.pending_line, v.pending_why);
			}
			goto done;
		}
		if (check_mac(&v, &cur, lineno, err, errlen) != 0 ||
		    check_anchor(&v, &cur, lineno, err, errlen) != 0)
			goto done;
		fragments_skipped(&v, lineno, "the next record continues the "
		    "chain");
		if (res->records == 0)
			res->first_seq = cur.seq;
		v.last = cur;
		v.last_line = lineno;
		res->records++;
		res->last_seq = cur.seq;
		memcpy(res->last_hash, cur.hash, sizeof(res->last_hash));
	}
	if (ferror(f)) {
		errf(err, errlen, "read %s: %s", path, strerror(errno));
		goto done;
	}
	if (v.pending_n > 0) {
		/* complete lines no record follows: not a torn write */
		res->bad_line = v.pending_line;
		errf(err, errlen, "line %" PRIu64 ": %s", v.pending_line,
		    v.pending_why);
		goto done;
	}
	res->bad_line = 0;
	if (anchors_missing(&v, err, errlen) != 0)
		goto done;
	rc = 0;
done:
	free(buf);
	if (f)
		fclose(f);
	return rc;
}

int
clog_verify_file(const char *path, const char *start_prev,
    uint64_t *records, uint64_t *bad_line, char *err, size_t errlen)
{
	struct clog_verify_opts o;
	struct clog_verify_result res;
	int rc;

	memset(&o, 0, sizeof(o));
	o.start_prev = start_prev;
	rc = clog_verify(path, &o, &res, err, errlen);
	if (records)
		*records = res.records;
	if (bad_line)
		*bad_line = res.bad_line;
	return rc;
}
