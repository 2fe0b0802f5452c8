/* dcgm_fake.c - libdcgm-fake.so: a stand-in for NVIDIA's libdcgm with the
 * few entry points the agent's DCGM source uses, answering health checks
 * with incidents from the file that $GH_DCGM_FAKE_CONFIG names (read at
 * dcgmInit).
 *
 * Config, one statement per line, '#' starts a comment:
 *   version 4|5              the dcgmHealthResponse version accepted (5)
 *   init_error RC            dcgmInit returns RC (a negative dcgmReturn_t)
 *   incident FROM TO GPU SYSTEM HEALTH CODE MESSAGE...
 *       present in health checks number FROM..TO (1-based, inclusive):
 *       GPU entity id, SYSTEM a DCGM_HEALTH_WATCH_* bit, HEALTH 10 (warn)
 *       or 20 (fail), CODE a dcgmError_t, MESSAGE the rest of the line.
 * The response layouts are declared here independently of src/agent/dcgm_health.c
 * (from DCGM's dcgm_structs.h), so that the two check each other. Like the
 * NVML fake, its state is one static struct: a fake of a global library. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

#define MAX_INCIDENTS 64

typedef uintptr_t dcgmHandle_t;
typedef uintptr_t dcgmGpuGrp_t;
typedef int dcgmReturn_t;

typedef struct {
    char msg[1024];
    unsigned int code;
} dcgmDiagErrorDetail_t;

typedef struct {
    unsigned int entityGroupId; /* dcgm_field_entity_group_t */
    unsigned int entityId;
} dcgmGroupEntityPair_t;

typedef struct {
    unsigned int system;        /* dcgmHealthSystems_t */
    int health;                 /* dcgmHealthWatchResults_t */
    dcgmDiagErrorDetail_t error;
    dcgmGroupEntityPair_t entityInfo;
} dcgmIncidentInfo_t;

typedef struct {
    unsigned int version;
    int overallHealth;
    unsigned int incidentCount;
    dcgmIncidentInfo_t incidents[64];
} dcgmHealthResponse_v4;

typedef struct {
    unsigned int version;
    int overallHealth;
    unsigned int incidentCount;
    dcgmIncidentInfo_t incidents[1024];
} dcgmHealthResponse_v5;

#define MAKE_DCGM_VERSION(type, ver) ((unsigned)sizeof(type) | ((unsigned)(ver) << 24))

static struct {
    int version;
    int init_error;
    bool inited;
    unsigned checks;
    unsigned watches;
    unsigned n;
    struct {
        unsigned from, to, gpu, system, code;
        int health;
        char msg[256];
    } inc[MAX_INCIDENTS];
} D;

static int load(void)
{
    const char *path = getenv("GH_DCGM_FAKE_CONFIG");
    char line[512];
    FILE *f;

    memset(&D, 0, sizeof D);
    D.version = 5;
    if (!path || !*path)
        return 0;
    f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "dcgm-fake: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        int off = 0;
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (sscanf(line, "version %d", &D.version) == 1)
            continue;
        if (sscanf(line, "init_error %d", &D.init_error) == 1)
            continue;
        if (D.n < MAX_INCIDENTS &&
            sscanf(line, "incident %u %u %u %u %d %u %n", &D.inc[D.n].from, &D.inc[D.n].to,
                   &D.inc[D.n].gpu, &D.inc[D.n].system, &D.inc[D.n].health, &D.inc[D.n].code,
                   &off) == 6 &&
            off > 0) {
            snprintf(D.inc[D.n].msg, sizeof D.inc[D.n].msg, "%s", line + off);
            D.n++;
            continue;
        }
        fprintf(stderr, "dcgm-fake: cannot parse: %s\n", line);
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

API const char *errorString(dcgmReturn_t r)
{
    switch (r) {
    case 0: return "Success";
    case -12: return "Version mismatch";
    case -7: return "DCGM initialization error";
    default: return "Generic error";
    }
}

API dcgmReturn_t dcgmInit(void)
{
    if (load() != 0)
        return -3;
    if (D.init_error)
        return D.init_error;
    D.inited = true;
    return 0;
}

API dcgmReturn_t dcgmShutdown(void)
{
    D.inited = false;
    return 0;
}

API dcgmReturn_t dcgmStartEmbedded(int mode, dcgmHandle_t *handle)
{
    if (!D.inited || mode < 1 || mode > 2 || !handle)
        return -1;
    *handle = 0x1234;
    return 0;
}

API dcgmReturn_t dcgmStopEmbedded(dcgmHandle_t handle)
{
    return handle == 0x1234 ? 0 : -1;
}

API dcgmReturn_t dcgmConnect(const char *address, dcgmHandle_t *handle)
{
    if (!D.inited || !address || !handle)
        return -1;
    if (strcmp(address, "127.0.0.1:5555") != 0)
        return -21; /* DCGM_ST_CONNECTION_NOT_VALID */
    *handle = 0x1234;
    return 0;
}

API dcgmReturn_t dcgmDisconnect(dcgmHandle_t handle)
{
    return handle == 0x1234 ? 0 : -1;
}

API dcgmReturn_t dcgmHealthSet(dcgmHandle_t handle, dcgmGpuGrp_t group, unsigned int systems)
{
    if (handle != 0x1234 || group != 0x7fffffff)
        return -1;
    D.watches = systems;
    return 0;
}

API dcgmReturn_t dcgmHealthCheck(dcgmHandle_t handle, dcgmGpuGrp_t group, void *response)
{
    unsigned version = *(unsigned *)response, cap, count = 0;
    int *overall;
    unsigned *pcount;
    dcgmIncidentInfo_t *out;

    if (handle != 0x1234 || group != 0x7fffffff || D.watches == 0)
        return -1;
    if (D.version == 5 && version == MAKE_DCGM_VERSION(dcgmHealthResponse_v5, 5)) {
        dcgmHealthResponse_v5 *r = response;
        cap = 1024;
        overall = &r->overallHealth;
        pcount = &r->incidentCount;
        out = r->incidents;
    } else if (D.version == 4 && version == MAKE_DCGM_VERSION(dcgmHealthResponse_v4, 4)) {
        dcgmHealthResponse_v4 *r = response;
        cap = 64;
        overall = &r->overallHealth;
        pcount = &r->incidentCount;
        out = r->incidents;
    } else {
        return -12; /* DCGM_ST_VER_MISMATCH, written nothing */
    }
    D.checks++;
    *overall = 0;
    for (unsigned i = 0; i < D.n && count < cap; i++) {
        if (D.checks < D.inc[i].from || D.checks > D.inc[i].to)
            continue;
        memset(&out[count], 0, sizeof out[count]);
        out[count].system = D.inc[i].system;
        out[count].health = D.inc[i].health;
        out[count].error.code = D.inc[i].code;
        snprintf(out[count].error.msg, sizeof out[count].error.msg, "%s", D.inc[i].msg);
        out[count].entityInfo.entityGroupId = 1; /* DCGM_FE_GPU */
        out[count].entityInfo.entityId = D.inc[i].gpu;
        if (D.inc[i].health > *overall)
            *overall = D.inc[i].health;
        count++;
    }
    *pcount = count;
    return 0;
}
