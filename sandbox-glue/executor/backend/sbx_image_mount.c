/*
 * sbx_image_mount.c: what the backends call of the image store
 * (sbx_image_mount.h: an image taken for a sandbox and mounted, let go)
 * and what it needs of the store: its lock, its users/ files, the sha256
 * helpers.  Kept apart from the profiles and the rest of the store
 * (image/sbx_image.c), which build on it: the backends never use image/.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <elf.h>
#include <linux/loop.h>
#include <linux/mount.h>

#include <openssl/evp.h>

#include "sandbox-glue/executor/backend/sbx_image_mount.h"

int
sbx_digest_ok(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' &&
		    s[i] <= 'f')))
			return 0;
	return i == SBX_DIGEST_HEX;
}

static void
to_hex(const unsigned char *md, char hex[SBX_DIGEST_HEX + 1])
{
	static const char x[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 32; i++) {
		hex[2 * i] = x[md[i] >> 4];
		hex[2 * i + 1] = x[md[i] & 15];
	}
	hex[SBX_DIGEST_HEX] = '\0';
}

void
sbx_sha256_hex(const void *p, size_t n, char hex[SBX_DIGEST_HEX + 1])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	(void)EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL);
	to_hex(md, hex);
}

int
sbx_sha256_fd(int fd, char hex[SBX_DIGEST_HEX + 1])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[32];
	unsigned int mdlen = 0;
	char *buf = malloc(1 << 20);
	ssize_t n;
	off_t off = 0;
	int rc = -1;

	if (ctx == NULL || buf == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(),
	    NULL) != 1)
		goto out;
	while ((n = pread(fd, buf, 1 << 20, off)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || EVP_DigestUpdate(ctx, buf, (size_t)n) != 1)
			goto out;
		off += n;
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
		goto out;
	to_hex(md, hex);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

/* flock <dir>/.lock (how); the fd, or -1. */
int
img_lock(const char *dir, int how)
{
	char p[SBX_PATH_MAX + 16];
	int fd;

	snprintf(p, sizeof(p), "%s/.lock", dir);
	if ((fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return -1;
	while (flock(fd, how) != 0)
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	return fd;
}

void
img_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* The first line of a small file into buf; 0/-1. */
int
img_read_line(int dirfd, const char *path, char *buf, size_t len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Write path (at dirfd) through a temporary file and a rename. */
int
img_write_atomic(int dirfd, const char *path, const char *text)
{
	char tmp[SBX_PATH_MAX + 200];
	size_t n = strlen(text);
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		return -1;
	if ((fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0644)) < 0)
		return -1;
	if (write(fd, text, n) != (ssize_t)n)
		rc = -1;
	if (close(fd) != 0)
		rc = -1;
	if (rc == 0 && renameat(dirfd, tmp, dirfd, path) != 0)
		rc = -1;
	if (rc != 0)
		(void)unlinkat(dirfd, tmp, 0);
	return rc;
}

int
sbx_image_store_of(const struct sbx_rec *rec, char *buf, size_t len)
{
	const char *s = strrchr(rec->image_path, '/');

	if (rec->image[0] == '\0' || s == NULL || s == rec->image_path ||
	    (size_t)(s - rec->image_path) >= len)
		return -1;
	memcpy(buf, rec->image_path, (size_t)(s - rec->image_path));
	buf[s - rec->image_path] = '\0';
	return 0;
}

/* <dir>/users/<digest>/<sha256 of the sandbox's directory>. */
int
img_user_file(char *buf, size_t len, const char *dir, const char *digest,
    const char *sbxdir)
{
	char h[SBX_DIGEST_HEX + 1];

	sbx_sha256_hex(sbxdir, strlen(sbxdir), h);
	return snprintf(buf, len, "%s/users/%s/%s", dir, digest, h) >=
	    (int)len ? -1 : 0;
}

/* ---- mounting ---- */

static int
sys_fsopen(const char *fs, unsigned flags)
{
	return (int)syscall(SYS_fsopen, fs, flags);
}

static int
sys_fsconfig(int fd, unsigned cmd, const char *key, const void *val, int aux)
{
	return (int)syscall(SYS_fsconfig, fd, cmd, key, val, aux);
}

static int
sys_fsmount(int fd, unsigned flags, unsigned attr)
{
	return (int)syscall(SYS_fsmount, fd, flags, attr);
}

/* A detached, read-only EROFS mount of source; -1 with the kernel's
 * words (read from the fs context) or errno in err. */
static int
erofs_mount(const char *source, char *err, size_t errlen)
{
	char msg[256];
	int fs, m = -1, e;
	ssize_t n;

	if ((fs = sys_fsopen("erofs", FSOPEN_CLOEXEC)) < 0)
		return sbx_err(err, errlen, "fsopen erofs: %s", strerror(errno));
	/* "ro" for the superblock: a read-only loop device is opened for
	 * reading only */
	if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "source", source, 0) != 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) != 0 ||
	    sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0 ||
	    (m = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY |
	    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0) {
		e = errno;
		n = read(fs, msg, sizeof(msg) - 1);
		msg[n > 0 ? n : 0] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		sbx_err(err, errlen, "mount erofs: %s%s%s", strerror(e),
		    msg[0] ? ": " : "", msg);
		close(fs);
		errno = e;
		return -1;
	}
	close(fs);
	return m;
}

/* The image through a loop device that clears itself on its last close:
 * the mount holds it, and it goes with the mount (or with our descriptor,
 * should the mount fail). */
static int
loop_mount(int imgfd, char *err, size_t errlen)
{
	struct loop_config lc;
	char dev[32];
	int ctl, lfd = -1, m = -1, i, nr = -1;

	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0)
		return sbx_err(err, errlen, "/dev/loop-control: %s",
		    strerror(errno));
	for (i = 0; i < 32; i++) {
		if ((nr = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0)
			break;
		snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
		if ((lfd = open(dev, O_RDONLY | O_CLOEXEC)) < 0)
			break;
		memset(&lc, 0, sizeof(lc));
		lc.fd = (unsigned)imgfd;
		lc.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0)
			break;
		close(lfd);
		lfd = -1;
		if (errno != EBUSY)     /* taken meanwhile: the next one */
			break;
	}
	close(ctl);
	if (lfd < 0)
		return sbx_err(err, errlen, "loop device%s%s: %s", nr >= 0 ?
		    " " : "", nr >= 0 ? dev : "", strerror(errno));
	m = erofs_mount(dev, err, errlen);
	close(lfd);
	return m;
}

int
sbx_image_attach(const struct sbx_rec *rec, char *err, size_t errlen)
{
	char dir[SBX_PATH_MAX], p[SBX_PATH_MAX + 160], src[48], e1[256];
	const char *how = getenv("SLUICE_IMAGE_MOUNT");
	struct stat st;
	int lk, fd = -1, m = -1, ufd;
	size_t n;

	if (!sbx_digest_ok(rec->image) || sbx_image_store_of(rec, dir,
	    sizeof(dir)) != 0)
		return sbx_err(err, errlen, "record: no image");
	if ((lk = img_lock(dir, LOCK_EX)) < 0) {
		sbx_err(err, errlen, "image_missing: %s: %s", dir,
		    strerror(errno));
		return SBX_IMG_MISSING;
	}
	if ((fd = open(rec->image_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0
	    || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		sbx_err(err, errlen, "image_missing: %s: %s", rec->image_path,
		    fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		img_unlock(lk);
		return SBX_IMG_MISSING;
	}
	/* in use from now on: the sandbox's own word first, then the
	 * store's entry that points to it */
	snprintf(p, sizeof(p), "%s/image.digest", rec->dir);
	n = strlen(rec->image);
	if ((ufd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0644)) < 0 || write(ufd, rec->image, n) != (ssize_t)n ||
	    close(ufd) != 0) {
		sbx_err(err, errlen, "%s: %s", p, strerror(errno));
		goto fail;
	}
	snprintf(p, sizeof(p), "%s/users/%s", dir, rec->image);
	if (util_mkdir_p(p, 0755) != 0 || img_user_file(p, sizeof(p), dir,
	    rec->image, rec->dir) != 0 || img_write_atomic(AT_FDCWD, p, rec->dir)
	    != 0) {
		sbx_err(err, errlen, "%s: %s", p, strerror(errno));
		goto fail;
	}
	img_unlock(lk);
	lk = -1;
	/* the kernel reads the file itself where it can (Linux 6.12 and
	 * later, EROFS_FS_BACKED_BY_FILE); named by our descriptor, so that
	 * mountinfo shows no host path */
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	if (how == NULL || strcmp(how, "loop") != 0) {
		m = erofs_mount(src, e1, sizeof(e1));
		if (m < 0 && how != NULL && strcmp(how, "file") == 0) {
			sbx_err(err, errlen, "%s", e1);
			goto fail;
		}
	}
	if (m < 0 && (m = loop_mount(fd, err, errlen)) < 0)
		goto fail;
	close(fd);
	return m;
fail:
	if (fd >= 0)
		close(fd);
	img_unlock(lk);
	sbx_image_detach(rec);
	return -1;
}

void
sbx_image_detach(const struct sbx_rec *rec)
{
	char dir[SBX_PATH_MAX], p[SBX_PATH_MAX + 160], who[SBX_PATH_MAX];
	int lk;

	if (!sbx_digest_ok(rec->image) || sbx_image_store_of(rec, dir,
	    sizeof(dir)) != 0)
		return;
	lk = img_lock(dir, LOCK_EX);
	if (img_user_file(p, sizeof(p), dir, rec->image, rec->dir) == 0 &&
	    img_read_line(AT_FDCWD, p, who, sizeof(who)) == 0 &&
	    strcmp(who, rec->dir) == 0)
		(void)unlink(p);
	snprintf(p, sizeof(p), "%s/image.digest", rec->dir);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/users/%s", dir, rec->image);
	(void)rmdir(p);
	img_unlock(lk);
}

int
sbx_elf_static(const char *path)
{
	unsigned char h[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0, is64, i;
	uint64_t phoff;
	unsigned phnum, phsz;
	uint16_t type;

	if (fd < 0)
		return 0;
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, ELFMAG, SELFMAG) != 0)
		goto out;
	is64 = h[EI_CLASS] == ELFCLASS64;
	if (is64) {
		Elf64_Ehdr e;

		memcpy(&e, h, sizeof(e));
		type = e.e_type;
		phoff = e.e_phoff;
		phnum = e.e_phnum;
		phsz = e.e_phentsize;
	} else if (h[EI_CLASS] == ELFCLASS32) {
		Elf32_Ehdr e;

		memcpy(&e, h, sizeof(e));
		type = e.e_type;
		phoff = e.e_phoff;
		phnum = e.e_phnum;
		phsz = e.e_phentsize;
	} else
		goto out;
	if ((type != ET_EXEC && type != ET_DYN) || phnum == 0 || phnum > 256 ||
	    phsz < (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
		goto out;
	for (i = 0; i < (int)phnum; i++) {
		unsigned char ph[sizeof(Elf64_Phdr)];
		uint32_t pt;

		if (pread(fd, ph, phsz > sizeof(ph) ? sizeof(ph) : phsz,
		    (off_t)(phoff + (uint64_t)i * phsz)) < (ssize_t)(is64 ?
		    sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
			goto out;
		memcpy(&pt, ph, sizeof(pt));    /* p_type comes first */
		if (pt == PT_INTERP)
			goto out;
	}
	rc = 1;
out:
	close(fd);
	return rc;
}
