/*
 * sbx_util.c: small helpers shared by the backends and sluice-run.
 */
#include "sluice-config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proxy/lib/util.h"
#include "sandbox-glue/executor/backend/sbx-int.h"

int64_t
sbx_now_ms(void)
{
	return util_now_ms();
}

uint64_t
sbx_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	ssize_t n;
	int i, fd;

	/* one read (the kernel makes the line at once), no stdio: the
	 * daemon asks for every command */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: skip to the
	 * last ')' then count fields; starttime is field 22 */
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	p++;
	for (i = 3; i <= 22 && p != NULL; i++) {
		p = strchr(p + 1, ' ');
		if (p != NULL && i == 21)
			sscanf(p + 1, "%llu", &st);
	}
	/* a zombie still has a stat line: count it as gone */
	if (strstr(buf, ") Z ") != NULL)
		return 0;
	return st;
}

/* ---- the bounded log ---- */

int
sbx_shim_spawn(const char *shim, char *const *argv, int fd0, int fd3,
    int detach, pid_t *pid)
{
	static char *const envp[] = { NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t all, none;
	short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
	int rc = -1, e = EINVAL, hi0 = -1, hi3 = -1;

	if (shim == NULL || shim[0] == '\0')
		goto out;
	/* both out of 0-3 first: a caller started with a standard
	 * descriptor closed may hold fd3 at 0, which fd0's dup2 would
	 * overwrite before it is copied */
	if ((fd0 >= 0 && (hi0 = fcntl(fd0, F_DUPFD_CLOEXEC, 10)) < 0) ||
	    (fd3 >= 0 && (hi3 = fcntl(fd3, F_DUPFD_CLOEXEC, 10)) < 0)) {
		e = errno;
		goto out;
	}
	if ((e = posix_spawn_file_actions_init(&fa)) != 0)
		goto out;
	if ((e = posix_spawnattr_init(&at)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		goto out;
	}
	sigfillset(&all);
	sigemptyset(&none);
	if (detach)
		flags |= POSIX_SPAWN_SETSID;
	/* dup2 clears close-on-exec; posix_spawn says its error itself */
	if ((hi0 < 0 || posix_spawn_file_actions_adddup2(&fa, hi0, 0) == 0) &&
	    (hi3 < 0 || posix_spawn_file_actions_adddup2(&fa, hi3, 3) == 0) &&
	    (!detach || (posix_spawn_file_actions_addopen(&fa, 1,
	    "/dev/null", O_WRONLY, 0) == 0 &&
	    posix_spawn_file_actions_adddup2(&fa, 1, 2) == 0 &&
	    posix_spawn_file_actions_addchdir_np(&fa, "/") == 0)) &&
	    posix_spawn_file_actions_addclosefrom_np(&fa, 4) == 0 &&
	    posix_spawnattr_setsigdefault(&at, &all) == 0 &&
	    posix_spawnattr_setsigmask(&at, &none) == 0 &&
	    posix_spawnattr_setflags(&at, flags) == 0 &&
	    (e = posix_spawn(pid, shim, &fa, &at, argv, envp)) == 0)
		rc = 0;
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
out:
	if (hi0 >= 0)
		close(hi0);
	if (hi3 >= 0)
		close(hi3);
	if (rc != 0)
		errno = e != 0 ? e : EINVAL;
	return rc;
}

int
sbx_log_start(const char *dir, const char *shim, char *err, size_t errlen)
{
	char p[4096], line[64], max[24];
	char *argv[] = { "sluice-shim", "--log", max, NULL };
	int pp[2], dfd, fd;
	pid_t pid;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
	    O_NOFOLLOW)) < 0)
		return sbx_err(err, errlen, "%s: %s", dir, strerror(errno));
	if (pipe2(pp, O_CLOEXEC) != 0) {
		close(dfd);
		return sbx_err(err, errlen, "pipe: %s", strerror(errno));
	}
	/* a session of its own (out of the caller's Ctrl-C) and nothing
	 * of the caller's (locks above all): it outlives it */
	snprintf(max, sizeof(max), "%d", SBX_LOG_MAX);
	if (sbx_shim_spawn(shim, argv, pp[0], dfd, 1, &pid) != 0) {
		close(dfd);
		close(pp[0]);
		close(pp[1]);
		return sbx_err(err, errlen, "%s --log: %s", shim,
		    strerror(errno));
	}
	close(pp[0]);
	close(dfd);
	snprintf(p, sizeof(p), "%s/log.pid", dir);
	snprintf(line, sizeof(line), "%d %llu\n", (int)pid,
	    (unsigned long long)sbx_proc_start(pid));
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) >= 0) {
		(void)!write(fd, line, strlen(line));
		close(fd);
	}
	return pp[1];
}

void
sbx_log_flush(int wfd)
{
	int i, n;

	for (i = 0; i < 100; i++) {
		if (ioctl(wfd, FIONREAD, &n) != 0 || n <= 0)
			break;
		usleep(10000);
	}
	/* the last read may still be on its way to the file */
	usleep(20000);
}

void
sbx_log_stop(const char *dir)
{
	char p[4096], buf[64];
	unsigned long long st = 0;
	int fd, pid = 0, i;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/log.pid", dir);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (sscanf(buf, "%d %llu", &pid, &st) == 2 && pid > 0 && st != 0 &&
	    sbx_proc_start(pid) == st) {
		kill(pid, SIGKILL);
		/* 1 ms steps (10 ms was most of a gVisor delete), 2 s at
		 * most as before */
		for (i = 0; i < 2000 && sbx_proc_start(pid) == st; i++)
			usleep(1000);
		/* ours when create fails */
		(void)waitpid(pid, NULL, WNOHANG);
	}
	unlink(p);
}

uint32_t
sbx_dir_hash(const char *dir)
{
	uint32_t h = 2166136261u;
	const char *p;

	for (p = dir; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* ---- root file system pieces ---- */

const char *const sbx_root_top[] = { "bin", "sbin", "lib", "lib32",
    "lib64", "libx32" };
const size_t sbx_root_top_n = sizeof(sbx_root_top) / sizeof(sbx_root_top[0]);

const char *const sbx_etc_keep[] = {
	"ssl", "ca-certificates", "ca-certificates.conf", "alternatives",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf",
	"protocols", "services", "mime.types", "localtime", "timezone",
	"host.conf", "os-release", "debian_version", "python3",
	"python3.11", "python3.12", "python3.13", "bash.bashrc", "profile",
	"inputrc", "mke2fs.conf", "perl", "gai.conf", "login.defs",
	"magic", "papersize", "xdg",
};
const size_t sbx_etc_keep_n = sizeof(sbx_etc_keep) / sizeof(sbx_etc_keep[0]);

int
sbx_mkdir(const char *path, mode_t mode)
{
	return mkdir(path, mode) == 0 || errno == EEXIST ? 0 : -1;
}

/* open/write only: the ns backend calls it in its init child */
int
sbx_write_file(const char *path, const char *content, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t n = content ? strlen(content) : 0;
	int rc = 0;

	if (fd < 0)
		return -1;
	if (n > 0 && write(fd, content, n) != (ssize_t)n)
		rc = -1;
	if (close(fd) != 0)
		rc = -1;
	return rc;
}

int
sbx_copy_file(const char *from, const char *to)
{
	char buf[8192];
	int in, out, rc = -1;
	ssize_t n;

	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) <
	    0)
		goto out;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			goto out;
	rc = n == 0 ? 0 : -1;
out:
	close(in);
	if (out >= 0 && close(out) != 0)
		rc = -1;
	return rc;
}

void
sbx_copy_link(const char *src, const char *dst)
{
	char lnk[SBX_PATH_MAX];
	ssize_t n;

	if ((n = readlink(src, lnk, sizeof(lnk) - 1)) > 0) {
		lnk[n] = '\0';
		(void)!symlink(lnk, dst);
	}
}

int
sbx_etc_ids(const char *root, unsigned uid, unsigned gid, char *failed,
    size_t flen)
{
	char text[512];

	snprintf(failed, flen, "%s/etc/passwd", root);
	snprintf(text, sizeof(text), "root:x:0:0:root:/root:/bin/sh\n"
	    "user:x:%u:%u:sandbox user:%s:/bin/bash\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	    uid, gid, SBX_HOME);
	if (sbx_write_file(failed, text, 0644) != 0)
		return -1;
	snprintf(failed, flen, "%s/etc/group", root);
	snprintf(text, sizeof(text), "root:x:0:\nuser:x:%u:\n"
	    "nogroup:x:65534:\n", gid);
	if (sbx_write_file(failed, text, 0644) != 0)
		return -1;
	snprintf(failed, flen, "%s/etc/hosts", root);
	if (sbx_write_file(failed, "127.0.0.1\tlocalhost sandbox\n"
	    "::1\tlocalhost ip6-localhost ip6-loopback\n", 0644) != 0)
		return -1;
	snprintf(failed, flen, "%s/etc/hostname", root);
	/* optional: without it the sandbox only lacks a pretty name */
	if (sbx_write_file(failed, "sandbox\n", 0644) != 0)
		failed[0] = '\0';
	return 0;
}
