/*
 * sbx_backends.c: the table of backends (sbx.h, sbx_backend_find).
 *
 * A file of its own so that the helpers the backends share (sbx_util.c)
 * do not name the backends that use them: the backends sit on the
 * helpers, and this table on the backends.
 */
#include "sluice-config.h"

#include <string.h>

#include "sandbox-glue/executor/backend/sbx.h"

const struct sbx_backend *
sbx_backend_find(const char *name)
{
	if (strcmp(name, sbx_ns_backend.name) == 0)
		return &sbx_ns_backend;
	if (strcmp(name, sbx_gvisor_backend.name) == 0)
		return &sbx_gvisor_backend;
	return NULL;
}
