/*
 * creds.c: credentials (POST/GET/DELETE /v1/credentials; sluiced(8),
 * "Credentials").  A credential's value is write-only: answers, the
 * connection log and the state file never carry it; the answers carry
 * the placeholder a sandbox sends in its place.  The values live in
 * credentials.file apart from the state file, mode 0600, written
 * atomically (a temporary file, fsync, rename, fsync of the directory).
 * The relay finds a credential by its placeholder (ctl_cred_find, its
 * cred_find hook) and puts the value in (proxy/relay/creds.c).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "proxy/daemon.h"
#include "proxy/relay/relay.h"
#include "proxy/control/ctl.h"
#include "proxy/control/control-int.h"
#include "proxy/lib/credspec.h"
#include "proxy/lib/jsonstrict.h"

#define CREDS_MAX 1024
#define CREDS_FILE_MAX (16u << 20)

struct cred {
	struct cred_spec s;
	struct relay_cred rc;            /* views into s, for the relay */
};

static struct cred **creds;
static size_t ncreds;
static char *creds_path;             /* as read at start */

static void
cred_free(struct cred *c)
{
	if (c == NULL)
		return;
	cred_spec_free(&c->s);
	free(c);
}

static struct cred *
cred_wrap(struct cred_spec *s)
{
	struct cred *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->s = *s;
	memset(s, 0, sizeof(*s));
	c->rc.name = c->s.name;
	c->rc.tenant = c->s.tenant;
	c->rc.hosts = c->s.hs;
	c->rc.header = c->s.header;
	c->rc.format = c->s.format;
	c->rc.methods = (const char *const *)c->s.methods;
	c->rc.nmethods = c->s.nmethods;
	c->rc.paths = (const char *const *)c->s.paths;
	c->rc.npaths = c->s.npaths;
	c->rc.value = c->s.value;
	return c;
}

static ssize_t
find_idx(const char *name)
{
	size_t i;

	for (i = 0; i < ncreds; i++)
		if (strcmp(creds[i]->s.name, name) == 0)
			return (ssize_t)i;
	return -1;
}

const struct relay_cred *
ctl_cred_find(const char *name, const char *secret, const char *session)
{
	ssize_t i = find_idx(name);
	char own[CRED_SECRET_LEN + 1];
	int ok;

	if (i < 0 || strlen(secret) != CRED_SECRET_LEN)
		return NULL;
	ok = CRYPTO_memcmp(creds[i]->s.secret, secret, CRED_SECRET_LEN) == 0;
	/* a sandbox's own placeholder: good in its session only */
	if (!ok && session != NULL &&
	    cred_session_secret(creds[i]->s.secret, session, own) == 0)
		ok = CRYPTO_memcmp(own, secret, CRED_SECRET_LEN) == 0;
	OPENSSL_cleanse(own, sizeof(own));
	return ok ? &creds[i]->rc : NULL;
}

void
ctl_creds_free(void)
{
	while (ncreds > 0)
		cred_free(creds[--ncreds]);
	free(creds);
	creds = NULL;
	free(creds_path);
	creds_path = NULL;
}


/* The file with list (the credentials to keep), atomically, 0600. */
static int
save(struct cred *const *list, size_t n, struct ctl_err *e)
{
	json_t *a = json_array(), *j;
	char *text = NULL, *line = NULL;
	size_t i, len = 0;
	int rc = -1;

	for (i = 0; a != NULL && i < n; i++)
		if (json_array_append_new(a, cred_spec_stored_json(
		    &list[i]->s)) != 0) {
			json_decref(a);
			a = NULL;
		}
	j = a ? json_pack("{s:i,s:o}", "version", 1, "credentials", a) : NULL;
	if (j != NULL)
		text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	if (text != NULL && (line = malloc((len = strlen(text)) + 1)) != NULL) {
		memcpy(line, text, len);
		line[len] = '\n';
	}
	if (line == NULL)
		ctl_fail(e, CTL_INTERNAL, "out of memory");
	else if (util_write_atomic(creds_path, line, len + 1, 0600) != 0) {
		ctl_fail(e, CTL_INTERNAL, "cannot save the credentials file "
		    "%s: %s", creds_path, strerror(errno));
		px_log(PX_ERR, "%s: %s", __func__, e ? e->msg : "failed");
	} else
		rc = 0;
	/* the values are in both copies */
	if (text != NULL)
		explicit_bzero(text, strlen(text));
	if (line != NULL)
		explicit_bzero(line, len + 1);
	free(text);
	free(line);
	return rc;
}

int
ctl_creds_load(const char *path, char *err, size_t errlen)
{
	struct stat st;
	json_error_t je;
	json_t *root, *a, *o;
	char *text = NULL;
	size_t i, len = 0;
	int fd;

	ctl_creds_free();
	if ((creds_path = strdup(path)) == NULL)
		return errf(err, errlen, "out of memory");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;     /* none yet */
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (st.st_mode & 077) != 0 || st.st_uid != geteuid() ||
	    st.st_size > (off_t)CREDS_FILE_MAX) {
		close(fd);
		return errf(err, errlen, "%s: must be a regular file of the "
		    "user sluiced runs as, mode 0600, at most %u bytes", path,
		    CREDS_FILE_MAX);
	}
	if ((text = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return errf(err, errlen, "out of memory");
	}
	while (len < (size_t)st.st_size) {
		ssize_t r = read(fd, text + len, (size_t)st.st_size - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	root = jsonstrict_load(text, len, &je);
	explicit_bzero(text, len);
	free(text);
	if (root == NULL)
		return errf(err, errlen, "%s:%d: %s", path, je.line, je.text);
	a = json_object_get(root, "credentials");
	if (!json_is_array(a) || json_array_size(a) > CREDS_MAX) {
		json_decref(root);
		return errf(err, errlen, "%s: expected {\"credentials\": "
		    "[...]} of at most %d", path, CREDS_MAX);
	}
	creds = calloc(json_array_size(a) + 1, sizeof(*creds));
	if (creds == NULL) {
		json_decref(root);
		return errf(err, errlen, "out of memory");
	}
	json_array_foreach(a, i, o) {
		struct cred_spec s;
		char why[256];
		int bad = cred_spec_parse(o, 1, &s, why, sizeof(why)) != 0;

		if (!bad && find_idx(s.name) >= 0) {
			snprintf(why, sizeof(why), "a name twice");
			bad = 1;
		}
		if (bad) {
			cred_spec_free(&s);
			json_decref(root);
			ctl_creds_free();
			return errf(err, errlen, "%s: credentials[%zu]: %s",
			    path, i, why);
		}
		if ((creds[ncreds] = cred_wrap(&s)) == NULL) {
			cred_spec_free(&s);
			json_decref(root);
			return errf(err, errlen, "out of memory");
		}
		ncreds++;
	}
	json_decref(root);
	return 0;
}

static int
record(const struct ctl_actor *a, const char *action,
    const struct cred_spec *s, const char *outcome)
{
	struct clog_rec *r = clog_rec_new("admin");
	char target[POL_ID_MAX + 32];

	snprintf(target, sizeof(target), "credential %s", s->name);
	clog_rec_str(r, "action", action);
	clog_rec_str(r, "who", a ? a->who : "sluiced");
	clog_rec_str(r, "role", a ? a->role : NULL);
	clog_rec_str(r, "target", target);
	clog_rec_str(r, "credential", s->name);
	clog_rec_str(r, "tenant", s->tenant);
	clog_rec_str(r, "outcome", outcome);
	return clog_write(px.log, r);
}

int
ctl_cred_put(const struct ctl_actor *a, void *body, void **out,
    int *created, struct ctl_err *e)
{
	struct cred_spec s;
	struct cred *c, **next;
	char why[256];
	unsigned char rnd[CRED_SECRET_LEN / 2];
	ssize_t at;
	size_t i;

	*out = NULL;
	if (cred_spec_parse(body, 0, &s, why, sizeof(why)) != 0)
		return ctl_fail(e, CTL_BAD_REQUEST, "%s", why);
	if (a != NULL && a->tenant != NULL && strcmp(a->tenant, s.tenant) != 0) {
		ctl_fail(e, CTL_FORBIDDEN, "tenant: this caller is bound to "
		    "tenant %s and manages only its credentials", a->tenant);
		cred_spec_free(&s);
		return -1;
	}
	for (i = 0; i < s.nhosts; i++)
		if (!px_inspect_covers(s.hosts[i])) {
			ctl_fail(e, CTL_BAD_REQUEST, "hosts[%zu]: %.253s is not "
			    "inspected (inspect.hosts): sluiced could never put "
			    "the value in its requests", i, s.hosts[i]);
			cred_spec_free(&s);
			return -1;
		}
	at = find_idx(s.name);
	if (at >= 0 && a != NULL && a->tenant != NULL &&
	    strcmp(creds[at]->s.tenant, a->tenant) != 0) {
		/* names are one namespace: another tenant's is not replaced
		 * by a bound caller (nor told whose it is) */
		ctl_fail(e, CTL_CONFLICT, "the name %s is taken: choose "
		    "another", s.name);
		cred_spec_free(&s);
		return -1;
	}
	*created = at < 0;
	if (at >= 0 && strcmp(creds[at]->s.tenant, s.tenant) == 0)
		/* rotation: the sandboxes keep their placeholder */
		memcpy(s.secret, creds[at]->s.secret, sizeof(s.secret));
	else {
		if (at < 0 && ncreds >= CREDS_MAX) {
			cred_spec_free(&s);
			return ctl_fail(e, CTL_CONFLICT, "at most %d credentials",
			    CREDS_MAX);
		}
		if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
			cred_spec_free(&s);
			return ctl_fail(e, CTL_INTERNAL, "no random bytes");
		}
		for (i = 0; i < sizeof(rnd); i++)
			snprintf(s.secret + 2 * i, 3, "%02x", rnd[i]);
	}
	s.updated = (long long)time(NULL);
	if ((c = cred_wrap(&s)) == NULL) {
		cred_spec_free(&s);
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	}
	next = calloc(ncreds + 2, sizeof(*next));
	if (next == NULL) {
		cred_free(c);
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	}
	if (ncreds > 0)
		memcpy(next, creds, ncreds * sizeof(*next));
	if (at >= 0)
		next[at] = c;
	else
		next[ncreds] = c;
	if (record(a, "credential_set", &c->s, "ok") != 0) {
		free(next);
		cred_free(c);
		return ctl_fail(e, CTL_LOG_UNAVAILABLE, "the connection log "
		    "cannot be written (%s): credential_set was not done",
		    clog_path(px.log));
	}
	if (save(next, at >= 0 ? ncreds : ncreds + 1, e) != 0) {
		(void)record(a, "credential_set", &c->s, "undone");
		free(next);
		cred_free(c);
		return -1;
	}
	if (at >= 0)
		cred_free(creds[at]);
	else
		ncreds++;
	free(creds);
	creds = next;
	*out = cred_spec_json(&c->s);
	return 0;
}

int
ctl_cred_delete(const struct ctl_actor *a, const char *name,
    struct ctl_err *e)
{
	ssize_t at = find_idx(name);
	struct cred **next;

	/* another tenant's is, to a bound caller, none */
	if (at < 0 || (a != NULL && a->tenant != NULL &&
	    strcmp(creds[at]->s.tenant, a->tenant) != 0))
		return ctl_fail(e, CTL_NOT_FOUND, "no credential %s", name);
	if ((next = calloc(ncreds + 1, sizeof(*next))) == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	memcpy(next, creds, (size_t)at * sizeof(*next));
	memcpy(next + at, creds + at + 1, (ncreds - (size_t)at - 1) *
	    sizeof(*next));
	if (record(a, "credential_delete", &creds[at]->s, "ok") != 0) {
		free(next);
		return ctl_fail(e, CTL_LOG_UNAVAILABLE, "the connection log "
		    "cannot be written (%s): credential_delete was not done",
		    clog_path(px.log));
	}
	if (save(next, ncreds - 1, e) != 0) {
		(void)record(a, "credential_delete", &creds[at]->s, "undone");
		free(next);
		return -1;
	}
	cred_free(creds[at]);
	free(creds);
	creds = next;
	ncreds--;
	return 0;
}

void *
ctl_creds_json(const char *tenant)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < ncreds; i++)
		if (tenant == NULL || strcmp(creds[i]->s.tenant, tenant) == 0)
			json_array_append_new(a, cred_spec_json(&creds[i]->s));
	return json_pack("{s:o}", "credentials", a);
}

void *
ctl_cred_json(const char *name, const char *tenant)
{
	ssize_t at = find_idx(name);

	if (at < 0 || (tenant != NULL &&
	    strcmp(creds[at]->s.tenant, tenant) != 0))
		return NULL;
	return cred_spec_json(&creds[at]->s);
}
