/* report-t.h - the report model's types, shared by report.c (which fills
 * them) and html.c (which draws them). Internal to src/report: nothing
 * outside it includes this header. Every char * is owned by the model. */
#ifndef GH_REPORT_REPORT_T_H
#define GH_REPORT_REPORT_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report/report.h"
#include "report/series.h"

/* Source groups: one timeline lane each (per node; per GPU for the first
 * two when the signal names a GPU). */
enum gh_rep_group {
    GH_REP_KMSG,      /* kernel log */
    GH_REP_GPU,       /* NVML / DCGM */
    GH_REP_HOST,      /* the node's own counters */
    GH_REP_KUBE,      /* Kubernetes */
    GH_REP_TRAIN,     /* training telemetry */
    GH_REP_PROBE,     /* probes */
    GH_REP__GROUPS
};

/* How much a marker matters: thinning drops 0 first, then 1; 2 is kept. */
enum { GH_REP_MINOR, GH_REP_NOTABLE, GH_REP_MAJOR };

struct gh_rep_event {
    int64_t ts;
    int gpu;          /* -1: node-level */
    uint8_t kind;     /* enum gh_kind */
    uint8_t weight;   /* GH_REP_MINOR.. */
    bool injected;
    char *label;      /* short: "XID 79", "pod failed: Error" */
    char *detail;     /* the raw message, or NULL */
};

struct gh_rep_seg {
    int64_t a, b;     /* a span of time in which the node reported steps */
};

#define GH_REP_MAX_SEGS 64

struct gh_rep_lane {
    char *node;       /* NULL: a job-level or cluster-level lane */
    char *job;        /* job-level lanes: the job; else NULL */
    int gpu;          /* -1: node-level */
    enum gh_rep_group group;
    struct gh_rep_event *ev;
    size_t n_ev;
    uint64_t dropped; /* markers thinned or refused */
    struct gh_rep_seg seg[GH_REP_MAX_SEGS];
    size_t n_seg;
    uint64_t steps;   /* step signals behind the segments */
};

/* A step-time series: one rank (rank >= 0), or one node's mean over its
 * ranks per step (rank -1). */
struct gh_rep_series {
    char *node;
    int rank, gpu;
    struct gh_series s;
    /* node series: the step being averaged */
    int64_t pstep;
    double pts;       /* its latest x */
    double psum;
    int pn;
};

struct gh_rep_job {
    char *name;
    char **nodes;
    size_t n_nodes;
    bool nodes_dropped;
    struct gh_rep_series *ranks, *nodes_s;
    size_t n_ranks, n_nodes_s;
    bool ranks_dropped, nodes_s_dropped;
    uint64_t steps;
    int64_t ckpt_last_ns; /* latest saved checkpoint (INT64_MIN: none) */
};

struct gh_rep_ev_row {
    int64_t ts;
    char *source, *kind, *node, *summary, *raw;
    int gpu;
    bool injected;
    bool joined; /* it joined the incident after the decision (joined_evidence) */
};

struct gh_rep_guard_row {
    int64_t ts;
    char *action, *target, *guard, *verdict, *detail;
};

struct gh_rep_action_row {
    int64_t started, finished;
    char *action, *target, *result, *api_result, *detail;
    long http;
};

struct gh_rep_incident {
    char *id, *cls, *severity, *node, *job, *rule, *reason, *mode, *phase, *ckpt_path, *actions;
    int gpu;
    int64_t first_ns, decided_ns, ckpt_step;
    struct gh_rep_ev_row *ev;
    size_t n_ev;
    uint64_t ev_total;
    struct gh_rep_guard_row *guards;
    size_t n_guards;
    uint64_t guards_total;
    struct gh_rep_action_row *acts;
    size_t n_acts;
    uint64_t acts_total;
};

struct gh_report {
    struct gh_report_limits lim;
    char *title, *origin;
    enum gh_report_scope scope;
    char *subject;
    struct gh_rep_lane *lanes;
    size_t n_lanes;
    size_t last_lane;             /* lookup cache */
    struct gh_rep_job *jobs;
    size_t n_jobs;
    struct gh_rep_incident *inc;
    size_t n_inc;
    int64_t t0;                   /* series x are seconds since t0 (first step seen) */
    bool has_t0;
    struct gh_report_stats st;
};

const char *gh_rep_group_name(enum gh_rep_group g);
/* A lane's job's record, or NULL. */
const struct gh_rep_job *gh_rep_find_job(const struct gh_report *r, const char *name);
/* True when job (a record) runs on node. */
bool gh_rep_job_has_node(const struct gh_rep_job *j, const char *node);
/* A series' stored points, then its partial bucket and (node series) the
 * step still being averaged, into x, y (room for max); returns the count.
 * x in seconds since r->t0. */
size_t gh_rep_series_points(const struct gh_rep_series *s, double *x, double *y, size_t max);

#endif
