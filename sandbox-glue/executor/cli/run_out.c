/*
 * run_out.c: sluice-run's last words and terminal-safe quoting
 * (run_out.h), one copy for its API verbs and its image verbs.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "sandbox-glue/executor/backend/sbx.h"
#include "sandbox-glue/executor/backend/sbx_cfg.h"
#include "sandbox-glue/executor/cli/run_out.h"

void
run_die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sluice-run: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

const char *
run_safe(const char *s)
{
	static char buf[4][4 * SBX_PATH_MAX + 1];
	static int k;

	k = (k + 1) % 4;
	sbx_text_safe(s != NULL ? s : "", buf[k], sizeof(buf[k]));
	return buf[k];
}
