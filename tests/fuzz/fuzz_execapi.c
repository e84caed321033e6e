/*
 * fuzz_execapi.c: what a client sends to sluice-execd, parsed by
 * sandbox-glue/executor/execd/exec_parse.c, on arbitrary bytes.  The first
 * byte picks the parser, the rest is its input:
 *   'r'  a request path against every route pattern: a match has its
 *        arguments, decoded, without NUL; a files path then normalises
 *        inside the workspace;
 *   'p'  a files API path: the result never climbs out (no "..", no
 *        leading "/", no "//");
 *   'g'  a Range header against a file size (the first 8 bytes): a
 *        satisfiable range lies inside the file;
 *   'c'  a create body (JSON): an accepted one has a good id, every
 *        limit within the maximum, and credentials with good names, a
 *        "for" of "", npm or pip, an index only with one, and that an
 *        https:// URL without user-pass, space, quote or query (it goes
 *        into npmrc and pip.conf lines);
 *   'x'  a command body: an accepted one has an argv without NUL and a
 *        timeout and cap within the maximum;
 *   't'  a PATCH body;
 *   'i'  an install body: an accepted one has an argv of the manager's
 *        words then packages that begin with no "-" and hold no "/",
 *        ":" or "@" past an npm scope (never an option, path or URL);
 *   'a'  an archive entry (exec_arch.c's check of a restore): a type
 *        byte ('f', 'd', 'l', other), then the name, a newline, a link
 *        target; an accepted one has a name neither absolute nor with a
 *        ".." component, a link a target, and (type 'h', odd length) a
 *        hard link a target inside the workspace likewise;
 *   'T'  the archive routes' checks (exec_tar.c): then 'q' and a
 *        ?path= value: an accepted one normalises inside the workspace
 *        and is not the staging directory's name; else a PUT's body: the
 *        kind told is one of tar, gzip, zstd, and only from bytes that
 *        are one (the magic, a whole header block);
 *   'P'  the daemon's configuration (exec_cfg.c), for its "pools" (a
 *        create's "limits" per pool): an accepted one has at most
 *        XD_POOLS_MAX pools of backend ns or gvisor, a size within
 *        0..1024, limits within the maximum and a workspace mke2fs can
 *        make, no two alike, pool_fills within 1..16;
 *   other: output bytes as JSON text (valid UTF-8 out) and the cut of a
 *        stream at a character boundary.
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sandbox-glue/executor/execd/execd-int.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const patterns[] = {
	"/v1/health", "/v1/sandboxes", "/v1/sandboxes/{id}",
	"/v1/sandboxes/{id}/exec", "/v1/sandboxes/{id}/commands",
	"/v1/sandboxes/{id}/commands/{cid}",
	"/v1/sandboxes/{id}/commands/{cid}/output",
	"/v1/sandboxes/{id}/files", "/v1/sandboxes/{id}/files/{path}",
	"/v1/sandboxes/{id}/archive",
};


static void
check_norm(const char *out)
{
	if (out[0] == '/' || strstr(out, "//") != NULL)
		abort();
	if (strcmp(out, "..") == 0 || strncmp(out, "../", 3) == 0 ||
	    strstr(out, "/../") != NULL || (strlen(out) >= 3 &&
	    strcmp(out + strlen(out) - 3, "/..") == 0))
		abort();
}

/* Whether t (a hard link's target) names something under the top with
 * no ".." component: an independent walk. */
static int
inside(const char *t)
{
	const char *p;
	size_t n;

	while (t[0] == '.' && t[1] == '/')
		t += 2;
	if (t[0] == '/' || t[0] == '\0' || strcmp(t, ".") == 0)
		return 0;
	for (p = t; *p; p += n + (p[n] == '/'))
		if ((n = strcspn(p, "/")) == 2 && p[0] == '.' && p[1] == '.')
			return 0;
	return 1;
}

static void
fuzz_tar(const char *s, size_t n)
{
	char out[SBX_PATH_MAX];
	struct xd_perr e;
	const char *k;

	if (n >= 1 && s[0] == 'q') {
		memset(&e, 0, sizeof(e));
		if (strlen(s) == n && xd_tar_dir_parse(s + 1, out, sizeof(out),
		    &e) == 0) {
			check_norm(out);
			if (strncmp(out, ".sluice-tar.", 12) == 0)
				abort();
		} else if (strlen(s) == n && e.status != 400)
			abort();
		return;
	}
	k = xd_tar_body_kind((const unsigned char *)s, n);
	if (k == NULL)
		return;
	if (strcmp(k, "gzip") == 0 ? n < 2 || (unsigned char)s[0] != 0x1f :
	    strcmp(k, "zstd") == 0 ? n < 4 || (unsigned char)s[0] != 0x28 :
	    strcmp(k, "tar") == 0 ? n < 512 : 1)
		abort();
}

static void
fuzz_arch(const char *s, size_t n)
{
	const char *nl, *clean = NULL, *why, *p;
	char *name;
	size_t len;

	if (n < 1 || strlen(s) != n || (nl = strchr(s + 1, '\n')) == NULL)
		return;
	len = (size_t)(nl - (s + 1));
	if ((name = strndup(s + 1, len)) == NULL)
		return;
	why = xd_arch_refused(name, s[0], nl + 1, (n & 1) && s[0] == 'h',
	    &clean);
	if (why == NULL) {
		if (clean == NULL || clean[0] == '/' || clean[0] == '\0')
			abort();
		for (p = clean; *p; p += strcspn(p, "/") + (p[strcspn(p, "/")]
		    == '/'))
			if (strncmp(p, "..", 2) == 0 && (p[2] == '/' ||
			    p[2] == '\0'))
				abort();
		if ((n & 1) && s[0] == 'h') {
			if (!inside(nl + 1))
				abort();
		} else if (s[0] != 'f' && s[0] != 'd' && s[0] != 'l')
			abort();
		if (s[0] == 'l' && nl[1] == '\0')
			abort();
	}
	free(name);
}

static void
lims_default(struct xd_lims *d, struct xd_lims *m)
{
	struct xd_cfg c;

	xd_cfg_defaults(&c);
	*d = c.def;
	*m = c.max;
}

static void
fuzz_json(char kind, const char *s, size_t n)
{
	json_t *j = json_loadb(s, n, 0, NULL);
	struct xd_lims d, m;
	struct xd_perr e;

	lims_default(&d, &m);
	memset(&e, 0, sizeof(e));
	if (kind == 'c') {
		struct xd_create_spec cs;

		if (xd_create_parse(j, &d, &m, "off", "ns", &cs, &e) == 0) {
			if (!sbx_id_ok(cs.id, SBX_ID_MAX) ||
			    cs.lim.sbx.memory_bytes > m.sbx.memory_bytes ||
			    cs.lim.timeout_s > m.timeout_s ||
			    cs.lim.output_cap > m.output_cap)
				abort();
			for (int i = 0; i < cs.ncreds; i++) {
				const struct xd_cred_ask *a = &cs.creds[i];

				if (!sbx_id_ok(a->name, SBX_ID_MAX) ||
				    (a->for_[0] && strcmp(a->for_, "npm") &&
				    strcmp(a->for_, "pip")) ||
				    (a->index[0] && (!a->for_[0] ||
				    strncmp(a->index, "https://", 8) ||
				    strpbrk(a->index, "@?#\"' \n\r\t;\\"))))
					abort();
			}
			/* a workspace mke2fs can make (issue 24 point 5) */
			if (cs.lim.disk_bytes && (cs.lim.disk_bytes < (8ull <<
			    20) || cs.lim.inodes < 64 || cs.lim.inodes >
			    cs.lim.disk_bytes / XD_WS_INODE_MIN))
				abort();
		} else if (e.status != 400 || e.code == NULL)
			abort();
	} else if (kind == 'x') {
		struct xd_cmd_spec cs;
		size_t i;

		if (xd_cmd_spec_parse(j, &d, m.timeout_s, m.output_cap,
		    n & 1, &cs, &e) == 0) {
			if (cs.argv == NULL || cs.argv[0] == NULL ||
			    cs.timeout_s > m.timeout_s ||
			    cs.output_cap > m.output_cap)
				abort();
			/* "changed" is a boolean: false only from false */
			if (cs.no_changes && !json_is_false(json_object_get(j,
			    "changed")))
				abort();
			for (i = 0; cs.argv[i] != NULL; i++)
				(void)strlen(cs.argv[i]);
			xd_cmd_spec_free(&cs);
		} else if (e.code == NULL)
			abort();
	} else if (kind == 'i') {
		struct xd_cmd_spec cs;
		char mgr[8];
		size_t i, first;

		if (xd_install_parse(j, &d, m.timeout_s, m.output_cap, &cs,
		    mgr, sizeof(mgr), &e) == 0) {
			first = strcmp(mgr, "pip") == 0 ? 9 : 5;
			for (i = 0; cs.argv[i] != NULL; i++) {
				const char *a = cs.argv[i], *at;

				if (i < first)
					continue;
				at = a[0] == '@' ? strchr(a, '/') : a;
				if (a[0] == '-' || a[0] == '\0' || at == NULL ||
				    strchr(at + (a[0] == '@'), '/') != NULL ||
				    strchr(a, ':') != NULL ||
				    (mgr[0] == 'p' && strchr(a, '@') != NULL))
					abort();
			}
			if (i <= first || cs.timeout_s > m.timeout_s)
				abort();
			xd_cmd_spec_free(&cs);
		} else if (e.status != 400 || e.code == NULL)
			abort();
	} else {
		char tier[16];

		if (xd_tier_parse(j, tier, sizeof(tier), &e) == 0 &&
		    !sbx_id_ok(tier, sizeof(tier) - 1))
			abort();
	}
	xd_perr_clear(&e);
	json_decref(j);
}

static void
fuzz_pools(const char *s, size_t n)
{
	static struct xd_cfg c;
	char err[512];
	size_t i, k;

	xd_cfg_defaults(&c);
	if (xd_cfg_parse(&c, s, n, "fuzz.json", err, sizeof(err)) != 0)
		return;
	if (c.npools > XD_POOLS_MAX || c.pool_fills < 1 || c.pool_fills > 16)
		abort();
	for (i = 0; i < c.npools; i++) {
		const struct xd_pool_cfg *p = &c.pools[i];

		if ((strcmp(p->backend, "ns") != 0 && strcmp(p->backend,
		    "gvisor") != 0) || p->profile[0] == '\0' || p->size < 0 ||
		    p->size > 1024 || p->lim.sbx.memory_bytes >
		    c.max.sbx.memory_bytes || p->lim.timeout_s > c.max.timeout_s ||
		    p->lim.disk_bytes > c.max.disk_bytes || (p->lim.disk_bytes &&
		    (p->lim.disk_bytes < (8ull << 20) || p->lim.inodes < 64)))
			abort();
		for (k = 0; k < i; k++)
			if (strcmp(c.pools[k].backend, p->backend) == 0 &&
			    strcmp(c.pools[k].profile, p->profile) == 0 &&
			    xd_lims_eq(&c.pools[k].lim, &p->lim))
				abort();
	}
}

/* The query values both terminal routes read (xd_q_bool, xd_q_u64):
 * exactly 1, true, 0 and false are yes/no; exactly the decimal numbers
 * that fit are offsets, read back to the same digits (leading zeros
 * aside). */
static void
fuzz_query(const char *s, size_t n)
{
	static const char *const yn[] = { "0", "1", "true", "false" };
	char back[32];
	uint64_t v = 7;
	size_t i;
	int b, known = 0;

	/* the value is the string up to its NUL, as the routes see it */
	n = strnlen(s, n);
	for (i = 0; i < 4; i++)
		if (strcmp(s, yn[i]) == 0)
			known = 1;
	if ((xd_q_bool(s, &b) == 0) != known || (known && b != (s[0] == '1' ||
	    s[0] == 't')))
		abort();
	if (xd_q_bool(NULL, &b) != 0 || b != 0 || xd_q_u64(NULL, &v) != 0 ||
	    v != 7)
		abort();
	if (xd_q_u64(s, &v) != 0) {
		if (v != 7)
			abort();
		return;
	}
	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			abort();
	while (n > 1 && *s == '0') {
		s++;
		n--;
	}
	snprintf(back, sizeof(back), "%llu", (unsigned long long)v);
	if (n == 0 || strcmp(back, s) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, out[SBX_PATH_MAX], *args[XD_ARGS_MAX];
	size_t n, i, k;
	char kind;

	if (size == 0)
		return 0;
	kind = (char)data[0];
	n = size - 1;
	if ((s = malloc(n + 1)) == NULL)
		return 0;
	memcpy(s, data + 1, n);
	s[n] = '\0';
	switch (kind) {
	case 'r':
		for (i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
			if (xd_route_match(patterns[i], s, args, XD_ARGS_MAX)
			    != 1)
				continue;
			for (k = 0; k < XD_ARGS_MAX && args[k] != NULL; k++)
				if (args[k][0] == '\0')
					abort();
			if (strstr(patterns[i], "{path}") != NULL &&
			    xd_path_norm(args[1], out, sizeof(out)) == 0)
				check_norm(out);
			xd_args_free(args, XD_ARGS_MAX);
		}
		break;
	case 'p':
		if (strlen(s) == n && xd_path_norm(s, out, sizeof(out)) == 0)
			check_norm(out);
		break;
	case 'g':
		if (n >= 8) {
			uint64_t sz = 0, from, to;

			memcpy(&sz, s, 8);
			sz &= (1ull << 40) - 1;
			if (strlen(s + 8) == n - 8 && xd_range_parse(s + 8, sz,
			    &from, &to) == 1 && (from > to || to >= sz))
				abort();
		}
		break;
	case 'c':
	case 'x':
	case 't':
	case 'i':
		fuzz_json(kind, s, n);
		break;
	case 'a':
		fuzz_arch(s, n);
		break;
	case 'P':
		fuzz_pools(s, n);
		break;
	case 'T':
		fuzz_tar(s, n);
		break;
	case 'q':
		fuzz_query(s, n);
		break;
	default: {
		json_t *j = xd_text_json((const unsigned char *)s, n, kind & 1);
		size_t w = xd_utf8_whole((const unsigned char *)s, n);

		/* jansson refuses invalid UTF-8: NULL would mean we made some */
		if (j == NULL || w > n || n - w > 3)
			abort();
		json_decref(j);
		break;
	}
	}
	free(s);
	return 0;
}
