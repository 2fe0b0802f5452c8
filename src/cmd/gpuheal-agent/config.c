/* config.c - gpuheal-agent's settings: one table of options, each settable
 * by flag, by $GPUHEAL_<NAME> and by a key=value config file, with --help
 * generated from the same table. --probe is the one repeatable option (its
 * values form a list; the highest layer that gives any replaces the lower
 * ones) and its values are parsed here too. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/gpuheal-agent/agent.h"
#include "common/log.h"
#include "common/version.h"


enum opt {
    O_NODE, O_KMSG, O_KMSG_MODE, O_NVML_LIB, O_POLL_INTERVAL, O_DCGM, O_DCGM_EXPORTER,
    O_DCGM_INTERVAL, O_TELEMETRY_SOCKET, O_TELEMETRY_STEP_INTERVAL, O_INJECT, O_INJECT_FOLLOW,
    O_IB_SYSFS_ROOT, O_NIC_POLL_INTERVAL, O_PROBE, O_KUBECONFIG, O_KUBE_CONTEXT,
    O_HEALTH_INTERVAL, O_CONTROLLER, O_TOKEN_FILE, O_CA_FILE, O_SPOOL_DIR, O_SPOOL_MAX_BYTES,
    O_SPOOL_TELEMETRY_SHARE, O_SPOOL_SYNC_INTERVAL, O_BATCH_RECORDS, O_BATCH_LINGER, O_LISTEN, O_LOG_LEVEL,
    O_BOOT_ID_FILE, O_RESET_GPU_CMD, O_REBOOT_CMD, O_DIAGNOSTICS_CMD, O_VALIDATE_CMD,
    O_REQUEST_TIMEOUT, O__COUNT
};

struct opt_def {
    const char *name;    /* flag without "--"; config key; env GPUHEAL_<NAME> */
    const char *arg;     /* what the value looks like */
    const char *def;     /* default ("" = none) */
    const char *help;
};

static const struct opt_def defs[O__COUNT] = {
    [O_NODE] = {"node", "NAME", "",
        "Kubernetes node name put on every signal (default: the host name;\n"
        "in a DaemonSet set GPUHEAL_NODE from spec.nodeName)"},
    [O_KMSG] = {"kmsg", "PATH|off", GH_KMSG_SRC_DEFAULT_DEVICE,
        "kernel log to follow for NVRM/NVSwitch/mlx5 lines (needs CAP_SYSLOG or\n"
        "root for /dev/kmsg); a file of /dev/kmsg-format records works for tests"},
    [O_KMSG_MODE] = {"kmsg-mode", "device|file", "device",
        "device: /dev/kmsg records (ring read from its start, shipped seq\n"
        "persisted in SPOOL_DIR/kmsg.state); file: a text log followed like tail -F\n"
        "(its position persisted there too: nothing written while the agent is\n"
        "down is lost, through rotation and copytruncate)"},
    [O_NVML_LIB] = {"nvml-lib", "PATH|off", GH_NVML_DEFAULT_LIB,
        "NVML library to dlopen (needs the /dev/nvidia* device nodes)"},
    [O_POLL_INTERVAL] = {"poll-interval", "DURATION", "1s", "NVML poll period"},
    [O_DCGM] = {"dcgm", "on|off", "on",
        "DCGM health watches through libdcgm when it is installed"},
    [O_DCGM_EXPORTER] = {"dcgm-exporter", "URL", "",
        "also scrape an existing dcgm-exporter, e.g. http://127.0.0.1:9400/metrics"},
    [O_DCGM_INTERVAL] = {"dcgm-interval", "DURATION", "10s",
        "period of the DCGM health check and of the dcgm-exporter scrape"},
    [O_TELEMETRY_SOCKET] = {"telemetry-socket", "PATH|off", GH_TELEMETRY_DEFAULT_SOCKET,
        "Unix socket where training ranks write step/checkpoint lines"},
    [O_TELEMETRY_STEP_INTERVAL] = {"telemetry-step-interval", "DURATION", "0",
        "ship at most one step signal per rank per DURATION (0: every step line;\n"
        "per-rank records are kept either way)"},
    [O_INJECT] = {"inject", "PATH", "",
        "file or FIFO of spec signal lines to ship, marked injected (tests, demos)"},
    [O_INJECT_FOLLOW] = {"inject-follow", "on|off", "off",
        "keep reading lines appended to a regular --inject file (a FIFO is always\n"
        "followed)"},
    [O_IB_SYSFS_ROOT] = {"ib-sysfs-root", "PATH|off", GH_NIC_DEFAULT_ROOT,
        "InfiniBand/RoCE sysfs root for port state and error counters\n"
        "(--nic-root and $GPUHEAL_NIC_ROOT are older names for it)"},
    [O_NIC_POLL_INTERVAL] = {"nic-poll-interval", "DURATION", "5s",
        "period of the InfiniBand/RoCE port scan"},
    [O_PROBE] = {"probe", "NAME=COMMAND[,timeout=D][,every=D][,gpu=N]", "",
        "a health check, repeatable (config file: one probe= line each;\n"
        "$GPUHEAL_PROBE: one per line). COMMAND runs as /bin/sh -c COMMAND with\n"
        "stdin /dev/null; exit 0 within timeout (default 60s) passes. every=D runs\n"
        "it every D (first run one D after start); without every= it runs only\n"
        "on demand, which the controller cannot request yet. gpu=N: the check is\n"
        "about GPU N (a pass clears that GPU's faults seen before it, a failure\n"
        "marks it unhealthy); without gpu= it is node-level. Each result is a\n"
        "probe_result signal. \"off\" drops the probes of lower layers"},
    [O_KUBECONFIG] = {"kubeconfig", "PATH|off", "",
        "publish GPU health (Node condition GPUHealthy, GPUNodeHealth status) to\n"
        "the API server of this kubeconfig; unset: in-cluster configuration when\n"
        "KUBERNETES_SERVICE_HOST is set, else publishing is off"},
    [O_KUBE_CONTEXT] = {"kube-context", "NAME", "",
        "kubeconfig context to use (default: its current-context)"},
    [O_HEALTH_INTERVAL] = {"health-interval", "DURATION", "10s",
        "least time between the starts of two GPU health writes to Kubernetes\n"
        "(changes in between are coalesced into the next write)"},
    [O_CONTROLLER] = {"controller", "URL", "",
        "controller base URL (POST URL/v1/signals); none: spool only"},
    [O_TOKEN_FILE] = {"token-file", "FILE", "",
        "bearer token for the controller (re-read for every request)"},
    [O_CA_FILE] = {"ca-file", "FILE", "", "PEM CA bundle for an https controller"},
    [O_SPOOL_DIR] = {"spool-dir", "DIR", "/var/lib/gpuheal/spool",
        "disk spool of unshipped signals (a hostPath survives pod restarts)"},
    [O_SPOOL_MAX_BYTES] = {"spool-max-bytes", "BYTES", "256Mi",
        "spool bound; when full the OLDEST signals are dropped and counted"},
    [O_SPOOL_TELEMETRY_SHARE] = {"spool-telemetry-share", "PERCENT", "25",
        "most of the spool that telemetry step lines may fill (1..50); beyond it\n"
        "new telemetry is dropped and counted, never a hardware signal"},
    [O_SPOOL_SYNC_INTERVAL] = {"spool-sync-interval", "DURATION", "200ms",
        "fsync period of the spool (batched fsync)"},
    [O_BATCH_RECORDS] = {"batch-records", "N", "1000", "signals per POST at most"},
    [O_BATCH_LINGER] = {"batch-linger", "DURATION", "200ms",
        "longest wait for a batch to fill before it is sent"},
    [O_LISTEN] = {"listen", "HOST:PORT|off", ":9401", "where /healthz and /metrics are served"},
    [O_LOG_LEVEL] = {"log-level", "LEVEL", "info", "debug, info, warn, error or off"},
    [O_BOOT_ID_FILE] = {"boot-id-file", "PATH", GH_KMSG_SRC_DEFAULT_BOOT_ID,
        "the kernel's boot id (part of every signal id the agent gives; a new\n"
        "one completes a reboot_node request)"},
    [O_RESET_GPU_CMD] = {"reset-gpu-cmd", "PATH [ARG...]", "",
        "command for the controller's reset_gpu request (words split at spaces,\n"
        "no shell; env GPUHEAL_ACTION, GPUHEAL_REQUEST_ID, GPUHEAL_INCIDENT,\n"
        "GPUHEAL_GPU, GPUHEAL_NODE); unset: the request fails NotConfigured"},
    [O_REBOOT_CMD] = {"reboot-cmd", "PATH [ARG...]", "",
        "command for a reboot_node request; done when the agent starts with a new\n"
        "boot id"},
    [O_DIAGNOSTICS_CMD] = {"diagnostics-cmd", "PATH [ARG...]", "",
        "command for a run_diagnostics request"},
    [O_VALIDATE_CMD] = {"validate-cmd", "PATH [ARG...]", "",
        "validation probe run after a request succeeded: its exit status sets\n"
        "GPUNodeHealth condition Validated (the controller's gate to uncordon)"},
    [O_REQUEST_TIMEOUT] = {"request-timeout", "DURATION", "10m",
        "deadline of each request and validation command (then its process group\n"
        "is killed)"},
};

/* Older names still accepted as flag, config key and environment variable. */
static const struct {
    const char *name;
    enum opt opt;
} aliases[] = {
    {"nic-root", O_IB_SYSFS_ROOT},
};
#define N_ALIASES (sizeof aliases / sizeof aliases[0])

/* The values of a repeatable option given in one layer (file, env, flags). */
struct strlist {
    char **v;
    size_t n;
    bool set;  /* the layer gave the option at least once */
};

static void list_free(struct strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Appends v[0..len); "off" empties the list instead. -1 on ENOMEM or when
 * more than GH_PROBE_MAX_CHECKS values are given. */
static int list_add(struct strlist *l, const char *v, size_t len)
{
    l->set = true;
    if (len == 3 && strncmp(v, "off", 3) == 0) {
        for (size_t i = 0; i < l->n; i++)
            free(l->v[i]);
        l->n = 0;
        return 0;
    }
    if (l->n >= GH_PROBE_MAX_CHECKS)
        return -1;
    if (!l->v) {
        l->v = calloc(GH_PROBE_MAX_CHECKS, sizeof *l->v);
        if (!l->v)
            return -1;
    }
    char *s = strndup(v, len);
    if (!s)
        return -1;
    l->v[l->n++] = s;
    return 0;
}

static void env_name(const char *name, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "GPUHEAL_");
    for (const char *p = name; *p && k + 1 < cap; p++)
        out[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[k] = '\0';
}

static void print_help(FILE *f)
{
    fprintf(f,
        "usage: gpuheal-agent [--config FILE] [--NAME VALUE | --NAME=VALUE ...]\n"
        "\n"
        "The gpuheal node agent: collects GPU, kernel-log, NIC and training signals,\n"
        "coalesces storms, spools them on disk and ships them to the controller.\n"
        "\n"
        "Every option can also be set as NAME=VALUE in the config file (--config FILE\n"
        "or $GPUHEAL_CONFIG; '#' comments) and as $GPUHEAL_<NAME> (upper case, '-' as\n"
        "'_'); flags beat the environment, which beats the file. DURATION: 500ms, 1s,\n"
        "2m (a bare number is seconds); BYTES: 1048576, 64Ki, 256Mi, 1Gi (or K/M/G).\n"
        "\noptions:\n");
    for (int i = 0; i < O__COUNT; i++) {
        char env[64];
        env_name(defs[i].name, env, sizeof env);
        fprintf(f, "  --%s %s", defs[i].name, defs[i].arg);
        if (defs[i].def[0])
            fprintf(f, "   (default %s)", defs[i].def);
        if (i == O_PROBE)
            fprintf(f, "   (repeatable)");
        fprintf(f, "   [$%s]\n      ", env);
        for (const char *p = defs[i].help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fputs("      ", f);
        }
        fputc('\n', f);
    }
    /* gpuheal-agent --check (check.c) */
    fputs("  --check [--json] [--check-root PATH]\n"
          "      one-shot check of this node with the options above: every source, what\n"
          "      it sees, what is missing and why; a table, or JSON with --json; exit 0\n"
          "      nothing failed, 1 a check failed (docs/agent.md, \"Checking a node\")\n",
          f);
    fprintf(f,
        "  --config FILE   read options from FILE first   [$GPUHEAL_CONFIG]\n"
        "  --help, --version\n"
        "\n"
        "Privileges: reading /dev/kmsg needs CAP_SYSLOG (or root) unless\n"
        "kernel.dmesg_restrict=0; NVML needs read/write on /dev/nvidiactl and\n"
        "/dev/nvidia* (the NVIDIA container runtime or a device plugin provides them);\n"
        "write access to the spool directory and the telemetry socket's directory;\n"
        "read access to /sys/class/infiniband. Nothing else: the agent never needs\n"
        "CAP_SYS_ADMIN, host networking or to run as root otherwise (docs/agent.md).\n");
}

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return 2;
}

static int find_opt(const char *name, size_t len)
{
    for (int i = 0; i < O__COUNT; i++)
        if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0)
            return i;
    for (size_t i = 0; i < N_ALIASES; i++)
        if (strlen(aliases[i].name) == len && strncmp(aliases[i].name, name, len) == 0)
            return (int)aliases[i].opt;
    return -1;
}

static int set(char **vals, int i, const char *v, size_t len)
{
    char *s = strndup(v, len);
    if (!s)
        return -1;
    free(vals[i]);
    vals[i] = s;
    return 0;
}

static int load_file(const char *path, char **vals, struct strlist *probes, char *err,
                     size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, cap, "--config %s: %s", path, strerror(errno));
    char line[4096];
    long n = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = fail(err, cap, "%s line %ld: longer than %zu bytes", path, n, sizeof line - 2);
            break;
        }
        char *s = line, *e = line + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (s == e || *s == '#')
            continue;
        char *eq = memchr(s, '=', (size_t)(e - s));
        if (!eq) {
            rc = fail(err, cap, "%s line %ld: expected NAME=VALUE", path, n);
            break;
        }
        char *ke = eq, *v = eq + 1;
        while (ke > s && isspace((unsigned char)ke[-1]))
            ke--;
        while (v < e && isspace((unsigned char)*v))
            v++;
        int i = find_opt(s, (size_t)(ke - s));
        if (i < 0) {
            rc = fail(err, cap, "%s line %ld: unknown option \"%.*s\"", path, n, (int)(ke - s), s);
            break;
        }
        if (i == O_PROBE) {
            if (list_add(probes, v, (size_t)(e - v))) {
                rc = fail(err, cap, "%s line %ld: more than %d probes (or out of memory)", path,
                          n, GH_PROBE_MAX_CHECKS);
                break;
            }
        } else if (set(vals, i, v, (size_t)(e - v))) {
            rc = fail(err, cap, "out of memory");
            break;
        }
    }
    fclose(f);
    return rc;
}

static int parse_duration(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = GH_NS_PER_S;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mul = GH_NS_PER_S;
    else if (strcmp(end, "ms") == 0)
        mul = GH_NS_PER_MS;
    else if (strcmp(end, "us") == 0)
        mul = GH_NS_PER_US;
    else if (strcmp(end, "ns") == 0)
        mul = 1;
    else if (strcmp(end, "m") == 0)
        mul = 60.0 * GH_NS_PER_S;
    else if (strcmp(end, "h") == 0)
        mul = 3600.0 * GH_NS_PER_S;
    else
        return -1;
    double ns = v * mul;
    if (ns > 9.0e18)
        return -1;
    *out = (int64_t)ns;
    return 0;
}

static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    uint64_t mul = 1;
    if (*end == '\0')
        mul = 1;
    else if (strcmp(end, "K") == 0 || strcmp(end, "k") == 0)
        mul = 1000;
    else if (strcmp(end, "M") == 0)
        mul = 1000000;
    else if (strcmp(end, "G") == 0)
        mul = 1000000000;
    else if (strcmp(end, "Ki") == 0)
        mul = 1024;
    else if (strcmp(end, "Mi") == 0)
        mul = 1024 * 1024;
    else if (strcmp(end, "Gi") == 0)
        mul = 1024ull * 1024 * 1024;
    else
        return -1;
    if (v > UINT64_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

/* NULL for "", "off"; else a copy. */
static int opt_path(const char *v, char **out)
{
    *out = NULL;
    if (!v[0] || strcmp(v, "off") == 0)
        return 0;
    *out = strdup(v);
    return *out ? 0 : -1;
}

/* A parsed --probe value's option: "timeout=D", "every=D" or "gpu=N" as
 * o[0..len). 1 when it is one (*k: 0 timeout, 1 every, 2 gpu; *ns, *gpu
 * set), 0 when it is not an option (part of the command), -1 when the
 * value is bad. */
static int probe_opt(const char *o, size_t len, int *k, int64_t *ns, int *gpu)
{
    static const char *const keys[] = {"timeout=", "every=", "gpu="};
    char v[64];
    for (int i = 0; i < 3; i++) {
        size_t kl = strlen(keys[i]);
        if (len <= kl || strncmp(o, keys[i], kl) != 0)
            continue;
        if (len - kl >= sizeof v)
            return -1;
        memcpy(v, o + kl, len - kl);
        v[len - kl] = '\0';
        *k = i;
        if (i == 2) {
            char *end;
            errno = 0;
            long g = strtol(v, &end, 10);
            if (errno || end == v || *end || g < 0 || g >= GH_NVML_MAX_GPUS)
                return -1;
            *gpu = (int)g;
            return 1;
        }
        return parse_duration(v, ns) || *ns < GH_NS_PER_MS ? -1 : 1;
    }
    return 0;
}

int agent_probe_parse(const char *spec, struct agent_probe *out, char *err, size_t cap)
{
    static const char *const keys[] = {"timeout", "every", "gpu"};
    memset(out, 0, sizeof *out);
    out->gpu = -1;
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec)
        return fail(err, cap, "--probe \"%.100s\": expected NAME=COMMAND[,timeout=D][,every=D]"
                    "[,gpu=N]", spec);
    size_t nlen = (size_t)(eq - spec);
    if (nlen > 63)
        return fail(err, cap, "--probe: name \"%.*s...\" longer than 63 bytes", 20, spec);
    for (size_t i = 0; i < nlen; i++)
        if (!isalnum((unsigned char)spec[i]) && spec[i] != '_' && spec[i] != '-' &&
            spec[i] != '.')
            return fail(err, cap, "--probe \"%.*s\": a name is letters, digits, '_', '-', '.'",
                        (int)nlen, spec);
    /* Options are taken from the end, so the command may contain commas. */
    const char *cmd = eq + 1;
    size_t clen = strlen(cmd);
    bool seen[3] = {false, false, false};
    for (;;) {
        const char *comma = NULL;
        for (size_t i = clen; i > 0; i--)
            if (cmd[i - 1] == ',') {
                comma = cmd + i - 1;
                break;
            }
        if (!comma)
            break;
        const char *o = comma + 1;
        size_t olen = clen - (size_t)(o - cmd);
        while (olen && isspace((unsigned char)*o)) {
            o++;
            olen--;
        }
        while (olen && isspace((unsigned char)o[olen - 1]))
            olen--;
        int k = -1, gpu = -1;
        int64_t ns = 0;
        int r = probe_opt(o, olen, &k, &ns, &gpu);
        if (r == 0)
            break;
        if (r < 0)
            return fail(err, cap, "--probe %.*s: bad \"%.*s\" (timeout=/every=: a duration of "
                        "at least 1ms; gpu=: 0..%d)", (int)nlen, spec, (int)olen, o,
                        GH_NVML_MAX_GPUS - 1);
        if (seen[k])
            return fail(err, cap, "--probe %.*s: %s given twice", (int)nlen, spec, keys[k]);
        seen[k] = true;
        if (k == 0)
            out->timeout_ns = ns;
        else if (k == 1)
            out->interval_ns = ns;
        else
            out->gpu = gpu;
        clen = (size_t)(comma - cmd);
    }
    while (clen && isspace((unsigned char)*cmd)) {
        cmd++;
        clen--;
    }
    while (clen && isspace((unsigned char)cmd[clen - 1]))
        clen--;
    if (!clen)
        return fail(err, cap, "--probe %.*s: no command", (int)nlen, spec);
    out->name = strndup(spec, nlen);
    out->command = strndup(cmd, clen);
    if (!out->name || !out->command) {
        free(out->name);
        free(out->command);
        memset(out, 0, sizeof *out);
        return fail(err, cap, "out of memory");
    }
    return 0;
}

void agent_config_free(struct agent_config *c)
{
    free(c->node);
    free(c->kmsg);
    free(c->nvml_lib);
    free(c->dcgm_exporter);
    free(c->telemetry_socket);
    free(c->inject);
    free(c->nic_root);
    free(c->kubeconfig);
    free(c->kube_context);
    for (size_t i = 0; i < c->n_probes; i++) {
        free(c->probes[i].name);
        free(c->probes[i].command);
    }
    free(c->probes);
    free(c->controller);
    free(c->token_file);
    free(c->ca_file);
    free(c->spool_dir);
    free(c->listen);
    free(c->boot_id_path);
    for (int i = 0; i < GH_REQ__COUNT; i++)
        free(c->request_cmd[i]);
    free(c->validate_cmd);
    memset(c, 0, sizeof *c);
}

static int on_off(const char *v, const char *name, bool *out, char *err, size_t cap)
{
    if (strcmp(v, "on") == 0)
        *out = true;
    else if (strcmp(v, "off") == 0)
        *out = false;
    else
        return fail(err, cap, "--%s: expected on or off, not \"%s\"", name, v);
    return 0;
}

static int duration_opt(char **v, int o, int64_t min_ns, int64_t *out, char *err, size_t cap)
{
    if (parse_duration(v[o], out) || *out < min_ns)
        return fail(err, cap, "--%s: bad duration \"%s\"", defs[o].name, v[o]);
    return 0;
}

static int convert_probes(const struct strlist *l, struct agent_config *c, char *err,
                          size_t cap)
{
    if (!l->n)
        return 0;
    c->probes = calloc(l->n, sizeof *c->probes);
    if (!c->probes)
        return fail(err, cap, "out of memory");
    for (size_t i = 0; i < l->n; i++) {
        int rc = agent_probe_parse(l->v[i], &c->probes[i], err, cap);
        if (rc)
            return rc;
        c->n_probes++;
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->probes[j].name, c->probes[i].name) == 0)
                return fail(err, cap, "--probe: two probes named \"%s\"", c->probes[i].name);
    }
    return 0;
}

static int convert(char **v, const struct strlist *probes, struct agent_config *c, char *err,
                   size_t cap)
{
    int rc;
    if (v[O_NODE][0]) {
        c->node = strdup(v[O_NODE]);
    } else {
        char host[256];
        if (gethostname(host, sizeof host) != 0)
            return fail(err, cap, "--node not set and no host name");
        host[sizeof host - 1] = '\0';
        c->node = strdup(host);
    }
    if (strcmp(v[O_KMSG_MODE], "device") == 0)
        c->kmsg_file_mode = false;
    else if (strcmp(v[O_KMSG_MODE], "file") == 0)
        c->kmsg_file_mode = true;
    else
        return fail(err, cap, "--kmsg-mode: expected device or file, not \"%s\"", v[O_KMSG_MODE]);
    if ((rc = duration_opt(v, O_POLL_INTERVAL, GH_NS_PER_MS, &c->poll_interval_ns, err, cap)) ||
        (rc = duration_opt(v, O_DCGM_INTERVAL, GH_NS_PER_MS, &c->dcgm_interval_ns, err, cap)) ||
        (rc = duration_opt(v, O_TELEMETRY_STEP_INTERVAL, 0, &c->telemetry_step_interval_ns, err,
                           cap)) ||
        (rc = duration_opt(v, O_NIC_POLL_INTERVAL, GH_NS_PER_MS, &c->nic_poll_interval_ns, err,
                           cap)) ||
        (rc = duration_opt(v, O_HEALTH_INTERVAL, GH_NS_PER_MS, &c->health_interval_ns, err,
                           cap)) ||
        (rc = on_off(v[O_DCGM], "dcgm", &c->dcgm, err, cap)) ||
        (rc = on_off(v[O_INJECT_FOLLOW], "inject-follow", &c->inject_follow, err, cap)))
        return rc;
    if (parse_bytes(v[O_SPOOL_MAX_BYTES], &c->spool_max_bytes) || c->spool_max_bytes < 64 * 1024)
        return fail(err, cap, "--spool-max-bytes: expected at least 64Ki, not \"%s\"",
                    v[O_SPOOL_MAX_BYTES]);
    char *pend;
    errno = 0;
    unsigned long share = strtoul(v[O_SPOOL_TELEMETRY_SHARE], &pend, 10);
    if (*pend == '%')
        pend++;
    if (errno || pend == v[O_SPOOL_TELEMETRY_SHARE] || *pend || share < 1 || share > 50)
        return fail(err, cap, "--spool-telemetry-share: expected a percentage 1..50, not \"%s\"",
                    v[O_SPOOL_TELEMETRY_SHARE]);
    c->spool_telemetry_share = (unsigned)share;
    if ((rc = duration_opt(v, O_SPOOL_SYNC_INTERVAL, GH_NS_PER_MS, &c->spool_sync_ns, err, cap)))
        return rc;
    uint64_t br;
    if (parse_bytes(v[O_BATCH_RECORDS], &br) || br < 1 || br > 100000)
        return fail(err, cap, "--batch-records: expected 1..100000, not \"%s\"", v[O_BATCH_RECORDS]);
    c->batch_records = (size_t)br;
    if ((rc = duration_opt(v, O_BATCH_LINGER, GH_NS_PER_MS, &c->batch_linger_ns, err, cap)))
        return rc;
    c->log_level = gh_log_parse_level(v[O_LOG_LEVEL]);
    if (c->log_level < 0)
        return fail(err, cap, "--log-level: unknown level \"%s\"", v[O_LOG_LEVEL]);
    if (!v[O_SPOOL_DIR][0])
        return fail(err, cap, "--spool-dir is required");
    if (v[O_CONTROLLER][0] && !v[O_TOKEN_FILE][0])
        return fail(err, cap, "--controller needs --token-file");
    if (!v[O_KUBECONFIG][0])
        c->kube_mode = AGENT_KUBE_AUTO;
    else if (strcmp(v[O_KUBECONFIG], "off") == 0)
        c->kube_mode = AGENT_KUBE_OFF;
    else
        c->kube_mode = AGENT_KUBE_FILE;
    if (opt_path(v[O_KMSG], &c->kmsg) || opt_path(v[O_NVML_LIB], &c->nvml_lib) ||
        opt_path(v[O_DCGM_EXPORTER], &c->dcgm_exporter) ||
        opt_path(v[O_TELEMETRY_SOCKET], &c->telemetry_socket) ||
        opt_path(v[O_INJECT], &c->inject) || opt_path(v[O_IB_SYSFS_ROOT], &c->nic_root) ||
        opt_path(v[O_KUBECONFIG], &c->kubeconfig) ||
        opt_path(v[O_KUBE_CONTEXT], &c->kube_context) ||
        opt_path(v[O_CONTROLLER], &c->controller) || opt_path(v[O_TOKEN_FILE], &c->token_file) ||
        opt_path(v[O_CA_FILE], &c->ca_file) || opt_path(v[O_LISTEN], &c->listen) ||
        opt_path(v[O_BOOT_ID_FILE], &c->boot_id_path) ||
        !(c->spool_dir = strdup(v[O_SPOOL_DIR])) || !c->node)
        return fail(err, cap, "out of memory");
    static const int cmd_opts[GH_REQ__COUNT] = {O_RESET_GPU_CMD, O_REBOOT_CMD,
                                                O_DIAGNOSTICS_CMD};
    if ((rc = duration_opt(v, O_REQUEST_TIMEOUT, GH_NS_PER_MS, &c->request_timeout_ns, err, cap)))
        return rc;
    for (int i = 0; i <= GH_REQ__COUNT; i++) {
        int o = i < GH_REQ__COUNT ? cmd_opts[i] : O_VALIDATE_CMD;
        char **dst = i < GH_REQ__COUNT ? &c->request_cmd[i] : &c->validate_cmd;
        if (!v[o][0])
            continue;
        char **argv;
        struct gh_err e;
        if (gh_requests_parse_cmd(v[o], &argv, &e) != GH_OK)
            return fail(err, cap, "--%s: %s", defs[o].name, e.msg);
        gh_requests_argv_free(argv);
        if (!(*dst = strdup(v[o])))
            return fail(err, cap, "out of memory");
    }
    return convert_probes(probes, c, err, cap);
}

/* $GPUHEAL_PROBE: one probe per line. */
static int env_probes(const char *v, struct strlist *l, char *err, size_t cap)
{
    while (*v) {
        size_t len = strcspn(v, "\n");
        const char *s = v, *e = v + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (e > s && list_add(l, s, (size_t)(e - s)))
            return fail(err, cap, "$GPUHEAL_PROBE: more than %d probes (or out of memory)",
                        GH_PROBE_MAX_CHECKS);
        v += len;
        if (*v)
            v++;
    }
    return 0;
}

int agent_config_parse(int argc, char **argv, struct agent_config *cfg, char *err, size_t cap)
{
    char *vals[O__COUNT] = {0};
    struct strlist probes[3] = {{0}}; /* file, environment, flags */
    int rc = 0;
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < O__COUNT; i++)
        if (set(vals, i, defs[i].def, strlen(defs[i].def))) {
            rc = fail(err, cap, "out of memory");
            goto out;
        }

    /* Pass 1: --help, --version, --config. */
    const char *config = getenv("GPUHEAL_CONFIG");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help(stdout);
            rc = 1;
            goto out;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("gpuheal-agent %s\n", GH_VERSION);
            rc = 1;
            goto out;
        }
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            config = argv[i] + 9;
    }
    if (config && config[0] && (rc = load_file(config, vals, &probes[0], err, cap)))
        goto out;
    /* The environment: older names first, so that the current name wins. */
    for (size_t i = 0; i < N_ALIASES; i++) {
        char env[64];
        env_name(aliases[i].name, env, sizeof env);
        const char *v = getenv(env);
        if (v && set(vals, (int)aliases[i].opt, v, strlen(v))) {
            rc = fail(err, cap, "out of memory");
            goto out;
        }
    }
    for (int i = 0; i < O__COUNT; i++) {
        char env[64];
        env_name(defs[i].name, env, sizeof env);
        const char *v = getenv(env);
        if (!v)
            continue;
        if (i == O_PROBE) {
            if ((rc = env_probes(v, &probes[1], err, cap)))
                goto out;
        } else if (set(vals, i, v, strlen(v))) {
            rc = fail(err, cap, "out of memory");
            goto out;
        }
    }
    /* Pass 2: flags. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            rc = fail(err, cap, "unexpected argument \"%s\" (see --help)", a);
            goto out;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const char *val;
        if (nlen == 6 && strncmp(name, "config", 6) == 0) {
            if (!eq)
                i++;
            continue;
        }
        int k = find_opt(name, nlen);
        if (k < 0) {
            rc = fail(err, cap, "unknown option \"--%.*s\" (see --help)", (int)nlen, name);
            goto out;
        }
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            rc = fail(err, cap, "--%s needs a value", defs[k].name);
            goto out;
        }
        if (k == O_PROBE) {
            if (list_add(&probes[2], val, strlen(val))) {
                rc = fail(err, cap, "--probe: more than %d probes (or out of memory)",
                          GH_PROBE_MAX_CHECKS);
                goto out;
            }
        } else if (set(vals, k, val, strlen(val))) {
            rc = fail(err, cap, "out of memory");
            goto out;
        }
    }
    /* The highest layer that gave --probe at all replaces the lower ones. */
    int layer = probes[2].set ? 2 : probes[1].set ? 1 : 0;
    rc = convert(vals, &probes[layer], cfg, err, cap);
    if (rc)
        agent_config_free(cfg);
out:
    for (int i = 0; i < O__COUNT; i++)
        free(vals[i]);
    for (int i = 0; i < 3; i++)
        list_free(&probes[i]);
    return rc;
}
