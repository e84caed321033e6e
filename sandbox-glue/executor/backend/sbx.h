/*
 * sbx.h: the contract between sluice-run (the session executor) and its
 * sandbox backends.
 *
 * One persistent sandbox per chat.  sluice-run holds the record (a
 * struct sbx_rec saved as JSON under the state directory), takes the
 * locks, talks to sluiced and enforces timeouts and output caps; a
 * backend only makes, enters, freezes and tears down sandboxes.
 *
 * Every backend call runs as root on the host, with the chat's lock
 * held, in a process that may exit right after the call: a backend keeps
 * nothing in memory between calls.  What it must remember goes into the
 * record (init_pid, cgroup, backend_data) or into files under rec->dir,
 * which is private to the sandbox and removed by sluice-run after
 * destroy().
 *
 * Error idiom: 0 on success, -1 with a one-line message (no newline, no
 * program name) in err.  Backends do not print.
 *
 * What is inside every sandbox, whatever the backend:
 *   /                 read-only: rec->image_path when rec->image is set
 *                     (sbx_image.h: a Debian tree built from a profile,
 *                     nothing of the host's), else the host's /usr and a
 *                     few /etc files
 *   /workspace        rec->workspace, read-write, owned by the sandbox user
 *   /run/sluice/      rec->session_dir (holds proxy.sock), bound as a
 *                     directory so a restarted sluiced's new socket is seen
 *   /opt/sluice/sluice-shim   rec->shim, read-only (static for an image:
 *                     it runs on the image's libc); started by create()
 *                     as the sandbox user with no arguments, kept running
 *   /dev/sluice-agent root's (0700), where the agent that starts
 *                     commands listens: gvisor, rec->dir/agent bound;
 *                     ns (cgroup v1), a directory of the /dev tmpfs
 *   /tmp, /home/user  size-bounded tmpfs (lim.tmp_bytes, lim.home_bytes),
 *                     /home/user owned by the sandbox user
 *   user "user", no capabilities, no_new_privs, no network device but
 *   loopback, the seccomp filter of sbx_seccomp.c; SBX_UID:SBX_GID
 *   inside a user namespace (ns), or host_uid:host_gid where the
 *   sandbox sees host uids (gvisor).
 */
#ifndef SLUICE_SBX_H
#define SLUICE_SBX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proxy/lib/util.h"

#define SBX_ID_MAX	64              /* chat, tenant: [A-Za-z0-9._-]{1,64} */
#define SBX_USER_MAX	128
#define SBX_PATH_MAX	512

#define SBX_UID		1000            /* the sandbox user, inside */
#define SBX_GID		1000
#define SBX_HOME	"/home/user"
#define SBX_WORKDIR	"/workspace"
#define SBX_SHIM_PATH	"/opt/sluice/sluice-shim"
#define SBX_SOCK_DIR	"/run/sluice"

/* Resource limits of one sandbox.  0 means "no limit" for every field. */
struct sbx_limits {
	uint64_t memory_bytes;  /* cgroup memory limit, whole sandbox */
	uint64_t pids;          /* cgroup pids limit, whole sandbox */
	uint64_t cpu_pct;       /* CPU quota in percent of one CPU */
	uint64_t tmp_bytes;     /* tmpfs size of /tmp */
	uint64_t home_bytes;    /* tmpfs size of /home/user */
	uint64_t fsize_bytes;   /* RLIMIT_FSIZE of every command */
	uint64_t nofile;        /* RLIMIT_NOFILE of every command */
	uint64_t nproc;         /* RLIMIT_NPROC of every command */
};

/*
 * The per-sandbox record.  sluice-run fills the identity, paths and
 * limits before create(); the backend fills init_pid, init_start,
 * cgroup, note and backend_data.  Strings are NUL-terminated.
 */
struct sbx_rec {
	char chat[SBX_ID_MAX + 1];
	/* sluice-execd: the id its API knows the sandbox by, within its
	 * tenant; chat is then the host's name of it (state dir, cgroups,
	 * sluiced's session), unique on the host.  "": chat (a record of
	 * sluice-run or of an executor before ids were per tenant). */
	char id[SBX_ID_MAX + 1];
	char tenant[SBX_ID_MAX + 1];    /* "" when none */
	char user[SBX_USER_MAX + 1];    /* "" when none */
	char tier[16];
	char backend[16];               /* "ns", "gvisor" */
	char dir[SBX_PATH_MAX];         /* <state-dir>/<chat>: backend files */
	char workspace[SBX_PATH_MAX];   /* host directory of /workspace */
	int workspace_made;             /* sluice-run created it: remove it */
	int workspace_given;            /* an empty directory handed over:
	                                 * give it back on destroy, as it
	                                 * was (owner, group, mode) */
	uid_t workspace_uid;
	gid_t workspace_gid;
	unsigned workspace_mode;        /* permission bits, 07777 */
	char session_dir[SBX_PATH_MAX]; /* host dir of the session socket */
	char shim[SBX_PATH_MAX];        /* host path of sluice-shim */
	uid_t uid_base;                 /* host uid of uid 0 inside */
	uid_t uid_count;                /* size of the mapped range */
	uid_t host_uid;                 /* host uid of SBX_UID (owner of
	                                 * workspace and the socket) */
	gid_t host_gid;
	int slot;                       /* index of the uid range */
	pid_t init_pid;                 /* host pid of the sandbox's holder */
	uint64_t init_start;            /* its /proc starttime (pid reuse) */
	int64_t created;                /* unix seconds */
	int64_t last_used;              /* unix seconds, end of last command */
	int suspended;
	char cgroup[SBX_PATH_MAX];      /* backend's cgroup note, "" none;
	                                 * before create(): "" any, "v1",
	                                 * "v2" or "off" (sluice-run's
	                                 * "cgroups" setting) */
	char note[256];                 /* limits not applied, and why */
	char backend_data[SBX_PATH_MAX];/* backend private (runsc id...) */
	struct sbx_limits lim;
	/* The root (sbx_image.h), set before create(): the profile's name
	 * ("host" or "": the host's /usr), the image's sha256 ("" none) and
	 * its file.  create() takes the image (sbx_image_attach), destroy()
	 * lets it go (sbx_image_detach). */
	char profile[SBX_ID_MAX + 1];
	char image[65];
	char image_path[SBX_PATH_MAX];
};

/* A command to start in a sandbox. */
struct sbx_cmd {
	char *const *argv;      /* argv[0] looked up in PATH of envp */
	char *const *envp;      /* the whole environment (nothing inherited) */
	int fd_in, fd_out, fd_err;      /* host fds, become 0, 1, 2 */
	const char *cwd;        /* SBX_WORKDIR */
	/* fd_in is a terminal's slave the caller opened (its master the
	 * caller's, its size set there), fd_out and fd_err are not used
	 * for the command's output: a backend with tty_stdin gives it as
	 * is; one with resize gives the command a terminal of its own
	 * inside of that size and relays between the two (the slave set
	 * raw, the inner terminal's output written to it). */
	int tty;
};

/*
 * A started command.  pid, when not 0, is a child of the caller whose
 * exit status is the command's (waitpid it; a signal death may be
 * reported as exit 128+N).  pid 0: no process of the caller stands for
 * it; fd (close-on-exec, the caller's to close) becomes readable when it
 * has ended, and the backend's reap() tells its status (ns's agent: the
 * command's connection, no relay process per command).  tag names the
 * per-command group the backend uses to find the whole process tree (a
 * cgroup, an exec id); it is opaque to sluice-run.
 */
struct sbx_proc {
	pid_t pid;
	int fd;                 /* pid 0: see above; else not used */
	int64_t start_ms;       /* CLOCK_MONOTONIC, set by the backend */
	char tag[128];
};

struct sbx_backend {
	const char *name;
	/* 0 if the backend can run here; -1 and why not. */
	int (*available)(char *err, size_t errlen);
	/* Make and start the persistent sandbox, start the shim.  On failure
	 * leave nothing running or mounted (files in rec->dir may stay). */
	int (*create)(struct sbx_rec *rec, char *err, size_t errlen);
	/* Start a command as SBX_UID in cmd->cwd with exactly cmd->envp.
	 * The caller closes its copies of the cmd fds afterwards. */
	int (*spawn)(struct sbx_rec *rec, const struct sbx_cmd *cmd,
	    struct sbx_proc *out, char *err, size_t errlen);
	/* Kill the command and everything it started (setsid, double fork
	 * included); background jobs of other commands stay.  Does not reap
	 * p->pid. */
	int (*kill_tree)(struct sbx_rec *rec, const struct sbx_proc *p,
	    char *err, size_t errlen);
	/* The command's main process has been reaped: drop per-command
	 * resources but leave its background processes running. */
	void (*release)(struct sbx_rec *rec, const struct sbx_proc *p);
	/* Freeze / thaw every process of the sandbox. */
	int (*suspend)(struct sbx_rec *rec, char *err, size_t errlen);
	int (*resume)(struct sbx_rec *rec, char *err, size_t errlen);
	/* 1 if the sandbox is still there (its init runs), 0 if not. */
	int (*alive)(const struct sbx_rec *rec);
	/* Kill every process, unmount, remove what create() made outside
	 * rec->dir.  Must succeed on a half-made or already dead sandbox. */
	int (*destroy)(struct sbx_rec *rec, char *err, size_t errlen);
	/* An O_PATH descriptor of the sandbox's root directory as its
	 * processes see it, mounts included, so that sluice-run opens files
	 * inside from the host (openat2 RESOLVE_IN_ROOT) with nothing of the
	 * sandbox in the way; -1 and why when it is gone.  NULL where the
	 * host cannot see the sandbox's files (gvisor: they are the
	 * sentry's); then sluice-shim's file modes run inside. */
	int (*root_fd)(const struct sbx_rec *rec, char *err, size_t errlen);
	/* The record naming the sandbox made by create() is saved: from now
	 * on it outlives this process.  Until then it may die with it, so
	 * that a create killed half way leaves nothing nobody can find.
	 * NULL: nothing to do. */
	void (*commit)(struct sbx_rec *rec);
	/* How many processes of the sandbox the kernel's OOM killer has
	 * killed so far (its memory cgroup's oom_kill count): 0 and *n, or
	 * -1 when it cannot be known.  A command was OOM-killed when the
	 * count grew while it ran.  NULL: never known. */
	int (*oom_kills)(const struct sbx_rec *rec, uint64_t *n);
	/* A TCP socket (IPv4, non-blocking, close-on-exec, not connected)
	 * in the sandbox's own network namespace, for the port proxy to
	 * connect to 127.0.0.1:port there: the sandbox gets no network
	 * device and cannot reach the host's side; only this byte stream
	 * crosses.  -1 and why when it is gone.  NULL where the host cannot
	 * reach into it (gvisor: its network stack is the sentry's). */
	int (*net_socket)(const struct sbx_rec *rec, char *err, size_t errlen);
	/* 1 if spawn() gives the command the very descriptor cmd->fd_in is,
	 * so that a pty the host opened is its terminal (ns); 0 where stdin
	 * is relayed (gvisor's agent and runsc exec): a terminal there is
	 * one inside the sandbox, relayed (cmd->tty, resize below). */
	int tty_stdin;
	/* A command spawn() gave as p->fd (pid 0), its fd readable: 1 when
	 * it has not ended after all (wait for the fd again), 0 and
	 * *status (as waitpid's: the command's exit as exit code, 128+N
	 * for a signal; SIGKILL when the backend's end went without
	 * saying) when it has; p->fd is left open.  Never blocks long.
	 * NULL where spawn() always gives a pid. */
	int (*reap)(struct sbx_proc *p, int *status);
	/* A TCP connection to 127.0.0.1:port inside the sandbox, made
	 * there (not by the host), for the port proxy where net_socket is
	 * NULL: asked for, never waited for (the caller's loop serves every
	 * sandbox; one whose server never accepts must not stall it).  A
	 * stream descriptor (non-blocking, close-on-exec; a Unix socket)
	 * on which the backend's answer comes first, which port_reply
	 * reads; after it, its bytes are the TCP connection's, shutdown's
	 * half-close passed on.  -1 and why when the sandbox cannot be
	 * reached (no agent; one too busy to take the connection).  NULL
	 * where net_socket is the way (ns). */
	int (*port_connect)(const struct sbx_rec *rec, int port, char *err,
	    size_t errlen);
	/* The answer at the start of len bytes read from port_connect's
	 * descriptor: 1 more is needed, 0 connected (*used bytes were the
	 * answer; what follows is the server's), -2 the connect inside
	 * failed (*inside its errno: ECONNREFUSED, nothing listens there),
	 * -1 and why (the agent refused it, or not an answer). */
	int (*port_reply)(const void *buf, size_t len, size_t *used,
	    int *inside, char *err, size_t errlen);
	/* For a command spawn() started with cmd->tty where tty_stdin is 0
	 * (its terminal is inside, relayed): the caller has set the size
	 * on its own master and tells the one inside (resize), or sends a
	 * signal to the inside terminal's foreground process group
	 * (tty_signal; the caller's master has no group).  0, or -1 when
	 * the command is gone.  NULL where the caller's pty is the
	 * command's (ns), and where there is no terminal at all. */
	int (*resize)(const struct sbx_proc *p, unsigned rows, unsigned cols);
	int (*tty_signal)(const struct sbx_proc *p, int sig);
};

extern const struct sbx_backend sbx_ns_backend;
extern const struct sbx_backend sbx_gvisor_backend;

/* The backend called name, or NULL. */
const struct sbx_backend *sbx_backend_find(const char *name);

/* ---- helpers shared by backends (sbx_util.c) ---- */

/* Monotonic milliseconds. */
int64_t sbx_now_ms(void);
/* /proc/<pid>/stat starttime, 0 if the process is gone. */
uint64_t sbx_proc_start(pid_t pid);
/* snprintf into err; returns -1 for "return sbx_err(...)": the one
 * errf of proxy/lib/util.h under the backends' prefix. */
#define sbx_err errf

#endif /* SLUICE_SBX_H */
