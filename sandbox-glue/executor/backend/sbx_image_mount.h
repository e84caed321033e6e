/*
 * sbx_image_mount.h: what the backends call of the image store (an image
 * taken for a sandbox and mounted, let go) and what that needs of the
 * store: its lock, its users/ files, the sha256 helpers
 * (sbx_image_mount.c).  The store itself (its layout, profiles, list,
 * rm, sweep, the builder) is image/sbx_image.h, one floor up, which
 * builds on this: the backends never use image/.
 */
#ifndef SLUICE_SBX_IMAGE_MOUNT_H
#define SLUICE_SBX_IMAGE_MOUNT_H

#include <stddef.h>

#include "sandbox-glue/executor/backend/sbx.h"

#define SBX_DIGEST_HEX		64              /* sha256, lower-case hex */

enum sbx_img_rc {
	SBX_IMG_OK = 0,
	SBX_IMG_FAIL = -1,      /* anything else (err says) */
	SBX_IMG_MISSING = -2,   /* no image for that profile or digest */
	SBX_IMG_IN_USE = -3,    /* a sandbox uses it */
	SBX_IMG_UNKNOWN = -4,   /* no such profile file */
	SBX_IMG_FORBIDDEN = -5, /* the tenant may not use the profile */
};

/* ---- digests ---- */

/* 1 when s is SBX_DIGEST_HEX lower-case hex digits. */
int sbx_digest_ok(const char *s);
/* sha256 of the bytes of fd (from its start) in hex; 0/-1. */
int sbx_sha256_fd(int fd, char hex[SBX_DIGEST_HEX + 1]) SLUICE_MUSTCHECK;
/* sha256 of n bytes. */
void sbx_sha256_hex(const void *p, size_t n, char hex[SBX_DIGEST_HEX + 1]);

/* ---- the store's primitives (image/sbx_image.c and the builder too) ---- */

/* flock <dir>/.lock (LOCK_EX, LOCK_SH): the fd, or -1 with errno. */
int img_lock(const char *dir, int how);
void img_unlock(int fd);
/* The first line of a small file (at dirfd) into buf, no link followed:
 * 0/-1. */
int img_read_line(int dirfd, const char *path, char *buf, size_t len);
/* path (at dirfd) written with text through a temporary file and a
 * rename: 0/-1. */
int img_write_atomic(int dirfd, const char *path, const char *text);
/* <dir>/users/<digest>/<sha256 of the sandbox directory sbxdir>. */
int img_user_file(char *buf, size_t len, const char *dir, const char *digest,
    const char *sbxdir);

/* The store of rec's image (the directory of rec->image_path). */
int sbx_image_store_of(const struct sbx_rec *rec, char *buf,
    size_t len) SLUICE_MUSTCHECK;

/* ---- for the backends ---- */

/*
 * Take rec's image for the sandbox (under the store's lock: the image is
 * there, or SBX_IMG_MISSING with "image_missing: ..." in err; it is now
 * in use) and mount it, read-only, nosuid and nodev, as a detached mount
 * (fsmount(2)): the descriptor, which the caller attaches with
 * move_mount(2) where the root goes and then closes.  The mount takes
 * the image file (EROFS file-backed), or an auto-clearing loop device
 * where the kernel cannot (SLUICE_IMAGE_MOUNT=loop forces it, =file
 * forbids it); in both cases nothing of it outlives the last reference
 * to the mount.  Its source in mountinfo is /proc/self/fd/N or
 * /dev/loopN, no host path.
 */
int sbx_image_attach(const struct sbx_rec *rec, char *err, size_t errlen);
/* The sandbox no longer uses its image (destroy(), once it is gone). */
void sbx_image_detach(const struct sbx_rec *rec);
/* 1 when path is an ELF executable without an interpreter (static):
 * the shim bound into an image must not need the image's libc. */
int sbx_elf_static(const char *path);

#endif /* SLUICE_SBX_IMAGE_MOUNT_H */
