/*
 * log.c: px_log (log.h).
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proxy/lib/clog.h"
#include "proxy/lib/log.h"

int px_verbose;
static px_log_sink sink;
static const char *log_name = PX_NAME;

static const char *const prio_names[] = {
	"emerg", "alert", "crit", "error", "warning", "notice", "info", "debug"
};

void
px_log(int prio, const char *fmt, ...)
{
	va_list ap;
	char raw[1024], buf[1024];

	if (prio >= PX_DEBUG && !px_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* messages quote names, paths and answers from outside: one line,
	 * nothing a terminal or the journal reader would act on */
	clog_sanitize(raw, strlen(raw), buf, sizeof(buf), sizeof(buf) - 4);
	if (sink != NULL) {
		sink(prio, buf);
		return;
	}
	/* "<N>" prefixes are what journald understands on stderr */
	fprintf(stderr, "<%d>%s: %s: %s\n", prio, log_name,
	    prio_names[prio & 7], buf);
}

void
px_log_set_name(const char *name)
{
	log_name = name;
}

void
px_log_set_sink(px_log_sink s)
{
	sink = s;
}
