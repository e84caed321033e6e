/*
 * agent.h: the in-sandbox agent of the gVisor backend, a mode of
 * sluice-shim (the one program of ours every sandbox has, static where
 * the root is an image), so that a command costs a fork inside the
 * sandbox rather than a "runsc exec".
 *
 *   sluice-shim --agent UID GID SECCOMP_HEX -- INIT [ARG]...
 *
 * runs as the container's first process, as root inside with only
 * CAP_SETUID, CAP_SETGID, CAP_KILL, CAP_DAC_OVERRIDE and CAP_SETPCAP.
 * It installs the seccomp program in itself first (no_new_privs), so
 * every process it starts has it.  It listens on AG_DIR/AG_SOCK
 * (agent_wire.h; the directory is the host's rec->dir/agent, which only
 * root can enter, and runsc's --host-uds=create makes the socket there a
 * host socket), starts INIT as UID:GID (again a second after it ends),
 * reaps whatever is reparented to it, and serves connections in worker
 * processes waiting in accept(): one made ahead, another when a
 * connection waits while all are busy, and a worker goes back to
 * accept() after its connection unless another already waits there.
 * SPAWN starts the command (as vfork does): its own session, its command group memory/sluice/<tag> in
 * gVisor's cgroupfs, then the drop to UID:GID with no groups, no
 * capability (bounding, inheritable and ambient sets too) and
 * no_new_privs, the rlimits, the directory, exactly the environment; and
 * relays its stdin, stdout, stderr, signals and exit, and removes the
 * group once the command has exited (if it is empty).  PTY before SPAWN
 * puts the command on a terminal opened here, under a keeper (a child,
 * the sandbox user, the session leader owning the terminal) that sends
 * signals to its foreground group.  CONNECT connects to a port on the
 * sandbox's loopback and relays that connection's bytes, in the worker,
 * until both sides have ended.  KILL empties a
 * command group; RELEASE removes an empty one.  A SPAWN connection that
 * ends before the command's exit was sent kills the command's group (the
 * host gave up on it).  Messages go to standard error (the sandbox's
 * bounded log).  Returns only on a usage or start-up error.
 */
#ifndef SLUICE_AGENT_H
#define SLUICE_AGENT_H

int agent_main(int argc, char **argv);

#endif /* SLUICE_AGENT_H */
