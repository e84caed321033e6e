/*
 * sbx_seccomp.c: the seccomp filter of every sandboxed process, both
 * backends (sbx.h, "seccomp").
 *
 * One table of refusals, in the spirit of the container runtimes'
 * default profiles: everything is allowed but calls a sandbox never
 * needs (kernel keyrings, bpf, userfaultfd, perf, kexec, modules, mounts,
 * namespaces, raw I/O ports, swap, reboot, accounting, the clock) and
 * socket families other than Unix, IPv4 and IPv6.  The sandboxed command
 * has no capability, so most of these fail anyway; the filter keeps
 * their kernel code out of its reach (keyctl, bpf, userfaultfd,
 * perf_event_open and io_uring need none) and keeps the sandbox shut
 * should a capability ever leak in.  Refused calls return an error, the
 * process lives: programs that probe for a feature go on without it.
 *
 * libseccomp compiles the table for the native architecture; calls of
 * any other (i386 through int 0x80, x32) get ENOSYS.  The ns backend
 * loads it in the command's process before exec; the gvisor backend
 * passes the compiled program to sluice-shim --seccomp inside (runsc
 * applies OCI seccomp to the container's first process only, not to
 * runsc exec).
 */
#include "sluice-config.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "sandbox-glue/executor/backend/sbx-int.h"

enum sc_how {
	SC_ALL,         /* every call */
	SC_GT,          /* arg0 > a */
	SC_EQ,          /* arg0 == a */
	SC_ANYBIT,      /* arg0 has any bit of a (one rule per bit) */
	SC_MASK,        /* (arg0 & a) == b */
};

struct sc_rule {
	const char *name;
	int err;
	enum sc_how how;
	uint64_t a, b;
};

#define ALL(n)		{ n, EPERM, SC_ALL, 0, 0 }
/* new namespaces; CLONE_NEWTIME (0x80) is part of clone's exit signal */
#define NS_FLAGS	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | \
	CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)
#define NEWTIME		0x80
/*
 * personality(2) flags that change the address space's layout or
 * protection (no ASLR, executable reads, page zero).  A call with bit 31
 * set is the query (0xffffffff) and passes: no persona sets it.
 */
#define PERS(f)		{ "personality", EPERM, SC_MASK, \
	(uint64_t)(f) | 0x80000000u, (f) }
/* socket families but AF_UNIX (1), AF_INET (2) and AF_INET6 (10) */
#define FAM(n, f)	{ n, EAFNOSUPPORT, SC_EQ, f, 0 }
#define FAMS(n)		FAM(n, 0), FAM(n, 3), FAM(n, 4), FAM(n, 5), \
	FAM(n, 6), FAM(n, 7), FAM(n, 8), FAM(n, 9), \
	{ n, EAFNOSUPPORT, SC_GT, AF_INET6, 0 }

static const struct sc_rule sc_rules[] = {
	/* kernel keyrings, bpf, userfaultfd, perf: reachable without any
	 * capability, and a steady source of kernel bugs */
	ALL("keyctl"), ALL("add_key"), ALL("request_key"), ALL("bpf"),
	ALL("userfaultfd"), ALL("perf_event_open"),
	/* io_uring's requests are not seen by a filter; ENOSYS, so that
	 * programs fall back to plain calls */
	{ "io_uring_setup", ENOSYS, SC_ALL, 0, 0 },
	{ "io_uring_enter", ENOSYS, SC_ALL, 0, 0 },
	{ "io_uring_register", ENOSYS, SC_ALL, 0, 0 },
	/* the system's own business */
	ALL("kexec_load"), ALL("kexec_file_load"), ALL("init_module"),
	ALL("finit_module"), ALL("delete_module"), ALL("iopl"),
	ALL("ioperm"), ALL("swapon"), ALL("swapoff"), ALL("reboot"),
	ALL("acct"), ALL("settimeofday"), ALL("clock_settime"),
	ALL("clock_adjtime"), ALL("syslog"), ALL("quotactl"),
	ALL("quotactl_fd"), ALL("open_by_handle_at"), ALL("lookup_dcookie"),
	ALL("fanotify_init"), ALL("nfsservctl"), ALL("uselib"),
	ALL("vhangup"), ALL("_sysctl"),
	/* mounts (the ns holder makes the sandbox's before any filter) */
	ALL("mount"), ALL("umount2"), ALL("pivot_root"), ALL("move_mount"),
	ALL("open_tree"), ALL("fsopen"), ALL("fsmount"), ALL("fsconfig"),
	ALL("fspick"), ALL("mount_setattr"),
	/* namespaces: none joined, none made (a new user namespace gives its
	 * maker every capability in it).  clone3's flags are in memory, out
	 * of a filter's reach: ENOSYS, and libc falls back to clone, whose
	 * flags are checked */
	ALL("setns"),
	{ "clone3", ENOSYS, SC_ALL, 0, 0 },
	{ "clone", EPERM, SC_ANYBIT, NS_FLAGS, 0 },
	{ "unshare", EPERM, SC_ANYBIT, NS_FLAGS | NEWTIME, 0 },
	PERS(ADDR_NO_RANDOMIZE), PERS(READ_IMPLIES_EXEC),
	PERS(MMAP_PAGE_ZERO), PERS(ADDR_COMPAT_LAYOUT),
	PERS(ADDR_LIMIT_32BIT), PERS(ADDR_LIMIT_3GB),
	/* the session socket is AF_UNIX, the shim listens on 127.0.0.1 and
	 * ::1; no packet, netlink, vsock, bluetooth... sockets */
	FAMS("socket"), FAMS("socketpair"),
};

static int
sc_add(scmp_filter_ctx ctx, int nr, const struct sc_rule *r)
{
	uint32_t act = SCMP_ACT_ERRNO((uint32_t)r->err);
	uint64_t bit;
	int rc;

	switch (r->how) {
	case SC_ALL:
		return seccomp_rule_add(ctx, act, nr, 0);
	case SC_GT:
		return seccomp_rule_add(ctx, act, nr, 1,
		    SCMP_A0(SCMP_CMP_GT, r->a));
	case SC_EQ:
		return seccomp_rule_add(ctx, act, nr, 1,
		    SCMP_A0(SCMP_CMP_EQ, r->a));
	case SC_MASK:
		return seccomp_rule_add(ctx, act, nr, 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, r->a, r->b));
	case SC_ANYBIT:
		/* the comparisons of one rule must all hold: one per bit */
		for (bit = 1; bit != 0; bit <<= 1)
			if ((r->a & bit) && (rc = seccomp_rule_add(ctx, act, nr,
			    1, SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit))) != 0)
				return rc;
		return 0;
	}
	return -EINVAL;
}

/* The filter for the native architecture, or NULL and why. */
static scmp_filter_ctx
sc_build(char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	size_t i;
	int rc, nr;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		sbx_err(err, errlen, "seccomp_init failed");
		return NULL;
	}
	/* calls of another architecture (i386's int 0x80, x32) are
	 * refused, whatever they are */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_ERRNO(ENOSYS))) != 0) {
		sbx_err(err, errlen, "seccomp: bad-arch action: %s",
		    strerror(-rc));
		goto fail;
	}
	for (i = 0; i < sizeof(sc_rules) / sizeof(sc_rules[0]); i++) {
		nr = seccomp_syscall_resolve_name(sc_rules[i].name);
		if (nr == __NR_SCMP_ERROR) {
			sbx_err(err, errlen, "seccomp: unknown call %s",
			    sc_rules[i].name);
			goto fail;
		}
		rc = sc_add(ctx, nr, &sc_rules[i]);
		/* a negative number is a call this architecture does not
		 * have (iopl on arm64): nothing to refuse */
		if (rc != 0 && nr >= 0) {
			sbx_err(err, errlen, "seccomp: rule for %s: %s",
			    sc_rules[i].name, strerror(-rc));
			goto fail;
		}
	}
	return ctx;
fail:
	seccomp_release(ctx);
	return NULL;
}

/*
 * The compiled program into buf (at most cap bytes): its length, or -1
 * and why.  libseccomp 2.5 exports to a descriptor only.
 */
static ssize_t
sc_export(scmp_filter_ctx ctx, unsigned char *buf, size_t cap, char *err,
    size_t errlen)
{
	ssize_t n = 0, k;
	int fd, rc;

	if ((fd = memfd_create("sbx-seccomp", MFD_CLOEXEC)) < 0)
		return sbx_err(err, errlen, "memfd_create: %s",
		    strerror(errno));
	if ((rc = seccomp_export_bpf(ctx, fd)) != 0) {
		close(fd);
		return sbx_err(err, errlen, "seccomp_export_bpf: %s",
		    strerror(-rc));
	}
	if (lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return sbx_err(err, errlen, "lseek: %s", strerror(errno));
	}
	while (n < (ssize_t)cap && (k = read(fd, buf + n, cap - (size_t)n)) >
	    0)
		n += k;
	close(fd);
	if (n == 0 || n == (ssize_t)cap ||
	    n % (ssize_t)sizeof(struct sock_filter) != 0)
		return sbx_err(err, errlen, "seccomp: unexpected program size "
		    "%zd", n);
	return n;
}

/*
 * The program, compiled once per process: compiling the table with
 * libseccomp costs more than a command's whole start (a quarter to half
 * a millisecond), so a holder compiles it before it forks and what it
 * forks (each command's process) only installs it.
 */
static struct sock_filter *sc_prog;
static unsigned short sc_prog_len;

int
sbx_seccomp_prepare(char *err, size_t errlen)
{
	static unsigned char buf[65536];
	scmp_filter_ctx ctx;
	ssize_t n;

	if (sc_prog != NULL)
		return 0;
	if ((ctx = sc_build(err, errlen)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	n = sc_export(ctx, buf, sizeof(buf), err, errlen);
	seccomp_release(ctx);
	if (n < 0) {
		errno = EINVAL;
		return -1;
	}
	sc_prog = (struct sock_filter *)(void *)buf;
	sc_prog_len = (unsigned short)((size_t)n / sizeof(struct sock_filter));
	return 0;
}

int
sbx_seccomp_load(char *err, size_t errlen)
{
	struct sock_fprog fp;

	if (sbx_seccomp_prepare(err, errlen) != 0)
		return -1;
	/* as libseccomp's seccomp_load: no_new_privs, then the filter,
	 * no flags */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		sbx_err(err, errlen, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	fp.len = sc_prog_len;
	fp.filter = sc_prog;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) {
		sbx_err(err, errlen, "seccomp_load: %s", strerror(errno));
		return -1;
	}
	return 0;
}

char *
sbx_seccomp_hex(char *err, size_t errlen)
{
	unsigned char buf[65536];
	scmp_filter_ctx ctx = sc_build(err, errlen);
	char *hex = NULL;
	ssize_t n, k;

	if (ctx == NULL)
		return NULL;
	n = sc_export(ctx, buf, sizeof(buf), err, errlen);
	seccomp_release(ctx);
	if (n < 0)
		return NULL;
	if ((hex = malloc((size_t)n * 2 + 1)) == NULL) {
		sbx_err(err, errlen, "out of memory");
		return NULL;
	}
	for (k = 0; k < n; k++)
		snprintf(hex + 2 * k, 3, "%02x", buf[k]);
	return hex;
}
