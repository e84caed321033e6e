/*
 * daemon.c: the process context (daemon.h).  Data only: it calls
 * nothing, so every layer may refer to it without a call cycle.
 */
#include "sluice-config.h"

#include "proxy/daemon.h"

struct px px;
