/*
 * sbx_image.h: sandbox images.  A profile (a JSON file naming Debian
 * packages and the checks of what they provide) is built by mmdebstrap
 * into an EROFS image: a read-only file system in one file, named by the
 * sha256 of its bytes, that both backends mount read-only as a sandbox's
 * root (sbx.h: rec->image, rec->image_path).
 *
 * Why EROFS and not squashfs: this kernel mounts an EROFS file directly
 * (file-backed mounts, Linux 6.12 and later), so a sandbox's root needs
 * no loop device at all and goes with the last reference to its mount;
 * where the kernel cannot, a loop device set to clear itself on its last
 * close (LO_FLAGS_AUTOCLEAR) is used, which no exit path can leave
 * behind.  EROFS also reads faster (lz4, no per-read decompression of a
 * whole block).  squashfs with zstd would be about half the size (359
 * MiB for base against 681) and slower to make (6 minutes of mksquashfs
 * on the test machine).
 *
 * The store, image_dir (root's, 0755):
 *   <digest>.erofs     an image (0644)
 *   <digest>.json      what it was built from: profile, inputs, suite,
 *                      sources, the packages and versions in it, size,
 *                      build time
 *   profiles/<name>    the digest of the profile's newest image
 *   users/<digest>/<h> one file per sandbox that uses the image (h: the
 *                      sha256 of the sandbox's directory, which the file
 *                      holds); the sandbox's own <dir>/image.digest names
 *                      the digest as long as it uses it.  A file whose
 *                      sandbox directory is gone or names another image
 *                      is stale.
 *   .lock              flock, held while any of these change
 *   .build-<pid>/      a build in progress (its lock file held)
 * An image is in use while one of its users/ files is not stale; it is
 * kept while in use or while a profile names it, and removed (sweep)
 * once neither holds: a rebuild never changes a running sandbox, and the
 * image it replaced goes with its last sandbox.
 *
 * The store's lock, its users/ files, the digests and what the backends
 * call (an image taken for a sandbox and mounted, let go) are
 * backend/sbx_image_mount.h's, below the rest of the store.
 *
 * Error idiom as in sbx.h (0/-1 and a line in err), except where an
 * enum sbx_img_rc says which failure it was; sbx_img_code() gives the
 * error code for APIs ("image_missing", ...).
 */
#ifndef SLUICE_SBX_IMAGE_H
#define SLUICE_SBX_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sandbox-glue/executor/backend/sbx.h"
#include "sandbox-glue/executor/backend/sbx_image_mount.h"

#define SBX_PROFILE_HOST	"host"          /* no image: the host's /usr */
#define SBX_IMAGE_EXT		".erofs"
#define SBX_PROFILE_FILE_MAX	(64 * 1024)     /* bytes of a profile */
#define SBX_PROFILE_ITEMS_MAX	1024            /* packages, checks */
#define SBX_PROFILE_DEPTH_MAX	8               /* "extends" chain */
#define SBX_IMAGE_FORMAT	2               /* of what the builder makes:
                                                 * part of the inputs */
/* Every file of an image has this mtime, and its build runs with it as
 * SOURCE_DATE_EPOCH (2024-01-01; after 1980, which zip needs). */
#define SBX_IMAGE_EPOCH		1704067200

/* "image_missing", "image_in_use", "profile_unknown",
 * "profile_forbidden", "image_failed". */
const char *sbx_img_code(int rc);

/* ---- profiles ---- */

/*
 * A profile file, <dir>/<name>.json:
 *   { "description": "...", "extends": "base",
 *     "packages": ["python3", ...],
 *     "check": { "python": ["pandas", ...], "commands": ["jq --version"] } }
 * Unknown keys are refused.  Packages are Debian package names; check
 * lists the Python modules to import and the shell lines that must exit
 * 0 in a sandbox of the image (make check-images).  A profile that
 * extends another has its packages and checks too.
 */
struct sbx_profile {
	char name[SBX_ID_MAX + 1];
	char path[SBX_PATH_MAX];        /* its own file */
	char extends[SBX_ID_MAX + 1];   /* as written; "" none */
	char description[256];
	char **packages;                /* sorted, no duplicates */
	size_t npackages;
	char **python;                  /* in order, no duplicates */
	size_t npython;
	char **commands;
	size_t ncommands;
};

/* One file's text (name: the profile's name, for messages); extends is
 * not followed.  p is reset first; sbx_profile_free it in any case. */
int sbx_profile_parse(struct sbx_profile *p, const char *name,
    const char *text, size_t len, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* The profile called name from the first of dirs (NULL-terminated) that
 * has <name>.json, with what it extends (bounded, no cycles).
 * SBX_IMG_UNKNOWN when no directory has it. */
int sbx_profile_load(struct sbx_profile *p, const char *const *dirs,
    const char *name, char *err, size_t errlen) SLUICE_MUSTCHECK;
void sbx_profile_free(struct sbx_profile *p);
/* A Debian package name (policy 5.6.1): [a-z0-9][a-z0-9+.-]+. */
int sbx_pkg_ok(const char *s);

/*
 * The inputs of a build, as the sha256 (hex) of a canonical JSON text of
 * them: the builder's format, the packages, the suite, the sources (one
 * apt line each, as given), the architecture, the epoch and the file
 * system.  Two builds of the same inputs make the same image, byte for
 * byte, as long as the mirror serves the same package versions; the
 * image's own digest is what names it.  canon (malloc'd, may be NULL)
 * gets the text.
 */
int sbx_image_inputs(const struct sbx_profile *p, const char *suite,
    const char *sources, const char *arch, char hex[SBX_DIGEST_HEX + 1],
    char **canon) SLUICE_MUSTCHECK;

/* ---- the store ---- */

/* The file of an image: <image_dir>/<digest>.erofs. */
int sbx_image_file(char *buf, size_t len, const char *image_dir,
    const char *digest) SLUICE_MUSTCHECK;
/* The digest of the profile's newest image, if its file is there:
 * SBX_IMG_OK, SBX_IMG_MISSING (and why in err), SBX_IMG_FAIL. */
int sbx_image_current(const char *image_dir, const char *profile,
    char digest[SBX_DIGEST_HEX + 1], char *err, size_t errlen) SLUICE_MUSTCHECK;
/*
 * Fill rec->profile, rec->image and rec->image_path for a new sandbox of
 * profile (SBX_PROFILE_HOST: no image; rec->image stays "").  The image
 * is not yet in use: the backend's create() takes it (sbx_image_attach)
 * under the store's lock, and fails with image_missing should it have
 * gone meanwhile.
 */
int sbx_image_pick(struct sbx_rec *rec, const char *image_dir,
    const char *profile, char *err, size_t errlen) SLUICE_MUSTCHECK;
/* Number of sandboxes using the image (stale users dropped), -1 on
 * error.  Takes the store's lock. */
int sbx_image_users(const char *image_dir, const char *digest) SLUICE_MUSTCHECK;
/*
 * { "images": [ { "digest", "file", "size", "built", "profile" (that it
 *   was built for), "profiles" (that name it now: [..]), "users" (n),
 *   "packages" (n) } ... ] } sorted by digest; images whose metadata is
 * missing are listed with what is known.  A new reference, or NULL and
 * err.
 */
json_t *sbx_image_list(const char *image_dir, char *err, size_t errlen);
/* Remove the image named by what (a profile: its newest image, or a
 * digest, or a unique prefix of 12 or more digits) and every profile
 * name of it; refused (SBX_IMG_IN_USE) while a sandbox uses it. */
int sbx_image_rm(const char *image_dir, const char *what,
    char digest[SBX_DIGEST_HEX + 1], char *err, size_t errlen) SLUICE_MUSTCHECK;
/* Remove the images no profile names and no sandbox uses, and builds
 * left by a killed builder; the number removed. */
int sbx_image_sweep(const char *image_dir);
/* Remove a tree without following links nor leaving its file system. */
void sbx_image_rm_tree(const char *path);

/* ---- the builder (sbx_image_build.c) ---- */

struct sbx_build_opts {
	const char *image_dir;
	const char *const *profile_dirs;        /* NULL-terminated */
	const char *profile;
	const char *suite;      /* "": the host's (os-release) */
	const char *sources;    /* apt lines, one a line; "": the host's
	                         * Debian sources (apt-get indextargets,
	                         * Origin: Debian) */
	int cached;             /* reuse an image of the same inputs
	                         * without building */
	long timeout_s;         /* bound on mmdebstrap and mkfs.erofs */
	int verbose;            /* mmdebstrap's progress to stderr */
};

struct sbx_build_res {
	char digest[SBX_DIGEST_HEX + 1];
	char inputs[SBX_DIGEST_HEX + 1];
	int reused;             /* the same image was there already */
	int cached;             /* not built: --cached found one */
	int64_t build_ms;
	uint64_t size;          /* bytes of the image file */
	uint64_t tree_bytes;    /* bytes of the files in it */
	size_t npackages;       /* installed */
};

/* Build (or with cached, find) the profile's image, install it in the
 * store and name it the profile's newest.  SBX_IMG_UNKNOWN, SBX_IMG_FAIL
 * (err: why, with the build log's last line). */
int sbx_image_build(const struct sbx_build_opts *o, struct sbx_build_res *r,
    char *err, size_t errlen) SLUICE_MUSTCHECK;

/* The host's Debian apt sources as lines for mmdebstrap (malloc'd), or
 * NULL and why. */
char *sbx_host_sources(const char *arch, char *err, size_t errlen);

#endif /* SLUICE_SBX_IMAGE_H */
