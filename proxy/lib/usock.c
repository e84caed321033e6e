/*
 * usock.c: the socket files of usock.h.
 *
 * Everything after the first open is relative to a directory
 * descriptor, so a link swapped into a path between two steps cannot
 * send a step elsewhere: the directories are opened one by one with
 * O_NOFOLLOW, the socket is bound and given its mode and group inside
 * a private directory only sluiced can write, and linkat(2) puts it in
 * place without replacing anything.  Someone who can write the socket's
 * own directory can still rename entries under sluiced's feet, but only
 * entries of that directory, which they could remove themselves.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proxy/lib/usock.h"
#include "proxy/lib/util.h"

#define SUN_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

int
usock_path_check(const char *path, char *err, size_t errlen)
{
	const char *c, *end;
	size_t n, i;

	if (path == NULL || path[0] != '/')
		return errf(err, errlen, "not an absolute path");
	n = strlen(path);
	if (n >= SUN_MAX)
		return errf(err, errlen, "longer than a socket path can be "
		    "(%zu bytes)", SUN_MAX - 1);
	for (i = 0; i < n; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return errf(err, errlen, "a control character in the "
			    "path");
	/* every component: not empty, not "." or ".." */
	for (c = path + 1; ; c = end + 1) {
		end = strchr(c, '/');
		if (end == NULL)
			end = path + n;
		if (end == c)
			return errf(err, errlen, "an empty path component "
			    "(\"//\" or a trailing \"/\")");
		if ((end - c == 1 && c[0] == '.') ||
		    (end - c == 2 && c[0] == '.' && c[1] == '.'))
			return errf(err, errlen, "a \".\" or \"..\" component");
		if (*end == '\0')
			break;
	}
	return 0;
}

int
usock_canon(const char *path, char *out, size_t outlen, char *err,
    size_t errlen)
{
	char buf[PATH_MAX], real[PATH_MAX];
	size_t cut;
	int n;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf) ||
	    buf[0] != '/') {
		errno = ENAMETOOLONG;
		return errf(err, errlen, "%s: not an absolute path that fits",
		    path);
	}
	/* the last component is the socket: never resolved (a link there
	 * is refused later, not followed) */
	cut = (size_t)(strrchr(buf, '/') - buf);
	for (;;) {
		const char *dir = buf;

		buf[cut] = '\0';
		if (cut == 0)
			dir = "/";
		if (realpath(dir, real) != NULL)
			break;
		if (errno != ENOENT || cut == 0)
			return errf(err, errlen, "%s: %s", dir, strerror(errno));
		buf[cut] = '/';
		while (cut > 0 && buf[--cut] != '/')
			;
	}
	/* real has no trailing slash except for "/" itself */
	n = snprintf(out, outlen, "%s%s", strcmp(real, "/") == 0 ? "" : real,
	    path + cut);
	if (n < 0 || (size_t)n >= outlen) {
		errno = ENAMETOOLONG;
		return errf(err, errlen, "%s: too long once resolved", path);
	}
	return 0;
}

int
usock_under(const char *canon, const char *canon_prefix)
{
	size_t n = strlen(canon_prefix);

	if (strcmp(canon_prefix, "/") == 0)
		return 1;
	return strncmp(canon, canon_prefix, n) == 0 && canon[n] == '/';
}

/*
 * The directory dir (canonical), opened for *at calls (O_PATH) one
 * component at a time from /, never through a link; with dirmode, the
 * missing ones are made.  The descriptor, or -1 with errno.
 */
static int
open_dir(const char *dir, mode_t dirmode)
{
	char buf[PATH_MAX], *c, *next;
	int fd, nfd;

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	for (c = buf + 1; *c != '\0'; c = next) {
		next = strchr(c, '/');
		if (next != NULL)
			*next++ = '\0';
		else
			next = c + strlen(c);
		nfd = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && dirmode != 0) {
			if (mkdirat(fd, c, dirmode) != 0 && errno != EEXIST) {
				close(fd);
				return -1;
			}
			nfd = openat(fd, c, O_PATH | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
		}
		close(fd);
		if (nfd < 0)
			return -1;
		fd = nfd;
	}
	return fd;
}

/* canon split into its directory (dir) and its last component. */
static const char *
split(const char *canon, char *dir, size_t len)
{
	const char *slash = strrchr(canon, '/');

	if (slash == NULL || slash[1] == '\0' ||
	    util_parent_dir(canon, dir, len) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return slash + 1;
}

/*
 * Whether someone accepts on dfd/name right now: NULL when the socket
 * is stale (a connection refused), else why it must stay.  Anything
 * but a refusal (no permission, a name too long to reach) leaves it
 * alone.
 */
static const char *
in_use(int dfd, const char *name)
{
	struct sockaddr_un sa;
	const char *why = NULL;
	int fd, n;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s",
	    dfd, name);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path) || fd < 0)
		why = "a socket is there (name too long to tell whether it "
		    "is served)";
	else if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
	    errno == EAGAIN || errno == EINPROGRESS)
		why = "another process serves it";
	else if (errno != ECONNREFUSED && errno != ENOENT)
		why = errno == EACCES ? "a socket is there that sluiced "
		    "may not connect to (so cannot tell whether it is "
		    "served)" : "a socket is there (cannot tell whether it is "
		    "served)";
	if (fd >= 0)
		close(fd);
	return why;
}

/* A new directory in dfd that only this process's user can enter; its
 * name into priv.  The descriptor (O_PATH), or -1 with errno. */
static int
private_dir(int dfd, char *priv, size_t len)
{
	static unsigned seq;
	struct stat st;
	int i, fd;

	for (i = 0; i < 32; i++) {
		snprintf(priv, len, ".sluiced-%ld-%u", (long)getpid(), seq++);
		if (mkdirat(dfd, priv, 0700) == 0)
			break;
		if (errno != EEXIST)
			return -1;
	}
	if (i == 32) {
		errno = EEXIST;
		return -1;
	}
	fd = openat(dfd, priv, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* still the one just made, not one swapped in by another user */
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

int
usock_listen(const char *canon, mode_t mode, gid_t gid, mode_t dirmode,
    int backlog, struct usock_id *id, char *err, size_t errlen)
{
	char dir[PATH_MAX], priv[64];
	struct sockaddr_un sa;
	struct stat st, ps;
	const char *name, *what = "";
	int dfd = -1, pfd = -1, fd = -1, e;

	if ((name = split(canon, dir, sizeof(dir))) == NULL)
		return errf(err, errlen, "%s: not a socket path", canon);
	if ((dfd = open_dir(dir, dirmode)) < 0) {
		what = errno == ENOTDIR || errno == ELOOP ?
		    " (a symlink or a file on the way)" : "";
		e = errno;
		errf(err, errlen, "%s: %s%s", dir, strerror(e), what);
		errno = e;
		return -1;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			what = "exists and is not a socket";
			errno = EEXIST;
			goto fail;
		}
		if ((what = in_use(dfd, name)) != NULL) {
			errno = EEXIST;
			goto fail;
		}
		what = "";
		/* stale: from an earlier run, or a process gone */
		if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
			goto fail;
	} else if (errno != ENOENT)
		goto fail;

	if ((pfd = private_dir(dfd, priv, sizeof(priv))) < 0)
		goto fail;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto fail;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/s", pfd);
	/* in the private directory no one else can put a link where the
	 * socket is, so mode and group land on the socket */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    fchmodat(pfd, "s", mode, 0) != 0 ||
	    (gid != (gid_t)-1 && fchownat(pfd, "s", (uid_t)-1, gid,
	    AT_SYMLINK_NOFOLLOW) != 0) ||
	    fstatat(pfd, "s", &ps, AT_SYMLINK_NOFOLLOW) != 0 ||
	    listen(fd, backlog) != 0)
		goto fail;
	if (linkat(pfd, "s", dfd, name, 0) != 0) {
		if (errno == EEXIST)
			what = "a file appeared there meanwhile";
		goto fail;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    st.st_dev != ps.st_dev || st.st_ino != ps.st_ino) {
		what = "replaced as it was made";
		errno = EEXIST;
		goto fail;
	}
	if (fstat(dfd, &st) != 0)
		goto fail;
	id->dir_dev = st.st_dev;
	id->dir_ino = st.st_ino;
	id->dev = ps.st_dev;
	id->ino = ps.st_ino;
	unlinkat(pfd, "s", 0);
	close(pfd);
	unlinkat(dfd, priv, AT_REMOVEDIR);
	close(dfd);
	return fd;
fail:
	e = errno;
	errf(err, errlen, "%s: %s", canon, what[0] != '\0' ? what :
	    strerror(e));
	if (pfd >= 0) {
		unlinkat(pfd, "s", 0);
		close(pfd);
		unlinkat(dfd, priv, AT_REMOVEDIR);
	}
	if (fd >= 0)
		close(fd);
	close(dfd);
	errno = e;
	return -1;
}

/* dfd/name is still the socket id names, in id's directory. */
static int
still_ours(int dfd, const char *name, const struct usock_id *id)
{
	struct stat st;

	if (fstat(dfd, &st) != 0 || st.st_dev != id->dir_dev ||
	    st.st_ino != id->dir_ino)
		return 0;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISSOCK(st.st_mode) || st.st_dev != id->dev ||
	    st.st_ino != id->ino)
		return 0;
	return 1;
}

void
usock_unlink(const char *canon, const struct usock_id *id)
{
	char dir[PATH_MAX];
	const char *name;
	int dfd;

	if ((name = split(canon, dir, sizeof(dir))) == NULL ||
	    (dfd = open_dir(dir, 0)) < 0)
		return;
	if (still_ours(dfd, name, id))
		unlinkat(dfd, name, 0);
	close(dfd);
}

int
usock_perms(const char *canon, const struct usock_id *id, mode_t mode,
    gid_t gid, char *err, size_t errlen)
{
	char dir[PATH_MAX], self[64];
	struct stat st;
	const char *name;
	int dfd, fd = -1, rc = -1;

	if ((name = split(canon, dir, sizeof(dir))) == NULL ||
	    (dfd = open_dir(dir, 0)) < 0)
		return errf(err, errlen, "%s: %s", canon, strerror(errno));
	if (!still_ours(dfd, name, id) ||
	    (fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(fd, &st) != 0 || st.st_dev != id->dev ||
	    st.st_ino != id->ino) {
		errf(err, errlen, "%s: no longer the socket sluiced made",
		    canon);
		goto out;
	}
	/* fd is the socket's inode: the magic link /proc/self/fd/N names
	 * it, not a path anyone can redirect */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	if ((gid != (gid_t)-1 && fchownat(fd, "", (uid_t)-1, gid,
	    AT_EMPTY_PATH) != 0) || chmod(self, mode) != 0) {
		errf(err, errlen, "%s: %s", canon, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return rc;
}
