/*
 * sbx_root.h: the pieces of a sandbox's root file system (sbx_util.c),
 * for both backends and for the image builder (image/sbx_image_build.c),
 * which lays out an image's root the same way.
 */
#ifndef SLUICE_SBX_ROOT_H
#define SLUICE_SBX_ROOT_H

#include <stddef.h>
#include <sys/types.h>

#include "sandbox-glue/executor/backend/sbx.h"

/* The top-level entries of a merged-/usr host ("bin", "lib", ...): each
 * is a symlink (copied, sbx_copy_link) or a directory (bound). */
extern const char *const sbx_root_top[];
extern const size_t sbx_root_top_n;
/* /etc entries copied (files) or bound read-only (directories) when the
 * host has them; passwd, group, hosts and hostname are written
 * (sbx_etc_ids). */
extern const char *const sbx_etc_keep[];
extern const size_t sbx_etc_keep_n;
/* mkdir that accepts an existing directory: 0/-1. */
int sbx_mkdir(const char *path, mode_t mode);
/* Create or truncate path with mode and write content (NULL: none). */
int sbx_write_file(const char *path, const char *content, mode_t mode) SLUICE_MUSTCHECK;
/* Copy the regular file from to to (mode 0644). */
int sbx_copy_file(const char *from, const char *to);
/* Make dst a symlink with the target of the symlink src (best effort). */
void sbx_copy_link(const char *src, const char *dst);
/*
 * Write <root>/etc/passwd and group (root, "user" uid:gid with home
 * SBX_HOME, nobody), hosts (loopback names only) and hostname.  -1 with
 * the path that failed in failed (hostname is best effort).
 */
int sbx_etc_ids(const char *root, unsigned uid, unsigned gid, char *failed,
    size_t flen) SLUICE_MUSTCHECK;

#endif /* SLUICE_SBX_ROOT_H */
