/*
 * exec_os_http.c: what the OpenSandbox-compatible API's handlers share:
 * a call's life and replies in OpenSandbox's shape ({"code","message"}
 * with its statuses; an empty 2xx body says Content-Length: 0, which
 * openapi-fetch, the JS SDK's client, needs to read it as empty), the
 * records of what OpenSandbox says of a sandbox and sluice does not
 * keep (image URI, metadata, env, entrypoint, expiry), and the
 * per-sandbox access tokens of endpoints/44772.
 *
 * Records are small JSON files under <state_dir>/.opensandbox/ (a name
 * no sandbox id can have), written atomically, read at start; the
 * tokens are HMAC-SHA256(secret, id) with a secret made once in the
 * same directory (0600), so a restarted daemon accepts the endpoints
 * its clients cached.
 */
#include "sluice-config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "proxy/lib/util.h"
#include "proxy/lib/apireply.h"
#include "sandbox-glue/executor/execd/exec_os-int.h"

const char *
xd_os_q(struct xd_os_call *k, const char *key)
{
	return k->query != NULL ? evhttp_find_header(k->query, key) : NULL;
}

void
xd_os_call_free(struct xd_os_call *k)
{
	if (k->ev_ping != NULL)
		event_free(k->ev_ping);
	if (k->pending)
		TAILQ_REMOVE(&k->xd->os->calls, k, link);
	if (k->evcon != NULL)
		evhttp_connection_set_closecb(k->evcon, NULL, NULL);
	if (k->query != NULL) {
		evhttp_clear_headers(k->query);
		free(k->query);
	}
	xd_args_free(k->arg, XD_ARGS_MAX);
	json_decref(k->body);
	if (k->box != NULL)
		xd_box_unref(k->box);
	free(k);
}

void
xd_os_call_wait(struct xd_os_call *k)
{
	if (k->pending)
		return;
	k->pending = 1;
	TAILQ_INSERT_TAIL(&k->xd->os->calls, k, link);
}

void
xd_os_reply_json(struct xd_os_call *k, int status, json_t *j)
{
	apireply_json(k->req, status, j);
	xd_os_call_free(k);
}

void
xd_os_reply_empty(struct xd_os_call *k, int status)
{
	struct evbuffer *b = evbuffer_new();

	/* evhttp writes Content-Length: 0 for an empty buffer; a 204 has
	 * no body and no length */
	evhttp_send_reply(k->req, status, util_http_phrase(status), b);
	if (b != NULL)
		evbuffer_free(b);
	xd_os_call_free(k);
}

static void
reply_code(struct xd_os_call *k, int status, const char *code,
    const char *msg)
{
	char up[64];
	size_t i;

	/* sluice's codes in OpenSandbox's style: NOT_FOUND, BAD_REQUEST */
	for (i = 0; code[i] && i + 1 < sizeof(up); i++)
		up[i] = (char)toupper((unsigned char)code[i]);
	up[i] = '\0';
	apireply_json(k->req, status, json_pack("{s:s,s:s}", "code", up,
	    "message", msg));
	xd_os_call_free(k);
}

void
xd_os_reply_err(struct xd_os_call *k, int status, const char *code,
    const char *fmt, ...)
{
	char msg[XD_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_code(k, status, code, msg);
}

void
xd_os_reply_perr(struct xd_os_call *k, struct xd_perr *e)
{
	char msg[XD_ERR_MAX * 2];
	char *extra = e->extra != NULL ? json_dumps(e->extra, JSON_COMPACT |
	    JSON_SORT_KEYS) : NULL;

	snprintf(msg, sizeof(msg), "%s%s%s", e->msg, extra ? " " : "",
	    extra ? extra : "");
	free(extra);
	reply_code(k, e->status ? e->status : 500, e->code ? e->code :
	    "internal", msg);
	xd_perr_clear(e);
}

/* ---- records ---- */

static int
rec_dir(const struct xd_os *os, char *out, size_t len)
{
	return snprintf(out, len, "%s/.opensandbox", os->xd->cfg->state_dir) >=
	    (int)len ? -1 : 0;
}

static int
secret_load(struct xd_os *os, const char *dir, char *err, size_t errlen)
{
	char p[SBX_PATH_MAX + 32], tmp[SBX_PATH_MAX + 48];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/secret", dir);
	if ((fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		n = read(fd, os->secret, sizeof(os->secret));
		close(fd);
		if (n == (ssize_t)sizeof(os->secret))
			return 0;
		snprintf(err, errlen, "%s: not %zu bytes", p,
		    sizeof(os->secret));
		return -1;
	}
	if (errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		return -1;
	}
	if (RAND_bytes(os->secret, (int)sizeof(os->secret)) != 1) {
		snprintf(err, errlen, "no random bytes for the token secret");
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd < 0 || write(fd, os->secret, sizeof(os->secret)) !=
	    (ssize_t)sizeof(os->secret) || fsync(fd) != 0 || close(fd) != 0 ||
	    rename(tmp, p) != 0) {
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return 0;
}

int
xd_os_recs_load(struct xd_os *os, char *err, size_t errlen)
{
	char dir[SBX_PATH_MAX + 16];
	struct stat st;
	struct dirent *de;
	DIR *d;

	if ((os->recs = json_object()) == NULL || rec_dir(os, dir,
	    sizeof(dir)) != 0) {
		snprintf(err, errlen, "state_dir: too long");
		return -1;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid !=
	    geteuid() || (st.st_mode & 077) != 0) {
		snprintf(err, errlen, "%s: must be a directory of the daemon's "
		    "user, mode 0700", dir);
		return -1;
	}
	if (secret_load(os, dir, err, errlen) != 0)
		return -1;
	if ((d = opendir(dir)) == NULL) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		char p[SBX_PATH_MAX + 300], id[SBX_ID_MAX + 8];
		char key[SBX_ID_MAX + 1];
		json_error_t je;
		json_t *r;

		if (!xd_json_name_id(de->d_name, id))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		r = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
		/* a record is named by its key (its tenant's and id's) */
		if (!json_is_object(r) || xd_os_rec_key(r, key) != 0 ||
		    strcmp(key, id) != 0) {
			xd_log(XD_LOG_WARN, "%s: not an OpenSandbox record, "
			    "left alone", p);
			json_decref(r);
			continue;
		}
		json_object_set_new(os->recs, id, r);
	}
	closedir(d);
	return 0;
}

void
xd_os_key(const char *tenant, const char *id, char out[SBX_ID_MAX + 1])
{
	xd_key(tenant != NULL ? tenant : "", id, out);
}

int
xd_os_rec_key(json_t *rec, char out[SBX_ID_MAX + 1])
{
	const char *id = json_string_value(json_object_get(rec, "id"));

	if (id == NULL)
		return -1;
	xd_os_key(json_string_value(json_object_get(rec, "tenant")), id, out);
	return 0;
}

json_t *
xd_os_rec(struct xd_os *os, const char *key)
{
	return json_object_get(os->recs, key);
}

int
xd_os_rec_save(struct xd_os *os, json_t *rec)
{
	char id[SBX_ID_MAX + 1];
	char dir[SBX_PATH_MAX + 16], p[SBX_PATH_MAX + 100], tmp[SBX_PATH_MAX +
	    120];
	char *s;
	int fd, rc = -1;
	size_t n;

	/* named by its key: see xd_os_key */
	if (xd_os_rec_key(rec, id) != 0 || rec_dir(os, dir, sizeof(dir)) != 0)
		return -1;
	if (json_object_get(os->recs, id) != rec)
		json_object_set(os->recs, id, rec);
	snprintf(p, sizeof(p), "%s/%s.json", dir, id);
	snprintf(tmp, sizeof(tmp), "%s/.%s.json.tmp", dir, id);
	if ((s = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return -1;
	n = strlen(s);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd >= 0 && write(fd, s, n) == (ssize_t)n && close(fd) == 0) {
		fd = -1;
		rc = rename(tmp, p);
	}
	if (fd >= 0)
		close(fd);
	if (rc != 0) {
		xd_log(XD_LOG_WARN, "%s: %s", p, strerror(errno));
		(void)unlink(tmp);
	}
	free(s);
	return rc;
}

void
xd_os_rec_drop(struct xd_os *os, const char *key)
{
	char dir[SBX_PATH_MAX + 16], p[SBX_PATH_MAX + 100];

	if (rec_dir(os, dir, sizeof(dir)) != 0)
		return;
	snprintf(p, sizeof(p), "%s/%s.json", dir, key);
	(void)unlink(p);
	json_object_del(os->recs, key);
}

/* ---- access tokens ---- */

void
xd_os_token(const struct xd_os *os, const char *id, char out[65])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int len = 0, i;

	HMAC(EVP_sha256(), os->secret, (int)sizeof(os->secret),
	    (const unsigned char *)id, strlen(id), mac, &len);
	for (i = 0; i < len && i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	out[64] = '\0';
}

void
xd_os_port_token(const struct xd_os *os, const char *key, long port,
    long long expires, char out[65])
{
	char in[SBX_ID_MAX + 48];

	/* '#' is in no key: these never stand for a key's execd token */
	if (expires > 0)
		snprintf(in, sizeof(in), "%s#%ld@%lld", key, port, expires);
	else
		snprintf(in, sizeof(in), "%s#%ld", key, port);
	xd_os_token(os, in, out);
}

int
xd_os_port_token_ok(const struct xd_os *os, const char *key, long port,
    long long expires, const char *tok)
{
	char want[65];

	if (tok == NULL || strlen(tok) != 64)
		return 0;
	xd_os_port_token(os, key, port, expires, want);
	return CRYPTO_memcmp(tok, want, 64) == 0;
}

int
xd_os_token_ok(const struct xd_os *os, const char *id,
    struct evhttp_request *req, const char *header)
{
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(
	    req), header);
	char want[65];

	if (v == NULL || strlen(v) != 64)
		return 0;
	xd_os_token(os, id, want);
	return CRYPTO_memcmp(v, want, 64) == 0;
}

json_t *
xd_os_iso_ms(int64_t ms)
{
	char buf[48];
	struct tm g;
	time_t t = (time_t)(ms / 1000);

	if (ms <= 0 || gmtime_r(&t, &g) == NULL)
		return json_null();
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &g);
	snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ".%03dZ",
	    (int)(ms % 1000));
	return json_string(buf);
}
