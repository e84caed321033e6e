/*
 * priv.h: sluiced's privilege separation (sluiced(8), PROCESS MODEL).
 *
 * Started as root, sluiced forks the firewall helper (the only process
 * that keeps a capability: CAP_NET_ADMIN, for the netlink code of
 * firewall/) when the firewall is enabled, gives its own directories and
 * files to the configured user, and then the proxy process, the one that
 * parses untrusted bytes, drops to that user with no capabilities at all
 * (effective, permitted, inheritable, ambient, bounding) and
 * no_new_privs.  With log.mac_key_file a second helper, the log signer,
 * holds the key the proxy never sees.
 */
#ifndef SLUICE_PRIV_H
#define SLUICE_PRIV_H

#include <sys/types.h>

struct priv_user {
	char name[64];
	uid_t uid;
	gid_t gid;
};

/* The user the proxy runs as.  0 / -1 with err (no such user, or uid 0
 * under another name). */
int priv_user_lookup(const char *name, struct priv_user *u, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/*
 * Fork the firewall helper on a SOCK_SEQPACKET socketpair.  The child
 * closes every other descriptor, keeps CAP_NET_ADMIN alone (and, with
 * u, becomes u with no supplementary groups), sets no_new_privs, serves
 * requests (fw_helper_run) and exits when the proxy's end closes,
 * leaving the table in the kernel.  start_table: the table named by the
 * trusted start-up configuration.  Returns the proxy's end, or -1 with
 * err; *pid is the helper.
 */
int priv_helper_spawn(const char *start_table, const struct priv_user *u,
    pid_t *pid, char *err, size_t errlen) SLUICE_MUSTCHECK;

/* After the proxy closed its end: wait for the helper, at most ms. */
void priv_helper_reap(pid_t pid, int ms);

/*
 * Fork the log signer (signer.h) on a SOCK_SEQPACKET socketpair.  The
 * child reads key_file as the user sluiced started as (root), closes
 * every other descriptor, keeps no capability (and, with u, becomes u
 * with no supplementary groups), sets no_new_privs and is not dumpable,
 * and signs the records after the chain head (seq, hash) until the
 * proxy's end closes.  The proxy never reads the key.  Returns the
 * proxy's end once the child says it is ready, or -1 with err (a key
 * the child refused, for one); *pid is the signer (-1 on failure).
 */
int priv_signer_spawn(const char *key_file, const struct priv_user *u,
    uint64_t seq, const char *hash, pid_t *pid, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/*
 * Fork the inspection CA helper (tlsca.h) on a SOCK_SEQPACKET
 * socketpair.  The child, still the user sluiced started as (root),
 * loads the CA at cert_path and key_path or makes it when both are
 * missing (tlsca_ensure), closes every other descriptor, keeps no
 * capability (and, with u, becomes u), sets no_new_privs, is not
 * dumpable, and signs leaves for the names hosts matches until the
 * proxy's end closes.  Returns the proxy's end with *pem the CA
 * certificate (PEM, malloc'ed) once the child says it is ready, or -1
 * with err; *pid is the helper (-1 on failure).
 */
int priv_ca_spawn(const char *cert_path, const char *key_path,
    char *const *hosts, size_t nhosts, int leaf_days,
    const struct priv_user *u, pid_t *pid, char **pem, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/*
 * mkdir -p dir (mode for what is created); with u, every directory made
 * here is given to u.  0 / -1 with err.
 */
int priv_mkdir(const char *dir, mode_t mode, const struct priv_user *u,
    char *err, size_t errlen) SLUICE_MUSTCHECK;

/*
 * Give runtime_dir and everything in it (sluiced's own: the lock,
 * sockets and session directories of earlier runs) to u.  A directory
 * that others may write to (such as /tmp) is refused.  0 / -1 with err.
 */
int priv_give_tree(const char *dir, const struct priv_user *u, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/* Give a regular file to u if it exists (the log, the state file). */
int priv_give_file(const char *path, const struct priv_user *u, char *err,
    size_t errlen) SLUICE_MUSTCHECK;

/*
 * The proxy's drop: with u, the user's groups plus the nextra groups of
 * extra (the groups the configuration gives its sockets: an unprivileged
 * process may give a file only a group it is in), gid and uid; in every
 * case no capabilities left in any set, and no_new_privs.  Checked
 * afterwards (root cannot be regained).  0 / -1 with err.
 */
int priv_drop(const struct priv_user *u, const gid_t *extra, size_t nextra,
    char *err, size_t errlen) SLUICE_MUSTCHECK;

#endif /* SLUICE_PRIV_H */
