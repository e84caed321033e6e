/*
 * metrics.c: GET /v1/metrics, Prometheus text format 0.0.4
 * (ctl.h, ctl_metrics_text): the relay's counters, sessions, prompts,
 * the resolver's latency histogram and the log's health.
 */
#include "sluice-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/daemon.h"
#include "proxy/relay/relay.h"
#include "proxy/control/ctl.h"
#include "proxy/control/events.h"

static void
label_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*s, f);
	}
}

/* METRIC{session="<id>"[,LABEL]} V */
static void
session_sample(FILE *f, const char *metric, const struct px_session *s,
    const char *label, unsigned long long v)
{
	fprintf(f, "%s{session=\"", metric);
	label_escape(f, pol_session_id(s->pol));
	fprintf(f, "\"%s%s} %llu\n", label ? "," : "", label ? label : "", v);
}

/* Decisions and closes by verdict and reason. */
static void
metrics_decisions(FILE *f)
{
	int v, r;

	fputs("# HELP sluice_decisions_total Decisions by verdict and reason.\n"
	    "# TYPE sluice_decisions_total counter\n", f);
	for (v = 0; v < 3; v++)
		for (r = 0; r < POL_R__COUNT; r++)
			if (px_counters.decisions[v][r] != 0 || r == POL_R_NONE)
				fprintf(f, "sluice_decisions_total{decision=\"%s\","
				    "reason=\"%s\"} %llu\n",
				    pol_verdict_name((enum pol_verdict)v),
				    pol_reason_name((enum pol_reason)r),
				    (unsigned long long)px_counters.decisions[v][r]);
	fputs("# HELP sluice_closes_total Allowed connections closed, by "
	    "reason.\n# TYPE sluice_closes_total counter\n", f);
	for (r = 0; r < POL_R__COUNT; r++)
		if (px_counters.closes[r] != 0 || r == POL_R_NONE)
			fprintf(f, "sluice_closes_total{reason=\"%s\"} %llu\n",
			    pol_reason_name((enum pol_reason)r),
			    (unsigned long long)px_counters.closes[r]);
}

/* Bytes, connections, sessions and the connection log. */
static void
metrics_relay(FILE *f)
{
	fprintf(f, "# HELP sluice_accepted_total Connections accepted.\n"
	    "# TYPE sluice_accepted_total counter\n"
	    "sluice_accepted_total %llu\n"
	    "# HELP sluice_open_connections Client connections open.\n"
	    "# TYPE sluice_open_connections gauge\n"
	    "sluice_open_connections %d\n"
	    "# HELP sluice_open_tunnels CONNECT tunnels relaying.\n"
	    "# TYPE sluice_open_tunnels gauge\n"
	    "sluice_open_tunnels %d\n"
	    "# HELP sluice_sessions Sessions.\n"
	    "# TYPE sluice_sessions gauge\n"
	    "sluice_sessions %zu\n"
	    "# HELP sluice_log_healthy 1 while the connection log is writable.\n"
	    "# TYPE sluice_log_healthy gauge\n"
	    "sluice_log_healthy %d\n"
	    "# HELP sluice_log_low_space 1 while the log's file system has "
	    "less than log.min_free_bytes free.\n"
	    "# TYPE sluice_log_low_space gauge\n"
	    "sluice_log_low_space %d\n"
	    "# HELP sluice_log_refusals_folded_total Refusal records folded "
	    "into refusals_folded records (log.refusals_per_s).\n"
	    "# TYPE sluice_log_refusals_folded_total counter\n"
	    "sluice_log_refusals_folded_total %llu\n",
	    (unsigned long long)px_counters.accepted, px_relay_nconns(), px_relay_count_tunnels(),
	    pol_session_count(px.state), clog_healthy(px.log),
	    clog_low_space(px.log),
	    (unsigned long long)px_refusals_folded_total);
	/* the head of the chain, for a SIEM to keep as an anchor (sluicectl
	 * log verify --anchor SEQ:HASH); the hash label changes with every
	 * record */
	fprintf(f, "# HELP sluice_log_last_seq Sequence number of the last "
	    "record written.\n"
	    "# TYPE sluice_log_last_seq gauge\n"
	    "sluice_log_last_seq %llu\n"
	    "# HELP sluice_log_head_info The last record written: its seq and "
	    "hash.\n"
	    "# TYPE sluice_log_head_info gauge\n"
	    "sluice_log_head_info{seq=\"%llu\",hash=\"%s\"} 1\n",
	    (unsigned long long)clog_last_seq(px.log),
	    (unsigned long long)clog_last_seq(px.log), clog_last_hash(px.log));
	if (clog_free_bytes(px.log) != UINT64_MAX)
		fprintf(f, "# HELP sluice_log_free_bytes Free bytes on the "
		    "connection log's file system.\n"
		    "# TYPE sluice_log_free_bytes gauge\n"
		    "sluice_log_free_bytes %llu\n",
		    (unsigned long long)clog_free_bytes(px.log));
}

/* The resolver's latency histogram. */
static void
metrics_dns(FILE *f)
{
	uint64_t cum = 0;
	int i;

	fputs("# HELP sluice_dns_duration_seconds Name resolution latency.\n"
	    "# TYPE sluice_dns_duration_seconds histogram\n", f);
	for (i = 0; i < PX_DNS_BUCKETS; i++) {
		cum += px_counters.dns[i];
		fprintf(f, "sluice_dns_duration_seconds_bucket{le=\"%g\"} %llu\n",
		    px_dns_bucket_us[i] / 1e6, (unsigned long long)cum);
	}
	cum += px_counters.dns[PX_DNS_BUCKETS];
	fprintf(f, "sluice_dns_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
	    "sluice_dns_duration_seconds_sum %.6f\n"
	    "sluice_dns_duration_seconds_count %llu\n",
	    (unsigned long long)cum, px_counters.dns_sum_s,
	    (unsigned long long)px_counters.dns_count);
}

/* Prompts: pending, raised, answered, how fast. */
static void
metrics_prompts(FILE *f)
{
	static const char *const kinds[5] = {
		"allow_once", "allow_chat", "deny", "timeout", "policy"
	};
	int i;

	fprintf(f, "# HELP sluice_prompts_pending Prompts waiting for "
	    "an answer.\n# TYPE sluice_prompts_pending gauge\n"
	    "sluice_prompts_pending %zu\n"
	    "# HELP sluice_approvers Event-stream subscribers that "
	    "may answer prompts.\n# TYPE sluice_approvers gauge\n"
	    "sluice_approvers %zu\n"
	    "# HELP sluice_prompts_total Prompts raised.\n"
	    "# TYPE sluice_prompts_total counter\n"
	    "sluice_prompts_total %llu\n"
	    "# HELP sluice_prompt_answers_total Prompts resolved, by "
	    "answer (timeout and policy: resolved by sluiced).\n"
	    "# TYPE sluice_prompt_answers_total counter\n",
	    px_prompts_pending(), ev_approvers(),
	    (unsigned long long)px_counters.prompts_raised);
	for (i = 0; i < 5; i++)
		fprintf(f, "sluice_prompt_answers_total{answer=\"%s\"} "
		    "%llu\n", kinds[i],
		    (unsigned long long)px_counters.prompts_answered[i]);
	fprintf(f, "# HELP sluice_prompt_answer_seconds Time from a "
	    "prompt to a person's answer.\n"
	    "# TYPE sluice_prompt_answer_seconds summary\n"
	    "sluice_prompt_answer_seconds_sum %.3f\n"
	    "sluice_prompt_answer_seconds_count %llu\n",
	    px_counters.prompt_latency_sum_s,
	    (unsigned long long)px_counters.prompt_latency_count);
	
}

/* Per session: decisions, bytes, open connections. */
static void
metrics_sessions(FILE *f)
{
	struct px_session *s;

	fputs("# HELP sluice_session_decisions_total Decisions per session.\n"
	    "# TYPE sluice_session_decisions_total counter\n", f);
	TAILQ_FOREACH(s, &px.sessions, entry) {
		session_sample(f, "sluice_session_decisions_total", s,
		    "decision=\"allow\"", s->n_allowed);
		session_sample(f, "sluice_session_decisions_total", s,
		    "decision=\"deny\"", s->n_denied);
	}
	fputs("# HELP sluice_session_bytes_total Bytes per session.\n"
	    "# TYPE sluice_session_bytes_total counter\n", f);
	TAILQ_FOREACH(s, &px.sessions, entry) {
		session_sample(f, "sluice_session_bytes_total", s,
		    "direction=\"up\"", s->bytes_up);
		session_sample(f, "sluice_session_bytes_total", s,
		    "direction=\"down\"", s->bytes_down);
	}
	fputs("# HELP sluice_session_open_connections Open connections per "
	    "session.\n# TYPE sluice_session_open_connections gauge\n", f);
	TAILQ_FOREACH(s, &px.sessions, entry)
		session_sample(f, "sluice_session_open_connections", s, NULL,
		    (unsigned long long)s->nconns);
}

char *
ctl_metrics_text(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	metrics_decisions(f);
	metrics_relay(f);
	metrics_dns(f);
	metrics_prompts(f);
	metrics_sessions(f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
