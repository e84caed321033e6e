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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "proxy/lib/clog.h"

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

static void
test_torn_tail(void **state)
{
	struct fx *fx = *state;
	char err[256] = "", *lines[MAX_LINES], h[65], *buf, side[PATH_MAX];
	struct clog *l;
	size_t n, len;
	FILE *f;

	make_log(fx->log, 3);
	f = fopen(fx->log, "ab");
	assert_non_null(f);
	fputs("{\"ts\":\"2026-11-30T02:1", f);
	fclose(f);
	expect_bad(fx->log, NULL, 4, "line 4: last line has no newline");

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
	/* The torn line is reported; without it the chain is whole. */
	expect_bad(fx->log, NULL, 4, "line 4: not a record");
	snprintf(side, sizeof(side), "%s/side.log", fx->dir);
	free(lines[3]);
	memmove(&lines[3], &lines[4], 2 * sizeof(lines[0]));
	write_lines(side, lines, 5);
	expect_good(side, ZERO64, 5);
	free_lines(lines, 5);

	/* Opening again leaves the (now complete) file alone. */
	l = clog_open(fx->log, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(clog_last_seq(l), 5);
	clog_close(l);
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
		cmocka_unit_test_setup_teardown(test_stdout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ustr_in_record, setup,
		    teardown),
		cmocka_unit_test(test_sanitize_vectors),
		cmocka_unit_test(test_sanitize_cap),
		cmocka_unit_test(test_sanitize_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
