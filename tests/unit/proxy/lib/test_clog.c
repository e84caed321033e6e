/*
 * test_clog.c: the connection log: chain, rotation, tampering, torn
 * tails, the sanitiser and fail-closed writes.
 */
#define _GNU_SOURCE
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "proxy/lib/clog.h"
#include "proxy/lib/log.h"

#define ZERO64 \
	"0000000000000000000000000000000000000000000000000000000000000000"
#define MAX_LINES 64

struct fx {
	char dir[64];         /* short: paths built from it fit PATH_MAX */
	char log[128];
};

/* ---- helpers ---- */

static int
rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_clog.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->log, sizeof(fx->log), "%s/conn.log", fx->dir);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	nftw(fx->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	return 0;
}

static char *
slurp(const char *path, size_t *lenp)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (lenp)
		*lenp = (size_t)n;
	return buf;
}

static void
spit(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Split a file into its lines (each without "\n"); returns the count. */
static size_t
read_lines(const char *path, char *lines[MAX_LINES])
{
	char *buf = slurp(path, NULL), *p = buf, *nl;
	size_t n = 0;

	while (*p != '\0' && n < MAX_LINES) {
		nl = strchr(p, '\n');
		if (nl == NULL) {
			lines[n++] = strdup(p);
			break;
		}
		lines[n++] = strndup(p, (size_t)(nl - p));
		p = nl + 1;
	}
	free(buf);
	return n;
}

static void
write_lines(const char *path, char *const *lines, size_t n)
{
	FILE *f = fopen(path, "wb");
	size_t i;

	assert_non_null(f);
	for (i = 0; i < n; i++)
		fprintf(f, "%s\n", lines[i]);
	assert_int_equal(fclose(f), 0);
}

static void
free_lines(char **lines, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(lines[i]);
}

static void
write_n(struct clog *l, int n, const char *host)
{
	int i;

	for (i = 0; i < n; i++) {
		struct clog_rec *r = clog_rec_new("decision");

		assert_non_null(r);
		clog_rec_str(r, "session", "s1");
		clog_rec_str(r, "host", host);
		clog_rec_int(r, "port", 443);
		clog_rec_str(r, "decision", "allow");
		assert_int_equal(clog_write(l, r), 0);
	}
}

static void
make_log(const char *path, int n)
{
	char err[256] = "";
	struct clog *l = clog_open(path, err, sizeof(err));

	assert_non_null(l);
	write_n(l, n, "pypi.org");
	clog_close(l);
}

/* The hash a line carries: its last 64 characters before "\"}". */
static void
line_hash(const char *line, char out[65])
{
	size_t len = strlen(line);

	assert_true(len > 66);
	memcpy(out, line + len - 66, 64);
	out[64] = '\0';
}

static void
sha256_hex(const char *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0, i;

	assert_int_equal(EVP_Digest(data, len, md, &mdlen, EVP_sha256(),
	    NULL), 1);
	assert_int_equal(mdlen, 32);
	for (i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

/* Verify path and expect failure at bad with msg somewhere in err. */
static void
expect_bad(const char *path, const char *start_prev, uint64_t bad,
    const char *msg)
{
	char err[256] = "";
	uint64_t bad_line = 0, records = 0;

	assert_int_equal(clog_verify_file(path, start_prev, &records,
	    &bad_line, err, sizeof(err)), -1);
	assert_int_equal(bad_line, bad);
	if (strstr(err, msg) == NULL)
		fail_msg("err \"%s\" lacks \"%s\"", err, msg);
}

static void
expect_good(const char *path, const char *start_prev, uint64_t want)
{
	char err[256] = "";
	uint64_t bad_line = 99, records = 0;

	if (clog_verify_file(path, start_prev, &records, &bad_line, err,
	    sizeof(err)) != 0)
		fail_msg("verify %s: %s", path, err);
	assert_int_equal(records, want);
	assert_int_equal(bad_line, 0);
}

/* ---- chain ---- */

static void
test_write_verify(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES], h[65], body_hash[65];
	const char *addrs[] = { "151.101.0.223", "2a04:4e42::223" };
	struct clog *l;
	struct clog_rec *r;
	json_t *root;
	size_t n, i, len;

	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(clog_healthy(l), 1);
	assert_int_equal(clog_last_seq(l), 0);
	assert_string_equal(clog_path(l), fx->log);

	r = clog_rec_new("decision");
	clog_rec_str(r, "session", "chat-1");
	clog_rec_ustr(r, "host", "pypi.org", 8);
	clog_rec_int(r, "port", 443);
	clog_rec_bool(r, "dialed", 1);
	clog_rec_strv(r, "addrs", addrs, 2);
	clog_rec_str(r, "prompt", NULL);
	clog_rec_json(r, "extra", json_pack("{s:i}", "k", 7));
	clog_rec_str(r, "hash", "forged");  /* reserved: ignored */
	clog_rec_str(r, "prev", "forged");
	assert_int_equal(clog_write(l, r), 0);
	write_n(l, 4, "files.pythonhosted.org");
	assert_int_equal(clog_last_seq(l), 5);
	assert_int_equal(clog_written(l), 5);
	assert_int_equal(clog_failed(l), 0);
	clog_close(l);

	expect_good(fx->log, ZERO64, 5);
	expect_good(fx->log, NULL, 5);

	n = read_lines(fx->log, lines);
	assert_int_equal(n, 5);
	/* Layout: ts, seq, event first; fields in order; prev; hash. */
	assert_int_equal(strncmp(lines[0], "{\"ts\":\"", 7), 0);
	assert_int_equal(strlen("2026-11-30T02:11:56.123Z"), 24);
	assert_int_equal(lines[0][7 + 4], '-');
	assert_int_equal(lines[0][7 + 10], 'T');
	assert_int_equal(lines[0][7 + 19], '.');
	{
		static const char want[] = "Z\",\"seq\":1,\"event\":"
		    "\"decision\",\"session\":\"chat-1\",\"host\":"
		    "\"pypi.org\",\"port\":443,\"dialed\":true,\"addrs\":"
		    "[\"151.101.0.223\",\"2a04:4e42::223\"],\"prompt\":null,"
		    "\"extra\":{\"k\":7},\"prev\":\"" ZERO64 "\",\"hash\":\"";

		assert_int_equal(strncmp(lines[0] + 7 + 23, want,
		    sizeof(want) - 1), 0);
		assert_int_equal(strlen(lines[0]),
		    7 + 23 + sizeof(want) - 1 + 64 + 2);
	}
	assert_non_null(strstr(lines[0], "\"extra\":{\"k\":7},\"prev\":\""
	    ZERO64 "\",\"hash\":\""));
	assert_non_null(strstr(lines[0], "\"prompt\":null,\"extra\""));
	assert_null(strstr(lines[0], "forged"));
	for (i = 0; i < n; i++) {
		len = strlen(lines[i]);
		line_hash(lines[i], h);
		/* body = everything before ,"hash":"...."} */
		sha256_hex(lines[i], len - 75, body_hash);
		assert_string_equal(h, body_hash);
		root = json_loads(lines[i], 0, NULL);
		assert_non_null(root);
		assert_int_equal(json_integer_value(json_object_get(root,
		    "seq")), (json_int_t)i + 1);
		json_decref(root);
	}
	line_hash(lines[0], h);
	assert_non_null(strstr(lines[1], h));
	free_lines(lines, n);
}

static void
test_continue_after_open(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES], h[65];
	struct clog *l;
	size_t n;

	make_log(fx->log, 3);
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(clog_last_seq(l), 3);
	write_n(l, 2, "crates.io");
	assert_int_equal(clog_last_seq(l), 5);
	clog_close(l);
	expect_good(fx->log, ZERO64, 5);

	n = read_lines(fx->log, lines);
	assert_int_equal(n, 5);
	line_hash(lines[2], h);
	assert_non_null(strstr(lines[3], "\"seq\":4,"));
	assert_non_null(strstr(lines[3], h));
	free_lines(lines, n);
}

static void
test_rotate(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", old[PATH_MAX], *lines[MAX_LINES], h[65];
	struct clog *l;
	size_t n;

	snprintf(old, sizeof(old), "%s.1", fx->log);
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	write_n(l, 3, "a.example");
	assert_int_equal(rename(fx->log, old), 0);
	write_n(l, 1, "b.example");  /* still the rotated file */
	assert_int_equal(clog_reopen(l), 0);
	write_n(l, 2, "c.example");
	assert_int_equal(clog_last_seq(l), 6);
	clog_close(l);

	expect_good(old, ZERO64, 4);
	n = read_lines(old, lines);
	assert_int_equal(n, 4);
	line_hash(lines[3], h);
	free_lines(lines, n);

	expect_good(fx->log, h, 2);
	expect_good(fx->log, NULL, 2);
	expect_bad(fx->log, ZERO64, 1, "line 1: prev does not match");
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 2);
	assert_non_null(strstr(lines[0], "\"seq\":5,"));
	free_lines(lines, n);
}

static void
test_remove_line(void **state)
{
	struct fx *fx = *state;
	char *lines[MAX_LINES];
	size_t n;

	make_log(fx->log, 10);
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 10);
	free(lines[6]);
	memmove(&lines[6], &lines[7], 3 * sizeof(lines[0]));
	write_lines(fx->log, lines, 9);
	expect_bad(fx->log, NULL, 7, "line 7: seq 8 follows 6 (record removed?)");
	free_lines(lines, 9);

	/* The first line removed: caught only with the expected start. */
	unlink(fx->log);
	make_log(fx->log, 3);
	n = read_lines(fx->log, lines);
	write_lines(fx->log, lines + 1, 2);
	expect_good(fx->log, NULL, 2);
	expect_bad(fx->log, ZERO64, 1, "prev does not match");
	free_lines(lines, n);
}

static void
test_edit_field(void **state)
{
	struct fx *fx = *state;
	char *lines[MAX_LINES], *p, body_hash[65];
	size_t n, len;

	make_log(fx->log, 6);
	n = read_lines(fx->log, lines);
	p = strstr(lines[3], "pypi.org");
	assert_non_null(p);
	p[0] = 'P';
	write_lines(fx->log, lines, n);
	expect_bad(fx->log, NULL, 4,
	    "line 4: hash does not match its record (edited?)");

	/* An editor who also fixes the hash breaks the next link. */
	len = strlen(lines[3]);
	sha256_hex(lines[3], len - 75, body_hash);
	memcpy(lines[3] + len - 66, body_hash, 64);
	write_lines(fx->log, lines, n);
	expect_bad(fx->log, NULL, 5,
	    "line 5: prev does not match the hash of line 4");

	/* Touching the hash itself is an edit too. */
	free_lines(lines, n);
	unlink(fx->log);
	make_log(fx->log, 3);
	n = read_lines(fx->log, lines);
	len = strlen(lines[1]);
	lines[1][len - 3] = lines[1][len - 3] == '0' ? '1' : '0';
	write_lines(fx->log, lines, n);
	expect_bad(fx->log, NULL, 2, "hash does not match");
	free_lines(lines, n);
}

static void
test_reorder(void **state)
{
	struct fx *fx = *state;
	char *lines[MAX_LINES], *t;
	size_t n;

	make_log(fx->log, 5);
	n = read_lines(fx->log, lines);
	t = lines[2];
	lines[2] = lines[3];
	lines[3] = t;
	write_lines(fx->log, lines, n);
	expect_bad(fx->log, NULL, 3, "line 3: seq 4 follows 2");
	free_lines(lines, n);

	/* Duplicated line. */
	unlink(fx->log);
	make_log(fx->log, 3);
	n = read_lines(fx->log, lines);
	lines[n] = strdup(lines[n - 1]);
	write_lines(fx->log, lines, n + 1);
	expect_bad(fx->log, NULL, 4, "seq 3 follows 3");
	free_lines(lines, n + 1);
}

/* Verify path: good, with want records and nfrag torn fragments. */
static void
expect_torn(const char *path, uint64_t want, uint64_t nfrag)
{
	struct clog_verify_opts o;
	struct clog_verify_result res;
	char err[256] = "";

	memset(&o, 0, sizeof(o));
	o.start_prev = ZERO64;
	if (clog_verify(path, &o, &res, err, sizeof(err)) != 0)
		fail_msg("verify %s: %s", path, err);
	assert_int_equal(res.records, want);
	assert_int_equal(res.fragments, nfrag);
	assert_int_equal(res.bad_line, 0);
}

static void
test_torn_tail(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES], h[65], *buf;
	struct clog *l;
	size_t n, len;
	FILE *f;

	make_log(fx->log, 3);
	f = fopen(fx->log, "ab");
	assert_non_null(f);
	fputs("{\"ts\":\"2026-11-30T02:1", f);
	fclose(f);
	/* a crash mid-write: reported, skipped, the chain is whole */
	expect_torn(fx->log, 3, 1);

	l = clog_open(fx->log, err, sizeof(err));
	if (l == NULL)
		fail_msg("open: %s", err);
	assert_int_equal(clog_last_seq(l), 3);
	write_n(l, 2, "after.example");
	clog_close(l);

	buf = slurp(fx->log, &len);
	assert_int_equal(buf[len - 1], '\n');
	free(buf);
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 6);
	assert_string_equal(lines[3], "{\"ts\":\"2026-11-30T02:1");
	assert_non_null(strstr(lines[4], "\"seq\":4,"));
	line_hash(lines[2], h);
	assert_non_null(strstr(lines[4], h));
	/* The torn line is reported and skipped: line 5 continues the
	 * chain of line 3. */
	expect_torn(fx->log, 5, 1);
	expect_good(fx->log, ZERO64, 5);

	/* A fragment where a record was is no torn write: the next record
	 * does not continue the chain, and the fragment is the failure. */
	lines[2][20] = '\0';
	write_lines(fx->log, lines, n);
	expect_bad(fx->log, NULL, 3, "line 3: not a record");
	free_lines(lines, n);

	/* Nor is a fragment no record follows. */
	unlink(fx->log);
	make_log(fx->log, 2);
	f = fopen(fx->log, "ab");
	assert_non_null(f);
	fputs("{\"ts\":\"2026\n", f);
	fclose(f);
	expect_bad(fx->log, NULL, 3, "line 3: not a record");
	/* nor a line that does not even start like a record */
	unlink(fx->log);
	make_log(fx->log, 3);
	n = read_lines(fx->log, lines);
	memmove(&lines[2], &lines[1], 2 * sizeof(lines[0]));
	lines[1] = strdup("junk");
	write_lines(fx->log, lines, 4);
	expect_bad(fx->log, NULL, 2, "line 2: not a record");
	free_lines(lines, 4);
}

static void
test_torn_only_and_garbage(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES];
	struct clog *l;
	size_t n;

	/* A crash during the very first record: the chain starts anew. */
	spit(fx->log, "{\"ts\":\"20", 9);
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(clog_last_seq(l), 0);
	write_n(l, 1, "x.example");
	clog_close(l);
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 2);
	assert_string_equal(lines[0], "{\"ts\":\"20");
	assert_non_null(strstr(lines[1], "\"seq\":1,"));
	assert_non_null(strstr(lines[1], ZERO64));
	free_lines(lines, n);

	/* A complete last line that is not a record refuses the open. */
	spit(fx->log, "hello\n", 6);
	err[0] = '\0';
	assert_null(clog_open(fx->log, err, sizeof(err)));
	assert_non_null(strstr(err, "last record"));

	/* An edited last record too. */
	unlink(fx->log);
	unlink(fx->log);
	make_log(fx->log, 2);
	n = read_lines(fx->log, lines);
	*strstr(lines[1], "pypi") = 'P';
	write_lines(fx->log, lines, n);
	free_lines(lines, n);
	assert_null(clog_open(fx->log, err, sizeof(err)));
	assert_non_null(strstr(err, "hash does not match"));

	/* Empty file: fresh chain. */
	spit(fx->log, "", 0);
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(clog_last_seq(l), 0);
	clog_close(l);
	expect_good(fx->log, ZERO64, 0);
}

static void
test_verify_long_line(void **state)
{
	struct fx *fx = *state;
	static const char rec[] = "{\"ts\":\"x\",\"seq\":1,\"event\":"
	    "\"e\",\"prev\":\"" ZERO64 "\"}\n";
	size_t len = 2 * 1024 * 1024;
	char *big = malloc(len + 1);

	assert_non_null(big);
	memset(big, 'a', len);
	big[len] = '\n';
	spit(fx->log, big, len + 1);
	free(big);
	expect_bad(fx->log, NULL, 1, "line 1: longer than");

	spit(fx->log, "\n", 1);
	expect_bad(fx->log, NULL, 1, "line 1: not a record");
	spit(fx->log, rec, sizeof(rec) - 1);
	expect_bad(fx->log, NULL, 1, "does not end with its hash");
}

static void
test_mkdir_and_mode(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", path[PATH_MAX], dir[128];
	struct clog *l;
	struct stat st;
	mode_t old = umask(022);

	snprintf(dir, sizeof(dir), "%s/var/log", fx->dir);
	snprintf(path, sizeof(path), "%s/sluice.jsonl", dir);
	l = clog_open(path, err, sizeof(err));
	umask(old);
	if (l == NULL)
		fail_msg("open: %s", err);
	write_n(l, 1, "x.example");
	clog_close(l);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	expect_good(path, ZERO64, 1);

	/* A file where a directory should be. */
	snprintf(path, sizeof(path), "%s/conn.log/x", fx->dir);
	make_log(fx->log, 1);
	assert_null(clog_open(path, err, sizeof(err)));
}

/* ---- fail closed ---- */

static void
test_write_failure(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", link[PATH_MAX];
	struct clog *l;
	struct clog_rec *r;

	if (access("/dev/full", W_OK) != 0)
		skip();
	l = clog_open("/dev/full", err, sizeof(err));
	if (l == NULL)
		fail_msg("open /dev/full: %s", err);
	r = clog_rec_new("decision");
	clog_rec_str(r, "host", "pypi.org");
	assert_int_equal(clog_write(l, r), -1);
	assert_int_equal(clog_healthy(l), 0);
	assert_int_equal(clog_failed(l), 1);
	assert_int_equal(clog_last_seq(l), 0);
	clog_close(l);

	/* Through a symlink, then recovery after the link is fixed. */
	snprintf(link, sizeof(link), "%s/link.log", fx->dir);
	assert_int_equal(symlink("/dev/full", link), 0);
	l = clog_open(link, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(clog_healthy(l), 1);
	assert_int_equal(clog_write(l, clog_rec_new("decision")), -1);
	assert_int_equal(clog_write(l, clog_rec_new("decision")), -1);
	assert_int_equal(clog_healthy(l), 0);
	assert_int_equal(clog_failed(l), 2);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink(fx->log, link), 0);
	assert_int_equal(clog_reopen(l), 0);
	assert_int_equal(clog_write(l, clog_rec_new("decision")), 0);
	assert_int_equal(clog_healthy(l), 1);
	assert_int_equal(clog_written(l), 1);
	assert_int_equal(clog_last_seq(l), 1);
	clog_close(l);
	expect_good(fx->log, ZERO64, 1);

	/* A record too big for one verifiable line is refused whole. */
	{
		size_t i, nbig = 5000;   /* about 1.4 MiB */
		json_t *a = json_array();

		for (i = 0; i < nbig; i++)
			json_array_append_new(a, json_string(
			    "0123456789abcdef0123456789abcdef0123456789abcdef"
			    "0123456789abcdef0123456789abcdef0123456789abcdef"
			    "0123456789abcdef0123456789abcdef0123456789abcdef"
			    "0123456789abcdef0123456789abcdef0123456789abcdef"
			    "0123456789abcdef0123456789abcdef0123456789abcdef"
			    "0123456789abcdef0123456789abcdef0123456789abcdef"));
		l = clog_open(fx->log, err, sizeof(err));
		assert_non_null(l);
		r = clog_rec_new("admin");
		clog_rec_json(r, "dump", a);
		assert_int_equal(clog_write(l, r), -1);
		assert_int_equal(clog_healthy(l), 0);
		assert_int_equal(clog_last_seq(l), 1);
		clog_close(l);
		expect_good(fx->log, ZERO64, 1);
	}

	/* No record (allocation failed upstream) still fails closed. */
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(clog_write(l, NULL), -1);
	assert_int_equal(clog_healthy(l), 0);
	clog_close(l);
}

/* Queued records: nothing in the file until a write or a flush takes
 * them along, in order, in one chain; a failed write counts none of
 * them; close and reopen write what is queued. */
static void
queue_close(struct clog *l, int conn)
{
	struct clog_rec *r = clog_rec_new("close");

	assert_non_null(r);
	clog_rec_int(r, "conn", conn);
	assert_int_equal(clog_queue(l, r), 0);
}

static void
test_queue(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", link[PATH_MAX], *lines[MAX_LINES];
	struct clog *l;
	struct stat st;
	size_t n;

	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	queue_close(l, 1);
	queue_close(l, 2);
	queue_close(l, 3);
	assert_int_equal(stat(fx->log, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(clog_last_seq(l), 0);
	write_n(l, 1, "pypi.org");          /* takes the three along */
	assert_int_equal(clog_last_seq(l), 4);
	assert_int_equal(clog_written(l), 4);
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 4);
	assert_non_null(strstr(lines[0], "\"seq\":1,\"event\":\"close\",\"conn\":1"));
	assert_non_null(strstr(lines[2], "\"seq\":3,\"event\":\"close\",\"conn\":3"));
	assert_non_null(strstr(lines[3], "\"seq\":4,\"event\":\"decision\""));
	free_lines(lines, n);
	expect_good(fx->log, ZERO64, 4);

	queue_close(l, 4);
	assert_int_equal(clog_flush(l), 0);
	assert_int_equal(clog_flush(l), 0);          /* nothing: no-op */
	queue_close(l, 5);
	assert_int_equal(clog_reopen(l), 0);         /* rotation writes it */
	queue_close(l, 6);
	clog_close(l);                               /* and so does close */
	expect_good(fx->log, ZERO64, 7);

	/* a write that fails takes the queue with it: no seq is spent */
	snprintf(link, sizeof(link), "%s/q.log", fx->dir);
	if (access("/dev/full", W_OK) != 0)
		return;
	assert_int_equal(symlink("/dev/full", link), 0);
	l = clog_open(link, err, sizeof(err));
	assert_non_null(l);
	queue_close(l, 1);
	queue_close(l, 2);
	assert_int_equal(clog_write(l, clog_rec_new("decision")), -1);
	assert_int_equal(clog_failed(l), 3);
	assert_int_equal(clog_written(l), 0);
	assert_int_equal(clog_last_seq(l), 0);
	assert_int_equal(clog_healthy(l), 0);
	queue_close(l, 3);
	assert_int_equal(clog_flush(l), -1);
	assert_int_equal(clog_failed(l), 4);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(unlink(fx->log), 0);
	assert_int_equal(symlink(fx->log, link), 0);
	assert_int_equal(clog_reopen(l), 0);
	queue_close(l, 4);
	assert_int_equal(clog_write(l, clog_rec_new("decision")), 0);
	assert_int_equal(clog_last_seq(l), 2);
	assert_int_equal(clog_healthy(l), 1);
	clog_close(l);
	expect_good(fx->log, ZERO64, 2);
}

/* Integers as JSON numbers at both ends of int64; a key set twice keeps
 * its first value; a nested value that holds ,"key": text does not make
 * a later key of that name a duplicate. */
static void
test_fields(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES];
	struct clog *l;
	struct clog_rec *r;
	json_t *root;
	json_error_t je;
	size_t n;

	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	r = clog_rec_new("admin");
	clog_rec_int(r, "zero", 0);
	clog_rec_int(r, "neg", -1);
	clog_rec_int(r, "min", INT64_MIN);
	clog_rec_int(r, "max", INT64_MAX);
	clog_rec_int(r, "neg", 5);                  /* dropped: set twice */
	clog_rec_json(r, "before", json_pack("{s:i,s:s}", "x", 1, "host",
	    "a"));
	clog_rec_str(r, "host", "b");               /* not a duplicate */
	assert_int_equal(clog_write(l, r), 0);
	clog_close(l);
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 1);
	root = json_loads(lines[0], 0, &je);
	assert_non_null(root);
	assert_int_equal(json_integer_value(json_object_get(root, "zero")), 0);
	assert_int_equal(json_integer_value(json_object_get(root, "neg")), -1);
	assert_true(json_integer_value(json_object_get(root, "min")) ==
	    INT64_MIN);
	assert_true(json_integer_value(json_object_get(root, "max")) ==
	    INT64_MAX);
	assert_non_null(json_object_get(root, "host"));
	assert_string_equal(json_string_value(json_object_get(root, "host")),
	    "b");
	json_decref(root);
	free_lines(lines, n);
	expect_good(fx->log, ZERO64, 1);
}

/*
 * A short write (the disk full; here a file size limit just past the end
 * of the log) leaves no torn fragment: the file is cut back to its last
 * record, the record does not count, and the next one continues the
 * chain from the record before.
 */
static void
test_short_write_cut_back(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *before, *after;
	size_t blen, alen;
	struct rlimit old, lim;
	struct clog *l;
	struct clog_rec *r;
	void (*old_xfsz)(int);
	int rc, healthy;

	make_log(fx->log, 3);
	before = slurp(fx->log, &blen);
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	r = clog_rec_new("admin");
	clog_rec_str(r, "action", "grant_add");
	clog_rec_str(r, "detail", "a record longer than the fifty bytes "
	    "the limit leaves room for, so that write(2) is cut short");

	/* nothing may print while the limit holds: the test's own output
	 * is a file too */
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)blen + 50;
	old_xfsz = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	rc = clog_write(l, r);
	healthy = clog_healthy(l);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, old_xfsz);

	assert_int_equal(rc, -1);
	assert_int_equal(healthy, 0);
	assert_int_equal(clog_last_seq(l), 3);
	after = slurp(fx->log, &alen);
	assert_int_equal(alen, blen);
	assert_memory_equal(after, before, blen);
	free(after);
	expect_torn(fx->log, 3, 0);

	/* room again: the next record is seq 4 on the record before */
	write_n(l, 1, "again.example");
	assert_int_equal(clog_last_seq(l), 4);
	assert_int_equal(clog_healthy(l), 1);
	clog_close(l);
	expect_torn(fx->log, 4, 0);
	free(before);
}

/* ---- keyed and anchored chains ---- */

static const char test_key[] = "0123456789abcdef0123456789abcdef";
static int sign_calls, sign_refuse;

static int
sign_test(void *arg, uint64_t seq, const char *prev, const char *hash,
    char mac[65])
{
	(void)arg;
	(void)seq;
	(void)prev;
	sign_calls++;
	if (sign_refuse)
		return -1;
	return clog_mac(test_key, sizeof(test_key) - 1, hash, mac);
}

static int
verify_with(const char *path, const char *key, const struct clog_anchor *a,
    size_t na, struct clog_verify_result *res, char *err, size_t errlen)
{
	struct clog_verify_opts o;

	memset(&o, 0, sizeof(o));
	o.key = key;
	o.keylen = key ? strlen(key) : 0;
	o.anchors = a;
	o.nanchors = na;
	return clog_verify(path, &o, res, err, errlen);
}

static void
expect_verify(const char *path, const char *key, const struct clog_anchor *a,
    size_t na, const char *msg)
{
	struct clog_verify_result res;
	char err[256] = "";
	int rc = verify_with(path, key, a, na, &res, err, sizeof(err));

	if (msg == NULL && rc != 0)
		fail_msg("verify %s: %s", path, err);
	if (msg != NULL && (rc == 0 || strstr(err, msg) == NULL))
		fail_msg("verify %s: rc %d err \"%s\", want \"%s\"", path, rc,
		    err, msg);
}

/* Renumber and rechain lines (no mac) from seq first, as someone without
 * the key who removed a record would. */
static void
rechain(char **lines, size_t n, uint64_t first, const char *prev0)
{
	char prev[65], h[65], *nl, seqs[32];
	size_t i, len;

	snprintf(prev, sizeof(prev), "%s", prev0);
	for (i = 0; i < n; i++) {
		char *p = strstr(lines[i], "\"seq\":"), *q;

		assert_non_null(p);
		q = strchr(p, ',');
		snprintf(seqs, sizeof(seqs), "\"seq\":%llu",
		    (unsigned long long)(first + i));
		len = strlen(lines[i]) - (size_t)(q - p) + strlen(seqs);
		nl = malloc(len + 1);
		assert_non_null(nl);
		snprintf(nl, len + 1, "%.*s%s%s", (int)(p - lines[i]),
		    lines[i], seqs, q);
		free(lines[i]);
		lines[i] = nl;
		len = strlen(nl);
		/* body ends ,"prev":"<64>" ; then ,"hash":"<64>"} */
		memcpy(nl + len - 75 - 65, prev, 64);
		sha256_hex(nl, len - 75, h);
		memcpy(nl + len - 66, h, 64);
		memcpy(prev, h, 65);
	}
}

static void
test_signed_chain(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES], mac[65], h[65], side[PATH_MAX];
	struct clog_verify_result res;
	struct clog *l;
	size_t n;

	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	clog_set_signer(l, sign_test, NULL);
	sign_calls = sign_refuse = 0;
	write_n(l, 4, "pypi.org");
	assert_int_equal(sign_calls, 4);
	/* a signer that says no: no record, fail closed */
	sign_refuse = 1;
	assert_int_equal(clog_write(l, clog_rec_new("decision")), -1);
	assert_int_equal(clog_last_seq(l), 4);
	sign_refuse = 0;
	write_n(l, 1, "pypi.org");
	clog_close(l);

	/* the mac after the hash; a reader without the key still verifies */
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 5);
	assert_non_null(strstr(lines[0], "\",\"mac\":\""));
	assert_int_equal(strncmp(lines[0] + strlen(lines[0]) - 148,
	    ",\"hash\":\"", 9), 0);
	memcpy(h, strstr(lines[2], ",\"hash\":\"") + 9, 64);
	h[64] = '\0';
	assert_int_equal(clog_mac(test_key, sizeof(test_key) - 1, h, mac), 0);
	assert_non_null(strstr(lines[2], mac));
	assert_int_equal(verify_with(fx->log, test_key, NULL, 0, &res, err,
	    sizeof(err)), 0);
	assert_int_equal(res.records, 5);
	assert_int_equal(res.macs, 5);
	memcpy(h, strstr(lines[4], ",\"hash\":\"") + 9, 64);
	assert_string_equal(res.last_hash, h);
	expect_good(fx->log, ZERO64, 5);
	expect_verify(fx->log, "another key, not the one", NULL, 0,
	    "line 1: mac does not match");

	/* opening continues from the signed tail */
	l = clog_open(fx->log, err, sizeof(err));
	if (l == NULL)
		fail_msg("open a signed log: %s", err);
	assert_int_equal(clog_last_seq(l), 5);
	assert_string_equal(clog_last_hash(l), res.last_hash);
	clog_close(l);

	/* a record removed and the rest rechained: the plain chain holds,
	 * the macs do not */
	snprintf(side, sizeof(side), "%s/rechained.log", fx->dir);
	free(lines[2]);
	memmove(&lines[2], &lines[3], 2 * sizeof(lines[0]));
	n = 4;
	{
		size_t i;

		/* without the key the macs can only be dropped */
		for (i = 0; i < n; i++) {
			char *m = strstr(lines[i], "\",\"mac\":\"");

			memmove(m, m + 73, strlen(m + 73) + 1);
		}
	}
	rechain(lines, n, 1, ZERO64);
	write_lines(side, lines, n);
	expect_good(side, ZERO64, 4);
	expect_verify(side, test_key, NULL, 0, "line 1: no mac");
	free_lines(lines, n);
}

static void
test_anchors(void **state)
{
	struct fx *fx = *state;
	char *lines[MAX_LINES], side[PATH_MAX];
	struct clog_anchor a[2];
	struct clog_verify_result res;
	char err[256];
	size_t n;

	{
		char err2[256] = "", host[32];
		struct clog *l = clog_open(fx->log, err2, sizeof(err2));
		int i;

		/* records that differ, so a removal shows after a rechain */
		assert_non_null(l);
		for (i = 1; i <= 10; i++) {
			snprintf(host, sizeof(host), "h%d.example", i);
			write_n(l, 1, host);
		}
		clog_close(l);
	}
	n = read_lines(fx->log, lines);
	assert_int_equal(n, 10);
	a[0].seq = 5;
	line_hash(lines[4], a[0].hash);
	a[1].seq = 9;
	line_hash(lines[8], a[1].hash);
	assert_int_equal(verify_with(fx->log, NULL, a, 2, &res, err,
	    sizeof(err)), 0);
	assert_int_equal(res.anchors, 2);
	assert_int_equal(res.first_seq, 1);
	assert_int_equal(res.last_seq, 10);

	/* another hash at the anchor's seq */
	a[0].hash[0] = a[0].hash[0] == '0' ? '1' : '0';
	expect_verify(fx->log, NULL, a, 1, "line 5: seq 5 does not have the "
	    "anchor's hash");
	line_hash(lines[4], a[0].hash);

	snprintf(side, sizeof(side), "%s/cut.log", fx->dir);
	/* the head cut: it still verifies alone, not with an anchor in it */
	write_lines(side, lines + 3, 7);
	expect_verify(side, NULL, NULL, 0, NULL);
	a[0].seq = 2;
	line_hash(lines[1], a[0].hash);
	expect_verify(side, NULL, a, 1, "anchor seq 2: the file begins at "
	    "seq 4");
	/* the tail cut */
	write_lines(side, lines, 7);
	expect_verify(side, NULL, NULL, 0, NULL);
	expect_verify(side, NULL, a + 1, 1, "anchor seq 9: the file ends at "
	    "seq 7");
	/* a record removed and the rest rechained: only the anchor sees it */
	free(lines[5]);
	memmove(&lines[5], &lines[6], 4 * sizeof(lines[0]));
	{
		char prev[65];

		line_hash(lines[4], prev);
		rechain(lines + 5, 4, 6, prev);
	}
	write_lines(side, lines, 9);
	expect_verify(side, NULL, NULL, 0, NULL);
	expect_verify(side, NULL, a + 1, 1, "seq 9 does not have the anchor's "
	    "hash");
	free_lines(lines, 9);
}

static int space_calls, space_low;

static void
space_seen(const char *path, int low, uint64_t free_bytes, uint64_t min_free)
{
	(void)path;
	(void)free_bytes;
	(void)min_free;
	space_calls++;
	space_low = low;
}

/* Below the minimum free space: told once, and once when it is over. */
static void
test_low_space(void **state)
{
	struct fx *fx = *state;
	char err[256] = "";
	struct clog *l = clog_open(fx->log, err, sizeof(err));

	assert_non_null(l);
	space_calls = 0;
	clog_set_min_free(l, UINT64_C(1) << 60, space_seen);
	assert_int_equal(space_calls, 1);
	assert_int_equal(space_low, 1);
	assert_int_equal(clog_low_space(l), 1);
	assert_true(clog_free_bytes(l) < UINT64_C(1) << 60);
	write_n(l, 3, "x.example");
	assert_int_equal(space_calls, 1);
	clog_set_min_free(l, 0, space_seen);
	assert_int_equal(space_calls, 2);
	assert_int_equal(space_low, 0);
	assert_int_equal(clog_low_space(l), 0);
	clog_close(l);
}

/* With a signer nothing is queued: a queued record is signed and written
 * at once (a queue the signer signed whose write failed could not be
 * signed again). */
static void
test_signed_queue(void **state)
{
	struct fx *fx = *state;
	char err[256] = "";
	struct clog *l;
	struct stat st;

	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	clog_set_signer(l, sign_test, NULL);
	sign_calls = sign_refuse = 0;
	queue_close(l, 1);
	assert_int_equal(clog_last_seq(l), 1);
	assert_int_equal(stat(fx->log, &st), 0);
	assert_true(st.st_size > 0);
	queue_close(l, 2);
	assert_int_equal(clog_last_seq(l), 2);
	assert_int_equal(clog_flush(l), 0);
	assert_int_equal(sign_calls, 2);
	sign_refuse = 1;
	assert_int_equal(clog_queue(l, clog_rec_new("close")), -1);
	sign_refuse = 0;
	queue_close(l, 3);
	clog_close(l);
	expect_good(fx->log, ZERO64, 3);
	expect_verify(fx->log, test_key, NULL, 0, NULL);
}

static void
test_stdout(void **state)
{
	struct fx *fx = *state;
	char err[256] = "";
	struct clog *l;
	int saved, fd;

	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	assert_true(saved >= 0);
	fd = open(fx->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
	close(fd);
	l = clog_open("-", err, sizeof(err));
	assert_non_null(l);
	write_n(l, 2, "x.example");
	assert_int_equal(clog_reopen(l), 0);
	write_n(l, 1, "y.example");
	clog_close(l);
	assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
	close(saved);
	/* stdout is still usable after clog_close. */
	assert_true(write(STDOUT_FILENO, "", 0) == 0);
	expect_good(fx->log, ZERO64, 3);
}

/* ---- sanitiser ---- */

struct vec {
	const char *in;
	size_t len;
	const char *want;
};

#define V(s, w) { s, sizeof(s) - 1, w }

static const struct vec vectors[] = {
	V("pypi.org", "pypi.org"),
	V("", ""),
	/* C0, DEL, C1 */
	V("a\x01" "b", "a?b"),
	V("a\tb\r\nc", "a?b??c"),
	V("\x1b[31mred", "?[31mred"),
	V("x\x7fy", "x?y"),
	V("\xc2\x80\xc2\x85\xc2\x9f", "???"),
	V("\xc2\xa0", "\xc2\xa0"),              /* NBSP stays */
	/* NUL */
	V("a\0b\0", "a?b?"),
	/* line and paragraph separators */
	V("a\xe2\x80\xa8" "b\xe2\x80\xa9", "a?b?"),
	V("\xe2\x80\xa7", "\xe2\x80\xa7"),      /* U+2027 stays */
	/* bidi controls */
	V("\xd8\x9c", "?"),                     /* U+061C */
	V("\xe2\x80\x8e\xe2\x80\x8f", "??"),    /* LRM RLM */
	V("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
	    "?????"),                           /* U+202A..202E */
	V("\xe2\x80\xaf", "\xe2\x80\xaf"),      /* U+202F stays */
	V("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "????"),
	V("\xe2\x81\xa5\xe2\x81\xaa", "\xe2\x81\xa5\xe2\x81\xaa"),
	V("evil\xe2\x80\xaegnp.exe", "evil?gnp.exe"),
	/* zero width */
	V("\xe2\x80\x8b\xe2\x80\x8c\xe2\x80\x8d", "???"),
	V("p\xe2\x81\xa0y", "p?y"),             /* U+2060 */
	V("\xef\xbb\xbfhi", "?hi"),             /* U+FEFF */
	V("\xf3\xa0\x81\x81", "?"),             /* tag LATIN A */
	/* valid multibyte stays */
	V("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
	V("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"),  /* U+10FFFF */
	/* invalid UTF-8: one '?' per maximal ill-formed subpart */
	V("\xff", "?"),
	V("\x80", "?"),
	V("a\xbf\xbf" "b", "a??b"),
	V("\xfe\xf5\xf8", "???"),
	V("\xc0\xaf", "??"),                    /* overlong '/' */
	V("\xc1\xbf", "??"),
	V("\xe0\x80\xaf", "???"),               /* overlong, 3 bytes */
	V("\xf0\x80\x80\xaf", "????"),          /* overlong, 4 bytes */
	V("\xed\xa0\x80", "???"),               /* surrogate D800 */
	V("\xed\xbf\xbf", "???"),               /* surrogate DFFF */
	V("\xf4\x90\x80\x80", "????"),          /* > U+10FFFF */
	V("\xe2\x82", "?"),                     /* truncated at end */
	V("\xe2\x82" "A", "?A"),
	V("\xf0\x9f\x98" "x", "?x"),
	V("\xc3", "?"),
};

static void
test_sanitize_vectors(void **state)
{
	char out[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		clog_sanitize(vectors[i].in, vectors[i].len, out, sizeof(out),
		    32);
		if (strcmp(out, vectors[i].want) != 0)
			fail_msg("vector %zu: got \"%s\" want \"%s\"", i, out,
			    vectors[i].want);
	}
}

static void
test_sanitize_cap(void **state)
{
	char out[64];

	(void)state;
	assert_string_equal(clog_sanitize("abc", 3, out, sizeof(out), 3),
	    "abc");
	assert_string_equal(clog_sanitize("abcd", 4, out, sizeof(out), 3),
	    "abc...");
	/* é is two bytes: never half of it. */
	assert_string_equal(clog_sanitize("a\xc3\xa9", 3, out, sizeof(out),
	    2), "a...");
	assert_string_equal(clog_sanitize("a\xc3\xa9", 3, out, sizeof(out),
	    3), "a\xc3\xa9");
	assert_string_equal(clog_sanitize("\xe2\x82\xac\xe2\x82\xac", 6, out,
	    sizeof(out), 5), "\xe2\x82\xac...");
	assert_string_equal(clog_sanitize("\xf0\x9f\x98\x80" "x", 5, out,
	    sizeof(out), 3), "...");
	/* A '?' counts one byte whatever it replaced. */
	assert_string_equal(clog_sanitize("\xe2\x80\x8b" "ab", 5, out,
	    sizeof(out), 3), "?ab");
	/* The output buffer bounds too, "..." included. */
	assert_string_equal(clog_sanitize("abcdefgh", 8, out, 6, 100),
	    "ab...");
	assert_string_equal(clog_sanitize("abcde", 5, out, 6, 100), "abcde");
	assert_string_equal(clog_sanitize("\xc3\xa9\xc3\xa9\xc3\xa9", 6,
	    out, 7, 100), "\xc3\xa9\xc3\xa9\xc3\xa9");
	assert_string_equal(clog_sanitize("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
	    8, out, 7, 100), "\xc3\xa9...");
	out[0] = 'x';
	assert_string_equal(clog_sanitize("abc", 3, out, 1, 100), "");
	assert_ptr_equal(clog_sanitize("abc", 3, out, sizeof(out), 0), out);
	assert_string_equal(out, "...");
}

/* Random bytes always come out as clean, capped UTF-8. */
static void
test_sanitize_random(void **state)
{
	unsigned char in[96];
	char out[40];
	uint32_t seed = 12345;
	const unsigned char *p;
	json_t *s;
	int iter;
	size_t i, len;

	(void)state;
	for (iter = 0; iter < 20000; iter++) {
		for (i = 0; i < sizeof(in); i++) {
			seed = seed * 1103515245u + 12345u;
			/* Bias towards high bytes to hit multibyte paths. */
			in[i] = (unsigned char)(seed >> 16);
			if (iter % 3 == 0 && in[i] < 0x80)
				in[i] |= 0x80;
		}
		len = (size_t)(seed % sizeof(in));
		clog_sanitize((const char *)in, len, out, sizeof(out), 30);
		assert_true(strlen(out) <= 33);
		s = json_string(out);   /* jansson checks UTF-8 */
		assert_non_null(s);
		json_decref(s);
		for (p = (const unsigned char *)out; *p; p++) {
			assert_true(*p >= 0x20 && *p != 0x7f);
			if (p[0] == 0xc2)
				assert_true(p[1] >= 0xa0);
			if (p[0] == 0xe2 && p[1] == 0x80)
				assert_false((p[2] >= 0x8b && p[2] <= 0x8f) ||
				    (p[2] >= 0xa8 && p[2] <= 0xae));
		}
	}
}

static void
test_ustr_in_record(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", big[2000], *lines[MAX_LINES];
	struct clog *l;
	struct clog_rec *r;
	json_t *root;
	const char *v;
	size_t n;

	memset(big, 'a', sizeof(big));
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	r = clog_rec_new("decision");
	clog_rec_ustr(r, "host", "ev\nil\xe2\x80\xae\xff.org\0x", 15);
	clog_rec_ustr(r, "sni", big, sizeof(big));
	clog_rec_ustr(r, "user", NULL, 0);
	clog_rec_str(r, "note", "bad\xff");   /* trusted but broken */
	assert_int_equal(clog_write(l, r), 0);
	clog_close(l);
	expect_good(fx->log, ZERO64, 1);

	n = read_lines(fx->log, lines);
	assert_int_equal(n, 1);
	root = json_loads(lines[0], 0, NULL);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "host")),
	    "ev?il??.org?x");
	v = json_string_value(json_object_get(root, "sni"));
	assert_non_null(v);
	assert_int_equal(strlen(v), CLOG_STR_CAP + 3);
	assert_string_equal(v + CLOG_STR_CAP, "...");
	assert_true(json_is_null(json_object_get(root, "user")));
	assert_string_equal(json_string_value(json_object_get(root, "note")),
	    "bad?");
	json_decref(root);
	free_lines(lines, n);
}

/*
 * Strings that are not the sandbox's are kept as they are, but no line
 * holds a character a terminal would act on: C1, bidi and zero-width
 * characters become \uXXXX escapes in plain and nested fields alike.
 */
static void
test_escape_in_record(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES];
	struct clog *l;
	struct clog_rec *r;
	json_t *root;
	size_t n;

	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	r = clog_rec_new("admin");
	clog_rec_str(r, "user", "ev\xe2\x80\xaeil\xe2\x80\x8b\xc2\x9b"
	    "x\x7f\xf3\xa0\x81\x81");
	clog_rec_json(r, "after", json_pack("{s:s}", "user",
	    "a\xe2\x80\xae" "b\xc2\x85"));
	assert_int_equal(clog_write(l, r), 0);
	clog_close(l);
	expect_good(fx->log, ZERO64, 1);

	n = read_lines(fx->log, lines);
	assert_int_equal(n, 1);
	assert_null(strstr(lines[0], "\xe2\x80\xae"));
	assert_null(strstr(lines[0], "\xe2\x80\x8b"));
	assert_null(strstr(lines[0], "\xc2\x9b"));
	assert_null(strstr(lines[0], "\xc2\x85"));
	assert_null(strchr(lines[0], 0x7f));
	assert_non_null(strstr(lines[0], "\"user\":\"ev\\u202eil\\u200b"
	    "\\u009bx\\u007f\\udb40\\udc41\""));
	assert_non_null(strstr(lines[0], "{\"user\":\"a\\u202eb\\u0085\"}"));
	/* and a JSON reader gets the very string back */
	root = json_loads(lines[0], 0, NULL);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "user")),
	    "ev\xe2\x80\xaeil\xe2\x80\x8b\xc2\x9bx\x7f\xf3\xa0\x81\x81");
	json_decref(root);
	free_lines(lines, n);
}

static void
test_json_escape(void **state)
{
	static const struct vec ev[] = {
		V("{\"a\":\"plain caf\xc3\xa9\"}", "{\"a\":\"plain caf\xc3\xa9\"}"),
		V("\t\r\n", "\t\r\n"),
		V("\"\x1b[31m\"", "\"\\u001b[31m\""),
		V("\"\xc2\x9b\xe2\x80\xae\xe2\x81\xa6\"",
		    "\"\\u009b\\u202e\\u2066\""),
		V("\xef\xbb\xbf", "\\ufeff"),
		V("\xf3\xa0\x80\x81", "\\udb40\\udc01"),
		V("\xff\xc3", "\\ufffd\\ufffd"),
		V("\xe2\x80\xaf", "\xe2\x80\xaf"),
	};
	size_t i, n;
	char *out;

	(void)state;
	for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		out = clog_json_escape(ev[i].in, ev[i].len, &n);
		assert_non_null(out);
		if (strcmp(out, ev[i].want) != 0)
			fail_msg("vector %zu: got \"%s\" want \"%s\"", i, out,
			    ev[i].want);
		assert_int_equal(n, strlen(ev[i].want));
		free(out);
	}
	assert_int_equal(clog_text_safe("alice caf\xc3\xa9", 11), 1);
	assert_int_equal(clog_text_safe("", 0), 1);
	assert_int_equal(clog_text_safe("a\xe2\x80\xae", 4), 0);
	assert_int_equal(clog_text_safe("a\xc2\x9b", 3), 0);
	assert_int_equal(clog_text_safe("a\xff", 2), 0);
	assert_int_equal(clog_text_safe("a\nb", 3), 0);
}

static char sink_last[1100];

static void
sink_keep(int prio, const char *msg)
{
	(void)prio;
	snprintf(sink_last, sizeof(sink_last), "%s", msg);
}

/* The diagnostic log quotes outside strings too: one inert line. */
static void
test_px_log_sanitised(void **state)
{
	(void)state;
	px_log_set_sink(sink_keep);
	px_log(PX_WARN, "session %s: %s", "ev\xe2\x80\xaeil\xc2\x9b",
	    "two\nlines\x1b[2J");
	px_log_set_sink(NULL);
	assert_string_equal(sink_last, "session ev?il?: two?lines?[2J");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_verify, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_continue_after_open,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_line, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_edit_field, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_reorder, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_tail, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_torn_only_and_garbage,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_long_line, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_and_mode, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_write_failure, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_short_write_cut_back, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_low_space, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signed_chain, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_anchors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stdout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signed_queue, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ustr_in_record, setup,
		    teardown),
		cmocka_unit_test(test_sanitize_vectors),
		cmocka_unit_test(test_sanitize_cap),
		cmocka_unit_test(test_sanitize_random),
		cmocka_unit_test_setup_teardown(test_escape_in_record, setup,
		    teardown),
		cmocka_unit_test(test_json_escape),
		cmocka_unit_test(test_px_log_sanitised),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
