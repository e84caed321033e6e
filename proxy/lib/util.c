/*
 * util.c: the helpers of util.h.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

void
util_strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n && v != NULL; i++)
		free(v[i]);
	free(v);
}

const char *
util_http_phrase(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 416: return "Range Not Satisfiable";
	case 421: return "Misdirected Request";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

int
util_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp, size_t *bad)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t need, i;
	uint32_t v;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		need = 1;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		v = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0;      /* overlong */
		else if (c == 0xed)
			hi = 0x9f;      /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		v = c & 0x07;
		if (c == 0xf0)
			lo = 0x90;      /* overlong */
		else if (c == 0xf4)
			hi = 0x8f;      /* past U+10FFFF */
	} else {
		if (bad != NULL)
			*bad = 1;
		return -1;
	}
	for (i = 1; i <= need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi) {
			if (bad != NULL)
				*bad = i;
			return i >= n ? 0 : -1;
		}
		v = (v << 6) | (s[i] & 0x3f);
		lo = 0x80;
		hi = 0xbf;
	}
	*cp = v;
	return (int)need + 1;
}

ssize_t
util_recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t n;

	do
		n = recv(fd, buf, len, flags);
	while (n < 0 && errno == EINTR);
	return n;
}

ssize_t
util_send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t n;

	do
		n = send(fd, buf, len, flags);
	while (n < 0 && errno == EINTR);
	return n;
}

int
util_wait_readable(int fd, int timeout_ms)
{
	struct pollfd pf;
	int n;

	pf.fd = fd;
	pf.events = POLLIN;
	do
		n = poll(&pf, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	return n;
}

int64_t
util_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
util_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
util_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

ssize_t
util_read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* fsync of the directory path is in, so that a rename in it lasts */
static int
fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	int fd, rc;

	if (util_parent_dir(path, dir, sizeof(dir)) != 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = open(dir[0] ? dir : ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int
util_write_atomic(const char *path, const void *data, size_t len,
    mode_t mode)
{
	char tmp[PATH_MAX];
	const char *p = data;
	size_t off = 0;
	int fd = -1, saved;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (util_mkdir_parent(path, 0750) != 0)
		return -1;
	(void)unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, mode)) < 0)
		return -1;
	if (fchmod(fd, mode) != 0)
		goto bad;
	while (off < len) {
		ssize_t w = write(fd, p + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			goto bad;
		}
		off += (size_t)w;
	}
	if (fsync(fd) != 0)
		goto bad;
	if (close(fd) != 0) {
		fd = -1;
		goto bad;
	}
	fd = -1;
	if (rename(tmp, path) != 0 || fsync_parent(path) != 0)
		goto bad;
	return 0;
bad:
	saved = errno;
	if (fd >= 0)
		close(fd);
	(void)unlink(tmp);
	errno = saved;
	return -1;
}

void
util_close_pair(int fd[2])
{
	int i;

	for (i = 0; i < 2; i++) {
		if (fd[i] >= 0)
			close(fd[i]);
		fd[i] = -1;
	}
}
