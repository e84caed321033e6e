/*
 * exec_log.c: sluice-execd's diagnostics on stderr, systemd style (the
 * "<N>" prefix is the priority journald reads), like sluiced's.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdio.h>

#include "sandbox-glue/executor/execd/execd-int.h"

int xd_verbose;

void
xd_log(int prio, const char *fmt, ...)
{
	static const char *const lvl[] = { "emerg", "alert", "crit", "error",
	    "warning", "notice", "info", "debug" };
	char line[1024];
	va_list ap;

	if (prio >= XD_LOG_DEBUG && !xd_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one write per line: a worker and the daemon share stderr */
	fprintf(stderr, "<%d>" XD_NAME ": %s: %s\n", prio, lvl[prio & 7], line);
	fflush(stderr);
}

const char *
xd_role_name(enum xd_role r)
{
	switch (r) {
	case XD_ROLE_AUDITOR: return "auditor";
	case XD_ROLE_APP: return "app";
	case XD_ROLE_ADMIN: return "admin";
	default: return "none";
	}
}
