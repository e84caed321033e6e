/*
 * sbx_image-int.h: what sbx_image.c, sbx_image_mount.c and
 * sbx_image_build.c share of the store (sbx_image.h describes it).
 */
#ifndef SLUICE_SBX_IMAGE_INT_H
#define SLUICE_SBX_IMAGE_INT_H

#include "sandbox-glue/executor/sbx_image.h"

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

#endif /* SLUICE_SBX_IMAGE_INT_H */
