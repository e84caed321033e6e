/*
 * exec_ws.c: the workspace of a sandbox as a file system of its own,
 * so that its size and its inodes are limits the kernel enforces
 * (issue 11 finding 9): a sparse image file <dir>/workspace.img, made
 * ext4 by mke2fs with -N inodes, attached to a loop device and mounted
 * at <dir>/workspace nosuid,nodev (noexec would break the commands run
 * from it).
 *
 * Why not project quotas: they need the quota feature on the file
 * system and a prjquota mount, which the state dir's file system
 * (ext4 here, often overlay or tmpfs in containers) does not have and
 * the daemon cannot turn on; a loop file system works on any of them
 * and makes df inside the sandbox show the sandbox's size.
 *
 * The image is allocated whole (fallocate) when made, not sparse (issue
 * 20 point 4): a sparse image takes host blocks as the sandbox writes,
 * so one tenant filling the host's file system within its own disk_mb
 * made the next write of another sandbox's ext4 fail on the loop device
 * (an I/O error: its journal aborts, it goes read-only, data is lost).
 * Allocated, a write inside the image never needs a host block.  What
 * could give blocks back is kept from doing so: mke2fs -E nodiscard
 * (no discard of the image), lazy_itable_init=0 and lazy_journal_init=0
 * (the kernel's lazy init zeroes the inode tables later through the loop
 * device, which punches holes for it), and the image is allocated again
 * after mke2fs, whose zeroing punches holes where the file system cannot
 * zero a range in place (tmpfs).  The mount has no discard option and a
 * sandbox may not FITRIM (CAP_SYS_ADMIN of the host).  fallocate takes
 * no time on ext4, xfs or tmpfs (no data is written); a file system
 * without it (EOPNOTSUPP) gets a sparse image and a warning, the
 * admission against free space (exec_box.c) still counting its size.
 *
 * The loop device is set up with LO_FLAGS_AUTOCLEAR and its fd closed
 * once mounted: the kernel releases the device when the last mount of
 * it goes (the one here and the sandbox's bind mounts of it), so no
 * path leaves a device attached: a failed mount clears it at once, an
 * unmount (or a sandbox's mount namespace ending) lets it go.
 *
 * mke2fs runs once per geometry (size, inodes), not per create (issue 26
 * point 2; it was 4-7 ms of a 24 ms create here): its image, made
 * owned by root, is kept as a template under
 * <state_dir>/.ws-templates/, every block of zeros punched out, and a
 * create copies the template's data ranges (SEEK_DATA, about 100 KiB
 * for 1 GiB) with copy_file_range into its own image, which is
 * allocated whole beforehand: its unwritten extents read as the zeros
 * the template's holes stand for, and the kernel's lazy init has
 * nothing left to zero (the template's groups say so, as mke2fs's
 * lazy_itable_init=0 made them).  The workspace's root is chowned to
 * the sandbox user once mounted (mke2fs's root_owner did it before).
 * No fsync on the create path (mke2fs's own flush went with it): the
 * image's blocks reach the disk with the host's writeback of the image
 * file, or sooner with the new file system's first journal commit
 * (which flushes the loop device); a host crash before that catches a
 * workspace that was empty.
 * Every workspace of one geometry has the template's UUID: nothing
 * reads it (no fstab, no blkid lookup: the image is mounted by its
 * loop device).  A template is made through a temporary name and
 * renamed, so two workers making it at once leave one whole file.
 *
 * Runs in the workers (blocking: mke2fs, the ioctls, umount).
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox-glue/executor/execd/execd-int.h"

/* "what: strerror(e)" */
static int
wserr(char *err, size_t len, const char *what, int e)
{
	snprintf(err, len, "%.300s: %s", what, strerror(e));
	return -1;
}

/*
 * mke2fs on the image; its output goes to /dev/null (a failure says
 * its exit status).  Its geometry follows the size (issue 24 point 5:
 * 8 and 16 MB failed, 32 MB left 11 MiB usable), so that df inside
 * shows at least 80% of disk_mb free (85-93% measured from 8 MB up),
 * not mke2fs.conf's defaults for whatever size type:
 *  - 1 KiB blocks below 512 MiB (or when the inodes need more than one
 *    per 4 KiB), 4 KiB above;
 *  - no journal below 32 MiB (ext4's smallest, 1 MiB, is an eighth of
 *    8 MB), then 1/64 of the size up to 1 GiB, mke2fs's own above;
 *  - no resize_inode (its GDT blocks are kept for growing the file
 *    system, which a workspace never does), no reserved blocks;
 *  - the inode count as asked (exec_parse.c keeps it to what fits).
 */
static int
ws_mkfs(const char *mke2fs, const char *img, uint64_t size, uint64_t inodes,
    char *err, size_t len)
{
	char n[32], owner[128], jsz[32];
	int st, fd, small = size < (512ull << 20) ||
	    inodes > size / XD_WS_INODE_BYTES;
	pid_t pid;

	snprintf(n, sizeof(n), "%llu", (unsigned long long)inodes);
	snprintf(owner, sizeof(owner), "root_owner=0:0,nodiscard,"
	    "lazy_itable_init=0,lazy_journal_init=0");
	snprintf(jsz, sizeof(jsz), "size=%llu", (unsigned long long)
	    (size >> 26 > (small ? 1 : 4) ? size >> 26 : (small ? 1 : 4)));
	if ((pid = fork()) < 0)
		return wserr(err, len, mke2fs, errno);
	if (pid == 0) {
		char *argv[20] = { (char *)mke2fs, (char *)"-q", (char *)"-F",
		    (char *)"-t", (char *)"ext4", (char *)"-m", (char *)"0",
		    (char *)"-N", n, (char *)"-E", owner, (char *)"-I",
		    (char *)"256", (char *)"-b", small ? (char *)"1024" :
		    (char *)"4096", NULL };
		size_t i = 15;

		if (size < (32ull << 20))
			argv[i++] = (char *)"-O^has_journal,^resize_inode";
		else {
			argv[i++] = (char *)"-O^resize_inode";
			if (size < (1ull << 30)) {
				argv[i++] = (char *)"-J";
				argv[i++] = jsz;
			}
		}
		argv[i++] = (char *)img;
		argv[i] = NULL;
		char *envp[] = { (char *)"PATH=/usr/sbin:/sbin:/usr/bin:/bin",
		    (char *)"MKE2FS_CONFIG=/etc/mke2fs.conf", NULL };

		if ((fd = open("/dev/null", O_RDWR)) >= 0) {
			(void)dup2(fd, 0);
			(void)dup2(fd, 1);
			(void)dup2(fd, 2);
		}
		execve(mke2fs, argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return wserr(err, len, mke2fs, errno);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, len, "%.300s: exit status %d%s", mke2fs,
		    WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		    WIFEXITED(st) && WEXITSTATUS(st) == 127 ? " (not found: "
		    "set \"mke2fs\")" : "");
		return -1;
	}
	return 0;
}

/* A free loop device attached to imgfd (autoclear); its fd or -1. */
static int
ws_loop(int imgfd, const char *img, char *dev, size_t devlen, char *err,
    size_t len)
{
	struct loop_config lc;
	int ctl, fd = -1, n, tries, saved;

	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0)
		return wserr(err, len, "/dev/loop-control", errno);
	/* another process may take the device GET_FREE named: try again
	 * (16 tries lost to a burst of 16 creates, which the template made
	 * fast enough to meet here at once), a little later each time */
	for (tries = 0; tries < 64; tries++) {
		if (tries > 0) {
			struct timespec ts = { 0, (long)(tries % 8 + 1) *
			    1000000L };

			nanosleep(&ts, NULL);
		}
		if ((n = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0) {
			wserr(err, len, "LOOP_CTL_GET_FREE", errno);
			break;
		}
		snprintf(dev, devlen, "/dev/loop%d", n);
		if ((fd = open(dev, O_RDWR | O_CLOEXEC)) < 0) {
			wserr(err, len, dev, errno);
			break;
		}
		memset(&lc, 0, sizeof(lc));
		lc.fd = (unsigned)imgfd;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		/* the name losetup shows (the kernel keeps 64 bytes) */
		memcpy(lc.info.lo_file_name, img, strlen(img) <
		    sizeof(lc.info.lo_file_name) ? strlen(img) :
		    sizeof(lc.info.lo_file_name) - 1);
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0)
			break;
		saved = errno;
		wserr(err, len, "LOOP_CONFIGURE", saved);
		close(fd);
		fd = -1;
		if (saved != EBUSY)
			break;
	}
	close(ctl);
	return fd;
}

/* Every block of the image allocated (holes filled, data kept): 0, or
 * -1 with err and *nospace 1 when the host's file system is full.  A
 * file system that cannot allocate leaves the image sparse (logged). */
static int
ws_alloc(int fd, const char *img, uint64_t size, int *nospace, char *err,
    size_t len)
{
	if (fallocate(fd, 0, 0, (off_t)size) == 0)
		return 0;
	if (errno == EOPNOTSUPP) {
		xd_log(XD_LOG_WARN, "%s: fallocate not supported here: the "
		    "workspace image stays sparse", img);
		return 0;
	}
	*nospace = errno == ENOSPC || errno == EDQUOT;
	return wserr(err, len, img, errno);
}

/* Every 4 KiB block of zeros in the data of fd punched out: the
 * template's data ranges are then what mke2fs wrote that is not zero. */
static int
ws_punch_zeros(int fd, char *err, size_t len)
{
	static char buf[65536];
	off_t pos = 0, end;
	ssize_t n, k;

	for (;;) {
		if ((pos = lseek(fd, pos, SEEK_DATA)) < 0)
			return errno == ENXIO ? 0 : wserr(err, len, "SEEK_DATA",
			    errno);
		if ((end = lseek(fd, pos, SEEK_HOLE)) < 0)
			return wserr(err, len, "SEEK_HOLE", errno);
		while (pos < end) {
			if ((n = pread(fd, buf, sizeof(buf), pos)) <= 0)
				return wserr(err, len, "template", n < 0 ? errno :
				    EIO);
			for (k = 0; k + 4096 <= n; k += 4096) {
				static const char z[4096];

				if (memcmp(buf + k, z, 4096) == 0 &&
				    fallocate(fd, FALLOC_FL_PUNCH_HOLE |
				    FALLOC_FL_KEEP_SIZE, pos + k, 4096) != 0)
					return wserr(err, len, "punch", errno);
			}
			pos += n;
		}
	}
}

/*
 * The template of this geometry, made when missing: an fd of it, read
 * only, or -1 with err.  The name holds the geometry's version (the
 * arguments of ws_mkfs: a change there is a new name), size and inodes.
 */
static int
ws_template(const char *mke2fs, const char *state_dir, uint64_t size,
    uint64_t inodes, char *err, size_t len)
{
	char dir[SBX_PATH_MAX + 32], p[SBX_PATH_MAX + 96], t[SBX_PATH_MAX + 128];
	int fd;

	snprintf(dir, sizeof(dir), "%s/.ws-templates", state_dir);
	if (snprintf(p, sizeof(p), "%s/g1-%llu-%llu.img", dir,
	    (unsigned long long)size, (unsigned long long)inodes) >=
	    (int)sizeof(p))
		return wserr(err, len, "template", ENAMETOOLONG);
	if ((fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
		return fd;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return wserr(err, len, dir, errno);
	snprintf(t, sizeof(t), "%s.%d.tmp", p, (int)getpid());
	if ((fd = open(t, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0)
		return wserr(err, len, t, errno);
	if (ftruncate(fd, (off_t)size) != 0) {
		wserr(err, len, t, errno);
		goto fail;
	}
	if (ws_mkfs(mke2fs, t, size, inodes, err, len) != 0 ||
	    ws_punch_zeros(fd, err, len) != 0)
		goto fail;
	if (rename(t, p) != 0) {
		wserr(err, len, p, errno);
		goto fail;
	}
	close(fd);
	if ((fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return wserr(err, len, p, errno);
	xd_log(XD_LOG_INFO, "%s: workspace template made", p);
	return fd;
fail:
	close(fd);
	(void)unlink(t);
	return -1;
}

/* The template's data ranges into the image at the same offsets. */
static int
ws_copy(int from, int to, char *err, size_t len)
{
	off_t pos = 0, end, in, out;
	ssize_t n;

	for (;;) {
		if ((pos = lseek(from, pos, SEEK_DATA)) < 0)
			return errno == ENXIO ? 0 : wserr(err, len, "SEEK_DATA",
			    errno);
		if ((end = lseek(from, pos, SEEK_HOLE)) < 0)
			return wserr(err, len, "SEEK_HOLE", errno);
		in = out = pos;
		while (in < end) {
			n = copy_file_range(from, &in, to, &out, (size_t)(end -
			    in), 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return wserr(err, len, "copy_file_range", n < 0 ?
				    errno : EIO);
		}
		pos = end;
	}
}

int
xd_ws_make(const char *mke2fs, const char *state_dir, const struct sbx_rec *r,
    const struct xd_lims *lim, int *nospace, char *err, size_t len)
{
	char img[SBX_PATH_MAX + 32], dev[32], lf[SBX_PATH_MAX + 32];
	int imgfd = -1, loopfd = -1, tfd = -1, rc = -1;

	*nospace = 0;
	if (mkdir(r->workspace, 0750) != 0)
		return wserr(err, len, r->workspace, errno);
	if (lim->disk_bytes == 0) {
		if (chown(r->workspace, r->host_uid, r->host_gid) != 0)
			return wserr(err, len, r->workspace, errno);
		return 0;
	}
	snprintf(img, sizeof(img), "%s/workspace.img", r->dir);
	if ((imgfd = open(img, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		wserr(err, len, img, errno);
		goto out;
	}
	/* its blocks taken now (see the top), before mke2fs writes */
	if (ftruncate(imgfd, (off_t)lim->disk_bytes) != 0) {
		wserr(err, len, img, errno);
		goto out;
	}
	if (ws_alloc(imgfd, img, lim->disk_bytes, nospace, err, len) != 0 ||
	    (tfd = ws_template(mke2fs, state_dir, lim->disk_bytes,
	    lim->inodes, err, len)) < 0 || ws_copy(tfd, imgfd, err, len) !=
	    0)
		goto out;
	if ((loopfd = ws_loop(imgfd, img, dev, sizeof(dev), err, len)) < 0)
		goto out;
	if (mount(dev, r->workspace, "ext4", MS_NOSUID | MS_NODEV |
	    MS_NOATIME, "errors=remount-ro") != 0) {
		wserr(err, len, dev, errno);
		/* not mounted: autoclear waits for a close that follows a
		 * use; clear it now */
		(void)ioctl(loopfd, LOOP_CLR_FD, 0);
		goto out;
	}
	/* mke2fs made lost+found in the sandbox's view: e2fsck makes it
	 * again if ever needed */
	snprintf(lf, sizeof(lf), "%s/lost+found", r->workspace);
	(void)rmdir(lf);
	/* the template's root is root's: the sandbox user's now */
	if (chown(r->workspace, r->host_uid, r->host_gid) != 0 ||
	    chmod(r->workspace, 0750) != 0) {
		wserr(err, len, r->workspace, errno);
		(void)!xd_ws_remove(r);
		goto out;
	}
	rc = 0;
out:
	if (tfd >= 0)
		close(tfd);
	if (loopfd >= 0)
		close(loopfd);  /* the mount holds the device now */
	if (imgfd >= 0)
		close(imgfd);
	if (rc != 0)
		(void)unlink(img);
	return rc;
}

int
xd_ws_remove(const struct sbx_rec *r)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	int i;

	/* every mount on the workspace (a create killed and retried may
	 * have stacked two); busy ones (a process the destroy did not end)
	 * a while, then detached: the device goes with the last user */
	for (i = 0; i < 60; i++) {
		if (umount2(r->workspace, UMOUNT_NOFOLLOW) == 0)
			continue;
		if (errno == EINVAL || errno == ENOENT)
			return 0;       /* not (or no longer) a mount point */
		if (errno != EBUSY)
			break;
		if (i >= 40) {
			if (umount2(r->workspace, UMOUNT_NOFOLLOW | MNT_DETACH)
			    == 0)
				continue;
			break;
		}
		nanosleep(&ts, NULL);
	}
	xd_log(XD_LOG_WARN, "%s: cannot unmount: %s", r->workspace,
	    strerror(errno));
	return -1;
}
