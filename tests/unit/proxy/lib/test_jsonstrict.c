/*
 * test_jsonstrict.c: the one JSON reader of sluiced, sluicectl and
 * sluice-run (proxy/jsonstrict.h): what it takes, what it refuses and
 * where it says the fault is; and the file variant's bounds.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "proxy/lib/jsonstrict.h"

static json_t *
load(const char *text, size_t len, json_error_t *je)
{
	return jsonstrict_load(text, len, je);
}

#define LOAD(lit, je) load(lit, sizeof(lit) - 1, je)

static void
refused(const char *text, size_t len, const char *why)
{
	json_error_t je;
	json_t *j = load(text, len, &je);

	if (j != NULL)
		fail_msg("took %.*s", (int)len, text);
	if (strstr(je.text, why) == NULL)
		fail_msg("%.*s: \"%s\", want \"%s\"", (int)len, text, je.text,
		    why);
}

#define REFUSED(lit, why) refused(lit, sizeof(lit) - 1, why)

static void
test_takes(void **state)
{
	json_error_t je;
	json_t *j;

	(void)state;
	j = LOAD("{\"decision\": \"allow_once\"}", &je);
	assert_true(json_is_object(j));
	assert_string_equal(json_string_value(json_object_get(j, "decision")),
	    "allow_once");
	json_decref(j);
	/* white space around it, a line end after it */
	j = LOAD(" \t\r\n{\"a\": {\"b\": [1, {\"b\": 2}]}}\n\n", &je);
	assert_true(json_is_object(j));
	json_decref(j);
	/* arrays too: the callers say which they want */
	j = LOAD("[1, 2]", &je);
	assert_true(json_is_array(j));
	json_decref(j);
	/* the same key in different objects is no duplicate */
	j = LOAD("{\"a\": {\"x\": 1}, \"b\": {\"x\": 1}}", &je);
	assert_non_null(j);
	json_decref(j);
	/* UTF-8 and escapes other than \u0000 */
	j = LOAD("{\"u\": \"caf\xc3\xa9 \\u00e9 \\n\"}", &je);
	assert_non_null(j);
	json_decref(j);
}

static void
test_refuses(void **state)
{
	(void)state;
	/* a key twice keeps neither, at the top and deeper */
	REFUSED("{\"decision\":\"deny\",\"decision\":\"allow_chat\"}",
	    "duplicate object key");
	REFUSED("{\"a\": [{\"k\": 1, \"k\": 1}]}", "duplicate object key");
	/* anything after the value */
	REFUSED("{\"decision\":\"deny\"} x", "end of file expected");
	REFUSED("{}{}", "end of file expected");
	REFUSED("{} []", "end of file expected");
	/* NUL: where a C-string reader stops and takes what came before */
	REFUSED("{\"decision\":\"allow_chat\"}\0garbage", "NUL byte");
	REFUSED("{\"decision\":\"allow_chat\"}\0", "NUL byte");
	REFUSED("{\"a\":\"x\0y\"}", "NUL byte");
	REFUSED("\0{}", "NUL byte");
	/* \u0000 would cut a C string short too */
	REFUSED("{\"a\":\"x\\u0000y\"}", "\\u0000");
	/* bare values, nothing, a byte order mark, broken UTF-8 */
	REFUSED("\"text\"", "expected");
	REFUSED("1", "expected");
	REFUSED("", "expected");
	REFUSED("   ", "expected");
	REFUSED("\xef\xbb\xbf{}", "expected");
	REFUSED("{\"a\":\"\xff\"}", "unable to decode byte");
	/* and plain syntax errors stay errors */
	REFUSED("{\"a\":", "");
}

static void
test_where(void **state)
{
	json_error_t je;

	(void)state;
	/* the NUL's place, counted as jansson counts */
	assert_null(LOAD("{\n  \"a\": 1\n}\0{\"b\": 2}", &je));
	assert_int_equal(je.line, 3);
	assert_int_equal(je.column, 2);
	assert_int_equal(je.position, 12);
	assert_null(LOAD("{\"a\": 1}\n{\"b\": 2}", &je));
	assert_int_equal(je.line, 2);
	/* a NULL buffer of length 0 is an empty text, and no error pointer
	 * is fine */
	assert_null(jsonstrict_load(NULL, 0, &je));
	assert_null(jsonstrict_load("{} x", 4, NULL));
	assert_null(jsonstrict_load("{}\0", 3, NULL));
}

static char tmpdir[64];

static void
write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

static void
test_file(void **state)
{
	char path[128], big[128], dir[128];
	json_error_t je;
	json_t *j;

	(void)state;
	snprintf(path, sizeof(path), "%s/state.json", tmpdir);
	write_file(path, "{\"version\": 1}\n", 15);
	j = jsonstrict_load_file(path, 15, &je);
	assert_true(json_is_object(j));
	json_decref(j);
	/* one byte over the bound */
	assert_null(jsonstrict_load_file(path, 14, &je));
	assert_int_equal(je.line, -1);
	assert_non_null(strstr(je.text, "larger than 14 bytes"));
	assert_string_equal(je.source, path);
	/* the same rules as for a buffer, the file named */
	write_file(path, "{\"a\": 1}\0{\"a\": 2}", 17);
	assert_null(jsonstrict_load_file(path, 1024, &je));
	assert_non_null(strstr(je.text, "NUL byte"));
	assert_string_equal(je.source, path);
	write_file(path, "{\"a\": 1, \"a\": 2}", 16);
	assert_null(jsonstrict_load_file(path, 1024, &je));
	assert_non_null(strstr(je.text, "duplicate object key"));
	/* a larger file, read whole past the first guess */
	snprintf(big, sizeof(big), "%s/big.json", tmpdir);
	{
		size_t n = 300000, i;
		char *t = malloc(n);

		assert_non_null(t);
		t[0] = '[';
		for (i = 1; i + 2 < n; i += 2)
			memcpy(t + i, "0,", 2);
		t[i - 1] = ']';
		write_file(big, t, i);
		j = jsonstrict_load_file(big, n, &je);
		if (j == NULL)
			fail_msg("%s", je.text);
		assert_int_equal(json_array_size(j), (i - 1) / 2);
		json_decref(j);
		free(t);
	}
	/* what is no regular file, and what is not there */
	snprintf(dir, sizeof(dir), "%s/d", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_null(jsonstrict_load_file(dir, 1024, &je));
	assert_non_null(strstr(je.text, "not a regular file"));
	assert_null(jsonstrict_load_file("/nonexistent/state.json", 1024,
	    &je));
	assert_int_equal(je.line, -1);
	assert_non_null(strstr(je.text, "cannot open"));
	unlink(path);
	unlink(big);
	rmdir(dir);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_jsonstrict.XXXXXX");
	return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	return rmdir(tmpdir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_takes),
		cmocka_unit_test(test_refuses),
		cmocka_unit_test(test_where),
		cmocka_unit_test(test_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
