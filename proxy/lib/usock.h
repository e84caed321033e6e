/*
 * usock.h: the Unix socket files sluiced makes (session sockets, the
 * control socket), made and removed without following a link someone
 * else put in the way.
 *
 * A path is walked from / one directory at a time with O_NOFOLLOW, the
 * socket is bound in a private directory (0700, sluiced's) where its
 * mode and group are set, then hard-linked into place, which never
 * replaces a file.  Only a socket is ever unlinked: a stale one before
 * the bind (never one that someone serves), and at the end the one
 * sluiced made, checked by device and inode.  Linux only (the bind goes
 * through /proc/self/fd).
 */
#ifndef SLUICE_USOCK_H
#define SLUICE_USOCK_H

#include <stddef.h>
#include <sys/types.h>

/* The socket sluiced made: its directory and itself. */
struct usock_id {
	dev_t dir_dev;
	ino_t dir_ino;
	dev_t dev;
	ino_t ino;
};

/*
 * A path sluiced may make a socket at: absolute, no empty, "." or ".."
 * component, no trailing slash, no control character, shorter than a
 * sun_path (clients connect by it).  0, or -1 with why in err.
 */
int usock_path_check(const char *path, char *err, size_t errlen)
    SLUICE_MUSTCHECK;

/*
 * The canonical form of a path that passed usock_path_ok: realpath(3)
 * of its deepest existing ancestor, and the rest as written (made later
 * by usock_listen as plain directories).  0, or -1 with errno and err.
 */
int usock_canon(const char *path, char *out, size_t outlen, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/*
 * Under prefix: canon (canonical) lies in the directory canon_prefix
 * (canonical) or below it.
 */
int usock_under(const char *canon, const char *canon_prefix);

/*
 * A listening socket (non-blocking, close-on-exec) at canon, a
 * canonical path: missing directories made with dirmode, a stale socket
 * there replaced, mode and group (gid -1: the process's) set before the
 * name appears.  Refused (-1, errno EEXIST) for an existing file that
 * is not a socket or a socket someone serves, and for a symlink
 * anywhere on the way (ELOOP or ENOTDIR).  The descriptor, or -1 with
 * errno and err.
 */
int usock_listen(const char *canon, mode_t mode, gid_t gid, mode_t dirmode,
    int backlog, struct usock_id *id, char *err, size_t errlen)
    SLUICE_MUSTCHECK;

/* Remove the socket at canon if it is still the one id names. */
void usock_unlink(const char *canon, const struct usock_id *id);

/* Set mode and group of the socket at canon, if it is still id's.
 * 0 / -1 with err. */
int usock_perms(const char *canon, const struct usock_id *id, mode_t mode,
    gid_t gid, char *err, size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_USOCK_H */
