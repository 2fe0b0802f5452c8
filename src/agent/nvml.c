/* nvml.c - the NVML source: polls GPU health counters and waits for XID
 * events through a dlopen'ed NVML on worker threads held to a deadline, and
 * turns what changed into signals.
 *
 * Shape. The state that NVML calls touch (library handle, device handles,
 * the latest raw samples) lives in a reference-counted `struct core`,
 * shared by the source and its two NVML threads: the worker, which runs
 * every NVML call except the event wait, and the event thread. A thread
 * stuck in the driver keeps its reference, so when the source gives up on
 * it (stop/free with a deadline) the core outlives the source and the
 * thread frees it when - if ever - the call returns. The library is
 * dlclose'd only by the last reference, i.e. when no thread can be inside
 * it. Everything the poller derives (baselines, lost/level states, the
 * /metrics snapshot) lives in the source and is touched only by the polling
 * caller, except the snapshot (health_mu) and the stats (emit_mu); what a
 * poll's samples mean is decided by nvml_derive.c, which calls no NVML.
 *
 * Hand-over. A poll posts job N under core->mu and waits on core->cond for
 * done_seq >= N until the deadline. The worker fills core->samples only
 * while busy; the poller reads them only after done_seq reached its job and
 * before posting the next (poll_mu serialises pollers), so the samples need
 * no further locking. The name of the call in progress is published through
 * an atomic so a timed-out poller can say which call hung. */
#include "agent/nvml.h"
#include "common/pci.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/nvml_api.h"
#include "agent/nvml_derive.h"
#include "agent/worker.h"
#include "common/mono.h"

#define DEFAULT_POLL_NS     (1 * GH_NS_PER_S)
#define DEFAULT_DEADLINE_NS (5 * GH_NS_PER_S)
#define DEFAULT_HOLDDOWN_NS (30 * GH_NS_PER_S)
#define EVENT_WAIT_MS       500u
#define EVENT_BACKOFF_NS    (1 * GH_NS_PER_S)
#define MSG_MAX GH_NVML_MSG_MAX

/* ---- the dlsym'ed functions: (symbol, required) ---- */
#define GH_NVML_SYMS(X)                                                        \
    X(nvmlInit_v2, 1)                                                          \
    X(nvmlShutdown, 1)                                                         \
    X(nvmlDeviceGetCount_v2, 1)                                                \
    X(nvmlDeviceGetHandleByIndex_v2, 1)                                        \
    X(nvmlSystemGetDriverVersion, 0)                                           \
    X(nvmlDeviceGetPciInfo_v3, 0)                                              \
    X(nvmlDeviceGetUUID, 0)                                                    \
    X(nvmlDeviceGetTemperature, 0)                                             \
    X(nvmlDeviceGetTemperatureThreshold, 0)                                    \
    X(nvmlDeviceGetPowerUsage, 0)                                              \
    X(nvmlDeviceGetEnforcedPowerLimit, 0)                                      \
    X(nvmlDeviceGetTotalEccErrors, 0)                                          \
    X(nvmlDeviceGetRemappedRows, 0)                                            \
    X(nvmlDeviceGetRetiredPages, 0)                                            \
    X(nvmlDeviceGetRetiredPagesPendingStatus, 0)                               \
    X(nvmlDeviceGetPcieReplayCounter, 0)                                       \
    X(nvmlDeviceGetNvLinkState, 0)                                             \
    X(nvmlDeviceGetNvLinkErrorCounter, 0)                                      \
    X(nvmlEventSetCreate, 0)                                                   \
    X(nvmlDeviceGetSupportedEventTypes, 0)                                     \
    X(nvmlDeviceRegisterEvents, 0)                                             \
    X(nvmlEventSetWait_v2, 0)                                                  \
    X(nvmlEventSetFree, 0)

struct nvml_fns {
#define FN_FIELD(name, req) gh_##name##_fn name;
    GH_NVML_SYMS(FN_FIELD)
#undef FN_FIELD
    /* nvmlDeviceGetCurrentClocksEventReasons, or on drivers before 535 the
     * same call under its old name ...ClocksThrottleReasons */
    gh_nvmlDeviceGetCurrentClocksEventReasons_fn reasons;
    const char *reasons_name;
};

enum job { J_NONE, J_INIT, J_POLL };

struct core {
    pthread_mutex_t mu;
    pthread_cond_t cond;      /* CLOCK_MONOTONIC; job posted/done, thread exited */
    int refs;

    void *dl;
    struct nvml_fns fn;

    /* init results (worker writes during J_INIT) */
    bool initialized;
    unsigned ngpus;
    struct gh_nvml_dev dev[GH_NVML_MAX_GPUS];
    nvmlDevice_t ev_handle[GH_NVML_MAX_GPUS]; /* as at init; the event thread's map */
    nvmlEventSet_t evset;
    bool events_ok;
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];

    /* jobs */
    enum job job_kind;
    bool job_posted;
    uint64_t job_seq, done_seq;
    int job_rc;
    struct gh_err job_err;
    bool busy;
    int64_t busy_since;       /* monotonic ns */
    _Atomic(const char *) cur_call;
    _Atomic int cur_gpu;
    bool quit, worker_exited, worker_abandoned;

    struct gh_nvml_sample samples[GH_NVML_MAX_GPUS];

    /* event thread */
    bool ev_quit, ev_exited, ev_abandoned, ev_in_source, ev_in_wait;
    int64_t ev_wait_since;    /* monotonic ns */
    uint64_t ev_wait_returns;
};

struct gh_nvml_source {
    struct core *core;
    char *node;
    int64_t poll_ns, deadline_ns, holddown_ns;
    double temp_threshold;
    const struct gh_clock *clock;
    gh_nvml_emit_fn emit;
    void *emit_ctx;
    unsigned ngpus;

    pthread_mutex_t poll_mu;  /* serialises poll_once; guards gs[] */
    struct gh_nvml_gpu_state *gs;
    bool hang_pending;        /* a timed-out job has not completed yet */
    uint64_t ev_hang_reported_at; /* ev_wait_returns value when reported, +1 */

    struct gh_nvml_derive_cfg dc; /* the derivation's and every emit's (set by new) */

    pthread_mutex_t emit_mu;  /* serialises emit; guards stats */
    struct gh_nvml_stats stats;

    pthread_mutex_t health_mu;
    struct gh_nvml_gpu_health *health;

    struct gh_worker *poller; /* poll_once every poll_ns */
    bool ev_running;          /* event thread control */
    pthread_t ev_thread;
};

/* ---- time and small helpers ---- */

static bool is_lost_rc(nvmlReturn_t r)
{
    return r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED;
}

static bool is_unsupported_rc(nvmlReturn_t r)
{
    return r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND;
}

/* ---- core lifetime ---- */

static void core_unref(struct core *c)
{
    bool last;
    pthread_mutex_lock(&c->mu);
    last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (!last)
        return;
    /* No thread holds a reference, so none is inside the library. */
    if (c->dl)
        dlclose(c->dl);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Frees the event set and shuts NVML down; called with c->mu held by the
 * last of the two NVML threads to leave (so neither is inside the library),
 * which matters when one of them was abandoned stuck in a call. */
static void nvml_release_locked(struct core *c)
{
    nvmlEventSet_t set = c->evset;
    if (!c->initialized)
        return;
    c->evset = NULL;
    c->initialized = false;
    pthread_mutex_unlock(&c->mu);
    if (set)
        c->fn.nvmlEventSetFree(set);
    c->fn.nvmlShutdown();
    pthread_mutex_lock(&c->mu);
}

/* ---- worker: every NVML call but the event wait ---- */

static void set_call(struct core *c, const char *name, int gpu)
{
    atomic_store_explicit(&c->cur_gpu, gpu, memory_order_relaxed);
    atomic_store_explicit(&c->cur_call, name, memory_order_release);
}

/* Classifies one call's result for GPU d: returns false when the GPU is
 * lost (the rest of its calls are skipped this poll), marks the metric
 * unsupported when NVML says so, and leaves the value invalid on other
 * errors (a transient failure keeps the old baseline). */
static bool check_rc(struct gh_nvml_dev *d, struct gh_nvml_sample *s, uint32_t metric_bit,
                     nvmlReturn_t r, const char *call)
{
    if (r == NVML_SUCCESS)
        return true;
    if (is_lost_rc(r)) {
        s->lost = true;
        s->lost_rc = r;
        s->lost_call = call;
        return false;
    }
    if (is_unsupported_rc(r))
        d->unsupported |= metric_bit;
    return true;
}

#define WANT(d, fnp, m) ((fnp) && !((d)->unsupported & GH_NVML_BIT(m)))

static void poll_gpu(struct core *c, unsigned i)
{
    struct gh_nvml_dev *d = &c->dev[i];
    struct gh_nvml_sample *s = &c->samples[i];
    const struct nvml_fns *f = &c->fn;
    nvmlReturn_t r;

    memset(s, 0, sizeof *s);
    if (!d->h) {
        /* No handle: retry it if the GPU was lost at init. */
        if (!is_lost_rc(d->handle_rc))
            return;
        set_call(c, "nvmlDeviceGetHandleByIndex_v2", (int)i);
        r = f->nvmlDeviceGetHandleByIndex_v2(i, &d->h);
        if (r != NVML_SUCCESS) {
            d->h = NULL;
            d->handle_rc = r;
            if (is_lost_rc(r)) {
                s->lost = true;
                s->lost_rc = r;
                s->lost_call = "nvmlDeviceGetHandleByIndex_v2";
            }
            return;
        }
    }

    if (WANT(d, f->nvmlDeviceGetTemperature, GH_NVML_M_TEMP)) {
        unsigned t = 0;
        set_call(c, "nvmlDeviceGetTemperature", (int)i);
        r = f->nvmlDeviceGetTemperature(d->h, NVML_TEMPERATURE_GPU, &t);
        if (!check_rc(d, s, GH_NVML_BIT(GH_NVML_M_TEMP), r, "nvmlDeviceGetTemperature"))
            return;
        if (r == NVML_SUCCESS) {
            s->v[GH_NVML_M_TEMP] = t;
            s->valid |= GH_NVML_BIT(GH_NVML_M_TEMP);
        }
    }
    if (WANT(d, f->nvmlDeviceGetPowerUsage, GH_NVML_M_POWER)) {
        unsigned mw = 0;
        set_call(c, "nvmlDeviceGetPowerUsage", (int)i);
        r = f->nvmlDeviceGetPowerUsage(d->h, &mw);
        if (!check_rc(d, s, GH_NVML_BIT(GH_NVML_M_POWER), r, "nvmlDeviceGetPowerUsage"))
            return;
        if (r == NVML_SUCCESS) {
            s->v[GH_NVML_M_POWER] = mw;
            s->valid |= GH_NVML_BIT(GH_NVML_M_POWER);
        }
    }
    if (WANT(d, f->reasons, GH_NVML_M_REASONS)) {
        unsigned long long bits = 0;
        set_call(c, f->reasons_name, (int)i);
        r = f->reasons(d->h, &bits);
        if (!check_rc(d, s, GH_NVML_BIT(GH_NVML_M_REASONS), r, f->reasons_name))
            return;
        if (r == NVML_SUCCESS) {
            s->v[GH_NVML_M_REASONS] = bits;
            s->valid |= GH_NVML_BIT(GH_NVML_M_REASONS);
        }
    }
    static const struct {
        enum gh_nvml_metric m;
        nvmlMemoryErrorType_t type;
        nvmlEccCounterType_t counter;
    } ecc[4] = {
        {GH_NVML_M_DBE_VOL, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC},
        {GH_NVML_M_DBE_AGG, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC},
        {GH_NVML_M_SBE_VOL, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC},
        {GH_NVML_M_SBE_AGG, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC},
    };
    for (int k = 0; k < 4; k++) {
        unsigned long long n = 0;
        if (!WANT(d, f->nvmlDeviceGetTotalEccErrors, ecc[k].m))
            continue;
        set_call(c, "nvmlDeviceGetTotalEccErrors", (int)i);
        r = f->nvmlDeviceGetTotalEccErrors(d->h, ecc[k].type, ecc[k].counter, &n);
        if (!check_rc(d, s, GH_NVML_BIT(ecc[k].m), r, "nvmlDeviceGetTotalEccErrors"))
            return;
        if (r == NVML_SUCCESS) {
            s->v[ecc[k].m] = n;
            s->valid |= GH_NVML_BIT(ecc[k].m);
        }
    }
    if (WANT(d, f->nvmlDeviceGetRemappedRows, GH_NVML_M_REMAP)) {
        unsigned corr = 0, unc = 0, pend = 0, fail = 0;
        set_call(c, "nvmlDeviceGetRemappedRows", (int)i);
        r = f->nvmlDeviceGetRemappedRows(d->h, &corr, &unc, &pend, &fail);
        if (!check_rc(d, s, GH_NVML_BIT(GH_NVML_M_REMAP), r, "nvmlDeviceGetRemappedRows"))
            return;
        if (r == NVML_SUCCESS) {
            s->remap_corr = corr;
            s->remap_unc = unc;
            s->remap_pending = pend != 0;
            s->remap_failure = fail != 0;
            s->valid |= GH_NVML_BIT(GH_NVML_M_REMAP);
        }
    }
    for (int k = 0; k < 2; k++) {
        enum gh_nvml_metric m = k ? GH_NVML_M_RETIRED_DBE : GH_NVML_M_RETIRED_SBE;
        unsigned count = 0;
        unsigned long long scratch[1];
        if (!WANT(d, f->nvmlDeviceGetRetiredPages, m))
            continue;
        /* pageCount 0 asks for the count alone (SUCCESS when there are
         * none, INSUFFICIENT_SIZE with the count otherwise). */
        set_call(c, "nvmlDeviceGetRetiredPages", (int)i);
        r = f->nvmlDeviceGetRetiredPages(
            d->h,
            k ? NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
              : NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            &count, scratch);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE)
            r = NVML_SUCCESS;
        if (!check_rc(d, s, GH_NVML_BIT(m), r, "nvmlDeviceGetRetiredPages"))
            return;
        if (r == NVML_SUCCESS) {
            s->v[m] = count;
            s->valid |= GH_NVML_BIT(m);
        }
    }
    if (WANT(d, f->nvmlDeviceGetRetiredPagesPendingStatus, GH_NVML_M_RETIRED_PENDING)) {
        nvmlEnableState_t pend = NVML_FEATURE_DISABLED;
        set_call(c, "nvmlDeviceGetRetiredPagesPendingStatus", (int)i);
        r = f->nvmlDeviceGetRetiredPagesPendingStatus(d->h, &pend);
        if (!check_rc(d, s, GH_NVML_BIT(GH_NVML_M_RETIRED_PENDING), r,
                      "nvmlDeviceGetRetiredPagesPendingStatus"))
            return;
        if (r == NVML_SUCCESS) {
            s->v[GH_NVML_M_RETIRED_PENDING] = pend == NVML_FEATURE_ENABLED;
            s->valid |= GH_NVML_BIT(GH_NVML_M_RETIRED_PENDING);
        }
    }
    if (WANT(d, f->nvmlDeviceGetPcieReplayCounter, GH_NVML_M_PCIE_REPLAY)) {
        unsigned n = 0;
        set_call(c, "nvmlDeviceGetPcieReplayCounter", (int)i);
        r = f->nvmlDeviceGetPcieReplayCounter(d->h, &n);
        if (!check_rc(d, s, GH_NVML_BIT(GH_NVML_M_PCIE_REPLAY), r,
                      "nvmlDeviceGetPcieReplayCounter"))
            return;
        if (r == NVML_SUCCESS) {
            s->v[GH_NVML_M_PCIE_REPLAY] = n;
            s->valid |= GH_NVML_BIT(GH_NVML_M_PCIE_REPLAY);
        }
    }
    if (!f->nvmlDeviceGetNvLinkErrorCounter)
        return;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
        if (!(d->links & (1u << l)))
            continue;
        for (unsigned k = 0; k < GH_NVML_L__COUNT; k++) {
            unsigned long long n = 0;
            if (d->link_unsupported[l] & (1u << k))
                continue;
            set_call(c, "nvmlDeviceGetNvLinkErrorCounter", (int)i);
            r = f->nvmlDeviceGetNvLinkErrorCounter(d->h, l, (nvmlNvLinkErrorCounter_t)k, &n);
            if (r == NVML_SUCCESS) {
                s->link[l][k] = n;
                s->link_valid[l] |= (uint8_t)(1u << k);
            } else if (is_lost_rc(r)) {
                s->lost = true;
                s->lost_rc = r;
                s->lost_call = "nvmlDeviceGetNvLinkErrorCounter";
                return;
            } else if (is_unsupported_rc(r)) {
                d->link_unsupported[l] |= (uint8_t)(1u << k);
            }
        }
    }
}

static int job_init(struct core *c, struct gh_err *err)
{
    const struct nvml_fns *f = &c->fn;
    unsigned count = 0;
    nvmlReturn_t r;

    set_call(c, "nvmlInit_v2", -1);
    r = f->nvmlInit_v2();
    if (r != NVML_SUCCESS)
        return gh_err_set(err, GH_ENOTFOUND,
                          "NVML: nvmlInit_v2 failed: %s (%d); GPU polling disabled",
                          gh_nvml_rc_name(r), (int)r);
    c->initialized = true;
    if (f->nvmlSystemGetDriverVersion) {
        set_call(c, "nvmlSystemGetDriverVersion", -1);
        if (f->nvmlSystemGetDriverVersion(c->driver, sizeof c->driver) != NVML_SUCCESS)
            c->driver[0] = '\0';
        c->driver[sizeof c->driver - 1] = '\0';
    }
    set_call(c, "nvmlDeviceGetCount_v2", -1);
    r = f->nvmlDeviceGetCount_v2(&count);
    if (r != NVML_SUCCESS)
        return gh_err_set(err, GH_ENOTFOUND,
                          "NVML: nvmlDeviceGetCount_v2 failed: %s (%d); GPU polling disabled",
                          gh_nvml_rc_name(r), (int)r);
    if (count == 0)
        return gh_err_set(err, GH_ENOTFOUND, "NVML: no GPU found (driver %s); GPU polling disabled",
                          c->driver[0] ? c->driver : "?");
    if (count > GH_NVML_MAX_GPUS)
        count = GH_NVML_MAX_GPUS;
    c->ngpus = count;

    for (unsigned i = 0; i < count; i++) {
        struct gh_nvml_dev *d = &c->dev[i];
        set_call(c, "nvmlDeviceGetHandleByIndex_v2", (int)i);
        r = f->nvmlDeviceGetHandleByIndex_v2(i, &d->h);
        d->handle_rc = r;
        if (r != NVML_SUCCESS) {
            d->h = NULL;
            continue;
        }
        if (f->nvmlDeviceGetPciInfo_v3) {
            nvmlPciInfo_t pci;
            memset(&pci, 0, sizeof pci);
            set_call(c, "nvmlDeviceGetPciInfo_v3", (int)i);
            if (f->nvmlDeviceGetPciInfo_v3(d->h, &pci) == NVML_SUCCESS) {
                pci.busId[sizeof pci.busId - 1] = '\0';
                /* "00000000:3B:00.0" -> the one form signals and metrics use */
                if (!gh_pci_canon(pci.busId, strlen(pci.busId), NULL, d->pci, sizeof d->pci))
                    snprintf(d->pci, sizeof d->pci, "%s", pci.busId);
            }
        }
        if (f->nvmlDeviceGetUUID) {
            set_call(c, "nvmlDeviceGetUUID", (int)i);
            if (f->nvmlDeviceGetUUID(d->h, d->uuid, sizeof d->uuid) != NVML_SUCCESS)
                d->uuid[0] = '\0';
            d->uuid[sizeof d->uuid - 1] = '\0';
        }
        if (f->nvmlDeviceGetTemperatureThreshold) {
            unsigned t = 0;
            set_call(c, "nvmlDeviceGetTemperatureThreshold", (int)i);
            if (f->nvmlDeviceGetTemperatureThreshold(d->h, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
                                                     &t) == NVML_SUCCESS &&
                t > 0) {
                d->has_slowdown = true;
                d->slowdown_c = t;
            }
        }
        if (f->nvmlDeviceGetEnforcedPowerLimit) {
            unsigned mw = 0;
            set_call(c, "nvmlDeviceGetEnforcedPowerLimit", (int)i);
            if (f->nvmlDeviceGetEnforcedPowerLimit(d->h, &mw) == NVML_SUCCESS && mw > 0) {
                d->has_power_limit = true;
                d->power_limit_mw = mw;
            }
        }
        if (f->nvmlDeviceGetNvLinkState && f->nvmlDeviceGetNvLinkErrorCounter) {
            for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
                nvmlEnableState_t st;
                set_call(c, "nvmlDeviceGetNvLinkState", (int)i);
                if (f->nvmlDeviceGetNvLinkState(d->h, l, &st) == NVML_SUCCESS)
                    d->links |= 1u << l;
            }
        }
    }

    /* XID events: optional (containers without the privilege, MIG). */
    if (f->nvmlEventSetCreate && f->nvmlDeviceRegisterEvents && f->nvmlEventSetWait_v2 &&
        f->nvmlEventSetFree) {
        set_call(c, "nvmlEventSetCreate", -1);
        if (f->nvmlEventSetCreate(&c->evset) != NVML_SUCCESS) {
            c->evset = NULL;
        } else {
            for (unsigned i = 0; i < count; i++) {
                unsigned long long types = nvmlEventTypeXidCriticalError;
                if (!c->dev[i].h)
                    continue;
                if (f->nvmlDeviceGetSupportedEventTypes) {
                    set_call(c, "nvmlDeviceGetSupportedEventTypes", (int)i);
                    if (f->nvmlDeviceGetSupportedEventTypes(c->dev[i].h, &types) != NVML_SUCCESS)
                        types = nvmlEventTypeXidCriticalError;
                    types &= nvmlEventTypeXidCriticalError;
                }
                if (!types)
                    continue;
                set_call(c, "nvmlDeviceRegisterEvents", (int)i);
                if (f->nvmlDeviceRegisterEvents(c->dev[i].h, types, c->evset) == NVML_SUCCESS) {
                    c->events_ok = true;
                    c->ev_handle[i] = c->dev[i].h;
                }
            }
        }
    }
    set_call(c, NULL, -1);
    return GH_OK;
}

static void *worker_main(void *arg)
{
    struct core *c = arg;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        enum job kind;
        uint64_t seq;
        int rc = GH_OK;
        struct gh_err err = {{0}};

        while (!c->job_posted && !c->quit)
            pthread_cond_wait(&c->cond, &c->mu);
        if (c->quit)
            break;
        kind = c->job_kind;
        seq = c->job_seq;
        c->job_posted = false;
        c->busy = true;
        c->busy_since = gh_mono_ns();
        pthread_mutex_unlock(&c->mu);

        if (kind == J_INIT) {
            rc = job_init(c, &err);
        } else if (kind == J_POLL) {
            for (unsigned i = 0; i < c->ngpus; i++)
                poll_gpu(c, i);
            set_call(c, NULL, -1);
        }

        pthread_mutex_lock(&c->mu);
        c->busy = false;
        c->job_rc = rc;
        c->job_err = err;
        c->done_seq = seq;
        pthread_cond_broadcast(&c->cond);
    }
    /* Leaving: release NVML unless the event thread may still be inside it
     * (then it does so when it leaves). */
    if (c->ev_exited)
        nvml_release_locked(c);
    c->worker_exited = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    core_unref(c);
    return NULL;
}

/* Posts a job and waits for it until the deadline. Returns GH_OK (job done;
 * *job_rc/err hold its result), GH_ETIMEOUT (not done: *call and *gpu say
 * what it was doing) or GH_EAGAIN (the worker is still in an older job). */
static int run_job(struct core *c, enum job kind, int64_t deadline_ns, int *job_rc,
                   struct gh_err *job_err, const char **call, int *gpu, int64_t *busy_ns)
{
    uint64_t seq;
    int64_t until;
    int rc = GH_OK;

    pthread_mutex_lock(&c->mu);
    if (c->busy) {
        *call = atomic_load_explicit(&c->cur_call, memory_order_acquire);
        *gpu = atomic_load_explicit(&c->cur_gpu, memory_order_relaxed);
        *busy_ns = gh_mono_ns() - c->busy_since;
        pthread_mutex_unlock(&c->mu);
        return GH_EAGAIN;
    }
    seq = ++c->job_seq;
    c->job_kind = kind;
    c->job_posted = true;
    pthread_cond_broadcast(&c->cond);
    until = gh_mono_ns() + deadline_ns;
    while (c->done_seq < seq) {
        if (!gh_cond_wait_until(&c->cond, &c->mu, until) && c->done_seq < seq) {
            rc = GH_ETIMEOUT;
            break;
        }
    }
    if (rc == GH_OK) {
        *job_rc = c->job_rc;
        if (job_err)
            *job_err = c->job_err;
    } else {
        *call = atomic_load_explicit(&c->cur_call, memory_order_acquire);
        *gpu = atomic_load_explicit(&c->cur_gpu, memory_order_relaxed);
        *busy_ns = gh_mono_ns() - c->busy_since;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Asks the (detached) worker to leave and waits up to wait_ns for it to
 * say so; after that it is abandoned and frees the core itself, if its
 * call ever returns. */
static void worker_release(struct core *c, int64_t wait_ns)
{
    int64_t until = gh_mono_ns() + wait_ns;

    pthread_mutex_lock(&c->mu);
    c->quit = true;
    pthread_cond_broadcast(&c->cond);
    while (!c->worker_exited && gh_cond_wait_until(&c->cond, &c->mu, until))
        ;
    if (!c->worker_exited)
        c->worker_abandoned = true;
    pthread_mutex_unlock(&c->mu);
}

/* ---- signals (what a poll's samples mean: nvml_derive.c) ---- */

static void stat_add(struct gh_nvml_source *src, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&src->emit_mu);
    *field += n;
    pthread_mutex_unlock(&src->emit_mu);
}

/* Fills the strings (node, pci, msg, counter), hands the signal to emit and
 * clears it. Returns GH_ENOMEM (counted as dropped) when a copy fails. */
static int emit_msg(struct gh_nvml_source *src, struct gh_signal *s, const char *counter,
                    const char *msg)
{
    int rc = GH_OK;
    const char *pci = NULL;

    if (s->gpu >= 0 && (unsigned)s->gpu < src->ngpus && src->core->dev[s->gpu].pci[0])
        pci = src->core->dev[s->gpu].pci;
    if (gh_signal_set_str(&s->node, src->node, strlen(src->node)) ||
        gh_signal_set_str(&s->msg, msg, strlen(msg)) ||
        (pci && gh_signal_set_str(&s->pci, pci, strlen(pci))) ||
        (counter && gh_signal_set_str(&s->counter, counter, strlen(counter))))
        rc = GH_ENOMEM;
    pthread_mutex_lock(&src->emit_mu);
    if (rc == GH_OK) {
        src->emit(src->emit_ctx, s);
        src->stats.signals++;
    } else {
        src->stats.dropped++;
    }
    pthread_mutex_unlock(&src->emit_mu);
    gh_signal_clear(s);
    return rc;
}

/* The derivation's emit (nvml_derive.h). */
static int derive_emit(void *ctx, struct gh_signal *s, const char *counter, const char *msg)
{
    return emit_msg(ctx, s, counter, msg);
}

static int emit_lost(struct gh_nvml_source *src, int gpu, const char *what)
{
    struct gh_signal s;
    gh_nvml_signal_begin(&src->dc, &s, GH_KIND_GPU_LOST, gpu);
    return gh_nvml_signal_emitf(&src->dc, &s, NULL, "%s", what);
}

/* Reports the event thread stuck in nvmlEventSetWait_v2 once per stall. */
static int check_event_hang(struct gh_nvml_source *src)
{
    struct core *c = src->core;
    bool stuck;
    uint64_t returns;
    int64_t since;

    pthread_mutex_lock(&c->mu);
    stuck = c->ev_in_wait;
    since = c->ev_wait_since;
    returns = c->ev_wait_returns;
    pthread_mutex_unlock(&c->mu);
    if (!stuck || src->ev_hang_reported_at == returns + 1)
        return GH_OK;
    if (gh_mono_ns() - since < (int64_t)EVENT_WAIT_MS * GH_NS_PER_MS + src->deadline_ns)
        return GH_OK;
    src->ev_hang_reported_at = returns + 1;
    {
        char what[MSG_MAX];
        snprintf(what, sizeof what,
                 "NVML call nvmlEventSetWait_v2 (timeout %u ms) did not return within %.1f s; "
                 "XID events paused until it returns",
                 EVENT_WAIT_MS, (double)src->deadline_ns / GH_NS_PER_S);
        return emit_lost(src, -1, what);
    }
}

int gh_nvml_source_poll_once(struct gh_nvml_source *src, struct gh_err *err)
{
    struct core *c = src->core;
    const char *call = NULL;
    int gpu = -1, job_rc = GH_OK, rc;
    int64_t busy_ns = 0;

    pthread_mutex_lock(&src->poll_mu);
    rc = run_job(c, J_POLL, src->deadline_ns, &job_rc, NULL, &call, &gpu, &busy_ns);
    if (rc == GH_EAGAIN) {
        char where[32] = "";
        if (gpu >= 0)
            snprintf(where, sizeof where, " on GPU %d", gpu);
        rc = gh_err_set(err, GH_EAGAIN, "NVML call %s%s still has not returned after %.1f s (reported)",
                        call ? call : "?", where, (double)busy_ns / GH_NS_PER_S);
        goto out;
    }
    if (rc == GH_ETIMEOUT) {
        char what[MSG_MAX], where[32] = "";
        if (gpu >= 0)
            snprintf(where, sizeof where, " on GPU %d", gpu);
        snprintf(what, sizeof what,
                 "NVML call %s%s did not return within %.1f s; NVML polling paused until it "
                 "returns",
                 call ? call : "?", where, (double)src->deadline_ns / GH_NS_PER_S);
        stat_add(src, &src->stats.poll_timeouts, 1);
        if (gpu >= 0 && (unsigned)gpu < src->ngpus) {
            src->gs[gpu].lost = true;
            pthread_mutex_lock(&src->health_mu);
            src->health[gpu].lost = true;
            pthread_mutex_unlock(&src->health_mu);
        }
        emit_lost(src, gpu, what);
        rc = gh_err_set(err, GH_ETIMEOUT, "%s", what);
        goto out;
    }
    for (unsigned i = 0; i < src->ngpus; i++) {
        if (gh_nvml_derive(&src->dc, i, &c->dev[i], &src->gs[i], &c->samples[i]) != GH_OK)
            rc = GH_ENOMEM;
        pthread_mutex_lock(&src->health_mu);
        gh_nvml_derive_health(&src->gs[i], &c->samples[i], &src->health[i]);
        pthread_mutex_unlock(&src->health_mu);
    }
    if (check_event_hang(src) != GH_OK)
        rc = GH_ENOMEM;
    stat_add(src, &src->stats.polls, 1);
    if (rc == GH_ENOMEM)
        gh_err_set(err, GH_ENOMEM, "NVML: out of memory building a signal (dropped)");
out:
    pthread_mutex_unlock(&src->poll_mu);
    return rc;
}

/* ---- threads ---- */

/* The poller's run (worker.h's GH_WORKER_RATE: after a hang the cadence
 * restarts). */
static void poll_run(void *arg, struct gh_worker *w)
{
    (void)w;
    gh_nvml_source_poll_once(arg, NULL);
}

static int find_gpu(const struct core *c, nvmlDevice_t h)
{
    for (unsigned i = 0; i < c->ngpus; i++)
        if (c->ev_handle[i] && c->ev_handle[i] == h)
            return (int)i;
    return -1;
}

struct ev_arg {
    struct gh_nvml_source *src; /* usable only while !core->ev_quit (see stop) */
    struct core *core;
};

static void *event_main(void *arg)
{
    struct ev_arg a = *(struct ev_arg *)arg;
    struct core *c = a.core;
    int64_t backoff_until = 0;

    free(arg);
    pthread_mutex_lock(&c->mu);
    for (;;) {
        nvmlEventData_t data;
        nvmlReturn_t r;

        while (!c->ev_quit && backoff_until && gh_cond_wait_until(&c->cond, &c->mu, backoff_until))
            ;
        backoff_until = 0;
        if (c->ev_quit)
            break;
        c->ev_in_wait = true;
        c->ev_wait_since = gh_mono_ns();
        pthread_mutex_unlock(&c->mu);

        memset(&data, 0, sizeof data);
        r = c->fn.nvmlEventSetWait_v2(c->evset, &data, EVENT_WAIT_MS);

        pthread_mutex_lock(&c->mu);
        c->ev_in_wait = false;
        c->ev_wait_returns++;
        if (c->ev_quit)
            break;
        if (r == NVML_SUCCESS && (data.eventType & nvmlEventTypeXidCriticalError)) {
            struct gh_nvml_source *src = a.src;
            int gpu = find_gpu(c, data.device);
            struct gh_signal s;
            c->ev_in_source = true;
            pthread_mutex_unlock(&c->mu);

            stat_add(src, &src->stats.events, 1);
            gh_nvml_signal_begin(&src->dc, &s, GH_KIND_XID, gpu);
            s.code = data.eventData > INT32_MAX ? INT32_MAX : (int)data.eventData;
            if (gpu >= 0)
                gh_nvml_signal_emitf(&src->dc, &s, NULL, "NVML event: Xid %llu on GPU %d (%s)",
                                     data.eventData, gpu,
                                     c->dev[gpu].pci[0] ? c->dev[gpu].pci : "?");
            else
                gh_nvml_signal_emitf(&src->dc, &s, NULL,
                                     "NVML event: Xid %llu on an unknown device", data.eventData);

            pthread_mutex_lock(&c->mu);
            c->ev_in_source = false;
            pthread_cond_broadcast(&c->cond);
        } else if (r != NVML_SUCCESS && r != NVML_ERROR_TIMEOUT) {
            /* GPU lost, interrupted, ...: the poller reports GPU state; here
             * we only avoid spinning. */
            backoff_until = gh_mono_ns() + EVENT_BACKOFF_NS;
        }
    }
    c->ev_exited = true;
    pthread_cond_broadcast(&c->cond);
    if (c->worker_exited)
        nvml_release_locked(c); /* we were abandoned and are the last out */
    pthread_mutex_unlock(&c->mu);
    core_unref(c);
    return NULL;
}

int gh_nvml_source_start(struct gh_nvml_source *src, struct gh_err *err)
{
    struct core *c = src->core;
    int rc;

    if ((rc = gh_worker_start(src->poller, err)))
        return rc;

    pthread_mutex_lock(&c->mu);
    if (c->events_ok && c->evset && !src->ev_running && !c->ev_abandoned) {
        struct ev_arg *a = malloc(sizeof *a);
        if (a) {
            a->src = src;
            a->core = c;
            c->refs++;
            c->ev_quit = false;
            c->ev_exited = false;
            rc = pthread_create(&src->ev_thread, NULL, event_main, a);
            if (rc) {
                c->refs--;
                free(a);
            } else {
                src->ev_running = true;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return GH_OK;
}

void gh_nvml_source_stop(struct gh_nvml_source *src)
{
    struct core *c;

    if (!src)
        return;
    c = src->core;
    gh_worker_stop(src->poller); /* bounded: poll_once waits at most the deadline */
    if (src->ev_running) {
        int64_t until = gh_mono_ns() + (int64_t)EVENT_WAIT_MS * GH_NS_PER_MS + src->deadline_ns;
        bool exited;
        pthread_mutex_lock(&c->mu);
        c->ev_quit = true;
        pthread_cond_broadcast(&c->cond);
        while (!c->ev_exited && gh_cond_wait_until(&c->cond, &c->mu, until))
            ;
        exited = c->ev_exited;
        if (!exited) {
            /* Stuck in the driver: it will not touch the source once it
             * sees ev_quit, but it may be emitting right now. */
            while (c->ev_in_source)
                pthread_cond_wait(&c->cond, &c->mu);
            c->ev_abandoned = true;
        }
        pthread_mutex_unlock(&c->mu);
        if (exited)
            pthread_join(src->ev_thread, NULL);
        else
            pthread_detach(src->ev_thread);
        src->ev_running = false;
    }
}

/* ---- construction ---- */

static int load_library(struct core *c, const char *path, struct gh_err *err)
{
    const char *missing = NULL;

    dlerror();
    c->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!c->dl) {
        const char *why = dlerror();
        return gh_err_set(err, GH_ENOTFOUND, "NVML: %s not found (dlopen: %s); GPU polling disabled",
                          path, why ? why : "unknown error");
    }
#define LOAD(name, req)                                                        \
    *(void **)&c->fn.name = dlsym(c->dl, #name);                               \
    if ((req) && !c->fn.name && !missing)                                      \
        missing = #name;
    GH_NVML_SYMS(LOAD)
#undef LOAD
    *(void **)&c->fn.reasons = dlsym(c->dl, "nvmlDeviceGetCurrentClocksEventReasons");
    c->fn.reasons_name = "nvmlDeviceGetCurrentClocksEventReasons";
    if (!c->fn.reasons) {
        *(void **)&c->fn.reasons = dlsym(c->dl, "nvmlDeviceGetCurrentClocksThrottleReasons");
        c->fn.reasons_name = "nvmlDeviceGetCurrentClocksThrottleReasons";
    }
    if (missing)
        return gh_err_set(err, GH_ENOTFOUND,
                          "NVML: %s lacks the symbol %s (driver too old?); GPU polling disabled",
                          path, missing);
    return GH_OK;
}

int gh_nvml_source_new(const struct gh_nvml_opts *opts, struct gh_nvml_source **out,
                       struct gh_err *err)
{
    struct gh_nvml_source *src = NULL;
    struct core *c = NULL;
    pthread_t worker;
    const char *path;
    const char *call = NULL;
    int gpu = -1, job_rc = GH_OK, rc;
    int64_t busy_ns = 0;
    struct gh_err job_err = {{0}};

    *out = NULL;
    if (!opts || !opts->emit || !opts->node || !opts->node[0])
        return gh_err_set(err, GH_EINVAL, "NVML source: node and emit are required");
    if (opts->poll_interval_ns < 0 || opts->deadline_ns < 0 || opts->state_holddown_ns < 0)
        return gh_err_set(err, GH_EINVAL, "NVML source: negative interval");
    path = opts->lib_path && opts->lib_path[0] ? opts->lib_path : GH_NVML_DEFAULT_LIB;

    c = calloc(1, sizeof *c);
    if (!c)
        return gh_err_set(err, GH_ENOMEM, "NVML source: out of memory");
    if (pthread_mutex_init(&c->mu, NULL)) {
        free(c);
        return gh_err_set(err, GH_EIO, "NVML source: mutex init failed");
    }
    if (gh_cond_init_monotonic(&c->cond)) {
        pthread_mutex_destroy(&c->mu);
        free(c);
        return gh_err_set(err, GH_EIO, "NVML source: condition init failed");
    }
    c->refs = 1;
    atomic_init(&c->cur_call, NULL);
    atomic_init(&c->cur_gpu, -1);
    c->ev_exited = true; /* no event thread yet */

    rc = load_library(c, path, err);
    if (rc)
        goto fail_core;

    c->refs++; /* the worker's */
    rc = pthread_create(&worker, NULL, worker_main, c);
    if (rc) {
        c->refs--;
        rc = gh_err_set(err, GH_EIO, "NVML: cannot start the worker thread: %s", strerror(rc));
        goto fail_core;
    }
    /* Never joined: whoever stops it waits for worker_exited, bounded. */
    pthread_detach(worker);

    src = calloc(1, sizeof *src);
    if (!src) {
        rc = gh_err_set(err, GH_ENOMEM, "NVML source: out of memory");
        goto fail_worker;
    }
    src->core = c;
    src->poll_ns = opts->poll_interval_ns ? opts->poll_interval_ns : DEFAULT_POLL_NS;
    src->deadline_ns = opts->deadline_ns ? opts->deadline_ns : DEFAULT_DEADLINE_NS;
    src->holddown_ns = opts->state_holddown_ns ? opts->state_holddown_ns : DEFAULT_HOLDDOWN_NS;
    src->temp_threshold = opts->temp_threshold_celsius;
    src->clock = opts->clock ? opts->clock : gh_clock_real();
    src->emit = opts->emit;
    src->emit_ctx = opts->emit_ctx;
    src->dc = (struct gh_nvml_derive_cfg){.clock = src->clock,
                                          .temp_threshold = src->temp_threshold,
                                          .holddown_ns = src->holddown_ns,
                                          .emit = derive_emit,
                                          .emit_ctx = src};
    src->node = strdup(opts->node);
    if (!src->node) {
        rc = gh_err_set(err, GH_ENOMEM, "NVML source: out of memory");
        goto fail_worker;
    }

    rc = run_job(c, J_INIT, src->deadline_ns, &job_rc, &job_err, &call, &gpu, &busy_ns);
    if (rc == GH_ETIMEOUT) {
        rc = gh_err_set(err, GH_ETIMEOUT,
                        "NVML call %s did not return within %.1f s; GPU polling disabled",
                        call ? call : "?", (double)src->deadline_ns / GH_NS_PER_S);
        goto fail_worker;
    }
    if (job_rc) {
        rc = job_rc;
        if (err)
            *err = job_err;
        goto fail_worker;
    }
    src->ngpus = c->ngpus;
    src->gs = calloc(src->ngpus, sizeof *src->gs);
    src->health = calloc(src->ngpus, sizeof *src->health);
    if (!src->gs || !src->health) {
        rc = gh_err_set(err, GH_ENOMEM, "NVML source: out of memory");
        goto fail_worker;
    }
    for (unsigned i = 0; i < src->ngpus; i++) {
        struct gh_nvml_gpu_health *h = &src->health[i];
        h->index = (int)i;
        snprintf(h->pci, sizeof h->pci, "%s", c->dev[i].pci);
        snprintf(h->uuid, sizeof h->uuid, "%s", c->dev[i].uuid);
        h->nvlinks = __builtin_popcount(c->dev[i].links);
    }
    if (pthread_mutex_init(&src->poll_mu, NULL) || pthread_mutex_init(&src->emit_mu, NULL) ||
        pthread_mutex_init(&src->health_mu, NULL)) {
        /* Leaks the mutexes that did initialise; glibc's need no cleanup. */
        rc = gh_err_set(err, GH_EIO, "NVML source: mutex init failed");
        goto fail_worker;
    }
    struct gh_worker_opts wo = {.name = "NVML source",
                                .period_ns = src->poll_ns,
                                .cadence = GH_WORKER_RATE,
                                .run = poll_run,
                                .arg = src};
    if ((rc = gh_worker_new(&wo, &src->poller, err)))
        goto fail_worker;
    *out = src;
    return GH_OK;

fail_worker:
    /* After a timed-out init do not wait again: the worker is stuck. */
    worker_release(c, rc == GH_ETIMEOUT ? 0 : (src ? src->deadline_ns : DEFAULT_DEADLINE_NS));
    if (src) {
        free(src->node);
        free(src->gs);
        free(src->health);
        free(src);
    }
fail_core:
    core_unref(c);
    return rc;
}

int gh_nvml_source_gpu_count(const struct gh_nvml_source *src)
{
    return (int)src->ngpus;
}

int gh_nvml_source_health(struct gh_nvml_source *src, int index, struct gh_nvml_gpu_health *out)
{
    if (index < 0 || (unsigned)index >= src->ngpus)
        return GH_ENOTFOUND;
    pthread_mutex_lock(&src->health_mu);
    *out = src->health[index];
    pthread_mutex_unlock(&src->health_mu);
    return GH_OK;
}

void gh_nvml_source_stats(struct gh_nvml_source *src, struct gh_nvml_stats *out)
{
    pthread_mutex_lock(&src->emit_mu);
    *out = src->stats;
    pthread_mutex_unlock(&src->emit_mu);
}

void gh_nvml_source_free(struct gh_nvml_source *src)
{
    struct core *c;

    if (!src)
        return;
    gh_nvml_source_stop(src);
    c = src->core;
    worker_release(c, src->deadline_ns);
    core_unref(c);

    gh_worker_free(src->poller);
    pthread_mutex_destroy(&src->health_mu);
    pthread_mutex_destroy(&src->emit_mu);
    pthread_mutex_destroy(&src->poll_mu);
    free(src->node);
    free(src->gs);
    free(src->health);
    free(src);
}
