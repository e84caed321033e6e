/*
 * exec_s3.c: the archive store in S3-compatible object storage
 * (lifecycle.archive_store "s3://bucket/prefix").  Path-style requests
 * (<endpoint>/<bucket>/<prefix>/<name>) signed with AWS Signature V4,
 * spoken over libcurl.  The signature is made here (OpenSSL's HMAC),
 * not by libcurl's CURLOPT_AWS_SIGV4: every payload this module sends is
 * a buffer of at most one part, whose SHA-256 it signs itself
 * (x-amz-content-sha256), whatever a libcurl version makes of a body
 * read through a callback; the canonical request is in one place here,
 * checked by a server that verifies it (tests/scenario/t_execd_s3.py).
 *
 * Blocking: the archive workers (forked, exec_job.c) call it, never
 * the daemon's loop.  Uploads are streamed: a file goes up in parts of
 * XD_S3_PART bytes (one PUT when it fits one part, else a multipart
 * upload, aborted on failure), so no more than one part is in memory;
 * downloads are written to a descriptor as they come.
 *
 * The key files are read at each request (a fixed or rotated key is
 * used by the next retry without a restart), must be regular files of
 * the daemon's uid readable by no group or other, and their text is
 * wiped after use.  Nothing of a key reaches a log or an error message:
 * errors name the method, the object and the store's <Code>.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/execd/execd-int.h"

#define S3_KEY_MAX	256     /* bytes of a key file */
#define S3_BODY_MAX	(4 << 20)       /* an answer kept in memory */
#define S3_PARTS_MAX	10000   /* S3's own limit */
#define S3_CONNECT_S	10
#define S3_SLOW_S	60      /* below 1 KiB/s this long: given up */

static const char empty_sha[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static void
hexs(const unsigned char *d, size_t n, char *out)
{
	static const char h[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = h[d[i] >> 4];
		out[2 * i + 1] = h[d[i] & 15];
	}
	out[2 * n] = '\0';
}

/* (not exec_cfg.c's xd_sha256: exec_cfg.c calls this file) */
static void
sha_hex(const void *p, size_t n, char out[65])
{
	unsigned char d[32];
	unsigned int len = 32;

	if (EVP_Digest(p, n, d, &len, EVP_sha256(), NULL) != 1)
		memset(d, 0, sizeof(d));
	hexs(d, 32, out);
}

/* ---- configuration ---- */

int
xd_s3_parse_url(const char *url, struct xd_s3 *s, char *err, size_t len)
{
	const char *b, *slash;
	size_t n, i;

	if (strncmp(url, "s3://", 5) != 0)
		return errf(err, len, "not s3://bucket/prefix");
	b = url + 5;
	slash = strchr(b, '/');
	n = slash != NULL ? (size_t)(slash - b) : strlen(b);
	/* S3's bucket names: 3-63 of [a-z0-9.-] */
	if (n < 3 || n >= sizeof(s->bucket))
		return errf(err, len, "the bucket: 3 to 63 characters");
	for (i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' &&
		    b[i] <= '9') || b[i] == '.' || b[i] == '-'))
			return errf(err, len, "the bucket: a-z, 0-9, '.' and "
			    "'-' only");
	memcpy(s->bucket, b, n);
	s->bucket[n] = '\0';
	s->prefix[0] = '\0';
	if (slash != NULL) {
		const char *p = slash + 1;
		size_t m = strlen(p);

		while (m > 0 && p[m - 1] == '/')
			m--;
		if (m >= sizeof(s->prefix) - 1)
			return errf(err, len, "the prefix: at most %zu bytes",
			    sizeof(s->prefix) - 2);
		for (i = 0; i < m; i++)
			if ((unsigned char)p[i] < 0x21 || p[i] == '\\' ||
			    (unsigned char)p[i] >= 0x7f || (p[i] == '/' &&
			    (i == 0 || p[i - 1] == '/')))
				return errf(err, len, "the prefix: printable "
				    "ASCII without spaces or empty segments");
		memcpy(s->prefix, p, m);
		s->prefix[m] = '\0';
	}
	snprintf(s->url, sizeof(s->url), "%s", url);
	return 0;
}

int
xd_s3_endpoint_ok(const char *ep, char *err, size_t len)
{
	const char *h;

	if (strncmp(ep, "http://", 7) == 0)
		h = ep + 7;
	else if (strncmp(ep, "https://", 8) == 0)
		h = ep + 8;
	else
		return errf(err, len, "http:// or https:// and a host");
	/* a path would be dropped: none, or one "/" */
	if (*h == '\0' || *h == '/' || strpbrk(h, "?#@ \\") != NULL ||
	    (strchr(h, '/') != NULL && strcmp(strchr(h, '/'), "/") != 0))
		return errf(err, len, "http(s)://host[:port] (path-style "
		    "requests: the bucket goes in the path)");
	return 0;
}

int
xd_s3_key_read(const char *path, char *out, size_t len, char *err,
    size_t elen)
{
	struct stat st;
	ssize_t n;
	int fd;

	out[0] = '\0';
	/* a link is followed (a Kubernetes Secret's files are links into
	 * its ..data): what is checked is the file read, by its fd */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errf(err, elen, "%.300s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return errf(err, elen, "%.300s: not a regular file", path);
	}
	/* the store's secret is as good as every archive in it */
	if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		close(fd);
		return errf(err, elen, "%.300s: owned by uid %u, mode %04o: "
		    "a key file must be the daemon's (uid %u) and readable by "
		    "no group or other (chmod 600)", path, (unsigned)st.st_uid,
		    (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
	}
	n = read(fd, out, len - 1);
	close(fd);
	if (n < 0)
		return errf(err, elen, "%.300s: %s", path, strerror(errno));
	out[n] = '\0';
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' ||
	    out[n - 1] == ' ' || out[n - 1] == '\t'))
		out[--n] = '\0';
	if (n == 0 || (size_t)n >= len - 1 || strpbrk(out, "\n\r \t") !=
	    NULL) {
		OPENSSL_cleanse(out, len);
		return errf(err, elen, "%.300s: one key on one line, at most "
		    "%zu bytes", path, len - 2);
	}
	return 0;
}

/* ---- answers: the few XML elements read (pure; fuzz_s3) ---- */

/* The text of the first <tag>...</tag> in [p, e), entities of XML's five
 * decoded; *next after it.  -1 none or too long. */
static int
xml_tag(const char *p, const char *e, const char *tag, char *out,
    size_t len, const char **next)
{
	size_t tl = strlen(tag), o = 0;
	const char *q, *v, *ve;

	for (q = p; q + tl + 2 <= e; q++) {
		if (q[0] != '<' || memcmp(q + 1, tag, tl) != 0 ||
		    q[1 + tl] != '>')
			continue;
		v = q + tl + 2;
		for (ve = v; ve + tl + 3 <= e; ve++)
			if (ve[0] == '<' && ve[1] == '/' && memcmp(ve + 2,
			    tag, tl) == 0 && ve[2 + tl] == '>')
				break;
		if (ve + tl + 3 > e)
			return -1;
		while (v < ve) {
			char c = *v++;

			if (c == '&') {
				static const struct { const char *n; char c; }
				    ent[] = { { "amp;", '&' }, { "lt;", '<' },
				    { "gt;", '>' }, { "quot;", '"' },
				    { "apos;", '\'' } };
				size_t i;

				for (i = 0; i < 5; i++)
					if ((size_t)(ve - v) >= strlen(ent[i].n) &&
					    memcmp(v, ent[i].n,
					    strlen(ent[i].n)) == 0)
						break;
				if (i == 5)
					return -1;
				v += strlen(ent[i].n);
				c = ent[i].c;
			}
			if (o + 1 >= len)
				return -1;
			out[o++] = c;
		}
		out[o] = '\0';
		if (next != NULL)
			*next = ve + tl + 3;
		return 0;
	}
	return -1;
}

int
xd_s3_xml_text(const char *xml, size_t n, const char *tag, char *out,
    size_t len)
{
	return xml_tag(xml, xml + n, tag, out, len, NULL);
}

/* "2026-12-06T01:02:03.000Z" as seconds since the epoch; -1 not that. */
static int64_t
iso_time(const char *s)
{
	struct tm tm;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return -1;
	/* before the epoch: as unknown (fuzz_s3 found year 1013) */
	t = timegm(&tm);
	return t < 0 ? -1 : (int64_t)t;
}

int
xd_s3_list_parse(const char *xml, size_t n, json_t *out, char *token,
    size_t tlen, int *truncated)
{
	const char *p = xml, *e = xml + n, *c, *ce;
	char key[1024], num[32], lm[64], tr[16];

	*truncated = 0;
	token[0] = '\0';
	if (xml_tag(p, e, "IsTruncated", tr, sizeof(tr), NULL) == 0)
		*truncated = strcmp(tr, "true") == 0;
	/* truncated without a token: the next page would be the first */
	if (*truncated && (xml_tag(p, e, "NextContinuationToken", token, tlen,
	    NULL) != 0 || token[0] == '\0'))
		return -1;
	while ((c = memmem(p, (size_t)(e - p), "<Contents>", 10)) != NULL) {
		char *endv;
		long long sz;

		if ((ce = memmem(c, (size_t)(e - c), "</Contents>", 11)) ==
		    NULL)
			return -1;
		if (xml_tag(c, ce, "Key", key, sizeof(key), NULL) != 0 ||
		    xml_tag(c, ce, "Size", num, sizeof(num), NULL) != 0)
			return -1;
		errno = 0;
		sz = strtoll(num, &endv, 10);
		if (errno != 0 || *endv != '\0' || endv == num || sz < 0)
			return -1;
		if (xml_tag(c, ce, "LastModified", lm, sizeof(lm), NULL) != 0)
			lm[0] = '\0';
		json_array_append_new(out, json_pack("{s:s,s:I,s:I}", "key",
		    key, "size", (json_int_t)sz, "mtime",
		    (json_int_t)iso_time(lm)));
		p = ce + 11;
	}
	return 0;
}

/* ---- requests ---- */

struct s3_req {
	const struct xd_s3 *s;
	const char *method;
	const char *name;       /* under the prefix; NULL: the bucket */
	const char *query;      /* canonical (sorted, encoded) or "" */
	const void *body;       /* sent, of blen bytes */
	size_t blen, boff;
	int out_fd;             /* the answer written here (2xx), or -1 */
	uint64_t out_max, out_n;
	char *ans;              /* else kept here, up to S3_BODY_MAX */
	size_t alen;
	int over;
	char etag[128];
	long status;
};

static size_t
rd_cb(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_req *q = arg;
	size_t k = size * n;

	if (k > q->blen - q->boff)
		k = q->blen - q->boff;
	memcpy(buf, (const char *)q->body + q->boff, k);
	q->boff += k;
	return k;
}

static size_t
wr_cb(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_req *q = arg;
	size_t k = size * n, off = 0;
	ssize_t w;

	if (q->out_fd >= 0 && q->status / 100 == 2) {
		if (q->out_n + k > q->out_max)
			return 0;       /* more than the metadata said */
		while (off < k) {
			if ((w = write(q->out_fd, buf + off, k - off)) < 0) {
				if (errno == EINTR)
					continue;
				return 0;
			}
			off += (size_t)w;
		}
		q->out_n += k;
		return k;
	}
	if (q->alen + k > S3_BODY_MAX) {
		q->over = 1;
		return 0;
	}
	{
		char *a = realloc(q->ans, q->alen + k + 1);

		if (a == NULL)
			return 0;
		q->ans = a;
	}
	memcpy(q->ans + q->alen, buf, k);
	q->alen += k;
	q->ans[q->alen] = '\0';
	return k;
}

static size_t
hd_cb(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_req *q = arg;
	size_t k = size * n, i, j;

	/* the status line of each answer (a 100 Continue's too) */
	if (k > 9 && strncmp(buf, "HTTP/", 5) == 0) {
		const char *sp = memchr(buf, ' ', k);

		if (sp != NULL)
			q->status = strtol(sp + 1, NULL, 10);
	}
	if (k > 5 && strncasecmp(buf, "etag:", 5) == 0) {
		for (i = 5; i < k && (buf[i] == ' ' || buf[i] == '\t'); i++)
			;
		for (j = k; j > i && (buf[j - 1] == '\r' ||
		    buf[j - 1] == '\n' || buf[j - 1] == ' '); j--)
			;
		if (j - i < sizeof(q->etag)) {
			memcpy(q->etag, buf + i, j - i);
			q->etag[j - i] = '\0';
		}
	}
	return k;
}

/* RFC 3986's unreserved kept; '/' kept when slash. */
static int
uri_enc(const char *s, int slash, char *out, size_t len)
{
	static const char h[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~' || (slash && c == '/')) {
			if (o + 1 >= len)
				return -1;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= len)
				return -1;
			out[o++] = '%';
			out[o++] = h[c >> 4];
			out[o++] = h[c & 15];
		}
	}
	out[o] = '\0';
	return 0;
}

static int
hmac(const void *k, size_t kl, const char *msg, unsigned char out[32])
{
	unsigned int ol = 32;

	return HMAC(EVP_sha256(), k, (int)kl, (const unsigned char *)msg,
	    strlen(msg), out, &ol) != NULL ? 0 : -1;
}

/* The request made, signed and sent: 0 with q->status, -1 with err
 * (transport). */
static int
s3_do(struct s3_req *q, char *err, size_t len)
{
	const struct xd_s3 *s = q->s;
	char ak[S3_KEY_MAX], sk[S3_KEY_MAX + 8], path[1400], enc[1400];
	char url[2048], host[256], amz[20], day[10], ph[65], crh[65];
	char *canon = NULL, sts[512], sig[65], h[4][1400];
	unsigned char k1[32], k2[32], k3[32], k4[32], d[32];
	const char *hp;
	struct curl_slist *hl = NULL;
	struct tm tm;
	time_t now = time(NULL);
	CURL *cu = NULL;
	CURLcode cc;
	int rc = -1, i;

	ak[0] = sk[0] = '\0';
	if (xd_s3_key_read(s->access_key_file, ak, sizeof(ak), err, len) !=
	    0 || xd_s3_key_read(s->secret_key_file, sk + 4, sizeof(sk) - 4,
	    err, len) != 0)
		goto out;
	memcpy(sk, "AWS4", 4);
	hp = s->endpoint + (strncmp(s->endpoint, "https://", 8) == 0 ? 8 :
	    7);
	snprintf(host, sizeof(host), "%.*s", (int)strcspn(hp, "/"), hp);
	if (snprintf(path, sizeof(path), "/%s%s%s%s%s", s->bucket, q->name ?
	    "/" : "", q->name &&
	    s->prefix[0] ? s->prefix : "", q->name && s->prefix[0] ? "/" : "",
	    q->name ? q->name : "") >= (int)sizeof(path) ||
	    uri_enc(path, 1, enc, sizeof(enc)) != 0) {
		errf(err, len, "s3: the object's name is too long");
		goto out;
	}
	if (snprintf(url, sizeof(url), "%.*s%s%s%s", (int)(hp - s->endpoint +
	    strlen(host)), s->endpoint, enc, q->query[0] ? "?" : "",
	    q->query) >= (int)sizeof(url)) {
		errf(err, len, "s3: the URL is too long");
		goto out;
	}
	gmtime_r(&now, &tm);
	strftime(amz, sizeof(amz), "%Y%m%dT%H%M%SZ", &tm);
	strftime(day, sizeof(day), "%Y%m%d", &tm);
	if (q->blen > 0)
		sha_hex(q->body, q->blen, ph);
	else
		snprintf(ph, sizeof(ph), "%s", empty_sha);
	if (asprintf(&canon, "%s\n%s\n%s\nhost:%s\nx-amz-content-sha256:%s\n"
	    "x-amz-date:%s\n\nhost;x-amz-content-sha256;x-amz-date\n%s",
	    q->method, enc, q->query, host, ph, amz, ph) < 0) {
		canon = NULL;
		errf(err, len, "s3: out of memory");
		goto out;
	}
	sha_hex(canon, strlen(canon), crh);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/"
	    "aws4_request\n%s", amz, day, s->region, crh);
	if (hmac(sk, strlen(sk), day, k1) != 0 || hmac(k1, 32, s->region,
	    k2) != 0 || hmac(k2, 32, "s3", k3) != 0 || hmac(k3, 32,
	    "aws4_request", k4) != 0 || hmac(k4, 32, sts, d) != 0) {
		errf(err, len, "s3: HMAC failed");
		goto out;
	}
	hexs(d, 32, sig);
	snprintf(h[0], sizeof(h[0]), "Host: %s", host);
	snprintf(h[1], sizeof(h[1]), "x-amz-date: %s", amz);
	snprintf(h[2], sizeof(h[2]), "x-amz-content-sha256: %s", ph);
	snprintf(h[3], sizeof(h[3]), "Authorization: AWS4-HMAC-SHA256 "
	    "Credential=%s/%s/%s/s3/aws4_request, SignedHeaders=host;"
	    "x-amz-content-sha256;x-amz-date, Signature=%s", ak, day,
	    s->region, sig);
	for (i = 0; i < 4; i++) {
		struct curl_slist *n = curl_slist_append(hl, h[i]);

		if (n == NULL)
			goto nomem;
		hl = n;
	}
	/* no 100-continue round trip; a body of a PUT has no type */
	if ((hl = curl_slist_append(hl, "Expect:")) == NULL ||
	    (hl = curl_slist_append(hl, "Content-Type:")) == NULL ||
	    (hl = curl_slist_append(hl, "Accept:")) == NULL)
		goto nomem;
	if ((cu = curl_easy_init()) == NULL)
		goto nomem;
	curl_easy_setopt(cu, CURLOPT_URL, url);
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(cu, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT, (long)S3_CONNECT_S);
	curl_easy_setopt(cu, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(cu, CURLOPT_LOW_SPEED_TIME, (long)S3_SLOW_S);
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, wr_cb);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, q);
	curl_easy_setopt(cu, CURLOPT_HEADERFUNCTION, hd_cb);
	curl_easy_setopt(cu, CURLOPT_HEADERDATA, q);
	if (strcmp(q->method, "PUT") == 0) {
		curl_easy_setopt(cu, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(cu, CURLOPT_READFUNCTION, rd_cb);
		curl_easy_setopt(cu, CURLOPT_READDATA, q);
		curl_easy_setopt(cu, CURLOPT_INFILESIZE_LARGE,
		    (curl_off_t)q->blen);
	} else if (strcmp(q->method, "POST") == 0) {
		curl_easy_setopt(cu, CURLOPT_POST, 1L);
		curl_easy_setopt(cu, CURLOPT_POSTFIELDS, q->body ? q->body :
		    "");
		curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)q->blen);
	} else if (strcmp(q->method, "GET") != 0)
		curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, q->method);
	if ((cc = curl_easy_perform(cu)) != CURLE_OK) {
		errf(err, len, "s3 %s %s/%s: %s", q->method, s->bucket,
		    q->name ? q->name : "", cc == CURLE_WRITE_ERROR ?
		    (q->over ? "the answer is too long" : "the object is "
		    "larger than its metadata says, or the disk refused it") :
		    curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &q->status);
	rc = 0;
	goto out;
nomem:
	errf(err, len, "s3: out of memory");
out:
	if (cu != NULL)
		curl_easy_cleanup(cu);
	curl_slist_free_all(hl);
	free(canon);
	OPENSSL_cleanse(ak, sizeof(ak));
	OPENSSL_cleanse(sk, sizeof(sk));
	OPENSSL_cleanse(k1, sizeof(k1));
	OPENSSL_cleanse(k2, sizeof(k2));
	OPENSSL_cleanse(k3, sizeof(k3));
	OPENSSL_cleanse(k4, sizeof(k4));
	return rc;
}

/* An answer that is not 2xx as an error naming the store's <Code>. */
static int
s3_fail(struct s3_req *q, char *err, size_t len)
{
	char code[128] = "", msg[200] = "";

	if (q->ans != NULL) {
		(void)!xd_s3_xml_text(q->ans, q->alen, "Code", code,
		    sizeof(code));
		(void)!xd_s3_xml_text(q->ans, q->alen, "Message", msg,
		    sizeof(msg));
	}
	return errf(err, len, "s3 %s %s/%s%s%s: HTTP %ld%s%s%s%s",
	    q->method, q->s->bucket, q->s->prefix, q->s->prefix[0] ? "/" : "",
	    q->name ? q->name : "", q->status, code[0] ? " " : "", code,
	    msg[0] ? ": " : "", msg);
}

static void
req_init(struct s3_req *q, const struct xd_s3 *s, const char *method,
    const char *name, const char *query)
{
	memset(q, 0, sizeof(*q));
	q->s = s;
	q->method = method;
	q->name = name;
	q->query = query;
	q->out_fd = -1;
}

/* One request whose answer is 2xx: 0; 404: 1 (when nf_ok); else -1. */
static int
s3_simple(struct s3_req *q, int nf_ok, char *err, size_t len)
{
	int rc;

	if (s3_do(q, err, len) != 0)
		rc = -1;
	else if (q->status / 100 == 2)
		rc = 0;
	else if (nf_ok && q->status == 404)
		rc = 1;
	else
		rc = s3_fail(q, err, len);
	return rc;
}

/* s3_simple of a request whose answer's body is not wanted. */
static int
s3_once(struct s3_req *q, int nf_ok, char *err, size_t len)
{
	int rc = s3_simple(q, nf_ok, err, len);

	free(q->ans);
	return rc;
}

int
xd_s3_put_mem(const struct xd_s3 *s, const char *name, const void *buf,
    size_t n, char *err, size_t len)
{
	struct s3_req q;

	req_init(&q, s, "PUT", name, "");
	q.body = buf;
	q.blen = n;
	return s3_once(&q, 0, err, len);
}

int
xd_s3_put_file(const struct xd_s3 *s, const char *name, int fd,
    char *err, size_t len)
{
	struct stat st;
	char *buf = NULL, uid[512], eu[1540], q[1600], *xml = NULL, *nx;
	size_t xl = 0, xcap = 0;
	struct s3_req r;
	ssize_t n;
	int part = 0, rc = -1, started = 0;

	if (fstat(fd, &st) != 0 || lseek(fd, 0, SEEK_SET) != 0)
		return errf(err, len, "s3: %s", strerror(errno));
	if ((buf = malloc(st.st_size < XD_S3_PART ? (size_t)st.st_size + 1 :
	    XD_S3_PART)) == NULL)
		return errf(err, len, "s3: out of memory");
	if (st.st_size < XD_S3_PART) {
		if ((n = util_read_full(fd, buf, (size_t)st.st_size)) !=
		    (ssize_t)st.st_size) {
			errf(err, len, "s3: reading the archive: %s", n < 0 ?
			    strerror(errno) : "short");
			goto out;
		}
		rc = xd_s3_put_mem(s, name, buf, (size_t)n, err, len);
		goto out;
	}
	/* multipart: begun, each part PUT with its own signed hash, then
	 * completed with the parts' ETags in order (aborted on failure: no
	 * parts left behind to pay for) */
	req_init(&r, s, "POST", name, "uploads=");
	if (s3_simple(&r, 0, err, len) != 0 || r.ans == NULL ||
	    xd_s3_xml_text(r.ans, r.alen, "UploadId", uid, sizeof(uid)) != 0) {
		if (r.status / 100 == 2)
			errf(err, len, "s3 POST %s: no UploadId in the answer",
			    name);
		free(r.ans);
		goto out;
	}
	free(r.ans);
	if (uri_enc(uid, 0, eu, sizeof(eu)) != 0) {
		errf(err, len, "s3: the upload's id is too long");
		goto out;
	}
	started = 1;
	xcap = 4096;
	if ((xml = malloc(xcap)) == NULL)
		goto nomem;
	xl = (size_t)snprintf(xml, xcap, "<CompleteMultipartUpload>");
	for (;;) {
		if ((n = util_read_full(fd, buf, XD_S3_PART)) < 0) {
			errf(err, len, "s3: reading the archive: %s",
			    strerror(errno));
			goto out;
		}
		if (n == 0 && part > 0)
			break;
		if (++part > S3_PARTS_MAX) {
			errf(err, len, "s3: more than %d parts", S3_PARTS_MAX);
			goto out;
		}
		snprintf(q, sizeof(q), "partNumber=%d&uploadId=%s", part, eu);
		req_init(&r, s, "PUT", name, q);
		r.body = buf;
		r.blen = (size_t)n;
		if (s3_simple(&r, 0, err, len) != 0 || r.etag[0] == '\0') {
			if (r.status / 100 == 2)
				errf(err, len, "s3 PUT %s part %d: no ETag",
				    name, part);
			free(r.ans);
			goto out;
		}
		free(r.ans);
		if (xl + 200 + strlen(r.etag) > xcap) {
			if ((nx = realloc(xml, xcap * 2)) == NULL)
				goto nomem;
			xml = nx;
			xcap *= 2;
		}
		/* an ETag holds no '<' or '&' (a quoted hex digest) */
		if (strpbrk(r.etag, "<&") != NULL) {
			errf(err, len, "s3 PUT %s part %d: a strange ETag",
			    name, part);
			goto out;
		}
		xl += (size_t)snprintf(xml + xl, xcap - xl, "<Part><PartNumber>"
		    "%d</PartNumber><ETag>%s</ETag></Part>", part, r.etag);
		if ((size_t)n < XD_S3_PART)
			break;
	}
	xl += (size_t)snprintf(xml + xl, xcap - xl,
	    "</CompleteMultipartUpload>");
	snprintf(q, sizeof(q), "uploadId=%s", eu);
	req_init(&r, s, "POST", name, q);
	r.body = xml;
	r.blen = xl;
	/* S3 may answer 200 with an <Error> in the body */
	if (s3_simple(&r, 0, err, len) == 0 && r.ans != NULL &&
	    strstr(r.ans, "<Error>") != NULL)
		rc = s3_fail(&r, err, len);
	else
		rc = r.status / 100 == 2 ? 0 : -1;
	free(r.ans);
	if (rc == 0)
		started = 0;
	goto out;
nomem:
	errf(err, len, "s3: out of memory");
out:
	if (started) {
		char e2[XD_ERR_MAX];

		snprintf(q, sizeof(q), "uploadId=%s", eu);
		req_init(&r, s, "DELETE", name, q);
		(void)s3_simple(&r, 1, e2, sizeof(e2));
		free(r.ans);
	}
	free(xml);
	free(buf);
	return rc;
}

int
xd_s3_get_fd(const struct xd_s3 *s, const char *name, int fd, uint64_t max,
    char *err, size_t len)
{
	struct s3_req q;

	req_init(&q, s, "GET", name, "");
	q.out_fd = fd;
	q.out_max = max;
	return s3_once(&q, 1, err, len);
}

char *
xd_s3_get_mem(const struct xd_s3 *s, const char *name, size_t max,
    size_t *n, int *rc, char *err, size_t len)
{
	struct s3_req q;

	req_init(&q, s, "GET", name, "");
	*rc = s3_simple(&q, 1, err, len);
	if (*rc == 0 && q.alen > max) {
		*rc = errf(err, len, "s3 GET %s: more than %zu bytes", name,
		    max);
	}
	if (*rc != 0) {
		free(q.ans);
		return NULL;
	}
	*n = q.alen;
	if (q.ans == NULL)
		q.ans = calloc(1, 1);
	return q.ans;
}

int
xd_s3_delete(const struct xd_s3 *s, const char *name, char *err,
    size_t len)
{
	struct s3_req q;

	req_init(&q, s, "DELETE", name, "");
	return s3_once(&q, 1, err, len) < 0 ? -1 : 0;
}

json_t *
xd_s3_list(const struct xd_s3 *s, char *err, size_t len)
{
	json_t *out = json_array(), *a;
	char tok[1024], etok[3100], pfx[300], epfx[1000], qs[4200];
	size_t i, pl;
	int trunc = 1, pages = 0;

	snprintf(pfx, sizeof(pfx), "%s%s", s->prefix, s->prefix[0] ? "/" :
	    "");
	pl = strlen(pfx);
	/* the prefix with its "/" (SigV4's canonical query: "%2F"), so a
	 * sibling prefix ("fleet-b/" beside "fleet/") is not listed too;
	 * the names are still filtered here (no deeper "/") */
	if (uri_enc(pfx, 0, epfx, sizeof(epfx)) != 0)
		goto fail;
	tok[0] = '\0';
	while (trunc) {
		struct s3_req q;
		json_t *page = json_array();

		/* bounded: 1000 keys a page */
		if (++pages > 10000 || page == NULL) {
			json_decref(page);
			errf(err, len, "s3 list: too many pages");
			goto fail;
		}
		if (tok[0] && uri_enc(tok, 0, etok, sizeof(etok)) != 0) {
			json_decref(page);
			goto fail;
		}
		snprintf(qs, sizeof(qs), "%s%s%slist-type=2&prefix=%s",
		    tok[0] ? "continuation-token=" : "", tok[0] ? etok : "",
		    tok[0] ? "&" : "", epfx);
		req_init(&q, s, "GET", NULL, qs);
		if (s3_simple(&q, 0, err, len) != 0) {
			free(q.ans);
			json_decref(page);
			goto fail;
		}
		if (xd_s3_list_parse(q.ans ? q.ans : "", q.alen, page, tok,
		    sizeof(tok), &trunc) != 0) {
			free(q.ans);
			json_decref(page);
			errf(err, len, "s3 list: the answer does not parse");
			goto fail;
		}
		free(q.ans);
		/* names under the prefix, the prefix taken off */
		json_array_foreach(page, i, a) {
			const char *k = json_string_value(json_object_get(a,
			    "key"));

			if (k == NULL || strncmp(k, pfx, pl) != 0 ||
			    strchr(k + pl, '/') != NULL)
				continue;
			json_object_set_new(a, "name", json_string(k + pl));
			json_array_append(out, a);
		}
		json_decref(page);
	}
	return out;
fail:
	if (err[0] == '\0')
		errf(err, len, "s3 list: a name is too long");
	json_decref(out);
	return NULL;
}
