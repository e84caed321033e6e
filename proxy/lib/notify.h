/*
 * notify.h: the service manager's readiness protocol (sd_notify(3)),
 * spoken directly so that sluice needs no libsystemd.
 *
 * When the environment has NOTIFY_SOCKET (systemd sets it for
 * Type=notify units), px_notify sends one datagram with the given
 * "KEY=VALUE\n..." text to that Unix socket (a path, or "@name" for the
 * abstract namespace).  Without it, nothing happens.  Errors are not
 * fatal: a manager that cannot be told only waits longer.
 */
#ifndef SLUICE_NOTIFY_H
#define SLUICE_NOTIFY_H

/* 1 sent, 0 no NOTIFY_SOCKET, -1 the send failed (errno). */
int px_notify(const char *state);

#endif /* SLUICE_NOTIFY_H */
