/* report.h - what `gpuheal report` shows, gathered from a scenario replay or
 * the audit store, in bounded memory: timeline lanes of signals (one per
 * source group and node, kernel-log and NVML/DCGM lanes per GPU), step-time
 * series per job (per rank and per node, decimated as they come), and the
 * incidents with their evidence, guard verdicts and actions. html.h draws
 * it.
 *
 *   r = gh_report_new(NULL, &err);
 *   gh_report_set_subject(r, GH_REPORT_JOB, "ml/llm", &err);   (optional)
 *   gh_report_add_header(r, header, &err);                     (scenario)
 *   gh_report_add_signal(r, &sig, &err);               ... each signal
 *   gh_report_add_incident(r, &inc, &idx, &err);       ... each decision
 *   gh_report_add_evidence(r, idx, &sig, raw, &err);   ... its evidence
 *   gh_report_write_html(r, out, &err);                (html.h)
 *   gh_report_free(r);
 *
 * Every cap is in gh_report_limits; what a cap leaves out is counted and
 * the page says so. Strings are copied (at most max_text bytes each, cut on
 * a UTF-8 boundary); the caller keeps ownership of what it passes. */
#ifndef GH_REPORT_REPORT_H
#define GH_REPORT_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"

struct gh_report_limits {
    size_t max_lanes;         /* timeline lanes kept */
    size_t max_lane_events;   /* markers kept per lane (ordinary ones thinned first) */
    size_t max_shown_lanes;   /* lanes drawn (blamed nodes first) */
    size_t max_jobs;          /* jobs with a step chart */
    size_t max_job_nodes;     /* nodes remembered per job */
    size_t max_rank_series;   /* per-rank step series per job; beyond it, per node only */
    size_t max_node_series;   /* per-node step series per job */
    size_t max_series_points; /* stored points per series (bucket means) */
    size_t max_chart_points;  /* points drawn per chart, all series together */
    size_t max_incidents;
    size_t max_evidence_rows; /* per incident */
    size_t max_rows;          /* guard verdicts and actions, each, per incident */
    size_t max_text;          /* bytes kept of any one string */
};
void gh_report_limits_default(struct gh_report_limits *l);

struct gh_report;

/* lim: copied (NULL: defaults). NULL with err set on failure. Caller frees
 * with gh_report_free. */
struct gh_report *gh_report_new(const struct gh_report_limits *lim, struct gh_err *err);
void gh_report_free(struct gh_report *r);

/* Words for the page's heading (copied): the report's title (default
 * "gpuheal report") and where the data came from ("scenario FILE",
 * "audit store sqlite:..."). */
int gh_report_set_title(struct gh_report *r, const char *title, struct gh_err *err);
int gh_report_set_origin(struct gh_report *r, const char *origin, struct gh_err *err);

/* Narrows the report to one job ("ns/name") or one node. Set before adding
 * anything. GH_REPORT_ALL (name NULL) is the default. A job's nodes are
 * learned from the scenario header, its step and pod signals and the nodes
 * its incidents blame; a node's other signals from before it is known to
 * run the job are left out. A node's report keeps the job-level signals
 * (checkpoints) of the jobs on it. */
enum gh_report_scope { GH_REPORT_ALL, GH_REPORT_JOB, GH_REPORT_NODE };
int gh_report_set_subject(struct gh_report *r, enum gh_report_scope scope, const char *name,
                          struct gh_err *err);

/* A scenario header (spec section 2; borrowed): which nodes each job runs on. */
int gh_report_add_header(struct gh_report *r, const json_t *header, struct gh_err *err);

/* One signal (borrowed): a marker on its lane, or for steps a point of the
 * job's step-time series and activity on the node's training lane.
 * Signals outside the subject are counted and dropped. GH_OK unless out of
 * memory: caps are not errors. */
int gh_report_add_signal(struct gh_report *r, const struct gh_signal *s, struct gh_err *err);

/* True when something on node (may be NULL) or about job (may be NULL)
 * belongs to the report's subject. */
bool gh_report_concerns(const struct gh_report *r, const char *node, const char *job);

/* A decision (spec section 3). Strings borrowed; NULL when absent. */
struct gh_report_incident {
    const char *id, *cls, *severity, *node, *job, *rule, *reason;
    const char *mode, *phase;    /* audit store only: "act"/"dry_run"/..., the phase */
    int gpu;                     /* -1 when absent */
    int64_t first_ns, decided_ns;
    const char *const *actions;  /* n_actions names, in order */
    size_t n_actions;
    int64_t ckpt_step;           /* -1 when none */
    const char *ckpt_path;
};
/* Adds inc; *idx (optional) receives its index for the calls below, or -1
 * when it was left out (over max_incidents: counted). */
int gh_report_add_incident(struct gh_report *r, const struct gh_report_incident *inc, long *idx,
                           struct gh_err *err);
/* One evidence signal of incident idx (borrowed), with its raw line (the
 * signal's JSON, borrowed; NULL: the message alone). idx -1 is a no-op. */
int gh_report_add_evidence(struct gh_report *r, long idx, const struct gh_signal *s,
                           const char *raw, struct gh_err *err);
/* The same for a signal that joined incident idx after it was decided
 * (audit.h, joined_evidence): its row says "joined later". */
int gh_report_add_joined_evidence(struct gh_report *r, long idx, const struct gh_signal *s,
                                  const char *raw, struct gh_err *err);

/* A guard's verdict on one action of incident idx. Strings borrowed. */
struct gh_report_guard {
    int64_t ts_ns;
    const char *action, *target, *guard, *verdict, *detail;
};
int gh_report_add_guard(struct gh_report *r, long idx, const struct gh_report_guard *g,
                        struct gh_err *err);

/* An action taken for incident idx and its result. Strings borrowed. */
struct gh_report_action {
    int64_t started_ns, finished_ns;
    const char *action, *target, *result, *api_result, *detail;
    long http;
};
int gh_report_add_action(struct gh_report *r, long idx, const struct gh_report_action *a,
                         struct gh_err *err);

/* Figures, for the command's summary line and for tests. */
struct gh_report_stats {
    uint64_t signals, filtered, markers, markers_dropped, steps;
    size_t lanes, lanes_dropped, jobs, jobs_dropped, incidents, incidents_dropped;
};
void gh_report_stats(const struct gh_report *r, struct gh_report_stats *out);

#endif
