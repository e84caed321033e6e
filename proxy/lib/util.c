/*
 * util.c: the helpers of util.h.
 */
#include "sluice-config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proxy/lib/util.h"

int
errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int
util_mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	char *p;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, mode) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

int
util_parent_dir(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	int n;

	if (slash == NULL)
		n = snprintf(dir, len, "%s", "");
	else if (slash == path)
		n = snprintf(dir, len, "/");
	else
		n = snprintf(dir, len, "%.*s", (int)(slash - path), path);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int
util_mkdir_parent(const char *path, mode_t mode)
{
	char dir[PATH_MAX];

	if (util_parent_dir(path, dir, sizeof(dir)) != 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (dir[0] == '\0' || strcmp(dir, "/") == 0)
		return 0;
	return util_mkdir_p(dir, mode);
}

void
util_rfc3339(time_t t, char *buf, size_t len)
{
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "%s", "");
}
