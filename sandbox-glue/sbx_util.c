/*
 * sbx_util.c: small helpers shared by the backends and sluice-run.
 */
#include "sluice-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sandbox-glue/sbx.h"

const struct sbx_backend *
sbx_backend_find(const char *name)
{
	if (strcmp(name, sbx_ns_backend.name) == 0)
		return &sbx_ns_backend;
	if (strcmp(name, sbx_gvisor_backend.name) == 0)
		return &sbx_gvisor_backend;
	return NULL;
}

int64_t
sbx_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
sbx_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	FILE *f;
	size_t n;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: skip to the
	 * last ')' then count fields; starttime is field 22 */
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	p++;
	for (i = 3; i <= 22 && p != NULL; i++) {
		p = strchr(p + 1, ' ');
		if (p != NULL && i == 21)
			sscanf(p + 1, "%llu", &st);
	}
	/* a zombie still has a stat line: count it as gone */
	if (strstr(buf, ") Z ") != NULL)
		return 0;
	return st;
}

int
sbx_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}
