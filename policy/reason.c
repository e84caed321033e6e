/*
 * reason.c: the name tables of policy.h (reasons, tiers, rules, verdicts)
 * and what a refusal tells the client.
 *
 * Logs, webhooks and tests carry these strings, so each table is indexed
 * by the enum and only ever grows at the end.
 */
#include "sluice-config.h"

#include <string.h>

#include "policy/policy.h"

struct reason_info {
	const char *name;
	int status;
	const char *hint;
};

/*
 * Statuses are limited to the set DESIGN.md promises clients (400, 403,
 * 421, 429, 502, 503, 504), so a few reasons that have a more specific
 * HTTP code elsewhere are mapped onto that set:
 *  - head_too_large would be 431, which is not in the set: 400;
 *  - head_timeout would be 408, also outside the set; the client never
 *    finished its request, which is a malformed request from our side: 400;
 *  - method_not_allowed would be 405: 403 (it is a policy refusal);
 *  - close-only reasons (idle_timeout, session_closed, ceiling_lowered)
 *    are normally logged, not answered; if a caller answers one anyway
 *    it gets 502, since the upstream side is what went away.
 */
static const struct reason_info reasons[POL_R__COUNT] = {
	[POL_R_NONE] = { "", 0, "the request was not refused." },
	[POL_R_BAD_REQUEST] = { "bad_request", 400,
	    "the request was refused because it is not strictly valid "
	    "HTTP/1.1; send a well-formed request (CRLF line ends, no "
	    "conflicting framing headers)." },
	[POL_R_BAD_TARGET] = { "bad_target", 400,
	    "the target was refused because its host, scheme or port is "
	    "malformed or not canonical; use an http:// or CONNECT target "
	    "with a plain host name or dotted-quad address and a decimal "
	    "port." },
	[POL_R_PORT_NOT_ALLOWED] = { "port_not_allowed", 403,
	    "the connection was refused because no tier, registry entry or "
	    "grant admits this port; use a standard port (usually 443 or "
	    "80) or ask an administrator to admit it." },
	[POL_R_ADMIN_DENY] = { "admin_deny", 403,
	    "the connection was refused because an administrator has denied "
	    "this host or address; only an administrator can lift the "
	    "deny." },
	[POL_R_NETWORK_OFF] = { "network_off", 403,
	    "the connection was refused because network access is turned "
	    "off by the administrator's ceiling; an administrator can raise "
	    "the ceiling." },
	[POL_R_ABOVE_CEILING] = { "above_ceiling", 403,
	    "the connection was refused because the administrator's network "
	    "ceiling does not admit this host; an administrator can raise "
	    "the ceiling." },
	[POL_R_PRIVATE_ADDRESS] = { "private_address", 403,
	    "the connection was refused because every address of this host "
	    "is private, local, metadata or otherwise not public; an "
	    "administrator can admit the range with allow_cidrs." },
	[POL_R_SESSION_UNKNOWN] = { "session_unknown", 403,
	    "the connection was refused because it does not belong to a "
	    "known session; the app must create the session first." },
	[POL_R_SNI_MISMATCH] = { "sni_mismatch", 403,
	    "the tunnel was closed because the TLS server name differs from "
	    "the CONNECT host; connect to the host you name." },
	[POL_R_SNI_MISSING] = { "sni_missing", 403,
	    "the tunnel was closed because the TLS handshake names no server; "
	    "use a client that sends SNI for the CONNECT host." },
	[POL_R_NOT_TLS] = { "not_tls", 403,
	    "the tunnel was closed because the data on port 443 is not TLS; "
	    "only TLS may be tunnelled to that port." },
	[POL_R_HOST_MISMATCH] = { "host_mismatch", 421,
	    "the request was refused because its Host header names a "
	    "different authority than its URI; send matching values." },
	[POL_R_PROMPT_TIMEOUT] = { "prompt_timeout", 403,
	    "the connection was refused because nobody answered the approval "
	    "prompt in time; retry and have the user approve it." },
	[POL_R_NO_APPROVER] = { "no_approver", 403,
	    "the connection was refused because it needs approval and no "
	    "approver is connected; retry when the app is listening for "
	    "prompts." },
	[POL_R_USER_DENIED] = { "user_denied", 403,
	    "the connection was refused because the user denied it; ask the "
	    "user to allow this host." },
	[POL_R_DNS_FAILED] = { "dns_failed", 502,
	    "the connection failed because the host name did not resolve to "
	    "any address; check the name." },
	[POL_R_DNS_TIMEOUT] = { "dns_timeout", 504,
	    "the connection failed because resolving the host name timed "
	    "out; retry later." },
	[POL_R_UPSTREAM_FAILED] = { "upstream_failed", 502,
	    "the connection failed because every permitted address of the "
	    "host refused it; check that the service is up." },
	[POL_R_UPSTREAM_TIMEOUT] = { "upstream_timeout", 504,
	    "the connection failed because the host did not answer in time; "
	    "retry later." },
	[POL_R_TOO_MANY_CONNECTIONS] = { "too_many_connections", 429,
	    "the connection was refused because a connection limit was "
	    "reached (of the session, its tenant, or sluiced in all); close "
	    "some and retry." },
	[POL_R_HEAD_TOO_LARGE] = { "head_too_large", 400,
	    "the request was refused because its head (request line and "
	    "headers) is too large; send fewer or shorter headers." },
	[POL_R_HEAD_TIMEOUT] = { "head_timeout", 400,
	    "the request was refused because its head did not arrive in "
	    "time; send the complete request head promptly." },
	[POL_R_METHOD_NOT_ALLOWED] = { "method_not_allowed", 403,
	    "the request was refused because its method is not permitted "
	    "(TRACE, TRACK or unknown); use a standard method." },
	[POL_R_LOG_UNAVAILABLE] = { "log_unavailable", 503,
	    "the connection was refused because the connection log cannot be "
	    "written and the proxy fails closed; an administrator must fix "
	    "the log." },
	[POL_R_SHUTTING_DOWN] = { "shutting_down", 503,
	    "the connection was refused because the proxy is shutting down; "
	    "retry when it is back." },
	[POL_R_IDLE_TIMEOUT] = { "idle_timeout", 502,
	    "the connection was closed because it was idle too long; open a "
	    "new one." },
	[POL_R_SESSION_CLOSED] = { "session_closed", 502,
	    "the connection was closed because its session was removed; the "
	    "app must create a new session." },
	[POL_R_CEILING_LOWERED] = { "ceiling_lowered", 502,
	    "the connection was closed because the administrator's ceiling no "
	    "longer admits it; an administrator can raise the ceiling." },
	[POL_R_TIER_LOWERED] = { "tier_lowered", 403,
	    "the request waited for an answer while the chat's network tier "
	    "was lowered; the app can raise the tier again." },
	[POL_R_ECH_REFUSED] = { "ech_refused", 403,
	    "the tunnel was closed because the TLS ClientHello uses Encrypted "
	    "Client Hello (or ESNI), which hides the server name sluice "
	    "checks; turn ECH off in the client, or an administrator can "
	    "allow it with tls.allow_ech." },
	[POL_R_CONNECT_PLAIN_PORT] = { "connect_plain_port", 403,
	    "the tunnel was refused because this port carries plain HTTP, "
	    "whose Host sluice checks only on requests it forwards itself; "
	    "send http:// requests to the proxy directly instead of through "
	    "CONNECT." },
	[POL_R_SELF_TARGET] = { "self_target", 400,
	    "the connection was refused because it was made to sluice's "
	    "transparent listener directly instead of being redirected to "
	    "it; use the proxy port (HTTP_PROXY) or connect to the real "
	    "host." },
	[POL_R_TOO_MANY_INTERIM] = { "too_many_interim", 502,
	    "the exchange failed because the upstream sent interim (1xx) "
	    "answers without a final one; check the upstream service." },
	[POL_R_TOO_MANY_REFUSALS] = { "too_many_refusals", 429,
	    "the connection was closed because too many of its requests were "
	    "refused; fix the requests, then open a new connection." },
	[POL_R_UPSTREAM_TLS] = { "upstream_tls", 502,
	    "the request failed because sluice inspects this host and the "
	    "upstream's TLS certificate did not verify against the trust "
	    "store (or its TLS handshake failed); check the upstream's "
	    "certificate, or an administrator can name its CA in "
	    "inspect.upstream_ca_file." },
	[POL_R_RULE_DENIED] = { "rule_denied", 403,
	    "the request was refused because a request rule denies this "
	    "method and path on this host (the rule is named below and in "
	    "X-Sluice-Rule); an administrator can change the rules." },
	[POL_R_SESSION_DENIED] = { "session_denied", 403,
	    "the connection was refused because this sandbox's own egress "
	    "rules deny this host (set by its app, e.g. an OpenSandbox "
	    "networkPolicy); the app can change them." },
};

/* Codes are assigned in blocks, so the table may have holes: a hole is
 * an unknown code. */
static int
reason_ok(enum pol_reason r)
{
	return (int)r >= 0 && r < POL_R__COUNT && reasons[r].name != NULL;
}

const char *
pol_reason_name(enum pol_reason r)
{
	return reason_ok(r) ? reasons[r].name : "unknown";
}

int
pol_reason_status(enum pol_reason r)
{
	/* An unknown code is still a refusal; 403 never admits anything. */
	return reason_ok(r) ? reasons[r].status : 403;
}

const char *
pol_reason_hint(enum pol_reason r)
{
	if (!reason_ok(r))
		return "the connection was refused for an unknown reason; "
		    "check the proxy's log.";
	return reasons[r].hint;
}

#define NAMES_N(t)	(sizeof(t) / sizeof(*(t)))

/* The name of i in a table of names, "unknown" outside it. */
static const char *
name_at(const char *const *names, size_t n, int i)
{
	return i >= 0 && (size_t)i < n ? names[i] : "unknown";
}

static const char *const tier_names[] = {
	[POL_TIER_OFF] = "off",
	[POL_TIER_REGISTRIES] = "registries",
	[POL_TIER_PUBLIC] = "public",
};

const char *
pol_tier_name(enum pol_tier t)
{
	return name_at(tier_names, NAMES_N(tier_names), (int)t);
}

int
pol_tier_parse(const char *s, enum pol_tier *out)
{
	size_t i;

	if (s == NULL)
		return -1;
	/* Exact spelling only: config and API values are not folded. */
	for (i = 0; i < NAMES_N(tier_names); i++) {
		if (strcmp(s, tier_names[i]) == 0) {
			if (out != NULL)
				*out = (enum pol_tier)i;
			return 0;
		}
	}
	return -1;
}

static const char *const rule_names[] = {
	[POL_RULE_NONE] = "",
	[POL_RULE_REGISTRIES] = "registries",
	[POL_RULE_PUBLIC] = "public",
	[POL_RULE_GRANT] = "grant",
	[POL_RULE_PROMPT] = "prompt",
	[POL_RULE_SESSION] = "session",
};

const char *
pol_rule_name(enum pol_rule r)
{
	return name_at(rule_names, NAMES_N(rule_names), (int)r);
}

static const char *const verdict_names[] = {
	[POL_ALLOW] = "allow",
	[POL_DENY] = "deny",
	[POL_PROMPT] = "prompt",
};

const char *
pol_verdict_name(enum pol_verdict v)
{
	return name_at(verdict_names, NAMES_N(verdict_names), (int)v);
}
