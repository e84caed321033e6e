/*
 * run_api.h: sluice-run's exit statuses (sluice-run(1), EXIT STATUS),
 * shared by its two modes, and the entry of the API mode (run_api.c).
 */
#ifndef SLUICE_RUN_API_H
#define SLUICE_RUN_API_H

/* Exit codes.  An API error maps to one by its code (run_api.c,
 * api_exit); the local mode (--local) uses the same numbers where they
 * mean the same. */
enum {
	EX_OK = 0,
	EX_FAIL = 1,            /* anything else that went wrong */
	EX_USAGE = 2,           /* usage; the API's bad_request */
	EX_NOSANDBOX = 3,       /* not_found: no such sandbox (or, over
	                         * the API, command or file) */
	EX_QUOTA = 4,           /* quota_exceeded */
	EX_BROKER = 5,          /* sluiced unreachable or refused:
	                         * broker_unavailable */
	EX_EXISTS = 6,          /* the chat has a sandbox already */
	EX_BACKEND = 7,         /* backend unavailable or failed */
	EX_CUT = 8,             /* read: the file was larger than
	                         * max_file_bytes, cut there */
	EX_IMAGE = 9,           /* image_missing, image_in_use,
	                         * profile_unknown, profile_forbidden */
	EX_BUSY = 10,           /* busy: a foreground command runs */
	EX_CONFLICT = 11,       /* conflict: edit's old text missing or
	                         * not unique, a directory not empty */
	EX_NETWORK = 12,        /* network_not_permitted */
	EX_DENIED = 13,         /* forbidden, unauthorized */
	EX_TOOLARGE = 14,       /* too_large */
	EX_EXECD = 15,          /* sluice-execd unreachable or its answer
	                         * unreadable */
	EX_TIMEOUT = 124,       /* exec: the command timed out */
	EX_EXECFAIL = 125,      /* exec: sluice-run could not run it, or
	                         * (API) its result was lost */
};

/* The API mode: sluice-run [--json] [--socket PATH] VERB ...  Returns
 * the exit status. */
int run_api_main(int argc, char **argv);

#endif /* SLUICE_RUN_API_H */
