/* det_sdc.c - silent data corruption: replica checksums that disagree (the
 * odd one out by majority is the suspect, localised to its node and GPU), and
 * loss anomalies (non-finite, or >= loss_spike x the running median) with no
 * application explanation, which suspect the job's nodes and ask for probes.
 * Either way the job resumes from the last checkpoint saved before the first
 * anomalous signal, hardware precursors on the suspect nodes (an ECC count
 * rising, a hardware XID) included. A checksum disagreement resumes from a
 * checkpoint verified clean: one that complete, agreeing checksums of a step
 * at or after its own were taken after it was saved. A replica that diverged
 * stays diverged (nothing re-synchronises weights), so state the replicas
 * agreed on at step S was clean at every step up to S; a checkpoint saved
 * after the last agreement is unverified. A non-finite loss in a job's first steps
 * (or the first after a restart), with no replica checksum disagreeing and no
 * hardware evidence on its nodes, is the job's own doing (class application,
 * no node): diverging from the start is what bad hyperparameters, data or
 * code do. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/classify.h"
#include "engine/detector.h"
#include "engine/stats.h"
#include "common/strmap.h"
#include "signal/xid_catalog.h"

#define NB 4
#define CK_MAX 512
#define LOSS_HIST 32
#define ANOM_EV 8
#define MAX_JOBS 65536
#define CK_WAIT_NS (120 * GH_NS_PER_S) /* a step's checksums may straddle skewed clocks */
#define LOSS_WAIT_NS (5 * GH_NS_PER_S)
#define RESTART_REWIND 8 /* a step counter this far back is a restart, not a late report */
#define AGREE_N 8        /* agreeing comparisons remembered: the checkpoints they verify */

struct ckbucket {
    bool used;
    int64_t step, first_ts;
    int n;
    const struct gh_tl_entry *ev[CK_MAX];
};

struct sdcjob {
    const char *name;
    int64_t last_ts;       /* the latest signal of the job seen here */
    struct ckbucket b[NB];
    int expected;          /* checksums per step seen before (0 = unknown) */
    int64_t last_final;
    /* loss */
    int n_loss;
    double loss[LOSS_HIST]; /* ring of per-step losses */
    int loss_head;
    int64_t last_loss_step;
    bool ck_disagree;       /* a step's replica checksums disagreed (since the last restart) */
    struct {
        int64_t step, ts;
    } agree[AGREE_N]; /* the latest complete, agreeing comparisons (ring) */
    int n_agree, agree_head;
    int64_t dis_ts, dis_step; /* the first disagreement since the replicas last agreed
                               * (INT64_MAX: none), reported or not */
    /* a loss anomaly being localised */
    bool anom;
    int64_t anom_step, anom_ts, anom_deadline;
    int n_anom, n_norm;
    const struct gh_tl_entry *anom_ev[ANOM_EV];
    int n_anom_ev;
    bool ck_wait;           /* a whole-job loss anomaly waits for its step's checksums */
    bool reported;          /* an SDC finding was made for this job (reset by time) */
    int64_t reported_ts;
};

struct sdc {
    struct gh_strmap *jobs;
    struct sdcjob *last;
    int64_t episode_ns;
};

static int sdc_create(struct gh_engine *e, void **state)
{
    struct sdc *s = calloc(1, sizeof *s);
    if (!s)
        return GH_ENOMEM;
    s->jobs = gh_strmap_new(MAX_JOBS);
    s->episode_ns = gh_ctx_settings(e)->episode_ns;
    *state = s;
    return s->jobs ? GH_OK : GH_ENOMEM;
}

static void bucket_clear(struct ckbucket *b)
{
    for (int i = 0; i < b->n; i++)
        gh_tl_unref(b->ev[i]);
    b->n = 0;
    b->used = false;
}

static void anom_clear(struct sdcjob *j)
{
    j->ck_wait = false;
    for (int i = 0; i < j->n_anom_ev; i++)
        gh_tl_unref(j->anom_ev[i]);
    j->n_anom_ev = 0;
    j->anom = false;
    j->n_anom = j->n_norm = 0;
}

static void sdc_destroy(void *state)
{
    struct sdc *s = state;
    if (s->jobs)
        for (size_t i = 0; i < gh_strmap_count(s->jobs); i++) {
            struct sdcjob *j = gh_strmap_value(s->jobs, i);
            if (!j)
                continue;
            for (int k = 0; k < NB; k++)
                bucket_clear(&j->b[k]);
            anom_clear(j);
            free(j);
        }
    gh_strmap_free(s->jobs);
    free(s);
}

static struct sdcjob *job_get(struct sdc *s, struct gh_engine *e, const char *name)
{
    if (s->last && strcmp(s->last->name, name) == 0)
        return s->last;
    int rc = GH_OK;
    long i = gh_strmap_intern(s->jobs, name, NULL, &rc);
    if (i < 0) {
        if (rc == GH_ENOMEM)
            gh_ctx_nomem(e);
        return NULL;
    }
    struct sdcjob *j = gh_strmap_value(s->jobs, (size_t)i);
    if (!j) {
        j = calloc(1, sizeof *j);
        if (!j) {
            gh_ctx_nomem(e);
            return NULL;
        }
        j->name = gh_strmap_key(s->jobs, (size_t)i);
        j->last_final = INT64_MIN;
        j->last_loss_step = INT64_MIN;
        j->dis_ts = j->dis_step = INT64_MAX;
        gh_strmap_set_value(s->jobs, (size_t)i, j);
    }
    s->last = j;
    return j;
}

/* Where an entry's rank runs: the signal's own node/GPU, the node the line
 * came from, or nowhere. Never the declared layout: a verdict about a node
 * rests on that node's own telemetry (issue 24); a rank whose line names
 * no node makes the suspect ambiguous (no node blamed, probes instead). */
static const char *locate(const struct gh_signal *s, int *gpu)
{
    *gpu = s->node ? s->gpu : -1;
    return s->node;
}


#define PRE_MAX 64

static bool same_counter(const struct gh_signal *o, const struct gh_signal *s)
{
    return o->kind == s->kind && o->gpu == s->gpu && o->has_count && o->bits == s->bits &&
           o->link == s->link && o->is_volatile == s->is_volatile &&
           (o->counter == s->counter ||
            (o->counter && s->counter && strcmp(o->counter, s->counter) == 0));
}

/* The earliest hardware precursor on node within [since, until]: a hardware
 * XID, an SXID, a row remap, an uncorrectable ECC error, or the first rise
 * of an ECC/NVLink/PCIe counter that rose at least twice in the window.
 * INT64_MAX when none. */
static int64_t precursor_on(struct gh_engine *e, const char *node, int64_t since, int64_t until)
{
    const struct gh_tl_entry *v[PRE_MAX];
    uint32_t kinds = GH_KIND_BIT(GH_KIND_XID) | GH_KIND_BIT(GH_KIND_SXID) |
                     GH_KIND_BIT(GH_KIND_ECC) | GH_KIND_BIT(GH_KIND_ROW_REMAP) |
                     GH_KIND_BIT(GH_KIND_NVLINK) | GH_KIND_BIT(GH_KIND_PCIE);
    size_t n = gh_timeline_query(gh_ctx_timeline(e), GH_TL_NODE, node, -1, kinds, since, until,
                                 false, v, PRE_MAX);
    int64_t best = INT64_MAX;
    for (size_t i = 0; i < n && v[i]->ts_ns < best; i++) {
        const struct gh_signal *s = &v[i]->sig;
        switch (s->kind) {
        case GH_KIND_XID:
            if (gh_xid_lookup(s->code)->application)
                continue;
            return v[i]->ts_ns < best ? v[i]->ts_ns : best;
        case GH_KIND_SXID:
            return v[i]->ts_ns < best ? v[i]->ts_ns : best;
        case GH_KIND_ROW_REMAP:
            if (s->pending || s->failure)
                return v[i]->ts_ns < best ? v[i]->ts_ns : best;
            continue;
        default:
            break;
        }
        if (s->kind == GH_KIND_ECC && s->bits == GH_ECC_DOUBLE && (!s->has_count || s->count > 0))
            return v[i]->ts_ns < best ? v[i]->ts_ns : best;
        if (!s->has_count)
            continue;
        /* A counter that rose at least twice in the window (a storm, not one
         * stray count): its first rise. */
        int rises = 0;
        int64_t first = INT64_MAX;
        const struct gh_signal *prev = NULL;
        for (size_t k = 0; k < n; k++) {
            const struct gh_signal *o = &v[k]->sig;
            if (!same_counter(o, s))
                continue;
            if (prev && o->count > prev->count && rises++ == 0)
                first = v[k]->ts_ns;
            prev = o;
        }
        if (rises >= 2 && first < best)
            best = first;
    }
    return best;
}

/* The earliest hardware precursor on the suspect: one node, else every node
 * of the job, within the hardware lookback before t. INT64_MAX: none. */
static int64_t precursor(struct gh_engine *e, const char *job, const char *node, int64_t t)
{
    int64_t since = t - gh_ctx_settings(e)->hardware_lookback_ns;
    if (node)
        return precursor_on(e, node, since, t);
    struct gh_topology *topo = gh_ctx_topology(e);
    long j = gh_topology_find_job(topo, job);
    if (j < 0)
        return INT64_MAX;
    const unsigned *nodes;
    size_t nn = gh_topology_job_nodes(topo, (size_t)j, &nodes);
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < nn; i++) {
        int64_t p = precursor_on(e, gh_topology_node_name(topo, nodes[i]), since, t);
        if (p < first)
            first = p;
    }
    return first;
}

static bool already(struct sdc *s, struct gh_engine *e, struct sdcjob *j, int64_t t)
{
    if (j->reported && t - j->reported_ts <= s->episode_ns)
        return true;
    enum gh_class cls;
    if (gh_ctx_job_episode(e, j->name, t, &cls) && cls != GH_CLASS_SILENT_DATA_CORRUPTION)
        return true; /* an open incident (e.g. the application's) explains it */
    return false;
}

static const char *val(const struct gh_tl_entry *e)
{
    const char *v = e->sig.value ? e->sig.value : "";
    return v[0] == '0' && (v[1] == 'x' || v[1] == 'X') ? v + 2 : v;
}

/* Checksums are hex: "0xAB12" and "ab12" are the same value. */
static bool same_value(const struct gh_tl_entry *a, const struct gh_tl_entry *b)
{
    return strcasecmp(val(a), val(b)) == 0;
}

static int cmp_replica_rank(const void *a, const void *b)
{
    const struct gh_signal *x = &(*(const struct gh_tl_entry *const *)a)->sig;
    const struct gh_signal *y = &(*(const struct gh_tl_entry *const *)b)->sig;
    if (x->replica != y->replica)
        return x->replica < y->replica ? -1 : 1;
    int rx = x->has_rank ? x->rank : -1, ry = y->has_rank ? y->rank : -1;
    return rx < ry ? -1 : rx > ry;
}

/* The latest checkpoint saved before `before` with a step below `bad` that
 * agreeing checksums verified: a complete comparison of a step at or after
 * the checkpoint's, taken after it was saved (so of the run that saved it
 * or one resumed from it) and before `before`. NULL when none is. *agreed:
 * the step of that comparison. */
static const struct gh_tl_entry *verified_checkpoint(struct gh_engine *e, const struct sdcjob *j,
                                                     int64_t bad, int64_t before, int64_t *agreed)
{
    if (j->n_agree == 0)
        return NULL;
    const struct gh_tl_entry *v[64];
    size_t n = gh_timeline_query(gh_ctx_timeline(e), GH_TL_JOB, j->name, -1,
                                 GH_KIND_BIT(GH_KIND_CHECKPOINT), INT64_MIN, before - 1, true, v,
                                 64);
    for (size_t i = n; i-- > 0;) {
        const struct gh_signal *c = &v[i]->sig;
        if (c->ckpt_state != GH_CKPT_SAVED || !c->has_step || c->step >= bad)
            continue;
        int64_t best = INT64_MIN;
        for (int k = 0; k < j->n_agree; k++)
            if (j->agree[k].step >= c->step && j->agree[k].ts >= v[i]->ts_ns &&
                j->agree[k].ts < before && j->agree[k].step > best)
                best = j->agree[k].step;
        if (best != INT64_MIN) {
            *agreed = best;
            return v[i];
        }
    }
    return NULL;
}

/* Compares the checksums of one step. With several ranks per replica (model
 * shards), the i-th rank of every replica holds the same shard: values are
 * compared across replicas position by position. In each position the odd
 * ones out by strict majority are suspects; two replicas that disagree have
 * no majority: both are. */
static void decide_loss(struct sdc *s, struct gh_engine *e, struct sdcjob *j);

static void finalize_ck(struct sdc *s, struct gh_engine *e, struct sdcjob *j, struct ckbucket *b)
{
    int n = b->n;
    if (n > j->expected)
        j->expected = n;
    j->last_final = b->step;
    if (n < 2)
        goto done;
    qsort(b->ev, (size_t)n, sizeof b->ev[0], cmp_replica_rank);
    /* Replica boundaries and the position of each entry within its replica. */
    int pos[CK_MAX], n_rep = 0, per = -1;
    bool uneven = false;
    for (int i = 0, k = 0; i < n; i++) {
        if (i == 0 || b->ev[i]->sig.replica != b->ev[i - 1]->sig.replica) {
            if (i) {
                if (per >= 0 && per != k)
                    uneven = true;
                per = k;
            }
            n_rep++;
            k = 0;
        }
        pos[i] = k++;
        if (i == n - 1 && per >= 0 && per != k)
            uneven = true;
    }
    if (n_rep < 2 || uneven)
        goto done; /* one replica, or replicas that report different shard counts: not comparable */
    const struct gh_tl_entry *sus[CK_MAX];
    int n_sus = 0, best_count = 0, positions = n / n_rep;
    bool ambiguous = false;
    const struct gh_tl_entry *agree = NULL;
    for (int p = 0; p < positions; p++) {
        const struct gh_tl_entry *col[CK_MAX];
        int m = 0;
        for (int i = 0; i < n; i++)
            if (pos[i] == p)
                col[m++] = b->ev[i];
        int best = -1, bc = 0;
        for (int i = 0; i < m; i++) {
            int c = 0;
            for (int k = 0; k < m; k++)
                c += same_value(col[i], col[k]);
            if (c > bc) {
                bc = c;
                best = i;
            }
        }
        if (bc == m)
            continue; /* all agree */
        if (bc * 2 > m) {
            for (int i = 0; i < m; i++)
                if (!same_value(col[i], col[best]) && n_sus < CK_MAX)
                    sus[n_sus++] = col[i];
            if (!agree) {
                agree = col[best];
                best_count = bc;
            }
        } else {
            ambiguous = true;
            for (int i = 0; i < m && n_sus < CK_MAX; i++)
                sus[n_sus++] = col[i];
        }
    }
    if (n_sus == 0) {
        /* Every replica of every position agreed. Verification only when
         * the step is complete: a missing replica may be the diverged one. */
        if (n >= j->expected) {
            int64_t ts = INT64_MIN;
            for (int i = 0; i < n; i++)
                if (b->ev[i]->ts_ns > ts)
                    ts = b->ev[i]->ts_ns;
            j->agree[j->agree_head].step = b->step;
            j->agree[j->agree_head].ts = ts;
            j->agree_head = (j->agree_head + 1) % AGREE_N;
            if (j->n_agree < AGREE_N)
                j->n_agree++;
            if (ts > j->dis_ts)
                j->dis_ts = j->dis_step = INT64_MAX; /* they agree again: a new start */
            if (j->anom && j->ck_wait && b->step >= j->anom_step)
                decide_loss(s, e, j); /* the comparison its loss anomaly waited for */
        }
        goto done;
    }
    j->ck_disagree = true;
    /* The first disagreement since they last agreed bounds the checkpoint
     * of whichever disagreement is reported (an open incident of another
     * cause may have held the first ones back). */
    for (int i = 0; i < n_sus; i++)
        if (sus[i]->ts_ns < j->dis_ts)
            j->dis_ts = sus[i]->ts_ns;
    if (b->step < j->dis_step)
        j->dis_step = b->step;
    if (already(s, e, j, b->first_ts))
        goto done;
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_SILENT_DATA_CORRUPTION;
    f.kind = GH_KIND_REPLICA_CHECKSUM;
    f.job = j->name;
    f.anomaly_step = b->step;
    const char *node = NULL;
    int gpu = -1;
    bool one_node = true;
    int64_t first = INT64_MAX;
    for (int i = 0; i < n_sus; i++) {
        const struct gh_signal *sg = &sus[i]->sig;
        if (sus[i]->ts_ns < first)
            first = sus[i]->ts_ns;
        int g;
        const char *nn = locate(sg, &g);
        if (!nn) {
            one_node = false;
        } else if (!node) {
            node = nn;
            gpu = g;
        } else if (strcmp(node, nn) != 0) {
            one_node = false;
        } else if (g != gpu) {
            gpu = -1;
        }
        gh_finding_add(&f, sus[i]);
    }
    if (agree)
        gh_finding_add(&f, agree);
    f.first_ts = first;
    int64_t pre = precursor(e, j->name, !ambiguous && one_node ? node : NULL, first);
    f.anomaly_ts = pre < first ? pre : first;
    if (j->dis_ts < f.anomaly_ts)
        f.anomaly_ts = j->dis_ts;
    int64_t bad = j->dis_step < b->step ? j->dis_step : b->step, agreed = -1;
    const struct gh_tl_entry *vck = verified_checkpoint(e, j, bad, f.anomaly_ts, &agreed);
    f.anomaly_step = bad;
    if (vck) {
        /* Exactly that checkpoint: none saved after it, none of a later step. */
        f.anomaly_ts = vck->ts_ns + 1;
        f.anomaly_step = vck->sig.step + 1;
    }
    const struct gh_signal *s0 = &sus[0]->sig;
    if (!ambiguous && one_node && node) {
        f.node = node;
        f.gpu = n_sus == 1 ? gpu : -1;
        f.severity = GH_SEV_HIGH;
        char where[200];
        if (f.gpu >= 0)
            gh_sfmt(where, sizeof where, "%s GPU %d", node, f.gpu);
        else
            gh_sfmt(where, sizeof where, "%s", node);
        if (n_sus == 1)
            gh_sfmt(f.what, sizeof f.what,
                    "replica checksums of %s disagree at step %lld: rank %d (replica %d) on %s "
                    "differs from the %d replicas that agree",
                    j->name, (long long)b->step, s0->has_rank ? s0->rank : -1, s0->replica, where,
                    best_count);
        else
            gh_sfmt(f.what, sizeof f.what,
                    "replica checksums of %s disagree at step %lld: %d ranks on %s differ from the "
                    "replicas that agree",
                    j->name, (long long)b->step, n_sus, where);
    } else {
        f.severity = GH_SEV_MEDIUM;
        gh_sfmt(f.what, sizeof f.what,
                "replica checksums of %s disagree at step %lld across %d replicas with no clear "
                "majority: every node of the job is a suspect",
                j->name, (long long)b->step, n_rep);
    }
    if (bad < b->step)
        gh_sfmt(f.what + strlen(f.what), sizeof f.what - strlen(f.what),
                "; they first disagreed at step %lld", (long long)bad);
    if (vck)
        gh_sfmt(f.what + strlen(f.what), sizeof f.what - strlen(f.what),
                "; checksums agreeing at step %lld verified the checkpoint of step %lld",
                (long long)agreed, (long long)vck->sig.step);
    j->reported = true;
    j->reported_ts = first;
    gh_ctx_report(e, &f);
done:
    bucket_clear(b);
}

static void on_checksum(struct sdc *s, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *sg = &ent->sig;
    if (!sg->job || !sg->has_step)
        return;
    struct sdcjob *j = job_get(s, e, sg->job);
    if (!j)
        return;
    if (ent->ts_ns > j->last_ts)
        j->last_ts = ent->ts_ns;
    struct ckbucket *b = NULL;
    int free_i = -1, oldest_i = -1;
    for (int i = 0; i < NB; i++) {
        if (!j->b[i].used) {
            if (free_i < 0)
                free_i = i;
        } else if (j->b[i].step == sg->step) {
            b = &j->b[i];
            break;
        } else if (oldest_i < 0 || j->b[i].step < j->b[oldest_i].step) {
            oldest_i = i;
        }
    }
    if (!b) {
        if (j->last_final != INT64_MIN && sg->step <= j->last_final && sg->step > j->last_final - 16)
            return;
        if (free_i < 0) {
            finalize_ck(s, e, j, &j->b[oldest_i]);
            free_i = oldest_i;
        }
        b = &j->b[free_i];
        b->used = true;
        b->step = sg->step;
        b->first_ts = ent->ts_ns;
        b->n = 0;
    }
    if (b->n < CK_MAX)
        b->ev[b->n++] = gh_tl_ref(ent);
    if (j->expected > 0 && b->n >= j->expected)
        finalize_ck(s, e, j, b);
}

/* Whether a step's checksums still being collected already differ (the
 * same shard position in two replicas, as finalize_ck compares them). Only
 * asked before calling a loss anomaly the job's own doing. */
static bool pending_disagree(const struct sdcjob *j)
{
    for (int k = 0; k < NB; k++) {
        const struct ckbucket *b = &j->b[k];
        if (!b->used || b->n < 2)
            continue;
        const struct gh_tl_entry *v[CK_MAX];
        int pos[CK_MAX];
        memcpy(v, b->ev, (size_t)b->n * sizeof v[0]);
        qsort(v, (size_t)b->n, sizeof v[0], cmp_replica_rank);
        for (int i = 0, p = 0; i < b->n; i++) {
            p = i && v[i]->sig.replica == v[i - 1]->sig.replica ? p + 1 : 0;
            pos[i] = p;
        }
        for (int i = 0; i < b->n; i++)
            for (int q = i + 1; q < b->n; q++)
                if (pos[q] == pos[i] && v[q]->sig.replica != v[i]->sig.replica &&
                    !same_value(v[i], v[q]))
                    return true;
    }
    return false;
}

/* A complete comparison at or after step found every replica agreeing. */
static bool agreed_since(const struct sdcjob *j, int64_t step, int64_t *at)
{
    for (int i = 0; i < j->n_agree; i++)
        if (j->agree[i].step >= step) {
            *at = j->agree[i].step;
            return true;
        }
    return false;
}

static double loss_median(const struct sdcjob *j)
{
    double v[LOSS_HIST];
    int n = j->n_loss < LOSS_HIST ? j->n_loss : LOSS_HIST;
    for (int i = 0; i < n; i++)
        v[i] = j->loss[i];
    return gh_stats_median(v, (size_t)n);
}

static void decide_loss(struct sdc *s, struct gh_engine *e, struct sdcjob *j)
{
    if (already(s, e, j, j->anom_ts)) {
        anom_clear(j);
        return;
    }
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_SILENT_DATA_CORRUPTION;
    f.kind = GH_KIND_STEP;
    f.severity = GH_SEV_MEDIUM;
    f.job = j->name;
    f.first_ts = j->anom_ts;
    f.anomaly_step = j->anom_step;
    const char *node = NULL;
    bool one_node = true;
    for (int i = 0; i < j->n_anom_ev; i++) {
        int g;
        const char *nn = locate(&j->anom_ev[i]->sig, &g);
        if (!nn || (node && strcmp(node, nn) != 0))
            one_node = false;
        else
            node = nn;
        gh_finding_add(&f, j->anom_ev[i]);
    }
    const struct gh_signal *first = j->n_anom_ev ? &j->anom_ev[0]->sig : NULL;
    char val[48] = "?";
    if (first)
        gh_sfmt(val, sizeof val, "%g", first->loss);
    double base = j->n_loss ? loss_median(j) : NAN;
    int64_t pre = precursor(e, j->name, NULL, j->anom_ts);
    f.anomaly_ts = pre < j->anom_ts ? pre : j->anom_ts;
    if (first && !isfinite(first->loss) && j->n_loss < st->loss_history && !j->ck_disagree &&
        pre == INT64_MAX && !pending_disagree(j)) {
        /* Diverged from the start: the job's own doing. */
        f.cls = GH_CLASS_APPLICATION;
        gh_sfmt(f.what, sizeof f.what,
                 "loss of %s is %s at step %lld, %d step%s after the job (re)started, with no "
                 "replica checksum disagreeing and no hardware evidence on its nodes: the job "
                 "diverged (its own doing, not silent data corruption)",
                 j->name, val, (long long)j->anom_step, j->n_loss, j->n_loss == 1 ? "" : "s");
    } else if (!(one_node && node && j->n_norm >= 2 && j->n_anom <= j->n_norm) &&
               (j->n_agree > 0 || j->expected > 0) && !j->ck_disagree && j->dis_ts == INT64_MAX &&
               !pending_disagree(j) && pre == INT64_MAX) {
        /* The whole job's loss went wrong and it reports replica checksums:
         * corruption on one GPU makes its replica diverge, so the verdict
         * waits for a comparison of this step or a later one. Every replica
         * agreeing there is the job's own doing (its data, its optimisation). */
        int64_t at;
        if (!agreed_since(j, j->anom_step, &at)) {
            if (!j->ck_wait) {
                j->ck_wait = true;
                j->anom_deadline = gh_ctx_now(e) + CK_WAIT_NS;
                return;
            }
            goto suspect; /* no comparison came: as without checksums */
        }
        j->ck_wait = false;
        if (first && isfinite(first->loss)) {
            /* a spike the replicas all share: nothing to act on */
            anom_clear(j);
            return;
        }
        f.cls = GH_CLASS_APPLICATION;
        gh_sfmt(f.what, sizeof f.what,
                "loss of %s is %s at step %lld on its ranks while every replica's checksum "
                "agrees at step %lld and no hardware evidence is on its nodes: the job "
                "diverged (its data or optimisation, not silent data corruption)",
                j->name, val, (long long)j->anom_step, (long long)at);
    } else if (one_node && node && j->n_norm >= 2 && j->n_anom <= j->n_norm) {
        /* One rank (or one node's ranks) anomalous while the rest of the
         * step was normal points at that node; otherwise the whole job is
         * suspect. */
        f.node = node;
        gh_sfmt(f.what, sizeof f.what,
                 "loss of %s at step %lld is %s on %d rank%s of %s while %d others are normal "
                 "(running median %.4g): suspected silent data corruption",
                 j->name, (long long)j->anom_step, val, j->n_anom, j->n_anom == 1 ? "" : "s", node,
                 j->n_norm, base);
    } else {
    suspect:
        gh_sfmt(f.what, sizeof f.what,
                 "loss of %s jumped to %s at step %lld (running median %.4g) with no application "
                 "explanation: suspected silent data corruption on one of the job's nodes",
                 j->name, val, (long long)j->anom_step, base);
    }
    j->ck_wait = false;
    j->reported = true;
    j->reported_ts = j->anom_ts;
    anom_clear(j);
    gh_ctx_report(e, &f);
}

static void on_loss(struct sdc *s, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *sg = &ent->sig;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    struct sdcjob *j = job_get(s, e, sg->job);
    if (!j)
        return;
    if (ent->ts_ns > j->last_ts)
        j->last_ts = ent->ts_ns;
    if (j->anom && sg->step > j->anom_step && !j->ck_wait)
        decide_loss(s, e, j);
    if (j->last_loss_step != INT64_MIN && sg->step < j->last_loss_step - RESTART_REWIND) {
        /* The step counter went back: a restart (from a checkpoint or from
         * scratch). Its losses are judged afresh. */
        if (j->anom)
            decide_loss(s, e, j);
        j->n_loss = 0;
        j->loss_head = 0;
        j->ck_disagree = false;
        j->last_loss_step = INT64_MIN;
    }
    double base = j->n_loss >= st->loss_history ? loss_median(j) : NAN;
    bool bad = !isfinite(sg->loss) || (base > 0 && sg->loss >= st->loss_spike * base);
    if (j->anom && sg->step == j->anom_step) {
        if (bad) {
            j->n_anom++;
            if (j->n_anom_ev < ANOM_EV)
                j->anom_ev[j->n_anom_ev++] = gh_tl_ref(ent);
        } else {
            j->n_norm++;
        }
        return;
    }
    if (bad) {
        if (j->reported && ent->ts_ns - j->reported_ts <= s->episode_ns)
            return;
        j->anom = true;
        j->anom_step = sg->step;
        j->anom_ts = ent->ts_ns;
        j->anom_deadline = ent->ts_ns + LOSS_WAIT_NS;
        j->n_anom = 1;
        j->n_norm = 0;
        j->anom_ev[j->n_anom_ev++] = gh_tl_ref(ent);
        /* Normal reports of this step that came before. */
        if (sg->step == j->last_loss_step)
            j->n_norm++;
        return;
    }
    if (sg->step != j->last_loss_step) {
        j->loss[j->loss_head] = sg->loss;
        j->loss_head = (j->loss_head + 1) % LOSS_HIST;
        if (j->n_loss < LOSS_HIST)
            j->n_loss++;
        j->last_loss_step = sg->step;
    }
}

static void sdc_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct sdc *s = state;
    if (ent->sig.kind == GH_KIND_REPLICA_CHECKSUM)
        on_checksum(s, e, ent);
    else if (ent->sig.kind == GH_KIND_STEP && ent->sig.has_loss && ent->sig.job && ent->sig.has_step)
        on_loss(s, e, ent);
}

static void sdc_on_deadline(void *state, struct gh_engine *e, int64_t now)
{
    struct sdc *s = state;
    for (size_t i = 0; i < gh_strmap_count(s->jobs); i++) {
        struct sdcjob *j = gh_strmap_value(s->jobs, i);
        if (!j)
            continue;
        if (j->anom && j->anom_deadline <= now)
            decide_loss(s, e, j);
        for (int k = 0; k < NB; k++)
            if (j->b[k].used && j->b[k].first_ts + CK_WAIT_NS <= now)
                finalize_ck(s, e, j, &j->b[k]);
    }
}

static int64_t sdc_next_deadline(void *state)
{
    struct sdc *s = state;
    int64_t d = INT64_MAX;
    for (size_t i = 0; i < gh_strmap_count(s->jobs); i++) {
        const struct sdcjob *j = gh_strmap_value(s->jobs, i);
        if (!j)
            continue;
        if (j->anom && j->anom_deadline < d)
            d = j->anom_deadline;
        for (int k = 0; k < NB; k++)
            if (j->b[k].used && j->b[k].first_ts + CK_WAIT_NS < d)
                d = j->b[k].first_ts + CK_WAIT_NS;
    }
    return d;
}

struct idle_ctx {
    struct gh_engine *e;
    int64_t before;
};

static bool drop_idle(const char *key, void *value, void *ctx)
{
    const struct idle_ctx *x = ctx;
    struct sdcjob *j = value;
    if (j) {
        if (j->last_ts >= x->before || j->anom || gh_ctx_job_seen(x->e, key) >= x->before)
            return false;
        for (int k = 0; k < NB; k++)
            if (j->b[k].used)
                return false; /* waiting for its deadline */
    }
    free(j);
    return true;
}

/* A job no checksum or loss named for job_idle: its loss history is stale
 * and a report older than that no longer suppresses anything. */
static void sdc_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct sdc *s = state;
    int64_t idle = gh_ctx_settings(e)->job_idle_ns;
    if (idle <= 0)
        return;
    if (idle < s->episode_ns)
        idle = s->episode_ns; /* `reported` suppresses for an episode */
    if (now < INT64_MIN + idle)
        return;
    struct idle_ctx x = {e, now - idle};
    s->last = NULL;
    gh_strmap_remove_if(s->jobs, drop_idle, &x);
}

static size_t sdc_memory(const void *state)
{
    const struct sdc *s = state;
    return sizeof *s + gh_strmap_memory(s->jobs) + gh_strmap_live(s->jobs) * sizeof(struct sdcjob);
}

const struct gh_detector_ops gh_det_sdc = {
    .name = "sdc",
    .kinds = GH_KIND_BIT(GH_KIND_REPLICA_CHECKSUM) | GH_KIND_BIT(GH_KIND_STEP),
    .create = sdc_create,
    .destroy = sdc_destroy,
    .on_signal = sdc_on_signal,
    .on_deadline = sdc_on_deadline,
    .next_deadline = sdc_next_deadline,
    .expire = sdc_expire,
    .memory = sdc_memory,
};
