/* main.c - gpuheal-controller: reads its settings (flags, then
 * GPUHEAL_* environment variables, then a config file), loads the
 * Kubernetes configuration (kubeconfig or in-cluster) and the policy, and
 * runs the controller until SIGTERM/SIGINT. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/file.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "common/version.h"
#include "control/controller.h"
#include "control/kube_signals.h"
#include "engine/policy.h"
#include "kube/kubeconfig.h"
#include "signal/signal_json.h"

#define CONFIG_MAX (256 * 1024)

/* Every setting: a flag --NAME, an environment variable GPUHEAL_NAME (upper
 * case, '-' as '_') and a config-file key NAME. */
static const struct setting {
    const char *name;
    bool boolean;
    const char *help;
} settings[] = {
    {"kubeconfig", false, "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)"},
    {"context", false, "kubeconfig context (default: current-context)"},
    {"listen", false, "ingest endpoint HOST:PORT, also /healthz and /metrics (0.0.0.0:8443)"},
    {"token-file", false,
     "operator bearer tokens for the ingest endpoint (gpuheal inject), "
     "one per line: they may report for any node"},
    {"agent-service-account", false,
     "NAMESPACE/NAME: agents authenticate with this "
     "ServiceAccount's bound token (TokenReview) and may "
     "report only for the node their pod runs on"},
    {"agent-token-audience", false, "audience the agents' tokens must carry (gpuheal)"},
    {"insecure-allow-anonymous", true, "accept signals without a token (development only)"},
    {"tls-cert", false, "PEM certificate for HTTPS on the ingest endpoint"},
    {"tls-key", false, "PEM key for HTTPS on the ingest endpoint"},
    {"db", false, "audit store: sqlite:PATH or postgres://... (sqlite:/var/lib/gpuheal/audit.db)"},
    {"policy", false, "recovery policy YAML (default: the built-in policy)"},
    {"reorder-window", false, "hold live signals this long to sort late arrivals (500ms)"},
    {"journal-retention", false,
     "keep accepted signals journalled this long for replay on "
     "start (the policy's detector windows, at least 1h; "
     "off: no journal, a 200 is not durable)"},
    {"ingest-max-body", false,
     "ingest request body limit in bytes, K/M/G or Ki/Mi/Gi "
     "suffix (8Mi; at most 1Gi): larger gets 413"},
    {"ingest-max-line", false,
     "ingest line length limit in bytes (64Ki, also the most): a "
     "longer line is rejected (422)"},
    {"ingest-max-lines", false,
     "lines in one ingest request (10000; at most 1000000): more "
     "gets 413"},
    {"ingest-max-connections", false, "ingest connections at once (1024; at most 65536)"},
    {"ingest-idle-timeout", false, "close an idle ingest connection after this (30s; 1s to 1h)"},
    {"ingest-header-timeout", false,
     "close a connection silent this long before its request "
     "headers are complete (5s; 1s to 1h)"},
    {"ingest-max-connections-per-client", false,
     "ingest connections from one client address "
     "(32; at most 65536)"},
    {"ingest-dedup-capacity", false,
     "signal ids remembered to drop duplicates (1048576, about "
     "24 MiB; at most 67108864)"},
    {"dry-run", true, "decide and record, never act"},
    {"require-approval", true, "act only on incidents approved with `gpuheal approve ID`"},
    {"max-unavailable", false,
     "nodes gpuheal may hold out of service: N or P% (unset: 10 nodes and 10%, the lower; a "
     "RecoveryPolicy's budgets.maxUnavailableNodes can only lower it: the chart's sets 5%)"},
    {"max-actions-per-hour", false, "actions in any hour (30; 0 = no limit)"},
    {"node-cooldown", false, "no new node action this soon after the last (30m)"},
    {"storm-nodes", false, "nodes blamed within --storm-window that pause isolations (5; 0 = off)"},
    {"storm-window", false, "storm breaker window (5m)"},
    {"storm-hold", false, "storm breaker stays open this long after the last blame (15m)"},
    {"taint-effect", false, "NoSchedule (default) or NoExecute"},
    {"in-place-timeout", false,
     "how long a job's pods may take to restart in place before the restart recreates the "
     "whole job (30s; 0s = never in place)"},
    {"taint-key", false,
     "the taint put on isolated nodes (gpuheal.io/unhealthy); agents must "
     "tolerate it"},
    {"node-conditions", false,
     "Node conditions other agents set that become signals: comma-"
     "separated types, or none (node-problem-detector's: " GH_NODE_CONDITIONS_DEFAULT ")"},
    {"drain-timeout", false, "give up on pods a PodDisruptionBudget keeps (60s)"},
    {"request-timeout", false,
     "record a reset_gpu/reboot_node/run_diagnostics request the node "
     "agent has not answered after this as timed out (1h)"},
    {"drain-concurrency", false, "evictions in flight while draining a node (8)"},
    {"drain-evictions-in-flight", false, "evictions in flight across all drains at once (64)"},
    {"identity", false, "this replica's name (default: hostname-pid)"},
    {"lease-namespace", false, "namespace of the leader Lease (gpuheal-system)"},
    {"lease-name", false, "name of the leader Lease (gpuheal-controller)"},
    {"lease-duration", false, "leader lease duration (15s)"},
    {"renew-deadline", false, "leader renew deadline (10s)"},
    {"retry-period", false, "leader retry period (2s)"},
    {"no-leader-election", true, "act without a Lease (a single replica)"},
    {"watch-namespace", false, "only pods and jobs of this namespace (default: all)"},
    {"node-selector", false, "only nodes with these labels (label selector; default: all)"},
    {"qps", false, "Kubernetes API requests per second per client (50)"},
    {"executor-workers", false, "threads acting on incidents; they share one --qps budget (8)"},
    {"log-level", false, "debug, info, warn or error (info)"},
    {"config", false, "a file of NAME = VALUE lines with any of these settings"},
};
#define N_SETTINGS (sizeof settings / sizeof settings[0])

struct values {
    const char *v[N_SETTINGS];
    char *owned[N_SETTINGS];
};

static int find(const char *name, size_t len)
{
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (strlen(settings[i].name) == len && strncmp(settings[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

static const char *get(const struct values *v, const char *name)
{
    int i = find(name, strlen(name));
    return i >= 0 ? v->v[i] : NULL;
}

static bool on(const struct values *v, const char *name)
{
    const char *s = get(v, name);
    return s && (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes"));
}

/* A taint key is a label key: [DNS-subdomain "/"] name (1-63 of [A-Za-z0-9._-],
 * alphanumeric at both ends); the prefix at most 253 of [a-z0-9.-]. */
static bool taint_key_ok(const char *k)
{
    const char *slash = strchr(k, '/');
    const char *name = slash ? slash + 1 : k;
    if (slash) {
        size_t pl = (size_t)(slash - k);
        if (pl == 0 || pl > 253 || strchr(name, '/'))
            return false;
        for (size_t i = 0; i < pl; i++)
            if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '-' ||
                  k[i] == '.'))
                return false;
        if (k[0] == '-' || k[0] == '.' || k[pl - 1] == '-' || k[pl - 1] == '.')
            return false;
    }
    size_t n = strlen(name);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '-' || c == '_' || c == '.') && i > 0 && i + 1 < n))
            return false;
    }
    return true;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuheal-controller [--NAME VALUE | --FLAG] ... | --help | --version\n\n");
    for (size_t i = 0; i < N_SETTINGS; i++)
        fprintf(f, "  --%-26s %s\n", settings[i].name, settings[i].help);
    fprintf(f, "\nEach setting may also come from the environment (GPUHEAL_DB, GPUHEAL_TOKEN_FILE,\n"
               "...) or a --config file (\"db = sqlite:/data/audit.db\"); flags win over the\n"
               "environment, which wins over the file.\n");
}

static void set_owned(struct values *v, int i, const char *s, size_t n)
{
    free(v->owned[i]);
    v->owned[i] = strndup(s, n);
    v->v[i] = v->owned[i];
}

/* NAME = VALUE or NAME: VALUE lines; '#' comments. */
static int read_config(const char *path, struct values *v, bool *given)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gpuheal-controller: --config %s: cannot open\n", path);
        return 2;
    }
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = line + strspn(line, " \t");
        s[strcspn(s, "\r\n")] = '\0';
        if (!*s || *s == '#')
            continue;
        size_t klen = strcspn(s, " \t=:");
        char *val = s + klen;
        val += strspn(val, " \t");
        if (*val != '=' && *val != ':') {
            fprintf(stderr, "%s:%d: expected NAME = VALUE\n", path, lineno);
            fclose(f);
            return 2;
        }
        val++;
        val += strspn(val, " \t");
        size_t vlen = strlen(val);
        while (vlen && (val[vlen - 1] == ' ' || val[vlen - 1] == '\t'))
            vlen--;
        if (vlen >= 2 && (val[0] == '"' || val[0] == '\'') && val[vlen - 1] == val[0]) {
            val++;
            vlen -= 2;
        }
        int i = find(s, klen);
        if (i < 0) {
            fprintf(stderr, "%s:%d: unknown setting \"%.*s\"\n", path, lineno, (int)klen, s);
            fclose(f);
            return 2;
        }
        if (!given[i])
            set_owned(v, i, val, vlen);
    }
    fclose(f);
    return 0;
}

static bool duration(const struct values *v, const char *name, int64_t *out)
{
    const char *s = get(v, name);
    if (!s)
        return true;
    if (!gh_policy_parse_duration(s, out) || *out < 0) {
        fprintf(stderr, "gpuheal-controller: --%s: \"%s\" is not a duration (500ms, 2s, 10m)\n",
                name, s);
        return false;
    }
    return true;
}

static bool integer(const struct values *v, const char *name, long *out)
{
    const char *s = get(v, name);
    if (!s)
        return true;
    char *end;
    long x = strtol(s, &end, 10);
    if (*end || end == s || x < 0) {
        fprintf(stderr, "gpuheal-controller: --%s: \"%s\" is not a count\n", name, s);
        return false;
    }
    *out = x;
    return true;
}

/* A positive size or count of setting name, at most max: *out unchanged
 * when not set. bytes: K, M, G (1000s) and Ki, Mi, Gi (1024s) suffixes. */
static bool size_setting(const struct values *v, const char *name, bool bytes, uint64_t max,
                         uint64_t *out)
{
    const char *s = get(v, name);
    if (!s)
        return true;
    static const struct {
        const char *suffix;
        uint64_t mul;
    } units[] = {{"", 1},       {"K", 1000},       {"M", 1000000},       {"G", 1000000000},
                 {"Ki", 1024},  {"Mi", 1024 * 1024}, {"Gi", 1024ull * 1024 * 1024}};
    char *end;
    errno = 0;
    unsigned long long x = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    uint64_t mul = 0;
    if (s[0] >= '0' && s[0] <= '9' && !errno)
        for (size_t i = 0; i < (bytes ? sizeof units / sizeof units[0] : 1); i++)
            if (strcmp(end, units[i].suffix) == 0)
                mul = units[i].mul;
    if (!mul) {
        fprintf(stderr, "gpuheal-controller: --%s: \"%s\" is not a %s\n", name, s,
                bytes ? "size (bytes, or with a K, M, G, Ki, Mi or Gi suffix)" : "count");
        return false;
    }
    if (x == 0) {
        fprintf(stderr, "gpuheal-controller: --%s: %s is not a positive %s\n", name, s,
                bytes ? "size" : "count");
        return false;
    }
    if (x > max / mul) {
        fprintf(stderr, "gpuheal-controller: --%s: %s is more than %llu\n", name, s,
                (unsigned long long)max);
        return false;
    }
    *out = x * mul;
    return true;
}

/* The ingest endpoint's limits (docs/controller.md, "Configuration"). */
static bool ingest_limits(const struct values *v, struct gh_controller_opts *o)
{
    uint64_t body = 0, line = 0, lines = 0, conns = 0, dedup = 0, per_client = 0;
    int64_t idle = 0, header = 0;
    if (!size_setting(v, "ingest-max-body", true, 1024ull * 1024 * 1024, &body) ||
        !size_setting(v, "ingest-max-line", true, GH_SIGNAL_LINE_MAX, &line) ||
        !size_setting(v, "ingest-max-lines", false, 1000000, &lines) ||
        !size_setting(v, "ingest-max-connections", false, 65536, &conns) ||
        !size_setting(v, "ingest-dedup-capacity", false, 64ull * 1024 * 1024, &dedup) ||
        !size_setting(v, "ingest-max-connections-per-client", false, 65536, &per_client) ||
        !duration(v, "ingest-idle-timeout", &idle) ||
        !duration(v, "ingest-header-timeout", &header))
        return false;
    if (get(v, "ingest-header-timeout") &&
        (header < GH_NS_PER_S || header > 3600 * GH_NS_PER_S)) {
        fprintf(stderr, "gpuheal-controller: --ingest-header-timeout: %s is not within 1s to 1h\n",
                get(v, "ingest-header-timeout"));
        return false;
    }
    if (get(v, "ingest-idle-timeout") && (idle < GH_NS_PER_S || idle > 3600 * GH_NS_PER_S)) {
        fprintf(stderr, "gpuheal-controller: --ingest-idle-timeout: %s is not within 1s to 1h\n",
                get(v, "ingest-idle-timeout"));
        return false;
    }
    o->ingest_body_max = (size_t)body;
    o->ingest_line_max = (size_t)line;
    o->ingest_max_lines = (size_t)lines;
    o->ingest_max_connections = (unsigned)conns;
    o->ingest_dedup_capacity = (size_t)dedup;
    o->ingest_idle_timeout_s = (unsigned)(idle / GH_NS_PER_S);
    o->ingest_header_timeout_s = (unsigned)(header / GH_NS_PER_S);
    o->ingest_max_per_client = (unsigned)per_client;
    return true;
}

static struct gh_policy *load_policy(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gpuheal-controller: --policy %s: cannot open\n", path);
        return NULL;
    }
    char *buf;
    size_t len;
    struct gh_err err = {{0}};
    int rc = gh_file_read_fd(fd, path, GH_POLICY_MAX_BYTES, &buf, &len, &err);
    close(fd);
    if (rc == GH_EIO) { /* a directory, an I/O error: not a short policy */
        fprintf(stderr, "gpuheal-controller: --policy %s\n", err.msg);
        return NULL;
    }
    if (rc) {
        fprintf(stderr, "gpuheal-controller: --policy %s: too large\n", path);
        return NULL;
    }
    struct gh_policy *p = NULL;
    struct gh_policy_diags d;
    gh_policy_parse(buf, len, &p, &d);
    free(buf);
    for (int i = 0; i < d.n; i++)
        if (d.d[i].error)
            fprintf(stderr, "%s:%d: error: %s\n", path, d.d[i].line, d.d[i].msg);
    return p;
}

int main(int argc, char **argv)
{
    struct values v;
    memset(&v, 0, sizeof v);
    bool given[N_SETTINGS] = {false};
    int status = 2;
    struct gh_policy *policy = NULL;
    struct gh_kube_config kc;
    memset(&kc, 0, sizeof kc);
    struct gh_controller *ctl = NULL;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            status = 0;
            goto out;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("gpuheal-controller %s\n", GH_VERSION);
            status = 0;
            goto out;
        }
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "gpuheal-controller: unexpected argument \"%s\"\n", a);
            usage(stderr);
            goto out;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        int k = find(a, eq ? (size_t)(eq - a) : strlen(a));
        if (k < 0) {
            fprintf(stderr, "gpuheal-controller: unknown option \"%s\"\n", argv[i]);
            usage(stderr);
            goto out;
        }
        if (eq) {
            v.v[k] = eq + 1;
        } else if (settings[k].boolean) {
            v.v[k] = "true";
        } else if (i + 1 < argc) {
            v.v[k] = argv[++i];
        } else {
            fprintf(stderr, "gpuheal-controller: --%s needs a value\n", settings[k].name);
            goto out;
        }
        given[k] = true;
    }
    /* the environment, where no flag was given */
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (given[i])
            continue;
        char env[64] = "GPUHEAL_";
        size_t u = strlen(env);
        for (const char *p = settings[i].name; *p && u + 1 < sizeof env; p++)
            env[u++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        env[u] = '\0';
        const char *e = getenv(env);
        if (e && *e) {
            v.v[i] = e;
            given[i] = true;
        }
    }
    if (get(&v, "config") && read_config(get(&v, "config"), &v, given))
        goto out;

    if (get(&v, "log-level")) {
        int lvl = gh_log_parse_level(get(&v, "log-level"));
        if (lvl < 0) {
            fprintf(stderr, "gpuheal-controller: --log-level: unknown level\n");
            goto out;
        }
        gh_log_set_level((enum gh_log_level)lvl);
    } else {
        gh_log_set_level(GH_LOG_INFO);
    }

    struct gh_controller_opts o;
    gh_controller_opts_default(&o);
    o.db_url = get(&v, "db") ? get(&v, "db") : "sqlite:/var/lib/gpuheal/audit.db";
    if (get(&v, "listen"))
        o.listen = get(&v, "listen");
    o.token_file = get(&v, "token-file");
    o.allow_anonymous = on(&v, "insecure-allow-anonymous");
    o.agent_service_account = get(&v, "agent-service-account");
    o.agent_audience = get(&v, "agent-token-audience");
    if (o.agent_service_account) {
        const char *sl = strchr(o.agent_service_account, '/');
        if (!sl || sl == o.agent_service_account || !sl[1] || strchr(sl + 1, '/')) {
            fprintf(stderr, "gpuheal-controller: --agent-service-account: \"%s\" is not "
                            "NAMESPACE/NAME\n", o.agent_service_account);
            goto out;
        }
    }
    o.tls_cert = get(&v, "tls-cert");
    o.tls_key = get(&v, "tls-key");
    o.guards.dry_run = on(&v, "dry-run");
    o.guards.approval = on(&v, "require-approval");
    const char *mu = get(&v, "max-unavailable");
    if (mu) {
        /* 0 is zero nodes, not "no cap"; the flag replaces both defaults */
        struct gh_err e;
        if (gh_guard_parse_budget(mu, &o.guards.max_isolated, &o.guards.max_isolated_pct, &e)) {
            fprintf(stderr, "gpuheal-controller: --max-unavailable: %s\n", e.msg);
            goto out;
        }
    }
    long rate = o.guards.max_actions_per_hour, storm = o.guards.storm_nodes, conc = 8, workers = 8;
    long dtotal = 64;
    if (!integer(&v, "max-actions-per-hour", &rate) || !integer(&v, "storm-nodes", &storm) ||
        !integer(&v, "drain-concurrency", &conc) || !integer(&v, "executor-workers", &workers) ||
        !integer(&v, "drain-evictions-in-flight", &dtotal))
        goto out;
    if (dtotal < 1 || dtotal > 4096) {
        fprintf(stderr, "gpuheal-controller: --drain-evictions-in-flight: %ld is not 1 to 4096\n",
                dtotal);
        goto out;
    }
    o.drain.total = (int)dtotal;
    if (workers < 1 || workers > 64) {
        fprintf(stderr, "gpuheal-controller: --executor-workers: 1 to 64\n");
        goto out;
    }
    o.executor_workers = (int)workers;
    o.guards.max_actions_per_hour = (int)rate;
    o.guards.storm_nodes = (int)storm;
    o.drain.concurrency = (int)conc;
    if (!duration(&v, "node-cooldown", &o.guards.node_cooldown_ns) ||
        !duration(&v, "storm-window", &o.guards.storm_window_ns) ||
        !duration(&v, "storm-hold", &o.guards.storm_hold_ns) ||
        !duration(&v, "drain-timeout", &o.drain.timeout_ns) ||
        !duration(&v, "in-place-timeout", &o.inplace_timeout_ns) ||
        !duration(&v, "request-timeout", &o.request_timeout_ns) ||
        !duration(&v, "reorder-window", &o.reorder_window_ns) ||
        !duration(&v, "lease-duration", &o.lease_ns) ||
        !duration(&v, "renew-deadline", &o.renew_ns) || !duration(&v, "retry-period", &o.retry_ns))
        goto out;
    const char *te = get(&v, "taint-effect");
    if (te && strcmp(te, "NoSchedule") && strcmp(te, "NoExecute")) {
        fprintf(stderr, "gpuheal-controller: --taint-effect: NoSchedule or NoExecute\n");
        goto out;
    }
    o.no_execute_taint = te && !strcmp(te, "NoExecute");
    if (get(&v, "in-place-timeout") && o.inplace_timeout_ns == 0)
        o.inplace_timeout_ns = -1; /* 0s: never in place */
    o.taint_key = get(&v, "taint-key");
    if (o.taint_key && !taint_key_ok(o.taint_key)) {
        fprintf(stderr, "gpuheal-controller: --taint-key \"%s\": a label key such as "
                        "gpuheal.io/unhealthy ([PREFIX/]NAME: NAME 1-63 letters, digits, '-', "
                        "'_', '.', starting and ending with a letter or digit; PREFIX a DNS "
                        "subdomain)\n", o.taint_key);
        goto out;
    }
    o.node_conditions = get(&v, "node-conditions");
    struct gh_node_conditions nconds;
    struct gh_err cerr = {{0}};
    if (gh_node_conditions_parse(o.node_conditions ? o.node_conditions : GH_NODE_CONDITIONS_DEFAULT,
                                 &nconds, &cerr)) {
        fprintf(stderr, "gpuheal-controller: %s\n", cerr.msg);
        goto out;
    }
    o.identity = get(&v, "identity");
    o.lease_namespace = get(&v, "lease-namespace");
    o.lease_name = get(&v, "lease-name");
    o.no_leader_election = on(&v, "no-leader-election");
    o.watch_namespace = get(&v, "watch-namespace");
    o.node_selector = get(&v, "node-selector");
    if (get(&v, "qps"))
        o.qps = strtod(get(&v, "qps"), NULL);
    const char *jr = get(&v, "journal-retention");
    if (jr && !strcmp(jr, "off"))
        o.journal_retention_ns = -1;
    else if (!duration(&v, "journal-retention", &o.journal_retention_ns))
        goto out;
    if (!ingest_limits(&v, &o))
        goto out;
    o.crash_after = getenv("GPUHEAL_TEST_CRASH_AFTER");

    if (get(&v, "policy") && !(policy = load_policy(get(&v, "policy")))) {
        status = 1;
        goto out;
    }
    o.policy = policy;

    struct gh_err err = {{0}};
    int rc = get(&v, "kubeconfig") ? gh_kubeconfig_load(get(&v, "kubeconfig"), get(&v, "context"),
                                                        &kc, &err)
                                   : gh_kubeconfig_load_default(&kc, &err);
    if (rc) {
        fprintf(stderr, "gpuheal-controller: kubernetes configuration: %s\n", err.msg);
        status = 1;
        goto out;
    }
    o.kube = &kc;

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    /* blocked before any thread starts, so that every thread inherits it */
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* room for --ingest-max-connections sockets (a container's soft limit
     * is often 1024): the soft file limit raised to the hard one */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &nofile);
    }
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        fprintf(stderr, "gpuheal-controller: signalfd failed\n");
        status = 1;
        goto out;
    }
    rc = gh_controller_new(&o, &ctl, &err);
    if (rc) {
        fprintf(stderr, "gpuheal-controller: %s\n", err.msg);
        close(sfd);
        status = 1;
        goto out;
    }
    /* the bound port on stdout, for scripts that asked for port 0 */
    printf("listening on port %d\n", gh_controller_port(ctl));
    fflush(stdout);
    rc = gh_controller_run(ctl, sfd, &err);
    if (rc)
        fprintf(stderr, "gpuheal-controller: %s\n", err.msg);
    status = rc ? 1 : 0;
    close(sfd);
out:
    gh_controller_free(ctl);
    gh_kube_config_clear(&kc);
    gh_policy_free(policy);
    for (size_t i = 0; i < N_SETTINGS; i++)
        free(v.owned[i]);
    return status;
}
