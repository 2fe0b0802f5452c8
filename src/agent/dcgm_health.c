/* dcgm_health.c - the DCGM library client (see dcgm.h, part 1): dlopen
 * libdcgm, start the embedded host engine or connect to nv-hostengine,
 * set the health watches, and turn each new incident of dcgmHealthCheck
 * into a signal. The DCGM ABI subset is declared here, not from NVIDIA's
 * headers (not packaged): values from NVIDIA/DCGM dcgmlib/dcgm_structs.h,
 * dcgm_errors.h (see shared/data/gpu-signals.md 4). */
#include "agent/dcgm.h"
#include "agent/dcgm_signal.h"
#include "agent/worker.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The DCGM ABI subset (dcgm_structs.h). */
typedef uintptr_t dcgmHandle_t;
typedef uintptr_t dcgmGpuGrp_t;
typedef int dcgmReturn_t;
#define DCGM_ST_OK 0
#define DCGM_ST_VER_MISMATCH (-12)
#define DCGM_OPERATION_MODE_AUTO 1
#define DCGM_GROUP_ALL_GPUS 0x7fffffff
#define DCGM_FE_GPU 1
#define DCGM_HEALTH_RESULT_PASS 0
/* PCIE NVLINK MEM SM INFOROM THERMAL POWER DRIVER */
#define GH_DCGM_WATCHES 0x3F3u
#define MAKE_DCGM_VERSION(size, ver) ((unsigned)(size) | ((unsigned)(ver) << 24))

typedef struct {
    char msg[1024];
    unsigned int code;
} gh_dcgmDiagErrorDetail_t;

typedef struct {
    unsigned int entityGroupId;
    unsigned int entityId;
} gh_dcgmGroupEntityPair_t;

typedef struct {
    unsigned int system;
    int health;
    gh_dcgmDiagErrorDetail_t error;
    gh_dcgmGroupEntityPair_t entityInfo;
} gh_dcgmIncidentInfo_t;

/* v4 (DCGM 2.0-3.x): 64 incidents; v5 (DCGM 4): 1024 (DCGM_GROUP_MAX_ENTITIES_V2). */
#define INCIDENTS_V4 64
#define INCIDENTS_V5 1024
typedef struct {
    unsigned int version;
    int overallHealth;
    unsigned int incidentCount;
    gh_dcgmIncidentInfo_t incidents[INCIDENTS_V5];
} gh_dcgmHealthResponse_v5;
#define RESPONSE_SIZE(n)                                                                           \
    (offsetof(gh_dcgmHealthResponse_v5, incidents) + (n) * sizeof(gh_dcgmIncidentInfo_t))

_Static_assert(sizeof(gh_dcgmIncidentInfo_t) == 1044, "dcgmIncidentInfo_t ABI");

typedef dcgmReturn_t (*gh_dcgmInit_fn)(void);
typedef dcgmReturn_t (*gh_dcgmShutdown_fn)(void);
typedef dcgmReturn_t (*gh_dcgmStartEmbedded_fn)(int mode, dcgmHandle_t *handle);
typedef dcgmReturn_t (*gh_dcgmStopEmbedded_fn)(dcgmHandle_t handle);
typedef dcgmReturn_t (*gh_dcgmConnect_fn)(const char *address, dcgmHandle_t *handle);
typedef dcgmReturn_t (*gh_dcgmDisconnect_fn)(dcgmHandle_t handle);
typedef dcgmReturn_t (*gh_dcgmHealthSet_fn)(dcgmHandle_t handle, dcgmGpuGrp_t group,
                                            unsigned int systems);
typedef dcgmReturn_t (*gh_dcgmHealthCheck_fn)(dcgmHandle_t handle, dcgmGpuGrp_t group,
                                              void *response);
typedef const char *(*gh_errorString_fn)(dcgmReturn_t result);

#define INCIDENT_SET_MAX 256

struct incident_key {
    unsigned group, entity, system, code;
};

struct gh_dcgm_health {
    pthread_mutex_t mu; /* serialises checks */
    void *dl;
    struct {
        gh_dcgmInit_fn init;
        gh_dcgmShutdown_fn shutdown;
        gh_dcgmStartEmbedded_fn start_embedded;
        gh_dcgmStopEmbedded_fn stop_embedded;
        gh_dcgmConnect_fn connect;
        gh_dcgmDisconnect_fn disconnect;
        gh_dcgmHealthSet_fn health_set;
        gh_dcgmHealthCheck_fn health_check;
        gh_errorString_fn error_string;
    } fn;
    bool inited, embedded, connected;
    dcgmHandle_t handle;
    int version; /* 0 unknown, 5, 4, -1 none accepted */
    gh_dcgmHealthResponse_v5 *resp;
    struct incident_key active[INCIDENT_SET_MAX];
    unsigned nactive;
    char *node;
    const struct gh_clock *clock;
    gh_dcgm_emit_fn emit;
    void *emit_ctx;
    struct gh_worker *worker; /* ticks every interval */
};

static const char *dcgm_str(struct gh_dcgm_health *h, dcgmReturn_t r)
{
    const char *s = h->fn.error_string ? h->fn.error_string(r) : NULL;
    return s ? s : "unknown DCGM error";
}

/* First decimal number after `word` (case-insensitive) in msg, or -1. */
static long number_after(const char *msg, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = msg; *p; p++) {
        if (strncasecmp(p, word, wl) == 0) {
            const char *q = p + wl;
            long v = 0;
            int digits = 0;
            while (*q == ' ' || *q == ':' || *q == '=')
                q++;
            while (isdigit((unsigned char)*q) && digits < 9) {
                v = v * 10 + (*q++ - '0');
                digits++;
            }
            if (digits)
                return v;
        }
    }
    return -1;
}

/* Maps one incident to a signal; false when the spec has no kind for it. */
static bool map_incident(const gh_dcgmIncidentInfo_t *in, struct gh_signal *s, const char **counter)
{
    long n;
    *counter = NULL;
    switch (in->error.code) {
    case 4: /* DCGM_FR_VOLATILE_DBE_DETECTED */
        s->kind = GH_KIND_ECC;
        s->bits = GH_ECC_DOUBLE;
        s->is_volatile = true;
        s->has_count = true;
        n = number_after(in->error.msg, "detected");
        s->count = n > 0 ? n : 1;
        return true;
    case 80: /* DCGM_FR_ROW_REMAP_FAILURE */
        s->kind = GH_KIND_ROW_REMAP;
        s->failure = true;
        return true;
    case 85: /* DCGM_FR_PENDING_ROW_REMAP */
    case 6:  /* DCGM_FR_PENDING_PAGE_RETIREMENTS */
    case 83: /* DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS */
        s->kind = GH_KIND_ROW_REMAP;
        s->pending = true;
        return true;
    case 101: /* DCGM_FR_XID_ERROR */
        s->kind = GH_KIND_XID;
        n = number_after(in->error.msg, "xid");
        s->code = n > 0 ? (int)n : 999; /* 999: NVML's "unknown Xid" */
        return true;
    case 120: /* DCGM_FR_FALLEN_OFF_BUS */ s->kind = GH_KIND_GPU_LOST; return true;
    case 13: /* DCGM_FR_NVLINK_ERROR_THRESHOLD */
    case 70: /* DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD */
        s->kind = GH_KIND_NVLINK;
        s->has_count = true;
        s->count = 0;
        n = number_after(in->error.msg, "link");
        if (n >= 0 && n < GH_DCGM_NVL_LINKS) {
            s->has_link = true;
            s->link = (int)n;
        }
        *counter = in->error.code == 70 ? "crc_flit" : "replay";
        return true;
    case 3:   /* DCGM_FR_PCI_REPLAY_RATE */
    case 104: /* DCGM_FR_PCIE_REPLAY_VIOLATION */
    case 107: /* DCGM_FR_PCIE_REPLAY_THRESHOLD_VIOLATION */
        s->kind = GH_KIND_PCIE;
        s->has_count = true;
        s->count = 0;
        *counter = "replay";
        return true;
    default: return false;
    }
}

static bool key_in(const struct incident_key *set, unsigned n, const struct incident_key *k)
{
    for (unsigned i = 0; i < n; i++)
        if (memcmp(&set[i], k, sizeof *k) == 0)
            return true;
    return false;
}

int gh_dcgm_health_check_once(struct gh_dcgm_health *h, struct gh_err *err)
{
    static const int versions[2] = {5, 4};
    struct incident_key now_set[INCIDENT_SET_MAX];
    unsigned nnow = 0, count, max = 0;
    dcgmReturn_t r = DCGM_ST_VER_MISMATCH;
    int rc = GH_OK;
    int64_t now;

    pthread_mutex_lock(&h->mu);
    if (h->version < 0) {
        rc = gh_err_set(err, GH_EUNSUPPORTED, "DCGM: no known health response version accepted");
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        int v = versions[k];
        max = v == 5 ? INCIDENTS_V5 : INCIDENTS_V4;
        if (h->version && h->version != v)
            continue;
        memset(h->resp, 0, offsetof(gh_dcgmHealthResponse_v5, incidents));
        h->resp->version = MAKE_DCGM_VERSION(RESPONSE_SIZE(max), v);
        r = h->fn.health_check(h->handle, DCGM_GROUP_ALL_GPUS, h->resp);
        if (r != DCGM_ST_VER_MISMATCH) {
            h->version = v;
            break;
        }
    }
    if (r == DCGM_ST_VER_MISMATCH) {
        h->version = -1;
        rc = gh_err_set(err, GH_EUNSUPPORTED,
                        "DCGM: dcgmHealthCheck accepts neither response v5 nor v4; DCGM health "
                        "watches disabled (use the dcgm-exporter scrape)");
        goto out;
    }
    if (r != DCGM_ST_OK) {
        rc = gh_err_set(err, GH_EIO, "DCGM: dcgmHealthCheck failed: %s (%d)", dcgm_str(h, r), r);
        goto out;
    }
    count = h->resp->incidentCount < max ? h->resp->incidentCount : max;
    now = gh_clock_now(h->clock);
    for (unsigned i = 0; i < count; i++) {
        gh_dcgmIncidentInfo_t *in = &h->resp->incidents[i];
        struct incident_key key = {in->entityInfo.entityGroupId, in->entityInfo.entityId,
                                   in->system, in->error.code};
        struct gh_signal s;
        const char *counter;
        char msg[GH_DCGM_MSG_MAX];
        int gpu;

        if (in->health == DCGM_HEALTH_RESULT_PASS)
            continue;
        in->error.msg[sizeof in->error.msg - 1] = '\0';
        if (key_in(now_set, nnow, &key))
            continue;
        if (nnow < INCIDENT_SET_MAX)
            now_set[nnow++] = key;
        if (key_in(h->active, h->nactive, &key))
            continue; /* reported while it lasts */
        gh_signal_init(&s);
        if (!map_incident(in, &s, &counter))
            continue;
        gpu = key.group == DCGM_FE_GPU && key.entity < GH_DCGM_MAX_GPUS ? (int)key.entity : -1;
        s.ts_ns = now;
        s.source = GH_SRC_DCGM;
        s.gpu = gpu;
        /* DCGM's text is ASCII in practice; keep only printable ASCII. */
        snprintf(msg, sizeof msg, "DCGM health (system 0x%x, code %u, %s): %.400s", key.system,
                 key.code, in->health >= 20 ? "fail" : "warn", in->error.msg);
        for (char *p = msg; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                *p = ' ';
        if (gh_dcgm_signal_emit(h->emit, h->emit_ctx, &s, h->node, NULL, counter, msg) != GH_OK)
            rc = gh_err_set(err, GH_ENOMEM, "DCGM: out of memory building a signal");
    }
    memcpy(h->active, now_set, nnow * sizeof now_set[0]);
    h->nactive = nnow;
out:
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void health_tick(void *arg, struct gh_worker *w)
{
    (void)w;
    gh_dcgm_health_check_once(arg, NULL);
}

int gh_dcgm_health_new(const struct gh_dcgm_health_opts *opts, struct gh_dcgm_health **out,
                       struct gh_err *err)
{
    static const char *const defaults[] = {"libdcgm.so.4", "libdcgm.so.3"};
    struct gh_dcgm_health *h;
    char why[256] = "";
    dcgmReturn_t r;
    int rc;

    *out = NULL;
    if (!opts || !opts->emit || !opts->node || !opts->node[0])
        return gh_err_set(err, GH_EINVAL, "DCGM: node and emit are required");
    if (opts->interval_ns < 0)
        return gh_err_set(err, GH_EINVAL, "DCGM: negative interval");
    h = calloc(1, sizeof *h);
    if (!h)
        return gh_err_set(err, GH_ENOMEM, "DCGM: out of memory");
    if (pthread_mutex_init(&h->mu, NULL)) {
        free(h);
        return gh_err_set(err, GH_EIO, "DCGM: mutex init failed");
    }
    h->node = strdup(opts->node);
    h->resp = malloc(sizeof *h->resp);
    h->clock = opts->clock ? opts->clock : gh_clock_real();
    h->emit = opts->emit;
    h->emit_ctx = opts->emit_ctx;
    if (!h->node || !h->resp) {
        rc = gh_err_set(err, GH_ENOMEM, "DCGM: out of memory");
        goto fail;
    }
    if (opts->lib_path && opts->lib_path[0]) {
        dlerror();
        h->dl = dlopen(opts->lib_path, RTLD_NOW | RTLD_LOCAL);
        if (!h->dl) {
            const char *e = dlerror();
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: %s not found (dlopen: %s); DCGM health watches disabled",
                            opts->lib_path, e ? e : "?");
            goto fail;
        }
    } else {
        for (size_t i = 0; i < 2 && !h->dl; i++) {
            dlerror();
            h->dl = dlopen(defaults[i], RTLD_NOW | RTLD_LOCAL);
            if (!h->dl && i == 0) {
                const char *e = dlerror();
                snprintf(why, sizeof why, "%s", e ? e : "?");
            }
        }
        if (!h->dl) {
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: libdcgm.so.4 / libdcgm.so.3 not found (dlopen: %s); DCGM "
                            "health watches disabled",
                            why);
            goto fail;
        }
    }
#define SYM(field, name) *(void **)&h->fn.field = dlsym(h->dl, name)
    SYM(init, "dcgmInit");
    SYM(shutdown, "dcgmShutdown");
    SYM(start_embedded, "dcgmStartEmbedded");
    SYM(stop_embedded, "dcgmStopEmbedded");
    SYM(connect, "dcgmConnect");
    SYM(disconnect, "dcgmDisconnect");
    SYM(health_set, "dcgmHealthSet");
    SYM(health_check, "dcgmHealthCheck");
    SYM(error_string, "errorString");
#undef SYM
    if (!h->fn.init || !h->fn.shutdown || !h->fn.health_set || !h->fn.health_check ||
        (opts->hostengine ? !h->fn.connect || !h->fn.disconnect
                          : !h->fn.start_embedded || !h->fn.stop_embedded)) {
        rc = gh_err_set(err, GH_ENOTFOUND,
                        "DCGM: the library lacks a needed symbol; DCGM health watches disabled");
        goto fail;
    }
    r = h->fn.init();
    if (r != DCGM_ST_OK) {
        rc = gh_err_set(err, GH_ENOTFOUND,
                        "DCGM: dcgmInit failed: %s (%d); DCGM health watches disabled",
                        dcgm_str(h, r), r);
        goto fail;
    }
    h->inited = true;
    if (opts->hostengine) {
        r = h->fn.connect(opts->hostengine, &h->handle);
        if (r != DCGM_ST_OK) {
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: cannot connect to nv-hostengine at %s: %s (%d); DCGM health "
                            "watches disabled",
                            opts->hostengine, dcgm_str(h, r), r);
            goto fail;
        }
        h->connected = true;
    } else {
        r = h->fn.start_embedded(DCGM_OPERATION_MODE_AUTO, &h->handle);
        if (r != DCGM_ST_OK) {
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: cannot start the embedded host engine: %s (%d); DCGM health "
                            "watches disabled",
                            dcgm_str(h, r), r);
            goto fail;
        }
        h->embedded = true;
    }
    r = h->fn.health_set(h->handle, DCGM_GROUP_ALL_GPUS, GH_DCGM_WATCHES);
    if (r != DCGM_ST_OK) {
        rc = gh_err_set(err, GH_EIO, "DCGM: dcgmHealthSet failed: %s (%d)", dcgm_str(h, r), r);
        goto fail;
    }
    struct gh_worker_opts wo = {.name = "DCGM health checker",
                                .period_ns = opts->interval_ns ? opts->interval_ns
                                                               : 10 * GH_NS_PER_S,
                                .cadence = GH_WORKER_RATE,
                                .run = health_tick,
                                .arg = h};
    if ((rc = gh_worker_new(&wo, &h->worker, err)))
        goto fail;
    *out = h;
    return GH_OK;
fail:
    gh_dcgm_health_free(h);
    return rc;
}

int gh_dcgm_health_start(struct gh_dcgm_health *h, struct gh_err *err)
{
    return gh_worker_start(h->worker, err);
}

void gh_dcgm_health_stop(struct gh_dcgm_health *h)
{
    if (h)
        gh_worker_stop(h->worker);
}

void gh_dcgm_health_free(struct gh_dcgm_health *h)
{
    if (!h)
        return;
    gh_worker_free(h->worker); /* stops it first */
    if (h->embedded)
        h->fn.stop_embedded(h->handle);
    if (h->connected)
        h->fn.disconnect(h->handle);
    if (h->inited)
        h->fn.shutdown();
    if (h->dl)
        dlclose(h->dl);
    pthread_mutex_destroy(&h->mu);
    free(h->resp);
    free(h->node);
    free(h);
}
