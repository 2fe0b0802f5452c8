/* config.c - gpuheal-agent's settings: one table of options, each settable
 * by flag, by $GPUHEAL_<NAME> and by a key=value config file, with --help
 * generated from the same table. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/gpuheal-agent/agent.h"
#include "common/log.h"

#ifndef GH_VERSION
#define GH_VERSION "0.1.0"
#endif

enum opt {
    O_NODE, O_KMSG, O_KMSG_MODE, O_NVML_LIB, O_POLL_INTERVAL, O_DCGM, O_DCGM_EXPORTER,
    O_TELEMETRY_SOCKET, O_INJECT, O_NIC_ROOT, O_CONTROLLER, O_TOKEN_FILE, O_CA_FILE,
    O_SPOOL_DIR, O_SPOOL_MAX_BYTES, O_SPOOL_SYNC_INTERVAL, O_BATCH_RECORDS, O_BATCH_LINGER,
    O_LISTEN, O_LOG_LEVEL, O_BOOT_ID_FILE, O__COUNT
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
        "persisted in SPOOL_DIR/kmsg.state); file: a text log followed like tail -F"},
    [O_NVML_LIB] = {"nvml-lib", "PATH|off", GH_NVML_DEFAULT_LIB,
        "NVML library to dlopen (needs the /dev/nvidia* device nodes)"},
    [O_POLL_INTERVAL] = {"poll-interval", "DURATION", "1s", "NVML poll period"},
    [O_DCGM] = {"dcgm", "on|off", "on",
        "DCGM health watches through libdcgm when it is installed"},
    [O_DCGM_EXPORTER] = {"dcgm-exporter", "URL", "",
        "also scrape an existing dcgm-exporter, e.g. http://127.0.0.1:9400/metrics"},
    [O_TELEMETRY_SOCKET] = {"telemetry-socket", "PATH|off", GH_TELEMETRY_DEFAULT_SOCKET,
        "Unix socket where training ranks write step/checkpoint lines"},
    [O_INJECT] = {"inject", "PATH", "",
        "file or FIFO of spec signal lines to ship, marked injected (tests, demos)"},
    [O_NIC_ROOT] = {"nic-root", "PATH|off", GH_NIC_DEFAULT_ROOT,
        "InfiniBand/RoCE sysfs root for port state and error counters"},
    [O_CONTROLLER] = {"controller", "URL", "",
        "controller base URL (POST URL/v1/signals); none: spool only"},
    [O_TOKEN_FILE] = {"token-file", "FILE", "",
        "bearer token for the controller (re-read for every request)"},
    [O_CA_FILE] = {"ca-file", "FILE", "", "PEM CA bundle for an https controller"},
    [O_SPOOL_DIR] = {"spool-dir", "DIR", "/var/lib/gpuheal/spool",
        "disk spool of unshipped signals (a hostPath survives pod restarts)"},
    [O_SPOOL_MAX_BYTES] = {"spool-max-bytes", "BYTES", "256Mi",
        "spool bound; when full the OLDEST signals are dropped and counted"},
    [O_SPOOL_SYNC_INTERVAL] = {"spool-sync-interval", "DURATION", "200ms",
        "fsync period of the spool (batched fsync)"},
    [O_BATCH_RECORDS] = {"batch-records", "N", "1000", "signals per POST at most"},
    [O_BATCH_LINGER] = {"batch-linger", "DURATION", "200ms",
        "longest wait for a batch to fill before it is sent"},
    [O_LISTEN] = {"listen", "HOST:PORT|off", ":9401", "where /healthz and /metrics are served"},
    [O_LOG_LEVEL] = {"log-level", "LEVEL", "info", "debug, info, warn, error or off"},
    [O_BOOT_ID_FILE] = {"boot-id-file", "PATH", GH_KMSG_SRC_DEFAULT_BOOT_ID,
        "the kernel's boot id (part of every signal id the agent gives)"},
};

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
        fprintf(f, "   [$%s]\n      ", env);
        for (const char *p = defs[i].help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fputs("      ", f);
        }
        fputc('\n', f);
    }
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

static int load_file(const char *path, char **vals, char *err, size_t cap)
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
        if (set(vals, i, v, (size_t)(e - v))) {
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

void agent_config_free(struct agent_config *c)
{
    free(c->node);
    free(c->kmsg);
    free(c->nvml_lib);
    free(c->dcgm_exporter);
    free(c->telemetry_socket);
    free(c->inject);
    free(c->nic_root);
    free(c->controller);
    free(c->token_file);
    free(c->ca_file);
    free(c->spool_dir);
    free(c->listen);
    free(c->boot_id_path);
    memset(c, 0, sizeof *c);
}

static int convert(char **v, struct agent_config *c, char *err, size_t cap)
{
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
    if (parse_duration(v[O_POLL_INTERVAL], &c->poll_interval_ns) || c->poll_interval_ns < GH_NS_PER_MS)
        return fail(err, cap, "--poll-interval: bad duration \"%s\"", v[O_POLL_INTERVAL]);
    if (strcmp(v[O_DCGM], "on") == 0)
        c->dcgm = true;
    else if (strcmp(v[O_DCGM], "off") == 0)
        c->dcgm = false;
    else
        return fail(err, cap, "--dcgm: expected on or off, not \"%s\"", v[O_DCGM]);
    if (parse_bytes(v[O_SPOOL_MAX_BYTES], &c->spool_max_bytes) || c->spool_max_bytes < 64 * 1024)
        return fail(err, cap, "--spool-max-bytes: expected at least 64Ki, not \"%s\"",
                    v[O_SPOOL_MAX_BYTES]);
    if (parse_duration(v[O_SPOOL_SYNC_INTERVAL], &c->spool_sync_ns) || c->spool_sync_ns < GH_NS_PER_MS)
        return fail(err, cap, "--spool-sync-interval: bad duration \"%s\"", v[O_SPOOL_SYNC_INTERVAL]);
    uint64_t br;
    if (parse_bytes(v[O_BATCH_RECORDS], &br) || br < 1 || br > 100000)
        return fail(err, cap, "--batch-records: expected 1..100000, not \"%s\"", v[O_BATCH_RECORDS]);
    c->batch_records = (size_t)br;
    if (parse_duration(v[O_BATCH_LINGER], &c->batch_linger_ns) || c->batch_linger_ns < GH_NS_PER_MS)
        return fail(err, cap, "--batch-linger: bad duration \"%s\"", v[O_BATCH_LINGER]);
    c->log_level = gh_log_parse_level(v[O_LOG_LEVEL]);
    if (c->log_level < 0)
        return fail(err, cap, "--log-level: unknown level \"%s\"", v[O_LOG_LEVEL]);
    if (!v[O_SPOOL_DIR][0])
        return fail(err, cap, "--spool-dir is required");
    if (v[O_CONTROLLER][0] && !v[O_TOKEN_FILE][0])
        return fail(err, cap, "--controller needs --token-file");
    if (opt_path(v[O_KMSG], &c->kmsg) || opt_path(v[O_NVML_LIB], &c->nvml_lib) ||
        opt_path(v[O_DCGM_EXPORTER], &c->dcgm_exporter) ||
        opt_path(v[O_TELEMETRY_SOCKET], &c->telemetry_socket) ||
        opt_path(v[O_INJECT], &c->inject) || opt_path(v[O_NIC_ROOT], &c->nic_root) ||
        opt_path(v[O_CONTROLLER], &c->controller) || opt_path(v[O_TOKEN_FILE], &c->token_file) ||
        opt_path(v[O_CA_FILE], &c->ca_file) || opt_path(v[O_LISTEN], &c->listen) ||
        opt_path(v[O_BOOT_ID_FILE], &c->boot_id_path) ||
        !(c->spool_dir = strdup(v[O_SPOOL_DIR])) || !c->node)
        return fail(err, cap, "out of memory");
    return 0;
}

int agent_config_parse(int argc, char **argv, struct agent_config *cfg, char *err, size_t cap)
{
    char *vals[O__COUNT] = {0};
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
    if (config && config[0] && (rc = load_file(config, vals, err, cap)))
        goto out;
    /* The environment. */
    for (int i = 0; i < O__COUNT; i++) {
        char env[64];
        env_name(defs[i].name, env, sizeof env);
        const char *v = getenv(env);
        if (v && set(vals, i, v, strlen(v))) {
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
        if (set(vals, k, val, strlen(val))) {
            rc = fail(err, cap, "out of memory");
            goto out;
        }
    }
    rc = convert(vals, cfg, err, cap);
    if (rc)
        agent_config_free(cfg);
out:
    for (int i = 0; i < O__COUNT; i++)
        free(vals[i]);
    return rc;
}
