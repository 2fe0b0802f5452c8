/* nvml_fake.c - libnvidia-ml-fake.so: a fault-injection NVML for tests and
 * benchmarks, exporting the versioned symbols the agent's NVML source
 * dlsyms, with GPUs, counters and faults described by the file that
 * $GH_NVML_FAKE_CONFIG names (read at the first nvmlInit_v2; re-read after
 * the last nvmlShutdown).
 *
 * Time in the fake is counted in steps, per GPU: each call of
 * nvmlDeviceGetTemperature on a GPU advances that GPU's step by one before
 * it answers. The agent reads every GPU's temperature once per poll, first,
 * so step N is "the N-th poll"; values and faults switch on by step (and
 * optionally by seconds since nvmlInit_v2).
 *
 * Config, one statement per line, '#' starts a comment:
 *   gpus N                 number of GPUs (default 1, at most 64)
 *   nvlinks N              NVLinks per GPU (default 0, at most 18)
 *   driver VERSION         nvmlSystemGetDriverVersion (default 555.42.06)
 *   init_error RC          nvmlInit_v2 returns RC (e.g. 9 = DRIVER_NOT_LOADED)
 *   events unsupported     nvmlDeviceRegisterEvents returns NOT_SUPPORTED
 *   GPU FIELD VALUE [at=STEP] [after=SECONDS] [every=N:DELTA]
 * GPU is an index or '*'. A rule applies from step STEP (default 0) and
 * once SECONDS have passed since init (default 0); among the rules that
 * apply to a field the one with the highest STEP wins (later lines win
 * ties). every=N:DELTA adds DELTA to VALUE every N steps after STEP.
 * FIELDs (defaults in brackets):
 *   temp [45]  slowdown_temp [90]  shutdown_temp [95]  power_mw [250000]
 *   power_limit_mw [700000]  reasons [0] (clock-event bits)
 *   ecc.sbe.volatile ecc.dbe.volatile ecc.sbe.aggregate ecc.dbe.aggregate
 *   remap.correctable remap.uncorrectable remap.pending remap.failure
 *   retired.sbe retired.dbe retired.pending  pcie.replay
 *   nvlink.L.replay nvlink.L.recovery nvlink.L.crc_flit nvlink.L.crc_data
 *   lost            non-zero: every call on the GPU returns GPU_IS_LOST
 *   reset_required  non-zero: every call on the GPU returns RESET_REQUIRED
 *   xid             one XidCriticalError event with this code, queued for
 *                   nvmlEventSetWait_v2 when the GPU reaches STEP (once)
 *   hang.FUNCTION   the next call of FUNCTION (an exported name) on the GPU
 *                   at or after STEP sleeps VALUE seconds, then answers
 *                   normally (once); nvmlEventSetWait_v2 uses GPU 0's step
 *   unsupported.FUNCTION  non-zero: FUNCTION returns NOT_SUPPORTED
 *
 * Being a stand-in for a process-global library, the fake keeps its state
 * in one static struct behind one mutex (the exception to "no global
 * mutable state" that a fake of a global library needs). Test-only code:
 * it reports config errors on stderr and fails nvmlInit_v2. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/nvml_api.h"

#define API __attribute__((visibility("default")))

#define FAKE_MAX_GPUS  64
#define FAKE_MAX_RULES 1024
#define FAKE_QUEUE     256
#define FN_MAX         64
#define LINE_MAX_LEN   512

enum field {
    F_TEMP,
    F_SLOWDOWN,
    F_SHUTDOWN,
    F_POWER_MW,
    F_POWER_LIMIT_MW,
    F_REASONS,
    F_SBE_VOL,
    F_DBE_VOL,
    F_SBE_AGG,
    F_DBE_AGG,
    F_REMAP_CORR,
    F_REMAP_UNC,
    F_REMAP_PENDING,
    F_REMAP_FAILURE,
    F_RETIRED_SBE,
    F_RETIRED_DBE,
    F_RETIRED_PENDING,
    F_PCIE_REPLAY,
    F_LOST,
    F_RESET_REQUIRED,
    F_NVLINK,      /* + link, counter */
    F_XID,
    F_HANG,        /* + fn */
    F_UNSUPPORTED, /* + fn */
};

static const struct {
    const char *name;
    enum field f;
    unsigned long long dflt;
} fields[] = {
    {"temp", F_TEMP, 45},
    {"slowdown_temp", F_SLOWDOWN, 90},
    {"shutdown_temp", F_SHUTDOWN, 95},
    {"power_mw", F_POWER_MW, 250000},
    {"power_limit_mw", F_POWER_LIMIT_MW, 700000},
    {"reasons", F_REASONS, 0},
    {"ecc.sbe.volatile", F_SBE_VOL, 0},
    {"ecc.dbe.volatile", F_DBE_VOL, 0},
    {"ecc.sbe.aggregate", F_SBE_AGG, 0},
    {"ecc.dbe.aggregate", F_DBE_AGG, 0},
    {"remap.correctable", F_REMAP_CORR, 0},
    {"remap.uncorrectable", F_REMAP_UNC, 0},
    {"remap.pending", F_REMAP_PENDING, 0},
    {"remap.failure", F_REMAP_FAILURE, 0},
    {"retired.sbe", F_RETIRED_SBE, 0},
    {"retired.dbe", F_RETIRED_DBE, 0},
    {"retired.pending", F_RETIRED_PENDING, 0},
    {"pcie.replay", F_PCIE_REPLAY, 0},
    {"lost", F_LOST, 0},
    {"reset_required", F_RESET_REQUIRED, 0},
    {"xid", F_XID, 0},
};

static const char *const link_counters[4] = {"replay", "recovery", "crc_flit", "crc_data"};

struct rule {
    int gpu;                  /* -1 = every GPU */
    enum field f;
    int link, counter;        /* F_NVLINK */
    char fn[FN_MAX];          /* F_HANG, F_UNSUPPORTED */
    unsigned long long value;
    double seconds;           /* F_HANG */
    unsigned at;
    double after;
    unsigned every;
    long long delta;
    bool fired;               /* F_HANG, F_XID: one-shot */
};

struct nvmlDevice_st {
    unsigned index;
    unsigned step;
    bool events;              /* registered for XID events */
};

struct nvmlEventSet_st {
    int unused;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;      /* CLOCK_MONOTONIC; event queued */
    pthread_once_t once;
    int init_count;
    struct timespec init_at;
    unsigned ngpus, nlinks;
    int init_error;
    bool events_unsupported;
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    struct rule rules[FAKE_MAX_RULES];
    unsigned nrules;
    struct nvmlDevice_st dev[FAKE_MAX_GPUS];
    struct nvmlEventSet_st set;
    bool set_live;
    struct {
        unsigned gpu;
        unsigned long long xid;
    } q[FAKE_QUEUE];
    unsigned qhead, qlen;
    unsigned long long calls;
} F = {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void init_cond(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&F.cond, &attr);
    pthread_condattr_destroy(&attr);
}

static double since_init(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - F.init_at.tv_sec) + (now.tv_nsec - F.init_at.tv_nsec) / 1e9;
}

/* ---- config ---- */

static void reset_config(void)
{
    F.ngpus = 1;
    F.nlinks = 0;
    F.init_error = 0;
    F.events_unsupported = false;
    snprintf(F.driver, sizeof F.driver, "555.42.06");
    F.nrules = 0;
    F.qhead = F.qlen = 0;
    F.calls = 0;
    F.set_live = false;
    for (unsigned i = 0; i < FAKE_MAX_GPUS; i++) {
        F.dev[i].index = i;
        F.dev[i].step = 0;
        F.dev[i].events = false;
    }
}

/* Splits line into up to max whitespace-separated words (in place). */
static int split(char *line, char **words, int max)
{
    int n = 0;
    char *p = line;
    while (*p) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            break;
        if (n == max)
            return -1;
        words[n++] = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
    }
    return n;
}

static bool parse_ull(const char *s, unsigned long long *v)
{
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 0);
    return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

static bool parse_double(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0' && *v >= 0;
}

static int bad(unsigned lineno, const char *what, const char *word)
{
    fprintf(stderr, "nvml-fake: config line %u: %s '%s'\n", lineno, what, word);
    return -1;
}

static int parse_rule(unsigned lineno, char **w, int n)
{
    struct rule *r;
    unsigned long long v;

    if (F.nrules == FAKE_MAX_RULES)
        return bad(lineno, "too many rules at", w[0]);
    r = &F.rules[F.nrules];
    memset(r, 0, sizeof *r);
    if (strcmp(w[0], "*") == 0) {
        r->gpu = -1;
    } else if (parse_ull(w[0], &v) && v < FAKE_MAX_GPUS) {
        r->gpu = (int)v;
    } else {
        return bad(lineno, "bad GPU", w[0]);
    }
    if (strncmp(w[1], "hang.", 5) == 0 || strncmp(w[1], "unsupported.", 12) == 0) {
        bool hang = w[1][0] == 'h';
        const char *fn = w[1] + (hang ? 5 : 12);
        if (!*fn || strlen(fn) >= FN_MAX)
            return bad(lineno, "bad function in", w[1]);
        r->f = hang ? F_HANG : F_UNSUPPORTED;
        snprintf(r->fn, sizeof r->fn, "%s", fn);
    } else if (strncmp(w[1], "nvlink.", 7) == 0) {
        char *end;
        unsigned long link = strtoul(w[1] + 7, &end, 10);
        int k;
        if (end == w[1] + 7 || *end != '.' || link >= NVML_NVLINK_MAX_LINKS)
            return bad(lineno, "bad NVLink field", w[1]);
        for (k = 0; k < 4; k++)
            if (strcmp(end + 1, link_counters[k]) == 0)
                break;
        if (k == 4)
            return bad(lineno, "bad NVLink counter in", w[1]);
        r->f = F_NVLINK;
        r->link = (int)link;
        r->counter = k;
    } else {
        size_t k;
        for (k = 0; k < sizeof fields / sizeof fields[0]; k++)
            if (strcmp(w[1], fields[k].name) == 0)
                break;
        if (k == sizeof fields / sizeof fields[0])
            return bad(lineno, "unknown field", w[1]);
        r->f = fields[k].f;
    }
    if (r->f == F_HANG) {
        if (!parse_double(w[2], &r->seconds))
            return bad(lineno, "bad seconds", w[2]);
    } else if (!parse_ull(w[2], &r->value)) {
        return bad(lineno, "bad value", w[2]);
    }
    for (int i = 3; i < n; i++) {
        if (strncmp(w[i], "at=", 3) == 0) {
            if (!parse_ull(w[i] + 3, &v) || v > UINT32_MAX)
                return bad(lineno, "bad step", w[i]);
            r->at = (unsigned)v;
        } else if (strncmp(w[i], "after=", 6) == 0) {
            if (!parse_double(w[i] + 6, &r->after))
                return bad(lineno, "bad seconds", w[i]);
        } else if (strncmp(w[i], "every=", 6) == 0) {
            char *colon = strchr(w[i] + 6, ':');
            char *end;
            long long d;
            if (!colon)
                return bad(lineno, "every= wants N:DELTA, not", w[i]);
            *colon = '\0';
            if (!parse_ull(w[i] + 6, &v) || v == 0 || v > UINT32_MAX)
                return bad(lineno, "bad every= period in", w[i]);
            errno = 0;
            d = strtoll(colon + 1, &end, 0);
            if (errno || end == colon + 1 || *end)
                return bad(lineno, "bad every= delta in", w[i]);
            r->every = (unsigned)v;
            r->delta = d;
        } else {
            return bad(lineno, "unknown option", w[i]);
        }
    }
    F.nrules++;
    return 0;
}

static int load_config(void)
{
    const char *path = getenv("GH_NVML_FAKE_CONFIG");
    char line[LINE_MAX_LEN];
    unsigned lineno = 0;
    FILE *f;
    int rc = 0;

    reset_config();
    if (!path || !*path)
        return 0;
    f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nvml-fake: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (rc == 0 && fgets(line, sizeof line, f)) {
        char *w[8];
        int n;
        unsigned long long v;
        lineno++;
        n = split(line, w, 8);
        if (n < 0) {
            rc = bad(lineno, "too many words at", line);
        } else if (n == 0) {
            continue;
        } else if (strcmp(w[0], "gpus") == 0 && n == 2) {
            if (!parse_ull(w[1], &v) || v > FAKE_MAX_GPUS)
                rc = bad(lineno, "bad GPU count", w[1]);
            else
                F.ngpus = (unsigned)v;
        } else if (strcmp(w[0], "nvlinks") == 0 && n == 2) {
            if (!parse_ull(w[1], &v) || v > NVML_NVLINK_MAX_LINKS)
                rc = bad(lineno, "bad NVLink count", w[1]);
            else
                F.nlinks = (unsigned)v;
        } else if (strcmp(w[0], "driver") == 0 && n == 2) {
            snprintf(F.driver, sizeof F.driver, "%s", w[1]);
        } else if (strcmp(w[0], "init_error") == 0 && n == 2) {
            if (!parse_ull(w[1], &v) || v > 999)
                rc = bad(lineno, "bad return code", w[1]);
            else
                F.init_error = (int)v;
        } else if (strcmp(w[0], "events") == 0 && n == 2 && strcmp(w[1], "unsupported") == 0) {
            F.events_unsupported = true;
        } else if (n >= 3) {
            rc = parse_rule(lineno, w, n);
        } else {
            rc = bad(lineno, "cannot parse", w[0]);
        }
    }
    fclose(f);
    return rc;
}

/* ---- evaluation (F.mu held) ---- */

static bool applies(const struct rule *r, unsigned gpu, unsigned step, double t)
{
    return (r->gpu < 0 || (unsigned)r->gpu == gpu) && r->at <= step && r->after <= t;
}

static unsigned long long value_of(unsigned gpu, enum field f, int link, int counter)
{
    unsigned step = F.dev[gpu].step;
    double t = since_init();
    const struct rule *best = NULL;
    unsigned long long v = 0;

    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        if (fields[k].f == f)
            v = fields[k].dflt;
    for (unsigned i = 0; i < F.nrules; i++) {
        const struct rule *r = &F.rules[i];
        if (r->f != f || !applies(r, gpu, step, t))
            continue;
        if (f == F_NVLINK && (r->link != link || r->counter != counter))
            continue;
        if (!best || r->at >= best->at)
            best = r;
    }
    if (best) {
        v = best->value;
        if (best->every) {
            long long n = (long long)((step - best->at) / best->every);
            v = (unsigned long long)((long long)v + n * best->delta);
        }
    }
    return v;
}

static bool fn_rule(enum field f, const char *fn, unsigned gpu)
{
    unsigned step = F.dev[gpu].step;
    double t = since_init();
    bool on = false;
    unsigned at = 0;
    for (unsigned i = 0; i < F.nrules; i++) {
        const struct rule *r = &F.rules[i];
        if (r->f == f && strcmp(r->fn, fn) == 0 && applies(r, gpu, step, t) &&
            (!on || r->at >= at)) {
            on = r->value != 0;
            at = r->at;
        }
    }
    return on;
}

/* Sleeps, unlocked, for the first unfired hang rule of fn on gpu. */
static void maybe_hang(const char *fn, unsigned gpu)
{
    unsigned step = F.dev[gpu].step;
    double t = since_init();
    for (unsigned i = 0; i < F.nrules; i++) {
        struct rule *r = &F.rules[i];
        if (r->f == F_HANG && !r->fired && strcmp(r->fn, fn) == 0 && applies(r, gpu, step, t)) {
            struct timespec ts = {.tv_sec = (time_t)r->seconds,
                                  .tv_nsec = (long)((r->seconds - (double)(time_t)r->seconds) * 1e9)};
            r->fired = true;
            pthread_mutex_unlock(&F.mu);
            while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
            pthread_mutex_lock(&F.mu);
            return;
        }
    }
}

static void queue_xids(unsigned gpu)
{
    unsigned step = F.dev[gpu].step;
    double t = since_init();
    for (unsigned i = 0; i < F.nrules; i++) {
        struct rule *r = &F.rules[i];
        if (r->f == F_XID && !r->fired && applies(r, gpu, step, t)) {
            if (r->gpu < 0) {
                /* '*': one event per GPU; fire when the last GPU gets there. */
                if (gpu != F.ngpus - 1)
                    continue;
                for (unsigned g = 0; g < F.ngpus && F.qlen < FAKE_QUEUE; g++) {
                    unsigned slot = (F.qhead + F.qlen++) % FAKE_QUEUE;
                    F.q[slot].gpu = g;
                    F.q[slot].xid = r->value;
                }
            } else if (F.qlen < FAKE_QUEUE) {
                unsigned slot = (F.qhead + F.qlen++) % FAKE_QUEUE;
                F.q[slot].gpu = gpu;
                F.q[slot].xid = r->value;
            }
            r->fired = true;
            pthread_cond_broadcast(&F.cond);
        }
    }
}

/* Common entry of every per-device call: on NVML_SUCCESS returns with F.mu
 * held and *gpu set; otherwise unlocked. */
static nvmlReturn_t enter(nvmlDevice_t d, const char *fn, unsigned *gpu)
{
    pthread_mutex_lock(&F.mu);
    F.calls++;
    if (F.init_count == 0) {
        pthread_mutex_unlock(&F.mu);
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!d || d < &F.dev[0] || d >= &F.dev[F.ngpus]) {
        pthread_mutex_unlock(&F.mu);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *gpu = d->index;
    maybe_hang(fn, *gpu);
    if (value_of(*gpu, F_LOST, 0, 0)) {
        pthread_mutex_unlock(&F.mu);
        return NVML_ERROR_GPU_IS_LOST;
    }
    if (value_of(*gpu, F_RESET_REQUIRED, 0, 0)) {
        pthread_mutex_unlock(&F.mu);
        return NVML_ERROR_RESET_REQUIRED;
    }
    if (fn_rule(F_UNSUPPORTED, fn, *gpu)) {
        pthread_mutex_unlock(&F.mu);
        return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}

#define ENTER(dev, name)                                                       \
    unsigned gpu;                                                              \
    nvmlReturn_t rc_ = enter((dev), (name), &gpu);                             \
    if (rc_ != NVML_SUCCESS)                                                   \
        return rc_;

#define LEAVE(rc)                                                              \
    do {                                                                       \
        pthread_mutex_unlock(&F.mu);                                           \
        return (rc);                                                           \
    } while (0)

/* ---- the exported NVML subset ---- */

API nvmlReturn_t nvmlInit_v2(void)
{
    int rc = 0;
    pthread_once(&F.once, init_cond);
    pthread_mutex_lock(&F.mu);
    if (F.init_count == 0) {
        if (load_config() != 0) {
            pthread_mutex_unlock(&F.mu);
            return NVML_ERROR_UNKNOWN;
        }
        if (F.init_error) {
            rc = F.init_error;
            pthread_mutex_unlock(&F.mu);
            return (nvmlReturn_t)rc;
        }
        clock_gettime(CLOCK_MONOTONIC, &F.init_at);
    }
    F.init_count++;
    pthread_mutex_unlock(&F.mu);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&F.mu);
    if (F.init_count == 0) {
        pthread_mutex_unlock(&F.mu);
        return NVML_ERROR_UNINITIALIZED;
    }
    F.init_count--;
    pthread_mutex_unlock(&F.mu);
    return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    default: return "Unknown Error";
    }
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!version || length == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&F.mu);
    snprintf(version, length, "%s", F.driver);
    pthread_mutex_unlock(&F.mu);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    pthread_mutex_lock(&F.mu);
    if (F.init_count == 0) {
        pthread_mutex_unlock(&F.mu);
        return NVML_ERROR_UNINITIALIZED;
    }
    *count = F.ngpus;
    pthread_mutex_unlock(&F.mu);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&F.mu);
    if (F.init_count == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else if (index >= F.ngpus || !device)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (value_of(index, F_LOST, 0, 0))
        rc = NVML_ERROR_GPU_IS_LOST;
    else
        *device = &F.dev[index];
    pthread_mutex_unlock(&F.mu);
    return rc;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    ENTER(device, "nvmlDeviceGetPciInfo_v3");
    memset(pci, 0, sizeof *pci);
    pci->domain = 0;
    pci->bus = (0x18 + 0x10 * gpu) & 0xff;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    pci->pciDeviceId = 0x233010de;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    ENTER(device, "nvmlDeviceGetUUID");
    snprintf(uuid, length, "GPU-fa4e0000-0000-4000-8000-%012x", gpu);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                          unsigned int *temp)
{
    /* The step counter moves before anything else, lost GPU or not. */
    pthread_mutex_lock(&F.mu);
    if (F.init_count && device >= &F.dev[0] && device < &F.dev[F.ngpus]) {
        device->step++;
        queue_xids(device->index);
    }
    pthread_mutex_unlock(&F.mu);
    ENTER(device, "nvmlDeviceGetTemperature");
    if (sensor != NVML_TEMPERATURE_GPU)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *temp = (unsigned)value_of(gpu, F_TEMP, 0, 0);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                                   nvmlTemperatureThresholds_t type,
                                                   unsigned int *temp)
{
    ENTER(device, "nvmlDeviceGetTemperatureThreshold");
    if (type == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
        *temp = (unsigned)value_of(gpu, F_SLOWDOWN, 0, 0);
    else if (type == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)
        *temp = (unsigned)value_of(gpu, F_SHUTDOWN, 0, 0);
    else
        LEAVE(NVML_ERROR_NOT_SUPPORTED);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    ENTER(device, "nvmlDeviceGetPowerUsage");
    *power = (unsigned)value_of(gpu, F_POWER_MW, 0, 0);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    ENTER(device, "nvmlDeviceGetEnforcedPowerLimit");
    *limit = (unsigned)value_of(gpu, F_POWER_LIMIT_MW, 0, 0);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                        unsigned long long *reasons)
{
    ENTER(device, "nvmlDeviceGetCurrentClocksEventReasons");
    *reasons = value_of(gpu, F_REASONS, 0, 0);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                           unsigned long long *reasons)
{
    ENTER(device, "nvmlDeviceGetCurrentClocksThrottleReasons");
    *reasons = value_of(gpu, F_REASONS, 0, 0);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t type,
                                             nvmlEccCounterType_t counter,
                                             unsigned long long *count)
{
    enum field f;
    ENTER(device, "nvmlDeviceGetTotalEccErrors");
    if (type == NVML_MEMORY_ERROR_TYPE_CORRECTED)
        f = counter == NVML_VOLATILE_ECC ? F_SBE_VOL : F_SBE_AGG;
    else if (type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
        f = counter == NVML_VOLATILE_ECC ? F_DBE_VOL : F_DBE_AGG;
    else
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *count = value_of(gpu, f, 0, 0);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                           unsigned int *uncRows, unsigned int *isPending,
                                           unsigned int *failureOccurred)
{
    ENTER(device, "nvmlDeviceGetRemappedRows");
    *corrRows = (unsigned)value_of(gpu, F_REMAP_CORR, 0, 0);
    *uncRows = (unsigned)value_of(gpu, F_REMAP_UNC, 0, 0);
    *isPending = value_of(gpu, F_REMAP_PENDING, 0, 0) != 0;
    *failureOccurred = value_of(gpu, F_REMAP_FAILURE, 0, 0) != 0;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                           unsigned int *pageCount, unsigned long long *addresses)
{
    unsigned long long n;
    ENTER(device, "nvmlDeviceGetRetiredPages");
    if (!pageCount)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    n = value_of(gpu, cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? F_RETIRED_DBE
                                                                               : F_RETIRED_SBE,
                 0, 0);
    if (*pageCount < n) {
        *pageCount = (unsigned)n;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned long long i = 0; addresses && i < n; i++)
        addresses[i] = 0x1000ULL * (i + 1);
    *pageCount = (unsigned)n;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                        nvmlEnableState_t *isPending)
{
    ENTER(device, "nvmlDeviceGetRetiredPagesPendingStatus");
    *isPending = value_of(gpu, F_RETIRED_PENDING, 0, 0) ? NVML_FEATURE_ENABLED
                                                        : NVML_FEATURE_DISABLED;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    ENTER(device, "nvmlDeviceGetPcieReplayCounter");
    *value = (unsigned)value_of(gpu, F_PCIE_REPLAY, 0, 0);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                          nvmlEnableState_t *isActive)
{
    ENTER(device, "nvmlDeviceGetNvLinkState");
    if (F.nlinks == 0)
        LEAVE(NVML_ERROR_NOT_SUPPORTED);
    if (link >= F.nlinks)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *isActive = NVML_FEATURE_ENABLED;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                 nvmlNvLinkErrorCounter_t counter,
                                                 unsigned long long *value)
{
    ENTER(device, "nvmlDeviceGetNvLinkErrorCounter");
    if (F.nlinks == 0)
        LEAVE(NVML_ERROR_NOT_SUPPORTED);
    if (link >= F.nlinks || (unsigned)counter > NVML_NVLINK_ERROR_DL_CRC_DATA)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *value = value_of(gpu, F_NVLINK, (int)link, (int)counter);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&F.mu);
    if (F.init_count == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else if (F.set_live)
        rc = NVML_ERROR_IN_USE; /* the fake keeps one set */
    else {
        F.set_live = true;
        *set = &F.set;
    }
    pthread_mutex_unlock(&F.mu);
    return rc;
}

API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                  unsigned long long *eventTypes)
{
    ENTER(device, "nvmlDeviceGetSupportedEventTypes");
    *eventTypes = nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |
                  nvmlEventTypeXidCriticalError;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                          nvmlEventSet_t set)
{
    ENTER(device, "nvmlDeviceRegisterEvents");
    if (set != &F.set || !F.set_live)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (F.events_unsupported)
        LEAVE(NVML_ERROR_NOT_SUPPORTED);
    if (eventTypes & nvmlEventTypeXidCriticalError)
        F.dev[gpu].events = true;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                     unsigned int timeoutms)
{
    struct timespec until;
    nvmlReturn_t rc = NVML_ERROR_TIMEOUT;

    pthread_mutex_lock(&F.mu);
    F.calls++;
    if (F.init_count == 0 || set != &F.set || !F.set_live || !data) {
        pthread_mutex_unlock(&F.mu);
        return F.init_count == 0 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
    }
    maybe_hang("nvmlEventSetWait_v2", 0);
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeoutms / 1000;
    until.tv_nsec += (long)(timeoutms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    for (;;) {
        while (F.qlen > 0) {
            unsigned g = F.q[F.qhead].gpu;
            unsigned long long xid = F.q[F.qhead].xid;
            F.qhead = (F.qhead + 1) % FAKE_QUEUE;
            F.qlen--;
            if (!F.dev[g].events)
                continue; /* not registered: dropped, as NVML would */
            data->device = &F.dev[g];
            data->eventType = nvmlEventTypeXidCriticalError;
            data->eventData = xid;
            data->gpuInstanceId = 0xFFFFFFFFu;
            data->computeInstanceId = 0xFFFFFFFFu;
            rc = NVML_SUCCESS;
            goto out;
        }
        if (pthread_cond_timedwait(&F.cond, &F.mu, &until) == ETIMEDOUT && F.qlen == 0)
            break;
    }
out:
    pthread_mutex_unlock(&F.mu);
    return rc;
}

API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&F.mu);
    if (set != &F.set || !F.set_live)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else
        F.set_live = false;
    pthread_mutex_unlock(&F.mu);
    return rc;
}

/* Fake-only: how many NVML calls were made since the last (first) init. */
API unsigned long long gh_nvml_fake_calls(void)
{
    unsigned long long n;
    pthread_mutex_lock(&F.mu);
    n = F.calls;
    pthread_mutex_unlock(&F.mu);
    return n;
}
