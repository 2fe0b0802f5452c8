/* policy.h - recovery policy: ordered rules that map a finding (class, kind,
 * codes, severity, a measured value) to ordered actions, with repetition
 * counting (N occurrences in a window, debounced), a grace period after node
 * boot, and escalation when incidents repeat; plus the detectors' settings.
 *
 * A policy is a heap-allocated value with no pointers inside: copy it with
 * memcpy, compare it with gh_policy_equal. The built-in default equals
 * data/policy-default.yaml (a unit test holds them equal). */
#ifndef GH_ENGINE_POLICY_H
#define GH_ENGINE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"
#include "signal/taxonomy.h"

#define GH_POLICY_MAX_RULES 256
#define GH_POLICY_MAX_ACTIONS 8
#define GH_POLICY_MAX_CODES 64
#define GH_POLICY_MAX_ESCALATIONS 4
#define GH_POLICY_NAME_MAX 64
#define GH_POLICY_MAX_CONDITIONS 16 /* condition names one rule matches */
#define GH_POLICY_CONDITION_MAX 64  /* bytes of one, NUL included */
#define GH_POLICY_MAX_BYTES (1024 * 1024)

struct gh_policy_escalation {
    int after;          /* from the after-th incident of this rule on the same subject ... */
    int64_t within_ns;  /* ... counted over this window */
    int n_actions;
    enum gh_action actions[GH_POLICY_MAX_ACTIONS];
};

struct gh_rule {
    char name[GH_POLICY_NAME_MAX];
    int line;                       /* line in the policy file (1-based) */
    uint32_t classes;               /* bitmask of 1u << gh_class; 0 = any */
    uint32_t kinds;                 /* bitmask of 1u << gh_kind; 0 = any */
    int n_codes;                    /* 0 = any code */
    int codes[GH_POLICY_MAX_CODES];
    int n_conditions; /* 0 = any; else node_condition findings whose
                                       condition is one of these (exact, case-sensitive) */
    char conditions[GH_POLICY_MAX_CONDITIONS][GH_POLICY_CONDITION_MAX];
    enum gh_severity min_severity;
    uint32_t impacts;               /* bitmask of 1u << gh_impact; 0 = any */
    bool has_threshold;
    double threshold;               /* the finding's measured value must be >= this */
    int repetitions;                /* >= 1 occurrences ... */
    int64_t window_ns;              /* ... within this window (0 = unbounded) */
    int64_t debounce_ns;            /* occurrences closer than this count once */
    int64_t boot_grace_ns;          /* ignored this long after the node became ready */
    int n_actions;
    enum gh_action actions[GH_POLICY_MAX_ACTIONS];
    bool catalog_actions;           /* "actions: [catalog]": the XID catalog's default
                                       actions for the finding's code (n_actions == 0) */
    int n_escalations;              /* ordered by increasing after */
    struct gh_policy_escalation escalations[GH_POLICY_MAX_ESCALATIONS];
};

/* Detector settings. Durations in ns. */
struct gh_policy_settings {
    int64_t reorder_window_ns;   /* out-of-order tolerance of the live stream */
    int64_t hold_ns;             /* an application/collective verdict waits this long for hardware evidence */
    int64_t episode_ns;          /* evidence of one root cause within this is one incident */
    int64_t hardware_lookback_ns;/* hardware evidence this old still explains a failure */
    int64_t counter_window_ns;   /* NVLink/PCIe/ECC counter rates are counted over this */
    /* straggler */
    double straggler_threshold;  /* fraction slower than the job's median, e.g. 0.10 */
    int straggler_k, straggler_n;/* slow in >= k of the last n steps */
    double straggler_z;          /* and at least z robust sigmas (1.4826 MAD) above it */
    int64_t restart_cost_ns;     /* rollback + restart, when the job does not say */
    int64_t assume_remaining_ns; /* a job's remaining run, when it does not say */
    /* silent data corruption */
    double loss_spike;           /* loss >= this x the running median is an anomaly */
    int64_t sdc_suspect_ns;      /* a node a corruption incident blamed but left in the job stays
                                  * its suspect this long: its next corruption resumes from
                                  * before the first */
    int loss_history;            /* steps of history before loss is judged */
    /* flapping */
    double flap_alpha;           /* Poisson tail probability that flags a node */
    int flap_min_failures;
    int flap_min_jobs;
    int64_t flap_lookback_ns;
    double flap_base_rate;       /* floor of the cluster base rate, failures per node-hour */
    int64_t flap_same_failure_ns;/* pod failures of one job within this are one failure */
    /* network */
    int64_t link_dead_ns;        /* a link down this long is dead, not flapping */
    int64_t nic_window_ns;       /* flaps and error bursts are counted over this */
    int64_t nic_error_burst;     /* error-counter increase within the window that counts as a burst */
    /* application */
    int64_t same_gpu_lookback_ns;/* an application XID on one GPU in this many ... */
    int same_gpu_jobs;           /* ... distinct jobs blames the GPU */
    /* nodes and state */
    int64_t node_down_ns;        /* a node NotReady this long (no node_ready) with a job on it is down */
    int64_t not_ready_toleration_ns; /* ... and is isolated only after this long without hardware evidence */
    int64_t job_idle_ns;         /* a job no signal named for this long is forgotten (0: never) */
    /* a Ready node that fails every pod (det_podhost.c) */
    int64_t pod_host_window_ns; /* pods the node refused within this are counted together */
    int pod_host_min_jobs;      /* ... of at least this many different jobs ... */
    int pod_host_min_pods;      /* ... and at least this many pods in all blame the node */
    /* shared causes (engine/fleet.c) */
    int64_t fleet_window_ns;      /* one signature on several nodes within this is one cause */
    int64_t fleet_link_window_ns; /* ... for a NIC port going down (a switch takes them at once) */
    int64_t fleet_hold_ns;        /* a finding whose signature may be shared waits this long after
                                  * its node first showed it for other nodes to show it too */
    int fleet_min_nodes;          /* nodes that make a signature a shared cause (2 when a rack,
                                  * switch or NVLink-domain label joins them) */
    int fleet_breaker;            /* at most this many nodes taken out of service or reset for
                                  * one rule within fleet_window: more wait for a person */
};

struct gh_policy {
    int version;
    struct gh_policy_settings settings;
    int n_rules;
    struct gh_rule rules[GH_POLICY_MAX_RULES];
};

/* A problem found while parsing or linting, with its position (1-based line). */
struct gh_policy_diag {
    int line;
    bool error; /* false: a warning */
    char msg[200];
};

#define GH_POLICY_MAX_DIAGS 64
struct gh_policy_diags {
    int n, errors, warnings;
    struct gh_policy_diag d[GH_POLICY_MAX_DIAGS];
};

/* Parses YAML text[0..len) into a new policy (caller frees with
 * gh_policy_free). Every problem goes into diags (may be NULL); returns
 * GH_EINVAL when there was at least one error (and *out is NULL), GH_OK
 * otherwise. Lint checks (shadowed rules, application rules that isolate,
 * unordered escalations, ...) are included. */
int gh_policy_parse(const char *text, size_t len, struct gh_policy **out,
                    struct gh_policy_diags *diags);

/* The built-in default policy: the text of data/policy-default.yaml,
 * embedded at build time (tools/policygen.c). */
const char *gh_policy_default_yaml(void);
/* A new copy of the built-in default; NULL on OOM. */
struct gh_policy *gh_policy_new_default(void);
void gh_policy_free(struct gh_policy *p);
bool gh_policy_equal(const struct gh_policy *a, const struct gh_policy *b);

/* What a detector reports, as the policy sees it. */
struct gh_policy_query {
    enum gh_class cls;
    enum gh_kind kind;
    int code;               /* -1: none */
    enum gh_severity severity;
    bool has_metric;
    double metric;
    bool has_impact;        /* false: not assessed (rules that match on impact do not match) */
    enum gh_impact impact;
    const char *condition; /* node_condition findings: the condition (borrowed); else NULL */
};

/* Index of the first rule whose static match (class, kind, code, condition,
 * severity, threshold) accepts q, or -1. */
int gh_policy_match(const struct gh_policy *p, const struct gh_policy_query *q);
/* The same, from rule index `from` on (0: gh_policy_match). */
int gh_policy_match_from(const struct gh_policy *p, const struct gh_policy_query *q, int from);
/* Whether a rule before index `upto` (-1: any) that matches on impact would
 * accept q but for its impact: then q's impact must be assessed first. */
bool gh_policy_impact_matters(const struct gh_policy *p, const struct gh_policy_query *q, int upto);

/* Actions of rule r for its n-th incident (for a catalog rule at level 0 the
 * caller substitutes the catalog's actions; this returns 0 of them) (1-based) on a subject within the
 * escalation windows: count_within(i) gives, for escalation i, how many
 * earlier incidents of the rule on the subject fall within its window. The
 * chosen escalation level (0 = base) is written to *level. */
int gh_policy_actions(const struct gh_rule *r, const int *earlier_within, enum gh_action *out,
                      int *level);

/* The settings a policy file may omit take these values. */
void gh_policy_settings_default(struct gh_policy_settings *s);

/* Parses "500ms", "2s", "10m", "1h", "7d" or a bare number of seconds. */
bool gh_policy_parse_duration(const char *s, int64_t *ns);

#endif
