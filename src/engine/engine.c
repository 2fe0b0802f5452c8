/* engine.c - drives timeline, detectors and decisions in stream-time order. */
#include "engine/engine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/classify.h"
#include "engine/decide.h"
#include "engine/detector.h"
#include "engine/fleet.h"
#include "engine/scope.h"
#include "common/strmap.h"

#define HW_ALERTS 8

/* In GH_DET_* bit order. */
static const struct gh_detector_ops *const detectors[] = {
    /* condition before application: a failure the host caused opens (or
     * joins) the condition's incident first, and the application detector
     * then finds it explained */
    &gh_det_hardware,  &gh_det_network, &gh_det_flapping, &gh_det_condition, &gh_det_application,
    &gh_det_straggler, &gh_det_sdc,     &gh_det_node,     &gh_det_fleet,     &gh_det_podhost,
};
static bool fleet_hold(void *ctx, const struct gh_finding *f, bool harmless);
#define FLEET_DET                                                                                  \
    8 /* its index: dispatched first (its counts must include the
                     * signal the other detectors report on) */
#define N_DET (sizeof detectors / sizeof detectors[0])

/* What detectors tell each other about a node. */
struct facts {
    int64_t boot_ts;
    int64_t flap_suspect_ts;
    int n_alerts;
    int64_t alerts[HW_ALERTS]; /* latest hardware alert times, ring */
};

/* When a signal last named a job, and whether that signal was a saved
 * checkpoint (a job whose telemetry ends with one has finished). */
#define RISES 8
#define PROGRESS_AFTER_NS (10 * GH_NS_PER_S) /* steps this soon after a fault prove nothing */
#define GPU_ID_WAIT_NS (GH_NS_PER_S) /* a bus id's index: NVML's reading follows within it */

struct seen {
    int64_t last;
    bool ckpt_last;
    int64_t last_step, ckpt_step;  /* highest step reported, the latest saved checkpoint's */
    int64_t first_step_ts, last_step_ts, ckpt_ts; /* when steps began, the highest came, the
                                                     checkpoint was saved */
    uint32_t n_steps;              /* how many times the highest step rose */
    /* the latest rises of the highest step and when they came (a ring):
     * whether the job kept training after a fault (gh_impact_assess) */
    uint8_t rise_head, rise_n;
    int64_t rise_ts[RISES];
};

/* For a job's telemetry to be read as a stream that ended, it must have
 * reported this many steps, at most STREAM_GAP_NS apart on average, the
 * last at most that long before its final checkpoint; and the silence after
 * must be ENDED_QUIET_NS and 20 times its step interval. Sparse or sampled
 * telemetry (a scenario's, a simulator's) says nothing of an end. */
#define ENDED_MIN_STEPS 8
#define STREAM_GAP_NS (60 * GH_NS_PER_S)

/* A job whose latest signal is a saved checkpoint and that is quiet this
 * long after it has finished (a hung job's watchdog fails its pods first). */
#define ENDED_QUIET_NS (600 * GH_NS_PER_S)

struct gh_engine {
    const struct gh_policy *policy;
    struct gh_policy *own_policy;
    struct gh_topology *topo;
    const struct gh_clock *clock;
    struct gh_timeline *tl;
    struct gh_decider *decider;
    struct gh_strmap *facts; /* node -> struct facts * */
    struct gh_strmap *gpu_ids; /* "node|bus" and "node|uuid" -> GPU index + 1 */
    struct gh_strmap *jobs_seen; /* job -> struct seen * */
    const char *seen_key;        /* the previous signal's job (map key) ... */
    struct seen *seen_last;      /* ... and its entry */
    int64_t next_sweep, sweep_every;
    uint64_t expired_jobs;
    void *state[N_DET];
    int64_t deadline[N_DET];
    int64_t min_deadline; /* the least of deadline[], kept up to date */
    uint32_t kinds[N_DET];
    /* Per kind, the detectors that take it, in GH_DET_* order: dispatch
     * walks only those. */
    uint8_t by_kind[GH_KIND__COUNT][N_DET];
    uint8_t n_by_kind[GH_KIND__COUNT];
    int64_t window_ns;
    size_t max_pending;
    int64_t now, start;
    uint64_t dispatched;
    uint64_t nomem; /* allocation failures here and in the detectors */
    gh_joined_fn joined; /* NULL: joined evidence is not reported */
    void *joined_ctx;
};

/* gh_progress_fn (impact.h): the job reported steps before first, and its
 * highest step rose at least twice from PROGRESS_AFTER_NS after first on
 * (every rise is a step newer than any before it). */
static bool job_progressing(void *ctx, const char *job, int64_t first, int64_t now, int64_t *step)
{
    struct gh_engine *e = ctx;
    long i = gh_strmap_find(e->jobs_seen, job);
    const struct seen *sn = i >= 0 ? gh_strmap_value(e->jobs_seen, (size_t)i) : NULL;
    if (!sn || sn->n_steps == 0 || sn->first_step_ts > first || now - first < PROGRESS_AFTER_NS)
        return false;
    int after = 0;
    for (int k = 0; k < sn->rise_n; k++)
        after += sn->rise_ts[k] >= first + PROGRESS_AFTER_NS;
    if (after < 2)
        return false;
    *step = sn->last_step;
    return true;
}

static bool job_live(void *ctx, const char *job, const char *node, int64_t first_ts, char *why,
                     size_t cap);

void gh_engine_config_default(struct gh_engine_config *c)
{
    c->reorder_window_ns = -1;
    c->detectors = GH_DET_ALL;
    gh_timeline_config_default(&c->timeline);
}

struct gh_engine *gh_engine_new(const struct gh_policy *policy, const struct gh_topology *topo,
                                const struct gh_clock *clock, const struct gh_engine_config *cfg,
                                gh_incident_fn cb, void *cb_ctx, struct gh_err *err)
{
    struct gh_engine_config defcfg;
    if (!cfg) {
        gh_engine_config_default(&defcfg);
        cfg = &defcfg;
    }
    struct gh_engine *e = calloc(1, sizeof *e);
    if (!e)
        goto oom;
    e->now = INT64_MIN;
    e->start = INT64_MIN;
    e->clock = clock ? clock : gh_clock_real();
    if (!policy) {
        e->own_policy = gh_policy_new_default();
        if (!e->own_policy)
            goto oom;
        policy = e->own_policy;
    }
    e->policy = policy;
    e->topo = topo ? gh_topology_clone(topo) : gh_topology_new();
    if (!e->topo)
        goto oom;
    struct gh_timeline_config tc = cfg->timeline;
    tc.window_ns = cfg->reorder_window_ns >= 0 ? cfg->reorder_window_ns
                                               : policy->settings.reorder_window_ns;
    e->window_ns = tc.window_ns;
    e->max_pending = tc.max_pending ? tc.max_pending : 1;
    e->tl = gh_timeline_new(&tc);
    e->facts = gh_strmap_new(GH_TOPO_MAX_NODES);
    e->gpu_ids = gh_strmap_new(1 << 20);
    e->jobs_seen = gh_strmap_new(GH_TOPO_MAX_JOBS);
    if (!e->tl || !e->facts || !e->gpu_ids || !e->jobs_seen)
        goto oom;
    /* Expiry runs every half idle period, within [1 min, 30 min]. */
    int64_t idle = policy->settings.job_idle_ns;
    e->sweep_every = idle > 0 ? idle / 2 : 1800 * GH_NS_PER_S;
    if (e->sweep_every < 60 * GH_NS_PER_S)
        e->sweep_every = 60 * GH_NS_PER_S;
    if (e->sweep_every > 1800 * GH_NS_PER_S)
        e->sweep_every = 1800 * GH_NS_PER_S;
    e->next_sweep = INT64_MIN;
    e->decider = gh_decider_new(policy, e->topo, e->tl, cb, cb_ctx);
    if (!e->decider)
        goto oom;
    gh_decider_set_job_live(e->decider, job_live, job_progressing, e);
    if (cfg->detectors & GH_DET_FLEET)
        gh_decider_set_hold(e->decider, fleet_hold, e);
    for (size_t i = 0; i < N_DET; i++) {
        e->deadline[i] = INT64_MAX;
        if (!(cfg->detectors & (1u << i)))
            continue; /* not running: no state, no kinds, never dispatched */
        e->kinds[i] = detectors[i]->kinds;
        if (detectors[i]->create(e, &e->state[i]) != GH_OK)
            goto oom;
        for (int k = 0; k < GH_KIND__COUNT; k++)
            if (e->kinds[i] & GH_KIND_BIT(k)) {
                if (i == FLEET_DET) {
                    memmove(e->by_kind[k] + 1, e->by_kind[k], e->n_by_kind[k]);
                    e->by_kind[k][0] = (uint8_t)i;
                    e->n_by_kind[k]++;
                } else {
                    e->by_kind[k][e->n_by_kind[k]++] = (uint8_t)i;
                }
            }
    }
    e->min_deadline = INT64_MAX;
    return e;
oom:
    gh_engine_free(e);
    gh_err_set(err, GH_ENOMEM, "engine: out of memory");
    return NULL;
}

void gh_engine_free(struct gh_engine *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < N_DET; i++)
        if (e->state[i])
            detectors[i]->destroy(e->state[i]);
    gh_decider_free(e->decider);
    if (e->facts)
        for (size_t i = 0; i < gh_strmap_count(e->facts); i++)
            free(gh_strmap_value(e->facts, i));
    gh_strmap_free(e->facts);
    gh_strmap_free(e->gpu_ids);
    if (e->jobs_seen)
        for (size_t i = 0; i < gh_strmap_count(e->jobs_seen); i++)
            free(gh_strmap_value(e->jobs_seen, i));
    gh_strmap_free(e->jobs_seen);
    gh_timeline_free(e->tl);
    gh_topology_free(e->topo);
    gh_policy_free(e->own_policy);
    free(e);
}

static int64_t resolve(const struct gh_engine *e, int64_t t)
{
    return t == GH_ENGINE_NOW ? gh_clock_now(e->clock) : t;
}

int gh_engine_ingest(struct gh_engine *e, const struct gh_signal *s, int64_t arrival_ns,
                     struct gh_err *err)
{
    return gh_timeline_push(e->tl, s, resolve(e, arrival_ns), err);
}

int gh_engine_ingest_steal(struct gh_engine *e, struct gh_signal *s, int64_t arrival_ns,
                           struct gh_err *err)
{
    return gh_timeline_push_steal(e->tl, s, resolve(e, arrival_ns), err);
}

/* "node|0000:3b:00" from a PCI id in any of the usual spellings
 * ("0000:3B:00.0", "00000000:3b:00.0", "3b:00.0"): domain:bus:device, lower
 * case, function dropped. */
static bool bus_key(const char *node, const char *pci, char *key, size_t cap)
{
    unsigned dom = 0, bus, dev;
    char rest[8];
    if (sscanf(pci, "%x:%x:%x%7s", &dom, &bus, &dev, rest) >= 3 ||
        (dom = 0, sscanf(pci, "%x:%x%7s", &bus, &dev, rest) >= 2)) {
        snprintf(key, cap, "%s|%04x:%02x:%02x", node, dom & 0xffff, bus & 0xff, dev & 0xff);
        return true;
    }
    return false;
}

static void learn_gpu_ids(struct gh_engine *e, const struct gh_signal *s)
{
    char key[400];
    if (s->pci && bus_key(s->node, s->pci, key, sizeof key)) {
        long i = gh_strmap_intern(e->gpu_ids, key, NULL, NULL);
        if (i >= 0)
            gh_strmap_set_value(e->gpu_ids, (size_t)i, (void *)(intptr_t)(s->gpu + 1));
        else if (!gh_strmap_full(e->gpu_ids))
            e->nomem++;
    }
    if (s->uuid) {
        snprintf(key, sizeof key, "%s|%s", s->node, s->uuid);
        long i = gh_strmap_intern(e->gpu_ids, key, NULL, NULL);
        if (i >= 0)
            gh_strmap_set_value(e->gpu_ids, (size_t)i, (void *)(intptr_t)(s->gpu + 1));
        else if (!gh_strmap_full(e->gpu_ids))
            e->nomem++;
    }
}

int gh_ctx_gpu_of(struct gh_engine *e, const struct gh_signal *s)
{
    if (s->gpu >= 0 || !s->node)
        return s->gpu;
    char key[400];
    long i = -1;
    if (s->pci && bus_key(s->node, s->pci, key, sizeof key))
        i = gh_strmap_find(e->gpu_ids, key);
    if (i < 0 && s->uuid) {
        snprintf(key, sizeof key, "%s|%s", s->node, s->uuid);
        i = gh_strmap_find(e->gpu_ids, key);
    }
    return i >= 0 ? (int)(intptr_t)gh_strmap_value(e->gpu_ids, (size_t)i) - 1 : -1;
}

/* Records that a signal named job at ts (signals of one job come in runs:
 * the previous one is remembered). */
static void note_job(struct gh_engine *e, const struct gh_signal *sg, int64_t ts)
{
    const char *job = sg->job;
    bool ckpt = sg->kind == GH_KIND_CHECKPOINT && sg->ckpt_state == GH_CKPT_SAVED;
    struct seen *sn = e->seen_last;
    if (!e->seen_key || strcmp(e->seen_key, job) != 0) {
        long i = gh_strmap_intern(e->jobs_seen, job, NULL, NULL);
        if (i < 0) {
            if (!gh_strmap_full(e->jobs_seen))
                e->nomem++;
            return;
        }
        sn = gh_strmap_value(e->jobs_seen, (size_t)i);
        if (!sn) {
            sn = malloc(sizeof *sn);
            if (!sn) {
                e->nomem++;
                return;
            }
            memset(sn, 0, sizeof *sn);
            sn->last = ts;
            gh_strmap_set_value(e->jobs_seen, (size_t)i, sn);
        }
        e->seen_key = gh_strmap_key(e->jobs_seen, (size_t)i);
        e->seen_last = sn;
    }
    if (ts >= sn->last) {
        sn->last = ts;
        sn->ckpt_last = ckpt;
    }
    if (sg->kind == GH_KIND_STEP && sg->has_step) {
        if (sg->step > sn->last_step || sn->n_steps == 0) {
            if (sn->n_steps == 0)
                sn->first_step_ts = ts;
            sn->last_step = sg->step;
            sn->last_step_ts = ts;
            sn->n_steps++;
            sn->rise_ts[sn->rise_head] = ts;
            sn->rise_head = (uint8_t)((sn->rise_head + 1) % RISES);
            if (sn->rise_n < RISES)
                sn->rise_n++;
        }
    } else if (ckpt && sg->has_step) {
        sn->ckpt_step = sg->step;
        sn->ckpt_ts = ts;
    }
}

/* The job's step telemetry streamed and ended with a checkpoint of its
 * last step, ENDED_QUIET_NS before t: it finished. */
static bool telemetry_ended(const struct seen *sn, int64_t t)
{
    if (!sn->ckpt_last || sn->n_steps < ENDED_MIN_STEPS || sn->ckpt_step != sn->last_step)
        return false;
    int64_t every = (sn->last_step_ts - sn->first_step_ts) / (int64_t)(sn->n_steps - 1);
    int64_t quiet = t - sn->last;
    return every <= STREAM_GAP_NS && sn->ckpt_ts - sn->last_step_ts <= STREAM_GAP_NS &&
           quiet >= ENDED_QUIET_NS && quiet >= 20 * every;
}

#define PODS_MAX 256

static bool same_str(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Whether another pod of sg's job that started on sg's node (pod_started)
 * has not completed there (no pod_succeeded of it since): the job has not
 * left the node yet. Without pod_started signals (a history without them)
 * nothing is known to remain. */
static bool pods_left(struct gh_engine *e, const struct gh_signal *sg)
{
    const struct gh_tl_entry *v[PODS_MAX];
    size_t n = gh_timeline_query(e->tl, GH_TL_NODE, sg->node, -1,
                                 GH_KIND_BIT(GH_KIND_POD_STARTED) |
                                     GH_KIND_BIT(GH_KIND_POD_SUCCEEDED),
                                 INT64_MIN, INT64_MAX, true, v, PODS_MAX);
    for (size_t i = 0; i < n; i++) {
        const struct gh_signal *p = &v[i]->sig;
        if (p->kind != GH_KIND_POD_STARTED || !same_str(p->job, sg->job) || !p->pod ||
            (same_str(p->pod, sg->pod) && same_str(p->namespace_, sg->namespace_)))
            continue;
        bool done = false;
        for (size_t k = i + 1; k < n && !done; k++)
            done = v[k]->sig.kind == GH_KIND_POD_SUCCEEDED && same_str(v[k]->sig.pod, p->pod) &&
                   (same_str(v[k]->sig.namespace_, p->namespace_) ||
                    (!v[k]->sig.namespace_ && !p->namespace_));
        if (!done)
            return true;
    }
    return false;
}

/* What runs now, from the kube kinds (pod_succeeded, job_finished) and
 * from any signal that places a job that had ended or left a node. */
static void note_placement(struct gh_engine *e, const struct gh_tl_entry *ent, int64_t ts)
{
    const struct gh_signal *sg = &ent->sig;
    if (sg->kind == GH_KIND_POD_FAILED && sg->node)
        gh_decider_job_harmed(e->decider, ent, e->now); /* harm under a record that waits */
    if (sg->kind == GH_KIND_POD_STARTED) {
        /* A pod started: the API says where the job runs now (a
         * replacement node the header never listed), so faults there
         * attach to it. */
        if (sg->node)
            gh_topology_note(e->topo, sg->job, sg->node, -1, -1);
        return;
    }
    if (sg->kind != GH_KIND_POD_SUCCEEDED && sg->kind != GH_KIND_JOB_FINISHED &&
        gh_topology_marked(e->topo) == 0)
        return;
    long j = gh_topology_find_job(e->topo, sg->job);
    if (j < 0)
        return;
    if (sg->kind == GH_KIND_JOB_FINISHED) {
        gh_topology_job_end(e->topo, (size_t)j, ts);
        gh_decider_job_finished(e->decider, ent, e->now);
    } else if (sg->kind == GH_KIND_POD_SUCCEEDED) {
        if (sg->node && pods_left(e, sg))
            return; /* another pod of it still runs there: not its last */
        gh_topology_job_leave(e->topo, (size_t)j, sg->node, ts);
        if (gh_topology_job_gone(e->topo, (size_t)j, sg->node))
            gh_decider_job_gone(e->decider, sg->node, ent, e->now);
    }
    else if (sg->node && (sg->kind == GH_KIND_STEP || sg->kind == GH_KIND_POD_FAILED) &&
             (gh_topology_job_ended(e->topo, (size_t)j) ||
              gh_topology_job_gone(e->topo, (size_t)j, sg->node)))
        gh_topology_note(e->topo, sg->job, sg->node, -1, -1); /* it runs there again */
}

/* The decision stage asks whether job still ran at first_ts. */
static bool job_live(void *ctx, const char *job, const char *node, int64_t first_ts, char *why,
                     size_t cap)
{
    struct gh_engine *e = ctx;
    char ts[GH_RFC3339_MAX];
    long j = gh_topology_find_job(e->topo, job);
    int64_t ended = j >= 0 ? gh_topology_job_ended(e->topo, (size_t)j) : 0;
    if (ended && ended <= first_ts) {
        snprintf(why, cap, "it finished at %s (no pod of it left)",
                 gh_time_format_rfc3339(ended, ts, sizeof ts));
        return false;
    }
    if (j >= 0 && node && gh_topology_job_gone(e->topo, (size_t)j, node)) {
        snprintf(why, cap, "it no longer runs on %s (its pods there ended or moved)", node);
        return false;
    }
    long i = gh_strmap_find(e->jobs_seen, job);
    const struct seen *sn = i >= 0 ? gh_strmap_value(e->jobs_seen, (size_t)i) : NULL;
    if (sn && telemetry_ended(sn, first_ts)) {
        snprintf(why, cap, "its telemetry ended with its final checkpoint at %s",
                 gh_time_format_rfc3339(sn->last, ts, sizeof ts));
        return false;
    }
    return true;
}

static void sweep(struct gh_engine *e);

static void update_min_deadline(struct gh_engine *e)
{
    int64_t dl = INT64_MAX;
    for (size_t i = 0; i < N_DET; i++)
        if (e->deadline[i] < dl)
            dl = e->deadline[i];
    e->min_deadline = dl;
}

static void dispatch(struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *sg = &ent->sig;
    if ((sg->pci || sg->uuid) && sg->node && sg->gpu >= 0)
        learn_gpu_ids(e, sg);
    if (ent->ts_ns > e->now)
        e->now = ent->ts_ns;
    if (e->start == INT64_MIN)
        e->start = ent->ts_ns;
    if (e->next_sweep == INT64_MIN)
        e->next_sweep = e->now + e->sweep_every;
    if (sg->job) {
        note_job(e, sg, ent->ts_ns);
        if (*sg->job)
            note_placement(e, ent, ent->ts_ns);
    }
    /* The timeline admits only kinds < GH_KIND__COUNT. */
    unsigned k = (unsigned)ent->sig.kind, n = e->n_by_kind[k];
    bool stale = false; /* the least deadline moved later: look again */
    for (unsigned d = 0; d < n; d++) {
        size_t i = e->by_kind[k][d];
        e->dispatched++;
        detectors[i]->on_signal(e->state[i], e, ent);
        if (detectors[i]->next_deadline) {
            int64_t old = e->deadline[i];
            e->deadline[i] = detectors[i]->next_deadline(e->state[i]);
            if (e->deadline[i] <= e->min_deadline)
                e->min_deadline = e->deadline[i];
            else if (old == e->min_deadline)
                stale = true;
        }
    }
    if (stale)
        update_min_deadline(e);
    if (e->now >= e->next_sweep)
        sweep(e);
}

static void fire(struct gh_engine *e, int64_t t)
{
    if (t > e->now)
        e->now = t;
    for (size_t i = 0; i < N_DET; i++) {
        if (e->deadline[i] > t)
            continue;
        if (detectors[i]->on_deadline)
            detectors[i]->on_deadline(e->state[i], e, t);
        e->deadline[i] = detectors[i]->next_deadline ? detectors[i]->next_deadline(e->state[i])
                                                     : INT64_MAX;
        /* A detector must move its deadline past t; if it does not, drop it
         * rather than spin. */
        if (e->deadline[i] <= t)
            e->deadline[i] = INT64_MAX;
    }
    update_min_deadline(e);
    if (e->next_sweep != INT64_MIN && e->now >= e->next_sweep)
        sweep(e);
}

/* Handles everything up to `horizon` in time order: signals (all of them when
 * force) and deadlines, interleaved; signals first on equal times. */
static void run(struct gh_engine *e, int64_t now, bool force, int64_t deadline_horizon)
{
    for (;;) {
        int64_t sig_ts = gh_timeline_pending_ts(e->tl);
        bool sig_ready = sig_ts != INT64_MAX &&
                         (force || sig_ts <= now - e->window_ns ||
                          gh_timeline_pending(e->tl) > e->max_pending);
        int64_t dl = e->min_deadline;
        bool dl_ready = dl != INT64_MAX && dl <= deadline_horizon;
        if (sig_ready && (!dl_ready || sig_ts <= dl)) {
            const struct gh_tl_entry *ent = gh_timeline_release(e->tl, now, true);
            if (ent)
                dispatch(e, ent);
        } else if (dl_ready) {
            fire(e, dl);
        } else {
            break;
        }
    }
}

void gh_engine_tick(struct gh_engine *e, int64_t now_ns)
{
    int64_t now = resolve(e, now_ns);
    if (now == INT64_MIN)
        return;
    int64_t horizon = now > INT64_MIN + e->window_ns ? now - e->window_ns : INT64_MIN;
    run(e, now, false, horizon);
}

void gh_engine_finish(struct gh_engine *e, int64_t until_ns)
{
    int64_t until = resolve(e, until_ns);
    run(e, until, true, until);
}

int64_t gh_engine_next_deadline(const struct gh_engine *e)
{
    if (gh_timeline_pending(e->tl) > e->max_pending)
        return INT64_MIN;
    int64_t t = gh_timeline_pending_ts(e->tl);
    for (size_t i = 0; i < N_DET; i++)
        if (e->deadline[i] < t)
            t = e->deadline[i];
    if (t == INT64_MAX)
        return INT64_MAX;
    return t > INT64_MAX - 1 - e->window_ns ? INT64_MAX - 1 : t + e->window_ns;
}

/* ---- forgetting ------------------------------------------------------- */

static void forget_job(struct gh_engine *e, const char *job, bool declared_too)
{
    long j = gh_topology_find_job(e->topo, job);
    bool declared = j >= 0 && gh_topology_job_declared(e->topo, (size_t)j);
    /* A declared job is the declarer's to forget (its placement and
     * checkpoints stay while it is quiet), unless the table is half full:
     * then idle ones go, so that new jobs are still tracked. */
    if (declared && !declared_too && gh_topology_jobs_live(e->topo) < GH_TOPO_MAX_JOBS / 2)
        return;
    if (j >= 0)
        gh_topology_remove_job(e->topo, (size_t)j);
    gh_timeline_forget(e->tl, GH_TL_JOB, job);
}

void gh_engine_forget_job(struct gh_engine *e, const char *job)
{
    if (!job)
        return;
    forget_job(e, job, true);
    long i = gh_strmap_find(e->jobs_seen, job);
    if (i >= 0) {
        free(gh_strmap_value(e->jobs_seen, (size_t)i));
        gh_strmap_remove(e->jobs_seen, (size_t)i);
    }
    e->seen_key = NULL;
    e->seen_last = NULL;
}

int gh_engine_declare_pod(struct gh_engine *e, const char *job, const char *node)
{
    if (!job || !node)
        return GH_EINVAL;
    long ji = gh_topology_find_job(e->topo, job);
    if (ji >= 0 && gh_topology_job_declared(e->topo, (size_t)ji) &&
        gh_topology_job_has_node(e->topo, (size_t)ji, node))
        return GH_OK;
    const char *nodes[1] = {node};
    return gh_topology_add_job(e->topo, job, nodes, 1, 0) >= 0 ? GH_OK : GH_ELIMIT;
}

int gh_engine_set_node_labels(struct gh_engine *e, const char *node, const char *const *keys,
                              const char *const *values, size_t n)
{
    return gh_topology_set_node_labels(e->topo, node, keys, values, n);
}

bool gh_engine_label_wanted(const char *key) { return gh_scope_of_label(key) != GH_SCOPE_UNSAID; }

void gh_engine_set_job_costs(struct gh_engine *e, const char *job, double remaining_s,
                             double restart_cost_s)
{
    long ji = job ? gh_topology_find_job(e->topo, job) : -1;
    if (ji >= 0)
        gh_topology_set_job_costs(e->topo, ji, remaining_s, restart_cost_s);
}

void gh_engine_node_returned(struct gh_engine *e, const char *node, int64_t ts)
{
    if (node)
        gh_decider_node_returned(e->decider, node, ts);
}

void gh_engine_decisions_not_acted(struct gh_engine *e)
{
    gh_decider_close_all(e->decider, e->now);
}

struct sweep_ctx {
    struct gh_engine *e;
    int64_t before; /* older than this is idle / expired */
};

static bool drop_idle_job(const char *job, void *value, void *ctx)
{
    struct sweep_ctx *x = ctx;
    struct seen *sn = value;
    if (sn && sn->last >= x->before)
        return false;
    /* a declared job stays placed: that its telemetry ended with its final
     * checkpoint must outlive this entry */
    long j = gh_topology_find_job(x->e->topo, job);
    if (sn && j >= 0 && telemetry_ended(sn, x->e->now))
        gh_topology_job_end(x->e->topo, (size_t)j, sn->last);
    forget_job(x->e, job, false);
    x->e->expired_jobs++;
    free(sn);
    return true;
}

static bool drop_facts(const char *node, void *value, void *ctx)
{
    struct sweep_ctx *x = ctx;
    struct facts *f = value;
    (void)node;
    if (f) {
        if (f->boot_ts >= x->before || f->flap_suspect_ts >= x->before)
            return false;
        int n = f->n_alerts < HW_ALERTS ? f->n_alerts : HW_ALERTS;
        for (int i = 0; i < n; i++)
            if (f->alerts[i] >= x->before)
                return false;
    }
    free(f);
    return true;
}

/* Forgets what can no longer matter at stream time e->now: jobs no signal
 * named for job_idle (the detectors judge their own state by the same
 * rule), node facts older than every lookback that reads them, timeline
 * entities whose entries all aged out, closed decisions. */
static void sweep(struct gh_engine *e)
{
    const struct gh_policy_settings *st = &e->policy->settings;
    int64_t now = e->now;
    e->next_sweep = now + e->sweep_every;
    struct sweep_ctx x = {e, INT64_MIN};
    /* The detectors first: they ask gh_ctx_job_seen, which forgets below. */
    for (size_t i = 0; i < N_DET; i++) {
        if (!e->state[i] || !detectors[i]->expire)
            continue;
        detectors[i]->expire(e->state[i], e, now);
        if (detectors[i]->next_deadline)
            e->deadline[i] = detectors[i]->next_deadline(e->state[i]);
    }
    update_min_deadline(e);
    if (st->job_idle_ns > 0 && now > INT64_MIN + st->job_idle_ns) {
        x.before = now - st->job_idle_ns;
        gh_strmap_remove_if(e->jobs_seen, drop_idle_job, &x);
    }
    e->seen_key = NULL;
    e->seen_last = NULL;
    int64_t keep = st->hardware_lookback_ns;
    for (int i = 0; i < e->policy->n_rules; i++)
        if (e->policy->rules[i].boot_grace_ns > keep)
            keep = e->policy->rules[i].boot_grace_ns;
    if (st->flap_same_failure_ns > keep)
        keep = st->flap_same_failure_ns;
    if (now > INT64_MIN + keep) {
        x.before = now - keep;
        gh_strmap_remove_if(e->facts, drop_facts, &x);
    }
    gh_timeline_expire(e->tl, now);
    gh_decider_expire(e->decider, now);
}

int64_t gh_engine_stream_time(const struct gh_engine *e) { return e->now; }
const struct gh_topology *gh_engine_topology(const struct gh_engine *e) { return e->topo; }
const struct gh_policy *gh_engine_policy(const struct gh_engine *e) { return e->policy; }

void gh_engine_set_policy(struct gh_engine *e, const struct gh_policy *policy)
{
    if (!policy || policy == e->policy)
        return;
    e->policy = policy;
    gh_decider_set_policy(e->decider, policy);
}

void gh_engine_set_rule_filter(struct gh_engine *e, bool (*fn)(void *ctx, int rule,
                                                                const char *node),
                               void *ctx)
{
    gh_decider_set_rule_filter(e->decider, fn, ctx);
}

void gh_engine_stats(const struct gh_engine *e, struct gh_engine_stats *out)
{
    memset(out, 0, sizeof *out);
    gh_timeline_stats(e->tl, &out->timeline);
    struct gh_decider_stats ds;
    gh_decider_stats(e->decider, &ds);
    out->findings = ds.findings;
    out->incidents = ds.decided;
    out->absorbed = ds.absorbed;
    out->pending = ds.pending;
    out->grace = ds.grace;
    out->unmatched = ds.unmatched;
    out->dispatched = e->dispatched;
    for (size_t i = 0; i < N_DET; i++)
        if (detectors[i]->memory && e->state[i])
            out->detector_bytes += detectors[i]->memory(e->state[i]);
    out->jobs = gh_topology_jobs_live(e->topo);
    out->expired_jobs = e->expired_jobs;
    out->held = gh_fleet_waiting(e->state[FLEET_DET]);
    out->nomem = e->nomem + out->timeline.nomem + ds.nomem + gh_topology_nomem(e->topo);
    out->bytes = sizeof *e + out->timeline.bytes + out->detector_bytes +
                 gh_decider_memory(e->decider) + gh_topology_memory(e->topo) +
                 gh_strmap_memory(e->facts) + gh_strmap_live(e->facts) * sizeof(struct facts) +
                 gh_strmap_memory(e->gpu_ids) + gh_strmap_memory(e->jobs_seen) +
                 gh_strmap_live(e->jobs_seen) * sizeof(struct seen);
}

/* ---- the detectors' context ------------------------------------------- */

const struct gh_policy_settings *gh_ctx_settings(struct gh_engine *e) { return &e->policy->settings; }
struct gh_topology *gh_ctx_topology(struct gh_engine *e) { return e->topo; }

void gh_ctx_restart_worth(struct gh_engine *e, const char *job, long tj, double slowdown,
                          struct gh_restart_worth *out)
{
    const struct gh_policy_settings *st = &e->policy->settings;
    double remaining = tj >= 0 ? gh_topology_job_remaining_s(e->topo, (size_t)tj) : -1;
    double cost = tj >= 0 ? gh_topology_job_restart_cost_s(e->topo, (size_t)tj) : -1;
    if (remaining < 0)
        remaining = (double)st->assume_remaining_ns / 1e9;
    if (cost < 0)
        cost = (double)st->restart_cost_ns / 1e9;
    const struct gh_tl_entry *ck[8];
    size_t n = gh_timeline_query(gh_ctx_timeline(e), GH_TL_JOB, job, -1,
                                 GH_KIND_BIT(GH_KIND_CHECKPOINT), INT64_MIN, e->now, true, ck, 8);
    double rollback = 0;
    for (size_t i = n; i-- > 0;)
        if (ck[i]->sig.ckpt_state == GH_CKPT_SAVED) {
            rollback = (double)(e->now - ck[i]->ts_ns) / 1e9;
            break;
        }
    bool rem_assumed = tj < 0 || gh_topology_job_remaining_s(e->topo, (size_t)tj) < 0;
    bool cost_assumed = tj < 0 || gh_topology_job_restart_cost_s(e->topo, (size_t)tj) < 0;
    out->assumed[0] = '\0';
    if (rem_assumed || cost_assumed)
        gh_sfmt(out->assumed, sizeof out->assumed,
                " (%s%s%s: the policy's defaults, the job "
                "does not say)",
                rem_assumed ? "remaining run" : "", rem_assumed && cost_assumed ? " and " : "",
                cost_assumed ? "restart cost" : "");
    out->remaining_s = remaining;
    out->loss_s = slowdown * remaining;
    out->cost_s = cost + rollback;
    out->worth = out->loss_s > out->cost_s;
}
struct gh_timeline *gh_ctx_timeline(struct gh_engine *e) { return e->tl; }
void gh_ctx_nomem(struct gh_engine *e) { e->nomem++; }

void gh_ctx_value_failed(struct gh_engine *e, const struct gh_strmap *m)
{
    if (!gh_strmap_full(m))
        e->nomem++;
}
int64_t gh_ctx_now(struct gh_engine *e) { return e->now; }
int64_t gh_ctx_start(struct gh_engine *e) { return e->start; }

static struct facts *facts_get(struct gh_engine *e, const char *node, bool create)
{
    if (!node)
        return NULL;
    long i = create ? gh_strmap_intern(e->facts, node, NULL, NULL) : gh_strmap_find(e->facts, node);
    if (i < 0) {
        if (create && !gh_strmap_full(e->facts))
            e->nomem++;
        return NULL;
    }
    struct facts *f = gh_strmap_value(e->facts, (size_t)i);
    if (!f && create) {
        f = calloc(1, sizeof *f);
        if (f) {
            f->boot_ts = INT64_MIN;
            f->flap_suspect_ts = INT64_MIN;
            gh_strmap_set_value(e->facts, (size_t)i, f);
        } else {
            e->nomem++;
        }
    }
    return f;
}

/* The fleet detector took work of its own (a record due, a finding held)
 * outside its dispatch: its deadline moves up now, or nothing fires it
 * when no signal of its kinds follows. */
static void fleet_deadline(struct gh_engine *e)
{
    e->deadline[FLEET_DET] = detectors[FLEET_DET]->next_deadline(e->state[FLEET_DET]);
    if (e->deadline[FLEET_DET] < e->min_deadline)
        e->min_deadline = e->deadline[FLEET_DET];
}

enum gh_outcome gh_ctx_report(struct gh_engine *e, const struct gh_finding *f)
{
    enum gh_outcome taken;
    if (e->state[FLEET_DET] && gh_fleet_take(e->state[FLEET_DET], e, f, &taken)) {
        fleet_deadline(e);
        return taken;
    }
    struct facts *fa = facts_get(e, f->node, false);
    return gh_decider_submit(e->decider, f, e->now, fa ? fa->boot_ts : INT64_MIN);
}

/* The decider's hold (decide.h): the fleet detector keeps f until a
 * deadline of its own. */
/* Whether f blames a node's GPU that its evidence names only by a PCI bus
 * id or UUID no reading has mapped to an index yet. */
static bool gpu_unnamed(struct gh_engine *e, const struct gh_finding *f)
{
    if (!f->node || f->gpu >= 0)
        return false;
    bool named_by_id = false;
    for (size_t i = 0; i < f->n_evidence; i++) {
        const struct gh_signal *s = &f->evidence[i]->sig;
        if (!s->node || strcmp(s->node, f->node) != 0 || (!s->pci && !s->uuid))
            continue;
        if (gh_ctx_gpu_of(e, s) >= 0)
            return false;
        named_by_id = true;
    }
    return named_by_id;
}

static bool fleet_hold(void *ctx, const struct gh_finding *f, bool harmless)
{
    struct gh_engine *e = ctx;
    bool held = gh_fleet_hold(e->state[FLEET_DET], e, f, harmless);
    if (!held && gpu_unnamed(e, f)) {
        /* the kernel log names a GPU by its bus id; the reading that maps
         * it to an index (NVML, DCGM) comes within a second or not at
         * all: the incident waits that second to name the GPU */
        int64_t first = f->first_ts ? f->first_ts : f->evidence[0]->ts_ns;
        if (e->now < first + GPU_ID_WAIT_NS)
            held = gh_fleet_hold_until(e->state[FLEET_DET], f, first + GPU_ID_WAIT_NS);
    }
    if (!held)
        return false;
    fleet_deadline(e);
    return true;
}

bool gh_ctx_shared_restarts(struct gh_engine *e, const struct gh_finding *f, const uint64_t *done,
                            int n_done)
{
    return gh_decider_shared_restarts(e->decider, f, e->now, done, n_done);
}

bool gh_ctx_job_progressing(struct gh_engine *e, const char *job, int64_t first, int64_t now,
                            int64_t *step)
{
    return job && job_progressing(e, job, first, now, step);
}

enum gh_outcome gh_ctx_decide_shared(struct gh_engine *e, const struct gh_shared *s,
                                     const struct gh_finding *f, bool record, bool followup,
                                     const uint64_t *done, int n_done, uint64_t *restarted)
{
    return gh_decider_shared(e->decider, s, f, e->now, record, followup, done, n_done, restarted);
}

void gh_ctx_note_boot(struct gh_engine *e, const char *node, int64_t ts)
{
    struct facts *f = facts_get(e, node, true);
    if (f)
        f->boot_ts = ts;
}

int64_t gh_ctx_boot_ts(struct gh_engine *e, const char *node)
{
    const struct facts *f = facts_get(e, node, false);
    return f ? f->boot_ts : INT64_MIN;
}

void gh_ctx_note_hw_alert(struct gh_engine *e, const char *node, int64_t ts)
{
    struct facts *f = facts_get(e, node, true);
    if (!f)
        return;
    f->alerts[f->n_alerts % HW_ALERTS] = ts;
    f->n_alerts++;
}

bool gh_ctx_hw_alert(struct gh_engine *e, const char *node, int64_t since, int64_t until,
                     int64_t *ts)
{
    struct facts *f = facts_get(e, node, false);
    if (!f)
        return false;
    bool found = false;
    int n = f->n_alerts < HW_ALERTS ? f->n_alerts : HW_ALERTS;
    for (int i = 0; i < n; i++) {
        int64_t t = f->alerts[i];
        if (t >= since && t <= until && (!found || t > *ts)) {
            *ts = t;
            found = true;
        }
    }
    return found;
}

void gh_ctx_note_flap_suspect(struct gh_engine *e, const char *node, int64_t ts)
{
    struct facts *f = facts_get(e, node, true);
    if (f)
        f->flap_suspect_ts = ts;
}

bool gh_ctx_flap_suspect(struct gh_engine *e, const char *node, int64_t since)
{
    struct facts *f = facts_get(e, node, false);
    return f && f->flap_suspect_ts != INT64_MIN && f->flap_suspect_ts >= since;
}

bool gh_ctx_node_condition_episode(struct gh_engine *e, const char *node, int64_t t)
{
    return gh_decider_node_condition_episode(e->decider, node, t);
}

void gh_ctx_condition_cleared(struct gh_engine *e, const char *node, const char *condition,
                              int64_t ts)
{
    gh_decider_condition_cleared(e->decider, node, condition, ts);
}

bool gh_ctx_node_episode(struct gh_engine *e, const char *node, int64_t t, enum gh_class *cls)
{
    return gh_decider_node_episode(e->decider, node, t, cls);
}

bool gh_ctx_job_episode(struct gh_engine *e, const char *job, int64_t t, enum gh_class *cls)
{
    return gh_decider_job_episode(e->decider, job, t, cls);
}

int64_t gh_ctx_last_hardware_incident(struct gh_engine *e)
{
    return gh_decider_last_hardware(e->decider);
}

void gh_ctx_absorbed(struct gh_engine *e, const struct gh_tl_entry *ent)
{
    gh_decider_count_absorbed(e->decider);
    if (!e->joined || !ent)
        return;
    const char *id = gh_decider_episode_id(e->decider, ent->sig.node, ent->sig.job, ent->ts_ns);
    if (id)
        e->joined(e->joined_ctx, id, ent->sig.node, &ent, 1);
}

void gh_ctx_joined(struct gh_engine *e, const char *incident_id, const char *node,
                   const struct gh_tl_entry *const *ev, size_t n)
{
    if (e->joined && incident_id && incident_id[0] && n)
        e->joined(e->joined_ctx, incident_id, node, ev, n);
}

const char *gh_ctx_shared_id(struct gh_engine *e) { return gh_decider_last_id(e->decider); }

void gh_engine_set_joined(struct gh_engine *e, gh_joined_fn fn, void *ctx)
{
    e->joined = fn;
    e->joined_ctx = ctx;
    gh_decider_set_joined(e->decider, fn, ctx);
}

int64_t gh_ctx_job_seen(struct gh_engine *e, const char *job)
{
    long i = job ? gh_strmap_find(e->jobs_seen, job) : -1;
    const struct seen *sn = i >= 0 ? gh_strmap_value(e->jobs_seen, (size_t)i) : NULL;
    return sn ? sn->last : INT64_MIN;
}

const char *gh_ctx_job_on(struct gh_engine *e, const char *node, int gpu)
{
    long j = gh_topology_job_on_node(e->topo, node, gpu);
    return j >= 0 ? gh_topology_job_name(e->topo, (size_t)j) : NULL;
}
