/*
 * jsonstrict.c: strict JSON reading (jsonstrict.h).
 *
 * JSON_REJECT_DUPLICATES refuses a key given twice; leaving out
 * JSON_DISABLE_EOF_CHECK makes jansson refuse anything but white space
 * after the value, and leaving out JSON_ALLOW_NUL refuses \u0000.  A NUL
 * byte is looked for here first, whatever the jansson version does with
 * one: it is where a C-string reader of the same bytes would stop.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/lib/jsonstrict.h"
#include "proxy/lib/util.h"

static void
error_set(json_error_t *err, const char *source, int line, int column,
    size_t position, const char *text)
{
	if (err == NULL)
		return;
	memset(err, 0, sizeof(*err));
	err->line = line;
	err->column = column;
	err->position = (int)position;
	snprintf(err->source, sizeof(err->source), "%s", source);
	snprintf(err->text, sizeof(err->text), "%s", text);
}

json_t *
jsonstrict_load(const char *buf, size_t len, json_error_t *err)
{
	const char *nul = len > 0 ? memchr(buf, '\0', len) : NULL;
	const char *p;
	int line = 1, column = 0;

	if (nul == NULL)
		return json_loadb(len > 0 ? buf : "", len,
		    JSON_REJECT_DUPLICATES, err);
	/* where it is, counted as jansson counts (column in bytes) */
	for (p = buf; p < nul; p++) {
		if (*p == '\n') {
			line++;
			column = 0;
		} else {
			column++;
		}
	}
	error_set(err, "<buffer>", line, column + 1, (size_t)(nul - buf),
	    "NUL byte in the text");
	return NULL;
}

json_t *
jsonstrict_load_file(const char *path, size_t max, json_error_t *err)
{
	char msg[160], *buf = NULL, *nb;
	struct stat st;
	size_t len = 0, cap;
	ssize_t r;
	json_t *j = NULL;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(msg, sizeof(msg), "cannot open: %s", strerror(errno));
		goto fail;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(msg, sizeof(msg), "not a regular file");
		goto fail;
	}
	if ((size_t)st.st_size > max) {
		snprintf(msg, sizeof(msg), "larger than %zu bytes", max);
		goto fail;
	}
	/* the size fstat gave is a hint: read to the end, at most max + 1 */
	cap = ((size_t)st.st_size < max ? (size_t)st.st_size : max) + 1;
	if ((buf = malloc(cap)) == NULL)
		goto oom;
	for (;;) {
		if (len == cap) {
			if (cap > max)
				break;
			cap = cap <= max / 2 ? cap * 2 : max + 1;
			if ((nb = realloc(buf, cap)) == NULL)
				goto oom;
			buf = nb;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(msg, sizeof(msg), "read: %s", strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len > max) {
		snprintf(msg, sizeof(msg), "larger than %zu bytes", max);
		goto fail;
	}
	close(fd);
	j = jsonstrict_load(buf, len, err);
	if (j == NULL && err != NULL)
		snprintf(err->source, sizeof(err->source), "%s", path);
	free(buf);
	return j;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	error_set(err, path, -1, -1, 0, msg);
	return NULL;
oom:
	snprintf(msg, sizeof(msg), "out of memory");
	goto fail;
}

int
jsonstrict_str(json_t *o, const char *key, int required, const char **out,
    char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (v == NULL || json_is_null(v)) {
		if (required)
			return errf(err, errlen, "%s: missing", key);
		return 0;
	}
	if (!json_is_string(v) || strlen(json_string_value(v)) !=
	    json_string_length(v))
		return errf(err, errlen, "%s: expected a string", key);
	*out = json_string_value(v);
	return 0;
}

int
jsonstrict_strv(json_t *o, const char *key, int required, size_t max,
    int unique, jsonstrict_item_ok ok, const char *what, char ***out,
    size_t *n, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key), *e;
	size_t i, j;

	*out = NULL;
	*n = 0;
	if (v == NULL || json_is_null(v)) {
		if (required)
			return errf(err, errlen, "%s: missing", key);
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) > max)
		return errf(err, errlen, "%s: expected an array of at most %zu "
		    "strings", key, max);
	if (required && json_array_size(v) == 0)
		return errf(err, errlen, "%s: at least one", key);
	if ((*out = calloc(json_array_size(v) + 1, sizeof(**out))) == NULL)
		return errf(err, errlen, "out of memory");
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);

		if (s == NULL || strlen(s) != json_string_length(e) || !ok(s))
			return errf(err, errlen, "%s[%zu]: expected %s", key, i,
			    what);
		for (j = 0; unique && j < i; j++)
			if (strcmp((*out)[j], s) == 0)
				return errf(err, errlen, "%s[%zu]: the same as "
				    "%s[%zu]", key, i, key, j);
		if (((*out)[i] = strdup(s)) == NULL)
			return errf(err, errlen, "out of memory");
		*n = i + 1;
	}
	return 0;
}

int
jsonstrict_check(const char *key, const char *v, jsonstrict_item_ok ok,
    const char *what, char *err, size_t errlen)
{
	if (!ok(v))
		return errf(err, errlen, "%s: expected %s", key, what);
	return 0;
}

json_t *
jsonstrict_strv_json(char *const *v, size_t n)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

const char *
jsonstrict_unknown_key(json_t *o, const char *const *keys)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(o, k, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL)
			return k;
	}
	return NULL;
}
