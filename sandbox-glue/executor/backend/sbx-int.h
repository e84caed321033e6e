/*
 * sbx-int.h: what the backends (sbx_ns.c, sbx_gvisor.c) share and
 * sbx_util.c, sbx_seccomp.c and the image builder provide for them:
 * the sandbox log's reader, host-wide names and the seccomp filter (the
 * pieces of a sandbox's root file system, which the image builder uses
 * too, are sbx_root.h).  Private to this folder: the image store,
 * sluice-execd and sluice-run see the backends through sbx.h, sbx_cfg.h,
 * sbx_root.h and sbx_image_mount.h.
 */
#ifndef SLUICE_SBX_INT_H
#define SLUICE_SBX_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox-glue/executor/backend/sbx.h"
#include "sandbox-glue/executor/backend/sbx_root.h"

/*
 * The bounded log of a sandbox's holder and shim: a pipe whose reader,
 * a host process of its own (`shim --log`, named "sluice-log", its pid
 * and start time in <dir>/log.pid), appends to <dir>/init.log and, before it would pass
 * SBX_LOG_MAX bytes, renames it to init.log.1 (replacing the older one)
 * and starts a new one.  A sandbox that makes the shim log without end
 * keeps at most twice SBX_LOG_MAX on the host.  sbx_log_start returns
 * the pipe's write end (close-on-exec), -1 on error; the reader ends
 * when every write end is closed.  sbx_log_flush waits (bounded) until
 * the reader has taken what is in the pipe.  sbx_log_stop kills the
 * reader and waits until it is gone (destroy, before the directory
 * goes).
 */
#define SBX_LOG_MAX	(1 << 20)
int sbx_log_start(const char *dir, const char *shim, char *err,
    size_t errlen) SLUICE_MUSTCHECK;
void sbx_log_flush(int wfd);
/*
 * posix_spawn of the host's sluice-shim (its --log mode) with
 * argv, no environment, every signal at its default and none blocked,
 * fd0 and fd3 (when >= 0) as its 0 and 3 and nothing else of the
 * caller's but 0-2; detach: its own session, /dev/null as 1 and 2, in
 * "/".  Nothing of the daemon's memory is copied.  0 and *pid, or -1.
 */
int sbx_shim_spawn(const char *shim, char *const *argv, int fd0, int fd3,
    int detach, pid_t *pid) SLUICE_MUSTCHECK;
void sbx_log_stop(const char *dir);
/*
 * FNV-1a of a state directory's path: two state directories may hold the
 * same chat name, while host cgroups and runsc's container ids are
 * host-wide, so the backends' host-wide names carry it.
 */
uint32_t sbx_dir_hash(const char *dir);

/*
 * The seccomp filter of every sandboxed process (sbx_seccomp.c; its list
 * is in sluice-run(1)).  sbx_seccomp_load installs it in the calling
 * process (no_new_privs first): 0, or -1 with errno and why in err.  It
 * is compiled once per process: sbx_seccomp_prepare compiles it ahead
 * (0, or -1 and why), so that what the caller forks inherits it and
 * only installs it.  sbx_seccomp_hex gives the
 * compiled program (struct sock_filter[], host byte order) as hex for
 * "sluice-shim --seccomp" inside a sandbox whose processes the host
 * cannot prepare itself (gvisor); malloc'd, NULL and why in err.
 */
int sbx_seccomp_prepare(char *err, size_t errlen);
int sbx_seccomp_load(char *err, size_t errlen) SLUICE_MUSTCHECK;
char *sbx_seccomp_hex(char *err, size_t errlen);

/*
 * The gVisor backend's agent (sbx_gv_agent.c, sandbox-glue/agent/): a
 * command started with one connection to <dir>/agent/agent.sock instead
 * of a "runsc exec".  sbx_gv_agent_spawn is spawn() with out->tag set:
 * 0 started, 1 the agent is not there or did not answer (nothing runs:
 * use runsc exec), -1 and why (the agent refused it).  sbx_gv_agent_call
 * sends AG_KILL or AG_RELEASE for tag: 0 done, 1 not reachable, -1 and
 * why.
 */
int sbx_gv_agent_spawn(const struct sbx_rec *rec, const struct sbx_cmd *cmd,
    struct sbx_proc *out, char *err, size_t errlen);
int sbx_gv_agent_call(const struct sbx_rec *rec, int type, const char *tag,
    char *err, size_t errlen);
/* The gVisor backend's port_connect, resize and tty_signal (sbx.h),
 * through the agent: CONNECT, and the relay of a command spawned with
 * cmd->tty (which then has no runsc exec to fall back on). */
int sbx_gv_agent_port_connect(const struct sbx_rec *rec, int port,
    char *err, size_t errlen);
int sbx_gv_agent_port_reply(const void *buf, size_t len, size_t *used,
    int *inside, char *err, size_t errlen);
int sbx_gv_agent_resize(const struct sbx_proc *p, unsigned rows,
    unsigned cols);
int sbx_gv_agent_tty_signal(const struct sbx_proc *p, int sig);

#endif /* SLUICE_SBX_INT_H */
