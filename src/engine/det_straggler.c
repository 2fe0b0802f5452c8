/* det_straggler.c - stragglers: per job and step, each rank's step time (its
 * compute time when comm_ms is reported) against the job's robust baseline
 * (median, MAD); a rank slow (>= threshold above the median and >= z robust
 * sigmas) in >= k of its last n steps is flagged, localised to its GPU, or to
 * its node when most of the node is slow or the node's median stands out
 * from the other nodes'. A whole-job slowdown moves the median and flags
 * nobody. Acting is worth it only when the expected loss over the job's
 * remaining run exceeds the restart cost (rollback + restart).
 *
 * The threshold follows the job's own jitter: once JIT_WARM steps of at
 * least JIT_MIN_RANKS ranks were seen, a rank is also slow at 2z of the
 * job's typical relative robust sigma above the median (smoothed per step,
 * each step's contribution bounded), never below 0.4 x threshold: a job
 * whose ranks agree within 1% finds a GPU 6% slow that the fixed 10% would
 * miss, and a noisy one keeps the fixed threshold.
 *
 * Per step the work is proportional to the ranks that reported it, not to
 * the job's size: each step's bucket lists who reported, and node medians
 * group those reports by node. A job no step named for job_idle is
 * forgotten.
 *
 * A step is judged when every rank reported it, when later steps push it
 * out of the NB in flight, or at the latest STEP_WAIT after its first
 * report: ranks that stop reporting (the job stopped, restarted elsewhere,
 * or ships a sample of its ranks) leave no step waiting for whatever
 * telemetry comes next, hours later, to have it judged then and a node
 * isolated for a slowness long over. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/classify.h"
#include "engine/detector.h"
#include "engine/stats.h"
#include "common/strmap.h"

#define NB 4     /* steps in flight per job */
#define SLOW_EV 3
#define JIT_WARM 20      /* steps before the job's jitter sets the threshold */
#define JIT_MIN_RANKS 8  /* ranks in a step for its spread to count */
#define JIT_FLOOR 0.4    /* the jitter threshold is never below this x threshold */
#define MAX_JOBS 65536
#define STEP_WAIT_NS (120 * GH_NS_PER_S) /* a step's reports may straddle skewed clocks */

struct rank {
    const char *node;   /* topology-owned name; NULL until placed */
    int32_t node_idx;   /* topology node index, -1 unknown */
    int16_t gpu;
    bool reported;
    uint8_t n_ev;
    uint32_t bits;      /* slow flags of the last steps, newest in bit 0 */
    uint16_t nobs;
    float ewma;         /* ratio to the median, smoothed */
    float slow_ewma;    /* the same over the slow steps of the current streak only:
                           how much slower it is when slow (ewma lags behind) */
    int64_t streak_ts;  /* ts of the first slow step of the current run */
    const struct gh_tl_entry *ev[SLOW_EV]; /* the streak's first slow step, then the
                                              latest ones (refs) */
};

struct bucket {
    bool used;
    int64_t step;
    int64_t first_ts;                  /* its first report: judged STEP_WAIT after */
    int count;                         /* ranks that reported ... */
    int *who;                          /* ... and which, in arrival order */
    float *v;                          /* per rank; NAN = not reported */
    const struct gh_tl_entry **ev;     /* per rank (refs) */
};

struct nodeacc {
    int32_t node_idx;
    uint32_t bits;
    uint16_t nobs;
    bool reported;
    float ewma;
    float slow_ewma;
    int64_t streak_ts;
};

struct sjob {
    const char *name; /* key in the jobs map */
    long topo;        /* topology job index (see topo_job) ... */
    uint64_t topo_gen; /* ... as of this topology generation */
    int64_t last_ts;  /* the latest step signal */
    int cap;          /* per-rank arrays */
    int max_rank;
    int declared;     /* expected ranks from the topology, 0 = unknown */
    bool learned;     /* max_rank + 1 is a trustworthy rank count */
    float jit;        /* the job's relative robust sigma per step, smoothed */
    int n_jit;        /* steps that fed it */
    float cut_rel;    /* the last step's rank threshold, relative to the median */
    int64_t last_final; /* last finalised step */
    struct rank *ranks;
    struct bucket b[NB];
    bool order_dirty;
    int *order;       /* ranks sorted by node */
    int n_order;
    int *acc_of;      /* per rank: index in nodes, -1 unplaced (valid when !order_dirty) */
    struct nodeacc *nodes;
    int *acc_cnt, *acc_pos; /* per node accumulator: finalize's grouping (kept zeroed) */
    int n_nodes, cap_nodes;
};

struct strag {
    struct gh_strmap *jobs; /* name -> struct sjob * */
    struct sjob *last;      /* cache: the job of the previous signal */
    int64_t next;           /* no bucket is due before this (may be early) */
    double *scratch, *scratch2;
    int *iscratch;
    size_t scratch_cap;
};

static int st_create(struct gh_engine *e, void **state)
{
    (void)e;
    struct strag *s = calloc(1, sizeof *s);
    if (!s)
        return GH_ENOMEM;
    s->jobs = gh_strmap_new(MAX_JOBS);
    s->next = INT64_MAX;
    *state = s;
    return s->jobs ? GH_OK : GH_ENOMEM;
}

static void bucket_clear(struct sjob *j, struct bucket *b)
{
    (void)j;
    for (int k = 0; k < b->count; k++) {
        int r = b->who[k];
        gh_tl_unref(b->ev[r]);
        b->ev[r] = NULL;
        b->v[r] = NAN;
    }
    b->used = false;
    b->count = 0;
}

/* When a step's wait is over. */
static int64_t due_at(const struct bucket *b)
{
    return b->first_ts > INT64_MAX - STEP_WAIT_NS ? INT64_MAX : b->first_ts + STEP_WAIT_NS;
}

static void job_free(struct sjob *j)
{
    if (!j)
        return;
    for (int i = 0; i < NB; i++) {
        bucket_clear(j, &j->b[i]);
        free(j->b[i].v);
        free(j->b[i].ev);
        free(j->b[i].who);
    }
    for (int r = 0; r < j->cap; r++)
        for (int k = 0; k < j->ranks[r].n_ev; k++)
            gh_tl_unref(j->ranks[r].ev[k]);
    free(j->ranks);
    free(j->order);
    free(j->acc_of);
    free(j->nodes);
    free(j->acc_cnt);
    free(j->acc_pos);
    free(j);
}

static void st_destroy(void *state)
{
    struct strag *s = state;
    if (s->jobs)
        for (size_t i = 0; i < gh_strmap_count(s->jobs); i++)
            job_free(gh_strmap_value(s->jobs, i));
    gh_strmap_free(s->jobs);
    free(s->scratch);
    free(s->scratch2);
    free(s->iscratch);
    free(s);
}

static int grow(struct sjob *j, int rank)
{
    if (rank < j->cap)
        return GH_OK;
    int ncap = j->cap ? j->cap : 64;
    while (ncap <= rank)
        ncap *= 2;
    struct rank *nr = realloc(j->ranks, (size_t)ncap * sizeof *nr);
    if (!nr)
        return GH_ENOMEM;
    j->ranks = nr;
    memset(nr + j->cap, 0, (size_t)(ncap - j->cap) * sizeof *nr);
    for (int r = j->cap; r < ncap; r++) {
        nr[r].node_idx = -1;
        nr[r].gpu = -1;
    }
    for (int i = 0; i < NB; i++) {
        float *v = realloc(j->b[i].v, (size_t)ncap * sizeof *v);
        if (!v)
            return GH_ENOMEM;
        j->b[i].v = v;
        for (int r = j->cap; r < ncap; r++)
            v[r] = NAN;
        const struct gh_tl_entry **ev = realloc(j->b[i].ev, (size_t)ncap * sizeof *ev);
        if (!ev)
            return GH_ENOMEM;
        j->b[i].ev = ev;
        memset(ev + j->cap, 0, (size_t)(ncap - j->cap) * sizeof *ev);
        int *w = realloc(j->b[i].who, (size_t)ncap * sizeof *w);
        if (!w)
            return GH_ENOMEM;
        j->b[i].who = w;
    }
    int *o = realloc(j->order, (size_t)ncap * sizeof *o);
    if (!o)
        return GH_ENOMEM;
    j->order = o;
    int *a = realloc(j->acc_of, (size_t)ncap * sizeof *a);
    if (!a)
        return GH_ENOMEM;
    j->acc_of = a;
    j->cap = ncap;
    j->order_dirty = true;
    return GH_OK;
}

static struct sjob *job_get(struct strag *s, struct gh_engine *e, const char *name)
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
    struct sjob *j = gh_strmap_value(s->jobs, (size_t)i);
    if (!j) {
        j = calloc(1, sizeof *j);
        if (!j) {
            gh_ctx_nomem(e);
            return NULL;
        }
        j->name = gh_strmap_key(s->jobs, (size_t)i);
        j->max_rank = -1;
        j->last_final = INT64_MIN;
        struct gh_topology *topo = gh_ctx_topology(e);
        j->topo = gh_topology_find_job(topo, name);
        j->topo_gen = gh_topology_generation(topo);
        if (j->topo >= 0)
            j->declared = gh_topology_job_ranks(topo, (size_t)j->topo);
        gh_strmap_set_value(s->jobs, (size_t)i, j);
    }
    s->last = j;
    return j;
}

/* The job's topology index, looked up again when jobs were removed since. */
static long topo_job(struct sjob *j, struct gh_topology *topo)
{
    uint64_t g = gh_topology_generation(topo);
    if (j->topo < 0 || j->topo_gen != g) {
        j->topo = gh_topology_find_job(topo, j->name);
        j->topo_gen = g;
    }
    return j->topo;
}

static int expected_ranks(const struct sjob *j)
{
    if (j->declared > 0)
        return j->declared > j->max_rank + 1 ? j->declared : j->max_rank + 1;
    return j->learned ? j->max_rank + 1 : INT32_MAX;
}

static bool ensure_scratch(struct strag *s, size_t n)
{
    if (n <= s->scratch_cap)
        return true;
    double *a = realloc(s->scratch, n * sizeof *a);
    if (!a)
        return false;
    s->scratch = a;
    double *b = realloc(s->scratch2, n * sizeof *b);
    if (!b)
        return false;
    s->scratch2 = b;
    int *c = realloc(s->iscratch, n * sizeof *c);
    if (!c)
        return false;
    s->iscratch = c;
    s->scratch_cap = n;
    return true;
}

static int cmp_node(const void *a, const void *b, void *arg)
{
    const struct rank *r = arg;
    int x = *(const int *)a, y = *(const int *)b;
    if (r[x].node_idx != r[y].node_idx)
        return r[x].node_idx < r[y].node_idx ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* False when an allocation failed (the order stays dirty, or the nodes'
 * accumulated history restarts). */
static bool build_order(struct sjob *j)
{
    j->n_order = 0;
    for (int r = 0; r <= j->max_rank && r < j->cap; r++)
        if (j->ranks[r].node_idx >= 0)
            j->order[j->n_order++] = r;
    qsort_r(j->order, (size_t)j->n_order, sizeof *j->order, cmp_node, j->ranks);
    /* One accumulator per node, in node order. */
    int n = 0;
    for (int i = 0; i < j->n_order; i++)
        if (i == 0 || j->ranks[j->order[i]].node_idx != j->ranks[j->order[i - 1]].node_idx)
            n++;
    if (n > j->cap_nodes) {
        struct nodeacc *na = realloc(j->nodes, (size_t)n * sizeof *na);
        if (!na)
            return false;
        j->nodes = na;
        int *c = calloc((size_t)n, sizeof *c), *p = calloc((size_t)n, sizeof *p);
        if (!c || !p) {
            free(c);
            free(p);
            return false;
        }
        free(j->acc_cnt);
        free(j->acc_pos);
        j->acc_cnt = c;
        j->acc_pos = p;
        j->cap_nodes = n;
    }
    /* Keep accumulated history of nodes that remain. */
    struct nodeacc *old = j->n_nodes ? malloc((size_t)j->n_nodes * sizeof *old) : NULL;
    bool ok = old || !j->n_nodes;
    int n_old = old ? j->n_nodes : 0;
    if (old)
        memcpy(old, j->nodes, (size_t)n_old * sizeof *old);
    n = 0;
    for (int r = 0; r < j->cap; r++)
        j->acc_of[r] = -1;
    for (int i = 0; i < j->n_order; i++) {
        int32_t ni = j->ranks[j->order[i]].node_idx;
        if (i && ni == j->ranks[j->order[i - 1]].node_idx) {
            j->acc_of[j->order[i]] = n - 1;
            continue;
        }
        struct nodeacc a = {.node_idx = ni, .streak_ts = INT64_MIN};
        for (int k = 0; k < n_old; k++)
            if (old[k].node_idx == ni)
                a = old[k];
        j->acc_of[j->order[i]] = n;
        j->nodes[n++] = a;
    }
    free(old);
    j->n_nodes = n;
    j->order_dirty = false;
    return ok;
}

/* Keeps ev[0], the first slow step of the streak (the incident's first_ts
 * is its ts), and the latest ones after it. A new streak starts afresh. */
static void push_ev(struct rank *r, const struct gh_tl_entry *ent, bool new_streak)
{
    if (new_streak) {
        for (int k = 0; k < r->n_ev; k++)
            gh_tl_unref(r->ev[k]);
        r->n_ev = 0;
    }
    if (r->n_ev == SLOW_EV) {
        gh_tl_unref(r->ev[1]);
        memmove(r->ev + 1, r->ev + 2, (SLOW_EV - 2) * sizeof r->ev[0]);
        r->n_ev--;
    }
    r->ev[r->n_ev++] = ent; /* steals the caller's reference */
}

static void report(struct gh_engine *e, struct sjob *j, const char *node, int gpu, int rank,
                   int n_slow, int n_node_ranks, double slowdown, int64_t first_ts,
                   struct rank *const *evr, int n_evr)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    struct gh_restart_worth rw;
    gh_ctx_restart_worth(e, j->name, topo_job(j, gh_ctx_topology(e)), slowdown, &rw);
    double remaining = rw.remaining_s, loss = rw.loss_s, total_cost = rw.cost_s;
    bool worth = rw.worth;

    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_STRAGGLER;
    f.kind = GH_KIND_STEP;
    f.severity = worth ? GH_SEV_MEDIUM : GH_SEV_LOW;
    f.has_metric = true;
    f.metric = slowdown;
    f.node = node;
    f.gpu = gpu;
    f.job = j->name;
    f.first_ts = first_ts;
    for (int i = 0; i < n_evr; i++)
        for (int k = 0; k < evr[i]->n_ev; k++)
            gh_finding_add(&f, evr[i]->ev[k]);
    if (f.n_evidence == 0 && node) {
        /* A node slow as a whole, no rank alone: its GPUs' latest steps. */
        const struct gh_tl_entry *v[4];
        for (int g = 0; g < 8; g++) {
            size_t n = gh_timeline_query(gh_ctx_timeline(e), GH_TL_GPU, node, g,
                                         GH_KIND_BIT(GH_KIND_STEP), INT64_MIN, INT64_MAX, true, v, 2);
            for (size_t k = 0; k < n; k++)
                if (v[k]->sig.job && strcmp(v[k]->sig.job, j->name) == 0)
                    gh_finding_add(&f, v[k]);
        }
    }
    char who[160];
    if (gpu >= 0)
        gh_sfmt(who, sizeof who, "rank %d on %s GPU %d", rank, node, gpu);
    else
        gh_sfmt(who, sizeof who, "node %s (its median over %d ranks; %d slow alone)", node,
                n_node_ranks, n_slow);
    gh_sfmt(f.what, sizeof f.what,
            "%s of %s is %.0f%% slower than the job's median step in >= %d of the last %d steps "
            "(threshold %.1f%%, the job's jitter %.1f%%); the expected loss, %.2f h over the "
            "remaining %.2f h, %s the restart cost of %.2f h%s",
            who, j->name, slowdown * 100, st->straggler_k, st->straggler_n, j->cut_rel * 100.0,
            j->jit * 100.0, loss / 3600, remaining / 3600, worth ? "exceeds" : "does not exceed",
            total_cost / 3600, rw.assumed);
    gh_ctx_report(e, &f);
}

/* How much slower (0.10 = 10%) a rank or node is: over its slow steps when
 * it has a streak (a smoothed ratio over every step lags far behind a
 * slowdown that just began), else its smoothed ratio. */
static double slowness(float ewma, float slow_ewma)
{
    double r = slow_ewma > ewma ? slow_ewma : ewma;
    return r > 1.0 ? r - 1.0 : 0;
}

static void finalize(struct strag *s, struct gh_engine *e, struct sjob *j, struct bucket *b)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    /* Everything below walks the ranks that reported (b->who), not the job. */
    const int m = b->count;
    if (!ensure_scratch(s, 2 * (size_t)m + 1)) {
        gh_ctx_nomem(e);
        goto done;
    }
    size_t n = 0;
    for (int k = 0; k < m; k++)
        s->scratch[n++] = b->v[b->who[k]];
    if (n < 3)
        goto done;
    double med = gh_stats_median(s->scratch, n);
    for (int k = 0; k < m; k++)
        s->scratch[k] = b->v[b->who[k]];
    double mad = gh_stats_mad(s->scratch, n, med, s->scratch2);
    if (!(med > 0))
        goto done;
    double sigma_raw = 1.4826 * mad, sigma = sigma_raw;
    if (sigma < med * 0.005)
        sigma = med * 0.005;
    double cut = med * (1 + st->straggler_threshold);
    if (med + st->straggler_z * sigma > cut)
        cut = med + st->straggler_z * sigma;
    if (j->n_jit >= JIT_WARM) {
        /* The job's own jitter: 2z of its typical sigma, floored. */
        double rel = 2 * st->straggler_z * j->jit, floor = JIT_FLOOR * st->straggler_threshold;
        if (rel < floor)
            rel = floor;
        double c2 = med * (1 + rel);
        if (med + st->straggler_z * sigma > c2)
            c2 = med + st->straggler_z * sigma;
        if (c2 < cut)
            cut = c2;
    }
    j->cut_rel = (float)(cut / med - 1);
    if ((int)n >= JIT_MIN_RANKS) {
        double r = sigma_raw / med;
        if (j->n_jit == 0) {
            j->jit = (float)r;
        } else {
            if (r > 3 * j->jit)
                r = 3 * j->jit; /* one step's hiccup moves it little */
            j->jit = (float)(0.95 * j->jit + 0.05 * r);
        }
        if (j->n_jit < INT32_MAX)
            j->n_jit++;
    }
    uint32_t mask = st->straggler_n >= 32 ? 0xffffffffu : (1u << st->straggler_n) - 1;
    int candidates = 0, reporting = (int)n;
    for (int k = 0; k < m; k++) {
        int r = b->who[k];
        float v = b->v[r];
        struct rank *rk = &j->ranks[r];
        bool slow = v >= cut;
        rk->bits = ((rk->bits << 1) | slow) & mask;
        if (rk->nobs < UINT16_MAX)
            rk->nobs++;
        float ratio = (float)(v / med);
        rk->ewma = rk->nobs == 1 ? ratio : 0.9f * rk->ewma + 0.1f * ratio;
        if (slow) {
            bool fresh = (rk->bits & ~1u) == 0 || rk->streak_ts == INT64_MIN || rk->streak_ts == 0;
            if (fresh)
                rk->streak_ts = b->ev[r] ? b->ev[r]->ts_ns : gh_ctx_now(e);
            rk->slow_ewma = fresh || rk->slow_ewma <= 0 ? ratio : 0.7f * rk->slow_ewma + 0.3f * ratio;
            if (b->ev[r]) {
                push_ev(rk, b->ev[r], fresh);
                b->ev[r] = NULL;
            }
        } else if (rk->bits == 0) {
            rk->streak_ts = INT64_MIN;
        }
        if (!rk->reported && __builtin_popcount(rk->bits) >= st->straggler_k)
            candidates++;
    }
    /* Node medians against the median of the other nodes' medians. The
     * reports are grouped by node (a counting sort over the nodes that
     * reported: acc_cnt and acc_pos are zero again afterwards). */
    if (j->order_dirty && !build_order(j))
        gh_ctx_nomem(e);
    int nodes_flagged = 0;
    if (j->n_nodes >= 2 && !j->order_dirty) {
        int *touched = s->iscratch;
        int n_touched = 0;
        for (int k = 0; k < m; k++) {
            int a = j->acc_of[b->who[k]];
            if (a >= 0 && a < j->n_nodes && j->acc_cnt[a]++ == 0)
                touched[n_touched++] = a;
        }
        int off = 0;
        for (int t = 0; t < n_touched; t++) {
            j->acc_pos[touched[t]] = off;
            off += j->acc_cnt[touched[t]];
        }
        double *grouped = s->scratch, *nmed = s->scratch2, *tmp = s->scratch2 + m;
        for (int k = 0; k < m; k++) {
            int a = j->acc_of[b->who[k]];
            if (a >= 0 && a < j->n_nodes)
                grouped[j->acc_pos[a]++] = b->v[b->who[k]];
        }
        /* acc_pos now points past each node's slice. */
        for (int t = 0; t < n_touched; t++) {
            int a = touched[t], c = j->acc_cnt[a];
            nmed[t] = gh_stats_median(grouped + j->acc_pos[a] - c, (size_t)c);
        }
        /* The baseline of a node: the median of the other nodes' medians.
         * With three or more nodes one node barely moves the median of all
         * of them, so that one is computed once (O(nodes), not O(nodes^2)). */
        double all = NAN;
        if (j->n_nodes >= 3) {
            for (int t = 0; t < n_touched; t++)
                tmp[t] = nmed[t];
            all = n_touched ? gh_stats_median(tmp, (size_t)n_touched) : NAN;
        }
        for (int t = 0; t < n_touched; t++) {
            double others = all;
            if (j->n_nodes < 3) {
                size_t q = 0;
                for (int u = 0; u < n_touched; u++)
                    if (u != t)
                        tmp[q++] = nmed[u];
                if (q == 0)
                    continue;
                others = gh_stats_median(tmp, q);
            }
            if (isnan(others))
                continue;
            struct nodeacc *na = &j->nodes[touched[t]];
            bool slow = others > 0 && nmed[t] >= others * (1 + st->straggler_threshold);
            na->bits = ((na->bits << 1) | slow) & mask;
            if (na->nobs < UINT16_MAX)
                na->nobs++;
            float ratio = others > 0 ? (float)(nmed[t] / others) : 1.0f;
            na->ewma = na->nobs == 1 ? ratio : 0.9f * na->ewma + 0.1f * ratio;
            if (slow) {
                bool fresh = na->streak_ts == INT64_MIN || (na->bits & ~1u) == 0;
                if (fresh)
                    na->streak_ts = gh_ctx_now(e);
                na->slow_ewma =
                    fresh || na->slow_ewma <= 0 ? ratio : 0.7f * na->slow_ewma + 0.3f * ratio;
            }
            if (!na->reported && __builtin_popcount(na->bits) >= st->straggler_k)
                nodes_flagged++;
        }
        for (int t = 0; t < n_touched; t++)
            j->acc_cnt[touched[t]] = j->acc_pos[touched[t]] = 0;
    }
    if ((candidates == 0 && nodes_flagged == 0) || candidates * 2 > reporting)
        goto done; /* nothing, or the whole job: not a straggler */
    /* Localise, one finding per node. */
    if (j->order_dirty && !build_order(j))
        gh_ctx_nomem(e);
    struct gh_topology *topo = gh_ctx_topology(e);
    int ni = 0;
    for (int i = 0; i < j->n_order && ni < j->n_nodes; ni++) {
        int32_t node = j->ranks[j->order[i]].node_idx;
        int start = i, n_rank = 0, n_slow = 0, n_lean = 0, worst = -1;
        struct rank *evr[SLOW_EV];
        int n_evr = 0;
        int64_t first = INT64_MAX;
        for (; i < j->n_order && j->ranks[j->order[i]].node_idx == node; i++) {
            struct rank *rk = &j->ranks[j->order[i]];
            n_rank++;
            if (__builtin_popcount(rk->bits) >= st->straggler_k && !rk->reported) {
                n_slow++;
                if (worst < 0 || rk->ewma > j->ranks[worst].ewma)
                    worst = j->order[i];
                if (rk->streak_ts != INT64_MIN && rk->streak_ts < first)
                    first = rk->streak_ts;
                if (n_evr < SLOW_EV)
                    evr[n_evr++] = rk;
            } else if (!rk->reported && 2 * __builtin_popcount(rk->bits) >= st->straggler_k) {
                n_lean++; /* half way there: slow too, only a little less often */
            }
        }
        struct nodeacc *na = &j->nodes[ni];
        bool node_slow = !na->reported && na->node_idx == node &&
                         __builtin_popcount(na->bits) >= st->straggler_k;
        if (!node_slow && n_slow == 0)
            continue;
        const char *node_name = gh_topology_node_name(topo, (size_t)node);
        /* The node as a whole when most of its ranks are slow (flagged, or
         * half way to it: a node slow as a whole makes its ranks cross the
         * threshold at nearly the same time, not at exactly the same step). */
        if (node_slow || (n_rank >= 2 && (n_slow + n_lean) * 2 >= n_rank)) {
            if (na->streak_ts != INT64_MIN && na->streak_ts < first)
                first = na->streak_ts;
            if (n_evr == 0)
                for (int k = start; k < i && n_evr < SLOW_EV; k++)
                    if (j->ranks[j->order[k]].n_ev)
                        evr[n_evr++] = &j->ranks[j->order[k]];
            double slowdown = (node_slow ? slowness(na->ewma, na->slow_ewma)
                                         : slowness(j->ranks[worst].ewma, j->ranks[worst].slow_ewma));
            report(e, j, node_name, -1, -1, n_slow, n_rank, slowdown > 0 ? slowdown : 0,
                   first == INT64_MAX ? gh_ctx_now(e) : first, evr, n_evr);
            na->reported = true;
            for (int k = start; k < i; k++)
                j->ranks[j->order[k]].reported = true;
        } else {
            struct rank *w = &j->ranks[worst];
            report(e, j, node_name, w->gpu, worst, 1, n_rank, slowness(w->ewma, w->slow_ewma),
                   w->streak_ts != INT64_MIN ? w->streak_ts : gh_ctx_now(e), &w, 1);
            w->reported = true;
        }
    }
done:
    j->last_final = b->step;
    bucket_clear(j, b);
}

static void st_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct strag *s = state;
    const struct gh_signal *sg = &ent->sig;
    if (!sg->job || !sg->has_rank || !sg->has_step || sg->rank < 0 ||
        sg->rank >= GH_TOPO_MAX_RANKS || !(sg->step_ms > 0))
        return;
    double v = sg->step_ms;
    if (sg->has_comm_ms && sg->comm_ms >= 0 && sg->comm_ms < sg->step_ms)
        v = sg->step_ms - sg->comm_ms;
    if (!isfinite(v))
        return;
    struct sjob *j = job_get(s, e, sg->job);
    if (!j)
        return;
    if (grow(j, sg->rank) != GH_OK) {
        gh_ctx_nomem(e);
        return;
    }
    if (ent->ts_ns > j->last_ts)
        j->last_ts = ent->ts_ns;
    struct rank *rk = &j->ranks[sg->rank];
    if (sg->rank > j->max_rank) {
        j->max_rank = sg->rank;
        j->order_dirty = true;
    }
    /* Placement: from the signal's node only, the node the line came from
     * (the ingest fills in the sender's): a verdict about a node rests on
     * that node's own telemetry, never on a layout guessed for a line from
     * elsewhere (issue 24). A rank that moved (a restart elsewhere) starts
     * a fresh history; one never reported with a node is not placed. */
    struct gh_topology *topo = gh_ctx_topology(e);
    if (sg->node && (!rk->node || strcmp(rk->node, sg->node) != 0 || rk->gpu != sg->gpu)) {
        const char *nn = sg->node;
        int g = sg->gpu;
        {
            long ni = gh_topology_add_node(topo, nn);
            gh_topology_note(topo, j->name, nn, sg->rank, g);
            if (ni >= 0) {
                if (rk->node)
                    rk->bits = 0, rk->reported = false, rk->nobs = 0;
                rk->node = gh_topology_node_name(topo, (size_t)ni);
                rk->node_idx = (int32_t)ni;
                rk->gpu = (int16_t)g;
                j->order_dirty = true;
            }
        }
    }
    /* The step's bucket. */
    struct bucket *b = NULL;
    int64_t oldest = INT64_MAX;
    int oldest_i = -1, free_i = -1;
    for (int i = 0; i < NB; i++) {
        if (!j->b[i].used) {
            if (free_i < 0)
                free_i = i;
            continue;
        }
        if (j->b[i].step == sg->step) {
            b = &j->b[i];
            break;
        }
        if (j->b[i].step < oldest) {
            oldest = j->b[i].step;
            oldest_i = i;
        }
    }
    if (!b) {
        if (j->last_final != INT64_MIN && sg->step <= j->last_final &&
            sg->step > j->last_final - 4 * NB)
            return; /* a late report for a step already judged */
        if (free_i < 0) {
            /* A restart rewinds the step counter: judge what is in flight. */
            if (sg->step < oldest) {
                for (int i = 0; i < NB; i++)
                    if (j->b[i].used)
                        finalize(s, e, j, &j->b[i]);
                free_i = 0;
            } else {
                finalize(s, e, j, &j->b[oldest_i]);
                j->learned = true;
                free_i = oldest_i;
            }
        }
        b = &j->b[free_i];
        b->used = true;
        b->step = sg->step;
        b->first_ts = ent->ts_ns;
        b->count = 0;
        if (due_at(b) < s->next)
            s->next = due_at(b);
    }
    if (isnan(b->v[sg->rank]))
        b->who[b->count++] = sg->rank;
    else
        gh_tl_unref(b->ev[sg->rank]);
    b->v[sg->rank] = (float)v;
    b->ev[sg->rank] = gh_tl_ref(ent);
    if (b->count >= expected_ranks(j))
        finalize(s, e, j, b);
}

/* Judges job j's steps whose wait is over, oldest step first, and the
 * older steps still in flight with them (a rank's history is in step
 * order). */
static void judge_due(struct strag *s, struct gh_engine *e, struct sjob *j, int64_t now)
{
    int64_t upto = INT64_MIN;
    for (int i = 0; i < NB; i++)
        if (j->b[i].used && due_at(&j->b[i]) <= now && j->b[i].step > upto)
            upto = j->b[i].step;
    for (;;) {
        struct bucket *b = NULL;
        for (int i = 0; i < NB; i++)
            if (j->b[i].used && j->b[i].step <= upto && (!b || j->b[i].step < b->step))
                b = &j->b[i];
        if (!b)
            return;
        finalize(s, e, j, b);
    }
}

static void st_on_deadline(void *state, struct gh_engine *e, int64_t now)
{
    struct strag *s = state;
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < gh_strmap_count(s->jobs); i++) {
        struct sjob *j = gh_strmap_value(s->jobs, i);
        if (!j)
            continue;
        judge_due(s, e, j, now);
        for (int k = 0; k < NB; k++)
            if (j->b[k].used && due_at(&j->b[k]) < next)
                next = due_at(&j->b[k]);
    }
    s->next = next;
}

static int64_t st_next_deadline(void *state)
{
    const struct strag *s = state;
    return s->next;
}

struct idle_ctx {
    struct gh_engine *e;
    int64_t before;
};

static bool drop_idle(const char *key, void *value, void *ctx)
{
    const struct idle_ctx *x = ctx;
    struct sjob *j = value;
    if (j && (j->last_ts >= x->before || gh_ctx_job_seen(x->e, key) >= x->before))
        return false;
    job_free(j);
    return true;
}

/* A job no signal named for job_idle (steps, checkpoints, pods, ...). */
static void st_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct strag *s = state;
    int64_t idle = gh_ctx_settings(e)->job_idle_ns;
    if (idle <= 0 || now < INT64_MIN + idle)
        return;
    struct idle_ctx x = {e, now - idle};
    s->last = NULL;
    gh_strmap_remove_if(s->jobs, drop_idle, &x);
}

static size_t st_memory(const void *state)
{
    const struct strag *s = state;
    size_t bytes = sizeof *s + gh_strmap_memory(s->jobs) + s->scratch_cap * 2 * sizeof(double);
    for (size_t i = 0; i < gh_strmap_count(s->jobs); i++) {
        const struct sjob *j = gh_strmap_value(s->jobs, i);
        if (j)
            bytes += sizeof *j + (size_t)j->cap * (sizeof(struct rank) + 2 * sizeof(int) +
                                                   NB * (sizeof(float) + sizeof(void *) + sizeof(int))) +
                     (size_t)j->cap_nodes * (sizeof(struct nodeacc) + 2 * sizeof(int));
    }
    return bytes;
}

const struct gh_detector_ops gh_det_straggler = {
    .name = "straggler",
    .kinds = GH_KIND_BIT(GH_KIND_STEP),
    .create = st_create,
    .destroy = st_destroy,
    .on_signal = st_on_signal,
    .on_deadline = st_on_deadline,
    .next_deadline = st_next_deadline,
    .expire = st_expire,
    .memory = st_memory,
};
