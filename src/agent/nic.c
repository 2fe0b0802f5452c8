/* nic.c - the agent's InfiniBand/RoCE source: scans sysfs port state and
 * error counters, keeps per-port baselines, and emits nic signals when a
 * watched counter moves up or a port's state changes. */
#include "agent/nic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/worker.h"
#include "common/pci.h"

#define NAME_MAX_LEN 64

struct port {
    bool used, present, baselined;
    char device[NAME_MAX_LEN];
    int port;
    char pci[32];
    bool up;
    char state[32];
    uint64_t flaps;
    bool have[GH_NIC_MAX_COUNTERS];
    uint64_t val[GH_NIC_MAX_COUNTERS];
};

struct gh_nic_source {
    char *root, *node;
    char counters[GH_NIC_MAX_COUNTERS][NAME_MAX_LEN];
    size_t n_counters;
    int64_t poll_interval_ns;
    const struct gh_clock *clock;
    gh_nic_emit_fn emit;
    void *emit_ctx;

    pthread_mutex_t mu;     /* ports (vs gh_nic_source_ports) and stats */
    struct port ports[GH_NIC_MAX_PORTS];
    struct gh_nic_stats st;

    struct gh_worker *worker; /* polls every poll_interval_ns */
};

void gh_nic_opts_init(struct gh_nic_opts *o)
{
    memset(o, 0, sizeof *o);
}

static int parse_counters(struct gh_nic_source *src, const char *list, struct gh_err *err)
{
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n) {
            if (n >= NAME_MAX_LEN || memchr(p, '/', n) || (n <= 2 && p[0] == '.'))
                return gh_err_set(err, GH_EINVAL, "nic: bad counter name \"%.*s\"", (int)n, p);
            if (src->n_counters == GH_NIC_MAX_COUNTERS)
                return gh_err_set(err, GH_EINVAL, "nic: more than %d counters",
                                  GH_NIC_MAX_COUNTERS);
            memcpy(src->counters[src->n_counters], p, n);
            src->counters[src->n_counters][n] = '\0';
            src->n_counters++;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return GH_OK;
}

static void poll_run(void *arg, struct gh_worker *w);

int gh_nic_source_new(const struct gh_nic_opts *opts, struct gh_nic_source **out,
                      struct gh_err *err)
{
    struct gh_nic_source *src;
    int rc;

    *out = NULL;
    if (!opts->node || !opts->node[0] || !opts->emit)
        return gh_err_set(err, GH_EINVAL, "nic: node and emit are required");
    src = calloc(1, sizeof *src);
    if (!src)
        return gh_err_set(err, GH_ENOMEM, "nic: out of memory");
    pthread_mutex_init(&src->mu, NULL);
    src->poll_interval_ns = opts->poll_interval_ns > 0 ? opts->poll_interval_ns
                                                       : 5 * GH_NS_PER_S;
    src->clock = opts->clock ? opts->clock : gh_clock_real();
    src->emit = opts->emit;
    src->emit_ctx = opts->emit_ctx;
    src->root = strdup(opts->root ? opts->root : GH_NIC_DEFAULT_ROOT);
    src->node = strdup(opts->node);
    if (!src->root || !src->node) {
        rc = gh_err_set(err, GH_ENOMEM, "nic: out of memory");
        goto out;
    }
    if ((rc = parse_counters(src, opts->counters ? opts->counters : GH_NIC_DEFAULT_COUNTERS,
                             err)))
        goto out;
    struct gh_worker_opts wo = {.name = "nic",
                                .period_ns = src->poll_interval_ns,
                                .cadence = GH_WORKER_AFTER,
                                .run = poll_run,
                                .arg = src};
    if ((rc = gh_worker_new(&wo, &src->worker, err)))
        goto out;
    *out = src;
    return GH_OK;
out:
    gh_nic_source_free(src);
    return rc;
}

/* Reads a small sysfs file into buf (trailing whitespace removed). */
static bool read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return false;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    return true;
}

static bool parse_u64(const char *s, uint64_t *v)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *v = x;
    return true;
}

/* "4: ACTIVE" (or a bare "ACTIVE") is up; anything else is down. */
static bool state_is_up(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end != s && *end == ':')
        return v == 4;
    return strcmp(s, "ACTIVE") == 0;
}

static bool is_number(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

static void emit_nic(struct gh_nic_source *src, const struct port *p, const char *counter,
                     uint64_t count, const char *msg)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = gh_clock_now(src->clock);
    s.source = GH_SRC_HOST;
    s.kind = GH_KIND_NIC;
    s.has_count = true;
    s.count = count > INT64_MAX ? INT64_MAX : (int64_t)count;
    s.has_port = true;
    s.port = p->port;
    s.state = p->up ? GH_LINK_UP : GH_LINK_DOWN;
    if (gh_signal_set_str(&s.node, src->node, strlen(src->node)) ||
        gh_signal_set_str(&s.device, p->device, strlen(p->device)) ||
        gh_signal_set_str(&s.counter, counter, strlen(counter)) ||
        (p->pci[0] && gh_signal_set_str(&s.pci, p->pci, strlen(p->pci))) ||
        (msg && gh_signal_set_str(&s.msg, msg, strlen(msg)))) {
        gh_signal_clear(&s);
        return; /* out of memory: the next change is reported */
    }
    src->emit(src->emit_ctx, &s);
    pthread_mutex_lock(&src->mu);
    src->st.signals++;
    pthread_mutex_unlock(&src->mu);
    gh_signal_clear(&s);
}

static struct port *find_port(struct gh_nic_source *src, const char *dev, int port, bool *full)
{
    struct port *free_slot = NULL;
    for (size_t i = 0; i < GH_NIC_MAX_PORTS; i++) {
        struct port *p = &src->ports[i];
        if (p->used && p->port == port && strcmp(p->device, dev) == 0)
            return p;
        if (!p->used && !free_slot)
            free_slot = p;
    }
    if (!free_slot) {
        *full = true;
        return NULL;
    }
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = true;
    snprintf(free_slot->device, sizeof free_slot->device, "%s", dev);
    free_slot->port = port;
    return free_slot;
}

static void read_pci(struct gh_nic_source *src, const char *dev, char *out, size_t cap)
{
    char path[PATH_MAX], link[PATH_MAX];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/%s/device", src->root, dev);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return;
    link[n] = '\0';
    const char *base = strrchr(link, '/');
    base = base ? base + 1 : link;
    if (!gh_pci_canon(base, strlen(base), NULL, out, cap))
        out[0] = '\0';
}

/* Reads one port and emits what changed since the last poll. */
static void poll_port(struct gh_nic_source *src, const char *dev, int portno, bool *full)
{
    char path[PATH_MAX], buf[64], msg[256];
    bool have[GH_NIC_MAX_COUNTERS] = {false};
    uint64_t val[GH_NIC_MAX_COUNTERS] = {0};
    char state[32] = "";

    snprintf(path, sizeof path, "%s/%s/ports/%d/state", src->root, dev, portno);
    bool have_state = read_small(path, state, sizeof state);
    for (size_t i = 0; i < src->n_counters; i++) {
        snprintf(path, sizeof path, "%s/%s/ports/%d/counters/%s", src->root, dev, portno,
                 src->counters[i]);
        have[i] = read_small(path, buf, sizeof buf) && parse_u64(buf, &val[i]);
    }
    if (!have_state) {
        pthread_mutex_lock(&src->mu);
        src->st.read_errors++;
        pthread_mutex_unlock(&src->mu);
    }

    pthread_mutex_lock(&src->mu);
    struct port *p = find_port(src, dev, portno, full);
    pthread_mutex_unlock(&src->mu);
    if (!p)
        return;
    if (!p->pci[0])
        read_pci(src, dev, p->pci, sizeof p->pci);
    bool up = have_state ? state_is_up(state) : p->up;

    if (!p->baselined) {
        pthread_mutex_lock(&src->mu);
        p->baselined = true;
        p->present = true;
        p->up = up;
        snprintf(p->state, sizeof p->state, "%s", state);
        memcpy(p->have, have, sizeof have);
        memcpy(p->val, val, sizeof val);
        pthread_mutex_unlock(&src->mu);
        return;
    }

    /* Counters first, with the new state, so a link_downed that moved
     * carries "down". */
    bool state_changed = have_state && up != p->up;
    char old_state[32];
    snprintf(old_state, sizeof old_state, "%s", p->present ? p->state : "gone");
    pthread_mutex_lock(&src->mu);
    p->present = true;
    if (have_state) {
        if (p->up && !up)
            p->flaps++;
        p->up = up;
        snprintf(p->state, sizeof p->state, "%s", state);
    }
    pthread_mutex_unlock(&src->mu);
    for (size_t i = 0; i < src->n_counters; i++) {
        if (!have[i])
            continue;
        bool moved = p->have[i] && val[i] > p->val[i];
        uint64_t prev = p->val[i];
        pthread_mutex_lock(&src->mu);
        p->have[i] = true;
        p->val[i] = val[i];
        pthread_mutex_unlock(&src->mu);
        if (moved) {
            snprintf(msg, sizeof msg, "%s port %d: %s %llu -> %llu", dev, portno,
                     src->counters[i], (unsigned long long)prev, (unsigned long long)val[i]);
            emit_nic(src, p, src->counters[i], val[i], msg);
        }
    }
    if (state_changed) {
        snprintf(msg, sizeof msg, "%s port %d: %s -> %s", dev, portno, old_state, state);
        emit_nic(src, p, "link_state", p->flaps, msg);
    }
}

int gh_nic_source_poll_once(struct gh_nic_source *src, struct gh_err *err)
{
    bool full = false;
    char path[PATH_MAX];

    pthread_mutex_lock(&src->mu);
    src->st.polls++;
    bool seen[GH_NIC_MAX_PORTS] = {false};
    pthread_mutex_unlock(&src->mu);

    DIR *d = opendir(src->root);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.' || strlen(de->d_name) >= NAME_MAX_LEN)
                continue;
            snprintf(path, sizeof path, "%s/%s/ports", src->root, de->d_name);
            DIR *pd = opendir(path);
            if (!pd)
                continue;
            struct dirent *pe;
            while ((pe = readdir(pd))) {
                if (!is_number(pe->d_name) || strlen(pe->d_name) > 6)
                    continue;
                int portno = (int)strtol(pe->d_name, NULL, 10);
                poll_port(src, de->d_name, portno, &full);
                pthread_mutex_lock(&src->mu);
                for (size_t i = 0; i < GH_NIC_MAX_PORTS; i++)
                    if (src->ports[i].used && src->ports[i].port == portno &&
                        strcmp(src->ports[i].device, de->d_name) == 0)
                        seen[i] = true;
                pthread_mutex_unlock(&src->mu);
            }
            closedir(pd);
        }
        closedir(d);
    }

    /* Ports that vanished (driver reset, adapter gone). */
    for (size_t i = 0; i < GH_NIC_MAX_PORTS; i++) {
        struct port *p = &src->ports[i];
        if (!p->used || seen[i] || !p->present)
            continue;
        bool was_up = p->up;
        pthread_mutex_lock(&src->mu);
        p->present = false;
        if (was_up)
            p->flaps++;
        p->up = false;
        pthread_mutex_unlock(&src->mu);
        if (was_up && p->baselined) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s port %d: %s -> gone", p->device, p->port, p->state);
            emit_nic(src, p, "link_state", p->flaps, msg);
        }
    }
    if (full)
        return gh_err_set(err, GH_ELIMIT, "nic: more than %d ports; the rest are not watched",
                          GH_NIC_MAX_PORTS);
    return GH_OK;
}

static void poll_run(void *arg, struct gh_worker *w)
{
    (void)w;
    gh_nic_source_poll_once(arg, NULL);
}

int gh_nic_source_start(struct gh_nic_source *src, struct gh_err *err)
{
    return gh_worker_start(src->worker, err);
}

void gh_nic_source_stop(struct gh_nic_source *src)
{
    if (src)
        gh_worker_stop(src->worker);
}

size_t gh_nic_source_ports(struct gh_nic_source *src, struct gh_nic_port_info *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&src->mu);
    for (size_t i = 0; i < GH_NIC_MAX_PORTS && n < cap; i++) {
        const struct port *p = &src->ports[i];
        if (!p->used)
            continue;
        struct gh_nic_port_info *o = &out[n++];
        memset(o, 0, sizeof *o);
        snprintf(o->device, sizeof o->device, "%s", p->device);
        o->port = p->port;
        o->present = p->present;
        o->up = p->up;
        snprintf(o->state, sizeof o->state, "%s", p->state);
        o->flaps = p->flaps;
        for (size_t k = 0; k < src->n_counters; k++)
            if (p->have[k])
                o->errors += p->val[k];
    }
    pthread_mutex_unlock(&src->mu);
    return n;
}

void gh_nic_source_stats(struct gh_nic_source *src, struct gh_nic_stats *out)
{
    pthread_mutex_lock(&src->mu);
    *out = src->st;
    pthread_mutex_unlock(&src->mu);
}

void gh_nic_source_free(struct gh_nic_source *src)
{
    if (!src)
        return;
    gh_worker_free(src->worker); /* stops it first */
    pthread_mutex_destroy(&src->mu);
    free(src->root);
    free(src->node);
    free(src);
}
