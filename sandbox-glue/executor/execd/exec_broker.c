/*
 * exec_broker.c: the sandboxes' broker sessions, through sluiced's
 * control API and the one client of it (proxy/sluicectl/ctl_http.h).
 * Every call blocks (bounded by control_timeout_ms): only workers and
 * --doctor call these.
 *
 * What sluiced answers becomes the executor's error: unreachable or not
 * HTTP is 503 broker_unavailable; its 400 (an unknown tier) is ours;
 * 403 is network_not_permitted; 409 exists (a session of that id that
 * the daemon did not make is not taken over).
 */
#include "sluice-config.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/lib/credspec.h"
#include "proxy/sluicectl/ctl_http.h"
#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

/* One call; 0 with the response in r (caller frees) when sluiced
 * answered at all. */
static int
call(const struct xd_cfg *c, const char *method, const char *path,
    const char *body, struct ctlh_resp *r, struct xd_perr *e)
{
	struct ctlh_target t;
	char err[XD_ERR_MAX];
	enum ctlh_rc rc;

	memset(&t, 0, sizeof(t));
	t.socket = c->control;
	t.timeout_ms = c->control_timeout_ms;
	rc = ctlh_request(&t, method, path, body, r, err, sizeof(err));
	if (rc != CTLH_OK) {
		xd_perr_set(e, 503, "broker_unavailable", "sluiced at %s: %s",
		    c->control, err);
		return -1;
	}
	return 0;
}

/* A status of sluiced that is not success, as ours. */
static void
refused(struct xd_perr *e, const struct ctlh_resp *r, const char *what)
{
	char m[XD_ERR_MAX / 2];

	sbx_broker_msg(r->body, m, sizeof(m));
	switch (r->status) {
	case 400:
		xd_perr_set(e, 400, "bad_request", "sluiced refused %s: %s",
		    what, m);
		break;
	case 403:
		xd_perr_set(e, 403, "network_not_permitted", "sluiced refused "
		    "%s: %s", what, m);
		break;
	case 404:
		xd_perr_set(e, 404, "not_found", "sluiced: %s: %s", what, m);
		break;
	case 409:
		xd_perr_set(e, 409, "exists", "sluiced: %s: %s", what, m);
		break;
	default:
		xd_perr_set(e, 503, "broker_unavailable", "sluiced refused "
		    "%s: %s", what, m);
		break;
	}
}

/* A call whose answer says only whether it was done: 0 when sluiced
 * answered 200 (gone_ok, a delete: 204 or 404 too, gone already being
 * what was wanted), else -1 and e (what: the refusal's words). */
static int
call_done(const struct xd_cfg *c, const char *method, const char *path,
    const char *body, int gone_ok, const char *what, struct xd_perr *e)
{
	struct ctlh_resp resp;
	int rc = 0;

	if (call(c, method, path, body, &resp, e) != 0)
		return -1;
	if (resp.status != 200 && !(gone_ok && (resp.status == 204 ||
	    resp.status == 404))) {
		refused(e, &resp, what);
		rc = -1;
	}
	ctlh_resp_free(&resp);
	return rc;
}

int
xd_broker_create(const struct xd_cfg *c, const struct sbx_rec *r,
    char *session_dir, size_t dlen, struct xd_perr *e)
{
	struct ctlh_resp resp;
	char err[XD_ERR_MAX];
	json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "id", r->chat, "tenant",
	    r->tenant, "user", r->user, "tier", r->tier);
	char *body = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	int rc = -1;

	json_decref(o);
	if (body == NULL) {
		xd_perr_set(e, 500, "internal", "out of memory");
		return -1;
	}
	if (call(c, "POST", "/v1/sessions", body, &resp, e) != 0) {
		free(body);
		return -1;
	}
	free(body);
	if (resp.status != 201 && resp.status != 200) {
		refused(e, &resp, "the session");
		goto out;
	}
	if (sbx_broker_socket(resp.body, session_dir, dlen, err,
	    sizeof(err)) != 0) {
		/* made but unusable: do not leave it */
		xd_perr_set(e, 503, "broker_unavailable", "sluiced's session: "
		    "%s", err);
		ctlh_resp_free(&resp);
		(void)!xd_broker_delete(c, r->chat, &(struct xd_perr){0});
		return -1;
	}
	rc = 0;
out:
	ctlh_resp_free(&resp);
	return rc;
}

int
xd_broker_delete(const struct xd_cfg *c, const char *chat,
    struct xd_perr *e)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/sessions/%s", chat);
	return call_done(c, "DELETE", path, NULL, 1, "to delete the session",
	    e);
}

int
xd_broker_tier(const struct xd_cfg *c, const char *chat, const char *tier,
    struct xd_perr *e)
{
	char path[128], body[64];

	snprintf(path, sizeof(path), "/v1/sessions/%s", chat);
	snprintf(body, sizeof(body), "{\"tier\":\"%s\"}", tier);
	return call_done(c, "PATCH", path, body, 0, "the tier", e);
}

int
xd_broker_egress(const struct xd_cfg *c, const char *chat, const char *body,
    struct xd_perr *e)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/sessions/%s/egress", chat);
	return call_done(c, "PUT", path, body, 0, "the egress rules", e);
}

int
xd_broker_get(const struct xd_cfg *c, const char *chat, char *eff,
    size_t elen, char *ceil, size_t clen, struct xd_perr *e)
{
	struct ctlh_resp resp;
	char path[128];
	json_t *o;
	const char *t;
	int rc = -1;

	snprintf(path, sizeof(path), "/v1/sessions/%s", chat);
	if (call(c, "GET", path, NULL, &resp, e) != 0)
		return -1;
	if (resp.status != 200) {
		refused(e, &resp, "the session");
		goto out;
	}
	o = resp.body != NULL ? json_loads(resp.body, 0, NULL) : NULL;
	t = json_string_value(json_object_get(o, "effective_tier"));
	if (t == NULL || strlen(t) >= elen)
		xd_perr_set(e, 503, "broker_unavailable", "sluiced's session "
		    "%s has no effective_tier", chat);
	else {
		snprintf(eff, elen, "%s", t);
		t = json_string_value(json_object_get(o, "ceiling"));
		snprintf(ceil, clen, "%s", t != NULL && strlen(t) < clen ?
		    t : "");
		rc = 0;
	}
	json_decref(o);
out:
	ctlh_resp_free(&resp);
	return rc;
}

int
xd_broker_ping(const struct xd_cfg *c, struct xd_perr *e)
{
	return call_done(c, "GET", "/v1/health", NULL, 0, "GET /v1/health",
	    e);
}

void
xd_broker_socket_own(const struct sbx_rec *r)
{
	char p[SBX_PATH_MAX + 16];
	struct stat st;

	snprintf(p, sizeof(p), "%s/proxy.sock", r->session_dir);
	if (lstat(p, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    (st.st_uid != r->host_uid || st.st_gid != r->host_gid) &&
	    lchown(p, r->host_uid, r->host_gid) != 0)
		xd_log(XD_LOG_WARN, "chown %s: %m", p);
}

/* ---- what a sandbox's commands get from sluiced: trust and
 * credentials (sluice-execd(8), POST /v1/sandboxes) ---- */

/* Writes data into path through a temporary file, mode 0644. */
static int
put_file(const char *path, const char *a, size_t alen, const char *b,
    size_t blen)
{
	char t[SBX_PATH_MAX + 64];
	FILE *f;
	int ok;

	snprintf(t, sizeof(t), "%s.tmp", path);
	(void)unlink(t);
	if ((f = fopen(t, "wx")) == NULL)
		return -1;
	ok = fchmod(fileno(f), 0644) == 0 &&
	    (alen == 0 || fwrite(a, 1, alen, f) == alen) &&
	    (alen == 0 || a[alen - 1] == '\n' || fputc('\n', f) != EOF) &&
	    fwrite(b, 1, blen, f) == blen;
	if (fclose(f) != 0)
		ok = 0;
	if (!ok || rename(t, path) != 0) {
		(void)unlink(t);
		return -1;
	}
	return 0;
}

/* The host's anchors, malloc'd ("" when there are none). */
static char *
host_anchors(size_t *len)
{
	FILE *f = fopen(XD_HOST_CA_BUNDLE, "r");
	char *s = NULL;
	size_t cap = 0, n;

	*len = 0;
	if (f == NULL) {
		xd_log(XD_LOG_WARN, "%s: %m: sandboxes trust only the "
		    "inspection CA", XD_HOST_CA_BUNDLE);
		return strdup("");
	}
	for (;;) {
		if (cap - *len < 65536) {
			char *t;

			if (cap >= (64u << 20) ||
			    (t = realloc(s, cap + 262144)) == NULL) {
				free(s);
				fclose(f);
				return NULL;
			}
			s = t;
			cap += 262144;
		}
		n = fread(s + *len, 1, cap - *len - 1, f);
		*len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	s[*len] = '\0';
	return s;
}

/* Writes text into path, the sandbox user's, mode 0600, through a
 * temporary file. */
static int
put_private(const struct sbx_rec *r, const char *path, const char *text)
{
	char t[SBX_PATH_MAX + 64];
	size_t n = strlen(text);
	int fd, ok;

	snprintf(t, sizeof(t), "%s.tmp", path);
	(void)unlink(t);
	if ((fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) < 0)
		return -1;
	ok = fchown(fd, r->host_uid, r->host_gid) == 0 &&
	    fchmod(fd, 0600) == 0 && write(fd, text, n) == (ssize_t)n;
	if (close(fd) != 0)
		ok = 0;
	if (!ok || rename(t, path) != 0) {
		(void)unlink(t);
		return -1;
	}
	return 0;
}

/* Appends to *buf (malloc'd, grown); -1 out of memory. */
static int
cat(char **buf, size_t *len, const char *fmt, ...)
{
	va_list ap;
	char *t;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || (t = realloc(*buf, *len + (size_t)n + 1)) == NULL)
		return -1;
	*buf = t;
	va_start(ap, fmt);
	(void)vsnprintf(t + *len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*len += (size_t)n;
	return 0;
}

/* The credential's inject is what the package manager sends: npm a
 * bearer token, pip (its index URL's user-pass) HTTP Basic. */
static int
inject_fits(const struct xd_cred_ask *a, json_t *cr, struct xd_perr *e)
{
	json_t *inj = json_object_get(cr, "inject");
	const char *h = json_string_value(json_object_get(inj, "header"));
	const char *f = json_string_value(json_object_get(inj, "format"));
	const char *want = strcmp(a->for_, "npm") == 0 ? "Bearer {}" : "Basic";

	if (h != NULL && strcasecmp(h, "Authorization") == 0 && f != NULL &&
	    strcmp(f, want) == 0)
		return 0;
	xd_perr_set(e, 400, "bad_request", "credentials: %s is for %s, whose "
	    "credential must inject Authorization with format \"%s\"",
	    a->name, a->for_, want);
	return -1;
}

/* npmrc: the registry (index) if given, and the placeholder as the
 * _authToken of the index's //host[:port]/path/, else of each of the
 * credential's hosts but *.suffix ones (npm sends it as a Bearer). */
static int
npmrc_add(char **buf, size_t *len, const struct xd_cred_ask *a, json_t *cr,
    const char *ph)
{
	json_t *h;
	size_t k;

	if (a->index[0] != '\0') {
		size_t n = strlen(a->index);

		return cat(buf, len, "registry=%s%s\n//%s%s:_authToken=%s\n",
		    a->index, a->index[n - 1] == '/' ? "" : "/", a->index + 8,
		    a->index[n - 1] == '/' ? "" : "/", ph);
	}
	json_array_foreach(json_object_get(cr, "hosts"), k, h) {
		const char *t = json_string_value(h);

		if (t != NULL && strncmp(t, "*.", 2) != 0 &&
		    cat(buf, len, "//%s/:_authToken=%s\n", t, ph) != 0)
			return -1;
	}
	return 0;
}

/* pip.conf: the index (default https://<the first host>/simple/) with
 * the placeholder as the password of its user-pass (pip sends it in a
 * Basic header, whose user-pass sluiced reads): first, "index-url =
 * URL", else an indented line of extra-index-url's list. */
static int
pipconf_add(char **buf, size_t *len, int first, const struct xd_cred_ask *a,
    json_t *cr, const char *ph, struct xd_perr *e)
{
	char idx[XD_CRED_INDEX_MAX + SBX_ID_MAX + 16], enc[256];
	const char *host = NULL, *p;
	size_t k, n = 0;
	json_t *h;

	if (a->index[0] != '\0')
		snprintf(idx, sizeof(idx), "%s", a->index + 8);
	else {
		json_array_foreach(json_object_get(cr, "hosts"), k, h) {
			host = json_string_value(h);
			if (host != NULL && strncmp(host, "*.", 2) != 0)
				break;
			host = NULL;
		}
		if (host == NULL) {
			xd_perr_set(e, 400, "bad_request", "credentials: %s "
			    "has no host to make pip's index of (only "
			    "*.suffix): name its \"index\"", a->name);
			return -1;
		}
		snprintf(idx, sizeof(idx), "%s/simple/", host);
	}
	/* the placeholder as a URL's password: its colons escaped */
	for (p = ph; *p != '\0' && n + 4 < sizeof(enc); p++)
		n += (size_t)snprintf(enc + n, sizeof(enc) - n,
		    *p == ':' ? "%%3A" : "%c", *p);
	if (cat(buf, len, "%s https://sluice:%s@%s\n",
	    first ? "index-url =" : "   ", enc, idx) != 0) {
		xd_perr_set(e, 500, "internal", "out of memory");
		return -1;
	}
	return 0;
}

/* The credentials asked for, each sluiced's and of r's tenant, as
 * SLUICE_CRED_<NAME>=<placeholder> into env, and those for npm and pip
 * into the session directory's npmrc and pip.conf (removed when none
 * is), named in env. */
static int
creds_env(const struct xd_cfg *c, const struct sbx_rec *r,
    const struct xd_cred_ask *asks, int n, json_t *env,
    struct xd_perr *e)
{
	struct ctlh_resp resp;
	json_t *o = NULL, *list, *cr, *found;
	char *npmrc = NULL, *pipconf = NULL, *extra = NULL;
	size_t nlen = 0, plen = 0, xlen = 0;
	char path[SBX_PATH_MAX + 32];
	int i, rc = -1, npip = 0;
	size_t k;

	memset(&resp, 0, sizeof(resp));
	if (n > 0) {
		if (call(c, "GET", "/v1/credentials", NULL, &resp, e) != 0)
			return -1;
		if (resp.status != 200) {
			refused(e, &resp, "the credentials");
			ctlh_resp_free(&resp);
			return -1;
		}
		o = resp.body != NULL ? json_loads(resp.body, 0, NULL) : NULL;
	}
	list = json_object_get(o, "credentials");
	for (i = 0; i < n; i++) {
		const struct xd_cred_ask *a = &asks[i];
		const char *ph = NULL, *t;
		char var[SBX_ID_MAX + 32], *p, own[CRED_SECRET_LEN + 1];
		char mine[SBX_ID_MAX + CRED_SECRET_LEN + 32];

		found = NULL;
		json_array_foreach(list, k, cr) {
			t = json_string_value(json_object_get(cr, "name"));
			if (t == NULL || strcmp(t, a->name) != 0)
				continue;
			t = json_string_value(json_object_get(cr, "tenant"));
			if (t != NULL && strcmp(t, r->tenant) == 0) {
				ph = json_string_value(json_object_get(cr,
				    "placeholder"));
				found = cr;
			}
			break;
		}
		if (ph == NULL) {
			xd_perr_set(e, 400, "bad_request", "credentials: "
			    "sluiced has no credential %s of tenant %s",
			    a->name, r->tenant[0] ? r->tenant : "(none)");
			goto out;
		}
		/* the sandbox's own placeholder, good in its session only:
		 * one seen in a sandbox opens no other */
		t = strrchr(ph, ':');
		if (t == NULL || strlen(t + 1) != CRED_SECRET_LEN ||
		    cred_session_secret(t + 1, r->chat, own) != 0) {
			xd_perr_set(e, 503, "broker_unavailable",
			    "credentials: sluiced answered a placeholder of "
			    "%s this executor does not read", a->name);
			goto out;
		}
		snprintf(mine, sizeof(mine), "%.*s%s", (int)(t + 1 - ph), ph,
		    own);
		explicit_bzero(own, sizeof(own));
		ph = mine;
		snprintf(var, sizeof(var), "SLUICE_CRED_%s", a->name);
		for (p = var + 12; *p != '\0'; p++)
			*p = (*p >= 'a' && *p <= 'z') ? (char)(*p - 32) :
			    (*p == '.' || *p == '-') ? '_' : *p;
		if (json_array_append_new(env, json_sprintf("%s=%s", var,
		    ph)) != 0)
			goto oom;
		if (a->for_[0] != '\0' && inject_fits(a, found, e) != 0)
			goto out;
		if (strcmp(a->for_, "npm") == 0 &&
		    npmrc_add(&npmrc, &nlen, a, found, ph) != 0)
			goto oom;
		if (strcmp(a->for_, "pip") == 0) {
			if (npip == 0 && cat(&pipconf, &plen, "[global]\n") != 0)
				goto oom;
			if (npip == 0 ? pipconf_add(&pipconf, &plen, 1, a, found,
			    ph, e) != 0 : pipconf_add(&extra, &xlen, 0, a, found,
			    ph, e) != 0)
				goto out;
			npip++;
		}
	}
	if (extra != NULL && cat(&pipconf, &plen, "extra-index-url =\n%s",
	    extra) != 0)
		goto oom;
	if (r->session_dir[0] == '\0') {
		rc = npmrc == NULL && pipconf == NULL ? 0 : -1;
		if (rc != 0)
			xd_perr_set(e, 500, "internal", "no session directory "
			    "for the package managers' files");
		goto out;
	}
	snprintf(path, sizeof(path), "%s/" XD_NPMRC_FILE, r->session_dir);
	if (npmrc == NULL)
		(void)unlink(path);
	else if (put_private(r, path, npmrc) != 0 ||
	    json_array_append_new(env, json_string("NPM_CONFIG_USERCONFIG="
	    SBX_SOCK_DIR "/" XD_NPMRC_FILE)) != 0) {
		xd_perr_set(e, 500, "internal", "%s: cannot write", path);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/" XD_PIPCONF_FILE, r->session_dir);
	if (pipconf == NULL)
		(void)unlink(path);
	else if (put_private(r, path, pipconf) != 0 ||
	    json_array_append_new(env, json_string("PIP_CONFIG_FILE="
	    SBX_SOCK_DIR "/" XD_PIPCONF_FILE)) != 0) {
		xd_perr_set(e, 500, "internal", "%s: cannot write", path);
		goto out;
	}
	rc = 0;
	goto out;
oom:
	xd_perr_set(e, 500, "internal", "out of memory");
out:
	free(npmrc);
	free(pipconf);
	free(extra);
	json_decref(o);
	ctlh_resp_free(&resp);
	return rc;
}

int
xd_broker_trust(const struct xd_cfg *c, const char *const *dirs, size_t n,
    struct xd_perr *e)
{
	struct ctlh_resp resp;
	char p[SBX_PATH_MAX + 32], *anchors = NULL;
	size_t alen, i;
	int rc = -1;

	if (call(c, "GET", "/v1/inspect/ca", NULL, &resp, e) != 0)
		return -1;
	if (resp.status == 404) {
		/* inspection is off */
		for (i = 0; i < n; i++) {
			snprintf(p, sizeof(p), "%s/" XD_CA_FILE, dirs[i]);
			(void)unlink(p);
		}
		rc = 0;
		goto out;
	}
	if (resp.status != 200 || resp.body == NULL ||
	    strstr(resp.body, "-----BEGIN CERTIFICATE-----") == NULL) {
		refused(e, &resp, "the inspection CA");
		goto out;
	}
	if ((anchors = host_anchors(&alen)) == NULL) {
		xd_perr_set(e, 500, "internal", "out of memory");
		goto out;
	}
	rc = 0;
	for (i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/" XD_CA_FILE, dirs[i]);
		if (put_file(p, anchors, alen, resp.body,
		    strlen(resp.body)) != 0) {
			xd_perr_set(e, 500, "internal", "%s: cannot write the "
			    "trust bundle", p);
			rc = -1;
		}
	}
out:
	free(anchors);
	ctlh_resp_free(&resp);
	return rc;
}

int
xd_broker_sbx_env(const struct xd_cfg *c, const struct sbx_rec *r,
    const struct xd_cred_ask *creds, int ncreds, struct xd_perr *e)
{
	const char *dir = r->session_dir;
	char p[SBX_PATH_MAX + 32];
	json_t *env;
	int rc = -1;

	if (xd_broker_trust(c, &dir, 1, e) != 0)
		return -1;
	if ((env = json_array()) == NULL) {
		xd_perr_set(e, 500, "internal", "out of memory");
		return -1;
	}
	if (creds_env(c, r, creds, ncreds, env, e) != 0)
		goto out;
	snprintf(p, sizeof(p), "%s/" XD_ENV_FILE, r->dir);
	if (json_array_size(env) == 0)
		(void)unlink(p);
	else if (json_dump_file(env, p, 0) != 0) {
		xd_perr_set(e, 500, "internal", "%s: cannot save", p);
		goto out;
	}
	rc = 0;
out:
	json_decref(env);
	return rc;
}

void
xd_broker_sbx_env_drop(const struct sbx_rec *r)
{
	char p[SBX_PATH_MAX + 32];

	if (r->session_dir[0] == '\0')
		return;
	snprintf(p, sizeof(p), "%s/" XD_CA_FILE, r->session_dir);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/" XD_CA_FILE ".tmp", r->session_dir);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/" XD_NPMRC_FILE, r->session_dir);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/" XD_PIPCONF_FILE, r->session_dir);
	(void)unlink(p);
}
