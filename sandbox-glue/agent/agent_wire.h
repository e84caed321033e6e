/*
 * agent_wire.h: the wire between the gVisor backend on the host and
 * sluice-shim's agent mode inside the sandbox (agent.h), over one Unix
 * stream socket per command.  libc only: both sides build it.
 *
 * A frame is an 8-byte header, then its payload:
 *   byte 0      type (AG_*)
 *   bytes 1-3   zero
 *   bytes 4-7   payload length, big endian, at most ag_max(type)
 * Anything else (an unknown type, a reserved byte set, a length above
 * the type's bound, a payload that does not parse exactly) ends the
 * connection: nothing is skipped or guessed.
 *
 * Host to agent: the first frame names the request, SPAWN, KILL,
 * RELEASE, CONNECT or PTY (then SPAWN); after SPAWN, STDIN frames (an empty one is end of input) and
 * SIGNAL frames.  Agent to host: after SPAWN, STARTED or ERROR, then
 * STDOUT/STDERR frames and one EXIT; after KILL or RELEASE, EXIT (0
 * done, 1 not) or ERROR.
 *
 * CONNECT (host to agent, the first frame): a port, 2 bytes big endian,
 * 1..65535.  The agent connects to 127.0.0.1:port inside the sandbox
 * and answers CONNECTED, whose payload is the connect's errno, 4 bytes
 * big endian (0: connected, else 1..4095: ECONNREFUSED when nothing
 * listens there); after a CONNECTED of 0 the connection carries the TCP
 * connection's raw bytes both ways, no more frames, and a half-close
 * (shutdown) of either side is passed on to the other.
 *
 * PTY (host to agent, the first frame, then SPAWN): rows and cols, 2
 * bytes big endian each, 1..65535: the command gets a terminal the agent
 * opens inside (its slave on 0, 1 and 2 and the controlling terminal of
 * the session a keeper of the agent's leads, the command in a process
 * group of its own in the foreground), the master's output comes as
 * STDOUT frames (no STDERR), STDIN frames are written to the master (an
 * empty one is the terminal's hang-up: the input ends and the foreground
 * group gets SIGHUP; under ISIG the signal characters are taken
 * out and signal the foreground group), SIGNAL goes to the terminal's
 * foreground process group, and RESIZE (the same payload as PTY) sets
 * its size.
 *
 * SPAWN's payload is NUL-terminated strings, each ended, nothing after
 * the last: tag, cwd, fsize, nofile, nproc, argc, then argc arguments,
 * then the environment (NAME=value each).  The numbers are decimal
 * (no sign, no leading zero, at most 20 digits, 0 = no limit).  The
 * user, group and seccomp program are the agent's own, fixed when the
 * sandbox was made: a request cannot choose them.
 */
#ifndef SLUICE_AGENT_WIRE_H
#define SLUICE_AGENT_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
	AG_SPAWN = 1, AG_STDIN = 2, AG_SIGNAL = 3, AG_KILL = 4,
	AG_RELEASE = 5, AG_CONNECT = 6, AG_PTY = 7, AG_RESIZE = 8,
	AG_STARTED = 16, AG_STDOUT = 17, AG_STDERR = 18, AG_EXIT = 19,
	AG_ERROR = 20, AG_CONNECTED = 21
};

#define AG_HDR		8
#define AG_SPAWN_MAX	(1u << 20)	/* argv + environment */
#define AG_DATA_MAX	(1u << 16)	/* one STDIN/STDOUT/STDERR frame */
#define AG_TAG_MAX	100
#define AG_ERR_MAX	512
#define AG_ARGC_MAX	4096
#define AG_ENVC_MAX	4096
#define AG_CWD_MAX	4096

/* The socket's name inside the sandbox and its directory on the host
 * (rec->dir/agent, bound there: under the /dev tmpfs, where
 * gVisor can make the mount point whatever the image has). */
#define AG_DIR		"/dev/sluice-agent"
#define AG_SOCK		"agent.sock"

/* A parsed SPAWN: pointers into the payload, which must outlive it;
 * argv and envp are malloc'd and NULL-terminated. */
struct ag_spawn {
	const char *tag, *cwd;
	uint64_t fsize, nofile, nproc;
	int argc, envc;
	char **argv, **envp;
};

/* The largest payload of a frame type, 0 for an unknown type. */
uint32_t ag_max(int type);
void ag_hdr_put(unsigned char h[AG_HDR], int type, uint32_t len);
/* 0 and the type and length, or -1 when the header is not one. */
int ag_hdr_get(const unsigned char h[AG_HDR], int *type, uint32_t *len);
/* 1 when p[0..n) is a command group's tag: [A-Za-z0-9._-]{1,100},
 * not "." or "..". */
int ag_tag_ok(const char *p, size_t n);
/* 0 and s filled, or -1 and why in err; ag_spawn_free after 0. */
int ag_spawn_parse(const char *p, size_t n, struct ag_spawn *s, char *err,
    size_t errlen);
void ag_spawn_free(struct ag_spawn *s);
/* SPAWN's payload for these (malloc'd, its length in *n), NULL when a
 * field is not valid or it would pass AG_SPAWN_MAX. */
char *ag_spawn_build(const char *tag, const char *cwd, uint64_t fsize,
    uint64_t nofile, uint64_t nproc, char *const *argv, char *const *envp,
    size_t *n);
/* EXIT: kind 0 exited with value, 1 killed by signal value.
 * ag_exit_parse gives the shell's status (value, or 128 + signal), -1
 * when the payload is not one. */
void ag_exit_put(unsigned char p[2], int kind, int value);
int ag_exit_parse(const unsigned char *p, size_t n);
/* STARTED: the command's pid inside, 4 bytes big endian; SIGNAL: one
 * byte, 1..64.  -1 when not. */
long ag_started_parse(const unsigned char *p, size_t n);
void ag_started_put(unsigned char p[4], long pid);
int ag_signal_parse(const unsigned char *p, size_t n);
/* CONNECT: the port, -1 when not one.  CONNECTED: the errno (0
 * connected), -1 when not one.  PTY and RESIZE: 0 and the size, -1 when
 * not one. */
void ag_port_put(unsigned char p[2], int port);
long ag_port_parse(const unsigned char *p, size_t n);
void ag_connected_put(unsigned char p[4], int err);
int ag_connected_parse(const unsigned char *p, size_t n);
void ag_winsize_put(unsigned char p[4], unsigned rows, unsigned cols);
int ag_winsize_parse(const unsigned char *p, size_t n, unsigned *rows,
    unsigned *cols);

/* CONNECT's answer at the start of len bytes (the host reads it in its
 * loop, not blocking): 1 more is needed; 0 CONNECTED, connected (*used
 * bytes were it); -2 CONNECTED with the connect's error (*inside); -1
 * and why in err (ERROR's text, or a protocol error). */
int ag_connect_answer(const void *buf, size_t len, size_t *used,
    int *inside, char *err, size_t errlen);

/* Blocking I/O of one whole frame on fd (EINTR retried).  ag_read_frame
 * reads a payload of at most cap bytes into buf: 0, or -1 on error, EOF
 * (errno 0) or a bad header (EPROTO). */
int ag_write_frame(int fd, int type, const void *p, size_t n);
int ag_read_frame(int fd, int *type, void *buf, size_t cap, size_t *n);

/* What both ends that start a SPAWN's command do (the gVisor agent and
 * the ns backend's holder), and the shim's --seccomp.
 * ag_signals_default: every signal to its default action and none
 * blocked, as a new command starts.  ag_hex_decode: hex (lower case)
 * into out, a whole number of unit-byte items and at most cap bytes:
 * how many bytes, or -1 when it is not that.  ag_now_ms: the monotonic
 * clock in milliseconds. */
void ag_signals_default(void);
/* A child made as vfork makes it (the caller waits until it has exec'd
 * or exited), running fn(arg) on a static stack of its own: a fork
 * copies the caller's page tables and its exec then tears them down,
 * which under gVisor's ptrace platform is a new host stub process and a
 * fault per page touched, and on the host, for the ns holder (a copy of
 * the daemon), most of a command's start.  fn may change no global of
 * the caller's but environ (put back here), and may not call malloc:
 * it runs on the caller's memory.  One at a time per process (one
 * stack).  Under a sanitizer, a fork.  Its pid, or -1. */
pid_t ag_vfork(int (*fn)(void *), void *arg);
long ag_hex_decode(const char *hex, void *out, size_t cap, size_t unit);
long long ag_now_ms(void);

#endif /* SLUICE_AGENT_WIRE_H */
