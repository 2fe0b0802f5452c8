/* det_network.c - network faults: NIC/InfiniBand link flaps (transient:
 * retry in place), dead links (down past dead_after: move the job), error
 * counter bursts, collective timeouts with no GPU evidence, localised by
 * the NIC's node or by the ranks that stopped reporting first, and gray
 * links: a port whose error counters keep rising while the link stays up
 * (retraining: link_error_recovery, symbol errors) on a node whose ranks'
 * communication time stands out from the job's other nodes. That slowdown
 * is measured (each node's comm_ms and step_ms smoothed over its ranks'
 * reports, against the median and spread of the other nodes) and the
 * finding's severity follows whether it costs the job more over its
 * remaining run than a restart elsewhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/classify.h"
#include "engine/detector.h"
#include "engine/stats.h"
#include "common/strmap.h"

#define MAX_KEYS (1 << 20)
#define MAX_WATCH 4096
#define FLAPS 16
#define ERR_SAMPLES 32
/* After a boot a port is down until its link trains: its first down-then-up
 * within this long of node_ready is the link coming up, not a flap (the
 * default policy's boot grace for low-severity findings). */
#define BOOT_BRINGUP_NS (600 * GH_NS_PER_S)
/* Gray links: node communication averages smoothed over about this many of
 * the node's rank reports; judged once this many were seen; a node's comm
 * time this much above the other nodes' median (or 2z of their spread, if
 * more) is slow. */
#define COMM_ALPHA (1.0 / 128)
#define COMM_MIN_REPORTS 64
#define COMM_MIN_EXCESS 0.05
#define COMM_MAX_NODES 4096
#define GRAY_EVERY_NS (60 * GH_NS_PER_S) /* one gray-link check per counter per this */

struct port {
    int64_t down_since;              /* INT64_MIN: up */
    const struct gh_tl_entry *down_ev;
    bool dead_reported, watched;
    bool bringup;                    /* down since a boot, never seen up since */
    int64_t up_seen;                 /* the latest reading that said up */
    int n_flaps;
    int64_t flap_ts[FLAPS];
};

struct ectr {
    int64_t last;
    int64_t seen;    /* ts of the latest reading */
    int64_t gray_ts; /* when its rises last asked for a gray-link check */
    bool has_last;
    int n, head;
    int64_t ts[ERR_SAMPLES], d[ERR_SAMPLES];
};

struct cjob {
    bool pending;
    int64_t first_ts, deadline;
    size_t n_ev;
    const struct gh_tl_entry *ev[GH_FINDING_MAX_EVIDENCE];
    int n_fail;
};

/* A node's communication time in one job, smoothed over its ranks' reports. */
struct ncomm {
    const char *node; /* topology-owned */
    float comm, stepms;
    uint32_t n;
    bool reported;
};

/* Last step each rank reported, to see who stopped first; per node of the
 * job its smoothed communication time. */
struct jsteps {
    int64_t last_ts; /* the latest step */
    int cap;
    int64_t *step; /* -1: none */
    int64_t *ts;
    int16_t *acc;  /* per rank: index in nodes, -1 none */
    struct ncomm *nodes;
    int n_nodes, cap_nodes;
};

struct net {
    struct gh_strmap *ports;  /* "node/device/port" -> struct port * */
    struct gh_strmap *ectrs;  /* "node/device/port/counter" -> struct ectr * */
    struct gh_strmap *cjobs;  /* job -> struct cjob * */
    struct gh_strmap *steps;  /* job -> struct jsteps * */
    long watch[MAX_WATCH];    /* ports that are down (dead-link deadlines) */
    int n_watch;
    long pending[MAX_WATCH];  /* cjobs waiting for their hold */
    int n_pending;
    int64_t dead_ns;          /* settings.link_dead_ns, for next_deadline */
    const char *last_job;     /* steps: the previous signal's job (map key) ... */
    struct jsteps *last_js;   /* ... and its state */
};

static int net_create(struct gh_engine *e, void **state)
{
    struct net *n = calloc(1, sizeof *n);
    if (!n)
        return GH_ENOMEM;
    n->dead_ns = gh_ctx_settings(e)->link_dead_ns;
    n->ports = gh_strmap_new(MAX_KEYS);
    n->ectrs = gh_strmap_new(MAX_KEYS);
    n->cjobs = gh_strmap_new(MAX_KEYS);
    n->steps = gh_strmap_new(GH_TOPO_MAX_JOBS);
    *state = n;
    return n->ports && n->ectrs && n->cjobs && n->steps ? GH_OK : GH_ENOMEM;
}

static void net_destroy(void *state)
{
    struct net *n = state;
    if (n->ports)
        for (size_t i = 0; i < gh_strmap_count(n->ports); i++) {
            struct port *p = gh_strmap_value(n->ports, i);
            if (p)
                gh_tl_unref(p->down_ev);
            free(p);
        }
    if (n->ectrs)
        for (size_t i = 0; i < gh_strmap_count(n->ectrs); i++)
            free(gh_strmap_value(n->ectrs, i));
    if (n->cjobs)
        for (size_t i = 0; i < gh_strmap_count(n->cjobs); i++) {
            struct cjob *c = gh_strmap_value(n->cjobs, i);
            for (size_t k = 0; c && k < c->n_ev; k++)
                gh_tl_unref(c->ev[k]);
            free(c);
        }
    if (n->steps)
        for (size_t i = 0; i < gh_strmap_count(n->steps); i++) {
            struct jsteps *s = gh_strmap_value(n->steps, i);
            if (s) {
                free(s->step);
                free(s->ts);
                free(s->acc);
                free(s->nodes);
            }
            free(s);
        }
    gh_strmap_free(n->ports);
    gh_strmap_free(n->ectrs);
    gh_strmap_free(n->cjobs);
    gh_strmap_free(n->steps);
    free(n);
}

static int flaps_within(const struct port *p, int64_t now, int64_t window)
{
    int n = 0;
    for (int i = 0; i < p->n_flaps; i++)
        n += p->flap_ts[i] > now - window;
    return n;
}

static void port_name(const struct gh_signal *s, char *buf, size_t cap)
{
    if (s->has_port)
        gh_sfmt(buf, cap, "%s port %d on %s", s->device ? s->device : "NIC", s->port,
                 s->node ? s->node : "?");
    else
        gh_sfmt(buf, cap, "%s on %s", s->device ? s->device : "NIC", s->node ? s->node : "?");
}

static void report_nic(struct gh_engine *e, const struct gh_signal *s, enum gh_severity sev,
                       double metric, int64_t first_ts, const struct gh_tl_entry *a,
                       const struct gh_tl_entry *b, const char *what)
{
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_NETWORK;
    f.kind = GH_KIND_NIC;
    f.severity = sev;
    f.has_metric = true;
    f.metric = metric;
    f.node = s->node;
    f.first_ts = first_ts;
    gh_finding_add(&f, a);
    gh_finding_add(&f, b);
    gh_sfmt(f.what, sizeof f.what, "%s", what);
    gh_ctx_report(e, &f);
}



static void report_gray(struct gh_engine *e, const struct gh_tl_entry *ent, const char *job,
                        const struct ncomm *me, double excess, double thr, double slowdown,
                        int rises, int64_t first_rise)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    struct gh_restart_worth rw;
    gh_ctx_restart_worth(e, job, gh_topology_find_job(gh_ctx_topology(e), job), slowdown, &rw);
    double remaining = rw.remaining_s, loss = rw.loss_s, total = rw.cost_s;
    bool worth = rw.worth;
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_NETWORK;
    f.kind = GH_KIND_STEP;
    f.severity = worth ? GH_SEV_MEDIUM : GH_SEV_LOW;
    f.has_metric = true;
    f.metric = slowdown;
    /* measured here: slower, by this much (not a collective that timed out) */
    f.impact = GH_IMPACT_SLOWER;
    f.has_slowdown = true;
    f.slowdown = slowdown;
    f.node = me->node;
    f.job = job;
    f.first_ts = first_rise;
    f.anomaly_ts = gh_ctx_now(e) + 1; /* slow, not wrong: the latest checkpoint is good */
    const struct gh_tl_entry *v[16];
    size_t nv = gh_timeline_query(gh_ctx_timeline(e), GH_TL_NODE, me->node, -1,
                                  GH_KIND_BIT(GH_KIND_NIC), first_rise, ent->ts_ns, true, v, 16);
    const struct gh_signal *s = &ent->sig;
    for (size_t i = 0; i < nv; i++) {
        const struct gh_signal *o = &v[i]->sig;
        if (o->counter && s->counter && strcasecmp(o->counter, s->counter) == 0 &&
            o->port == s->port && (o->device == s->device || (o->device && s->device && strcmp(o->device, s->device) == 0)))
            gh_finding_add(&f, v[i]);
    }
    gh_finding_add(&f, ent);
    for (int g = 0; g < 8 && f.n_evidence < GH_FINDING_MAX_EVIDENCE; g++) {
        size_t k = gh_timeline_query(gh_ctx_timeline(e), GH_TL_GPU, me->node, g,
                                     GH_KIND_BIT(GH_KIND_STEP), INT64_MIN, INT64_MAX, true, v, 1);
        if (k && v[0]->sig.job && strcmp(v[0]->sig.job, job) == 0)
            gh_finding_add(&f, v[0]);
    }
    char name[300];
    port_name(s, name, sizeof name);
    gh_sfmt(
        f.what, sizeof f.what,
        "%s keeps counting errors with the link up (%s rose %d times in %llds); %s's ranks "
        "there communicate %.0f%% slower than on its other nodes (threshold %.0f%%): the job is "
        "%.1f%% slower, %.2f h lost over the remaining %.2f h %s a restart's %.2f h%s",
        name, s->counter, rises, (long long)(st->nic_window_ns / GH_NS_PER_S), job, excess * 100,
        thr * 100, slowdown * 100, loss / 3600, remaining / 3600,
        worth ? "exceed" : "do not exceed", total / 3600, rw.assumed);
    gh_ctx_report(e, &f);
}

/* A port of node keeps retraining (`rises` counter increases in the window,
 * the link up): for each job with ranks there, is their communication
 * measurably slower than on the job's other nodes? */
static void gray_check(struct net *n, struct gh_engine *e, const struct gh_tl_entry *ent, int rises,
                       int64_t first_rise)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    const char *node = ent->sig.node;
    for (size_t i = 0; i < gh_strmap_count(n->steps); i++) {
        struct jsteps *js = gh_strmap_value(n->steps, i);
        if (!js || js->n_nodes < 2)
            continue;
        int me = -1, others = 0;
        for (int a = 0; a < js->n_nodes; a++) {
            if (strcmp(js->nodes[a].node, node) == 0)
                me = a;
            else if (js->nodes[a].n >= COMM_MIN_REPORTS)
                others++;
        }
        if (me < 0 || js->nodes[me].reported || js->nodes[me].n < COMM_MIN_REPORTS || others < 1)
            continue;
        double *c = malloc(3 * (size_t)others * sizeof *c);
        if (!c) {
            gh_ctx_nomem(e);
            return;
        }
        double *sm = c + others;
        int k = 0;
        for (int a = 0; a < js->n_nodes; a++)
            if (a != me && js->nodes[a].n >= COMM_MIN_REPORTS) {
                c[k] = js->nodes[a].comm;
                sm[k++] = js->nodes[a].stepms;
            }
        double med = gh_stats_median(c, (size_t)k);
        double mad = k >= 3 ? gh_stats_mad(c, (size_t)k, med, sm + k) : 0;
        double step_med = gh_stats_median(sm, (size_t)k);
        free(c);
        if (!(med > 0) || !(step_med > 0))
            continue;
        double thr = 2 * st->straggler_z * 1.4826 * mad / med;
        if (thr < COMM_MIN_EXCESS)
            thr = COMM_MIN_EXCESS;
        double excess = js->nodes[me].comm / med - 1;
        if (excess < thr)
            continue;
        js->nodes[me].reported = true;
        report_gray(e, ent, gh_strmap_key(n->steps, i), &js->nodes[me], excess, thr,
                    (js->nodes[me].comm - med) / step_med, rises, first_rise);
    }
}

static void flap(struct net *n, struct gh_engine *e, struct port *p, const struct gh_tl_entry *ent,
                 int64_t down_ts, const struct gh_tl_entry *down_ev)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    if (p->n_flaps == FLAPS) {
        memmove(p->flap_ts, p->flap_ts + 1, (FLAPS - 1) * sizeof p->flap_ts[0]);
        p->n_flaps--;
    }
    p->flap_ts[p->n_flaps++] = ent->ts_ns;
    int nf = flaps_within(p, ent->ts_ns, st->nic_window_ns);
    char name[300], what[320];
    port_name(&ent->sig, name, sizeof name);
    if (down_ev)
        gh_sfmt(what, sizeof what,
                 "%s went down and came back after %.1fs (%d flap%s in %llds): a transient link flap",
                 name, (double)(ent->ts_ns - down_ts) / 1e9, nf, nf == 1 ? "" : "s",
                 (long long)(st->nic_window_ns / GH_NS_PER_S));
    else
        gh_sfmt(what, sizeof what, "%s link went down and recovered (%d flap%s in %llds)", name, nf,
                 nf == 1 ? "" : "s", (long long)(st->nic_window_ns / GH_NS_PER_S));
    gh_ctx_note_hw_alert(e, ent->sig.node, ent->ts_ns);
    report_nic(e, &ent->sig, GH_SEV_LOW, nf, down_ev ? down_ts : ent->ts_ns, down_ev, ent, what);
    (void)n;
}

static void watch(struct net *n, long idx)
{
    for (int i = 0; i < n->n_watch; i++)
        if (n->watch[i] == idx)
            return;
    if (n->n_watch < MAX_WATCH)
        n->watch[n->n_watch++] = idx;
}

static void on_nic(struct net *n, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    char key[400];
    gh_sfmt(key, sizeof key, "%s/%s/%d", s->node ? s->node : "", s->device ? s->device : "",
             s->has_port ? s->port : -1);
    long pidx;
    bool created;
    struct port *p = gh_ctx_value(e, n->ports, key, sizeof *p, &pidx, &created);
    if (!p)
        return;
    if (created) {
        p->down_since = INT64_MIN;
        p->up_seen = INT64_MIN;
    }
    bool booting = false; /* only a down (or a link_downed count) asks */
    if (s->state == GH_LINK_DOWN || (s->counter && strcasecmp(s->counter, "link_downed") == 0)) {
        int64_t boot = gh_ctx_boot_ts(e, s->node);
        booting = boot != INT64_MIN && ent->ts_ns >= boot && ent->ts_ns - boot < BOOT_BRINGUP_NS &&
                  p->up_seen < boot;
    }
    bool counted_flap = false;
    if (s->counter && s->has_count) {
        char ckey[500];
        gh_sfmt(ckey, sizeof ckey, "%s/%s", key, s->counter);
        struct ectr *c = gh_ctx_value(e, n->ectrs, ckey, sizeof *c, NULL, NULL);
        if (c) {
            int64_t d = c->has_last ? (s->count >= c->last ? s->count - c->last : s->count) : 0;
            c->last = s->count;
            c->seen = ent->ts_ns;
            c->has_last = true;
            if (d > 0) {
                int at = (c->head + c->n) % ERR_SAMPLES;
                if (c->n == ERR_SAMPLES) {
                    c->head = (c->head + 1) % ERR_SAMPLES;
                    c->n--;
                }
                c->ts[at] = ent->ts_ns;
                c->d[at] = d;
                c->n++;
                if (strcasecmp(s->counter, "link_downed") == 0) {
                    /* The link went down since the last reading. When it is
                     * up now (or the state is not said), that was a flap. */
                    if (s->state != GH_LINK_DOWN && p->down_since == INT64_MIN && !booting) {
                        flap(n, e, p, ent, ent->ts_ns, NULL);
                        counted_flap = true;
                    }
                } else {
                    int64_t sum = 0;
                    for (int i = 0; i < c->n; i++) {
                        int k = (c->head + i) % ERR_SAMPLES;
                        if (c->ts[k] > ent->ts_ns - st->nic_window_ns)
                            sum += c->d[k];
                    }
                    /* Errors on a port that is down are part of the outage:
                     * the flap or dead-link verdict decides it (one incident
                     * per root cause), not a burst of its own. */
                    bool down = s->state == GH_LINK_DOWN || p->down_since != INT64_MIN;
                    int rises = 0;
                    int64_t first_rise = ent->ts_ns;
                    for (int i = 0; i < c->n; i++) {
                        int k = (c->head + i) % ERR_SAMPLES;
                        if (c->ts[k] > ent->ts_ns - st->nic_window_ns) {
                            if (rises++ == 0)
                                first_rise = c->ts[k];
                        }
                    }
                    if (!down && rises >= 2 && sum < st->nic_error_burst &&
                        (c->gray_ts == 0 || ent->ts_ns - c->gray_ts >= GRAY_EVERY_NS)) {
                        c->gray_ts = ent->ts_ns;
                        gray_check(n, e, ent, rises, first_rise);
                    }
                    if (down && sum >= st->nic_error_burst)
                        gh_ctx_note_hw_alert(e, s->node, ent->ts_ns);
                    else if (sum >= st->nic_error_burst) {
                        char name[300], what[320];
                        port_name(s, name, sizeof name);
                        gh_sfmt(what, sizeof what, "%s counted %lld %s errors within %llds", name,
                                 (long long)sum, s->counter,
                                 (long long)(st->nic_window_ns / GH_NS_PER_S));
                        gh_ctx_note_hw_alert(e, s->node, ent->ts_ns);
                        report_nic(e, s, GH_SEV_MEDIUM, (double)sum, ent->ts_ns, ent, NULL, what);
                    }
                }
            }
        }
    }
    if (s->state == GH_LINK_DOWN && p->down_since == INT64_MIN) {
        p->down_since = ent->ts_ns;
        p->down_ev = gh_tl_ref(ent);
        p->dead_reported = false;
        p->bringup = booting;
        p->watched = true;
        watch(n, pidx);
        if (!booting) /* a link training after a boot explains no failure */
            gh_ctx_note_hw_alert(e, s->node, ent->ts_ns);
    } else if (s->state == GH_LINK_UP && p->down_since != INT64_MIN) {
        if (!p->dead_reported && !counted_flap && !p->bringup)
            flap(n, e, p, ent, p->down_since, p->down_ev);
        p->bringup = false;
        p->down_since = INT64_MIN;
        gh_tl_unref(p->down_ev);
        p->down_ev = NULL;
    }
    if (s->state == GH_LINK_UP)
        p->up_seen = ent->ts_ns;
}

/* ---- collective timeouts ---------------------------------------------- */

/* The rank's node accumulator: its cached one while the node is the same. */
static struct ncomm *comm_acc(struct jsteps *js, struct gh_engine *e, const struct gh_signal *s)
{
    int a = js->acc[s->rank];
    if (a >= 0 && a < js->n_nodes &&
        (js->nodes[a].node == s->node || strcmp(js->nodes[a].node, s->node) == 0))
        return &js->nodes[a];
    for (a = 0; a < js->n_nodes; a++)
        if (strcmp(js->nodes[a].node, s->node) == 0)
            break;
    if (a == js->n_nodes) {
        if (js->n_nodes >= COMM_MAX_NODES)
            return NULL;
        if (js->n_nodes == js->cap_nodes) {
            int nc = js->cap_nodes ? 2 * js->cap_nodes : 8;
            struct ncomm *v = realloc(js->nodes, (size_t)nc * sizeof *v);
            if (!v) {
                gh_ctx_nomem(e);
                return NULL;
            }
            js->nodes = v;
            js->cap_nodes = nc;
        }
        struct gh_topology *topo = gh_ctx_topology(e);
        long ni = gh_topology_add_node(topo, s->node);
        if (ni < 0) {
            if (gh_topology_node_count(topo) < GH_TOPO_MAX_NODES)
                gh_ctx_nomem(e); /* not full: out of memory */
            return NULL;
        }
        js->nodes[a] = (struct ncomm){.node = gh_topology_node_name(topo, (size_t)ni)};
        js->n_nodes++;
    }
    js->acc[s->rank] = (int16_t)a;
    return &js->nodes[a];
}

static void comm_feed(struct jsteps *js, struct gh_engine *e, const struct gh_signal *s)
{
    struct ncomm *c = comm_acc(js, e, s);
    if (!c)
        return;
    float w = c->n < 16 ? 1.0f / (float)(c->n + 1) : (float)COMM_ALPHA;
    c->comm += w * ((float)s->comm_ms - c->comm);
    c->stepms += w * ((float)s->step_ms - c->stepms);
    if (c->n < UINT32_MAX)
        c->n++;
}

static void on_step(struct net *n, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    if (!s->job || !s->has_rank || s->rank < 0 || s->rank >= GH_TOPO_MAX_RANKS)
        return;
    struct jsteps *js;
    if (n->last_job && strcmp(n->last_job, s->job) == 0) {
        js = n->last_js;
    } else {
        long idx;
        js = gh_ctx_value(e, n->steps, s->job, sizeof *js, &idx, NULL);
        if (!js)
            return;
        n->last_job = gh_strmap_key(n->steps, (size_t)idx);
        n->last_js = js;
    }
    if (s->rank >= js->cap) {
        int ncap = js->cap ? js->cap : 64;
        while (ncap <= s->rank)
            ncap *= 2;
        int64_t *st = realloc(js->step, (size_t)ncap * sizeof *st);
        if (!st) {
            gh_ctx_nomem(e);
            return;
        }
        js->step = st;
        int64_t *ts = realloc(js->ts, (size_t)ncap * sizeof *ts);
        if (!ts) {
            gh_ctx_nomem(e);
            return;
        }
        js->ts = ts;
        int16_t *acc = realloc(js->acc, (size_t)ncap * sizeof *acc);
        if (!acc) {
            gh_ctx_nomem(e);
            return;
        }
        js->acc = acc;
        for (int i = js->cap; i < ncap; i++) {
            js->step[i] = -1;
            js->ts[i] = INT64_MIN;
            js->acc[i] = -1;
        }
        js->cap = ncap;
    }
    if (s->has_comm_ms && s->comm_ms >= 0 && s->step_ms > 0 && s->comm_ms < s->step_ms &&
        isfinite(s->step_ms) && s->node)
        comm_feed(js, e, s);
    if (s->step >= js->step[s->rank]) {
        js->step[s->rank] = s->step;
        js->ts[s->rank] = ent->ts_ns;
    }
    if (ent->ts_ns > js->last_ts)
        js->last_ts = ent->ts_ns;
}

static bool hw_explains(struct gh_engine *e, const char *job, const char *node, int64_t since,
                        int64_t until, bool nic_too)
{
    int64_t t;
    (void)nic_too;
    /* A job nobody declared has an unknown node list: a collective that
     * timed out soon after a hardware incident anywhere is most likely its
     * consequence (some rank of the job sat on that node). */
    struct gh_topology *tp = gh_ctx_topology(e);
    long jj = job ? gh_topology_find_job(tp, job) : -1;
    int64_t hw = gh_ctx_last_hardware_incident(e);
    if ((jj < 0 || !gh_topology_job_declared(tp, (size_t)jj)) && hw != INT64_MIN && hw >= since &&
        hw <= until)
        return true;
    if (node && (gh_ctx_hw_alert(e, node, since, until, &t) || gh_ctx_node_episode(e, node, until, NULL)))
        return true;
    struct gh_topology *topo = gh_ctx_topology(e);
    long j = job ? gh_topology_find_job(topo, job) : -1;
    if (j < 0)
        return false;
    const unsigned *nodes;
    size_t nn = gh_topology_job_nodes(topo, (size_t)j, &nodes);
    for (size_t i = 0; i < nn; i++) {
        const char *name = gh_topology_node_name(topo, nodes[i]);
        if (gh_ctx_hw_alert(e, name, since, until, &t) || gh_ctx_node_episode(e, name, until, NULL))
            return true;
    }
    return false;
}

static void on_pod_failed(struct net *n, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    if (gh_classify_pod_failure(s) != GH_PF_COLLECTIVE)
        return;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    const char *job = s->job;
    if (job)
        gh_topology_note(gh_ctx_topology(e), job, s->node, -1, -1);
    else
        job = gh_ctx_job_on(e, s->node, -1);
    if (hw_explains(e, job, s->node, ent->ts_ns - st->hardware_lookback_ns, ent->ts_ns, true) ||
        (job && gh_ctx_job_episode(e, job, ent->ts_ns, NULL))) {
        gh_ctx_absorbed(e, ent);
        return;
    }
    char key[300];
    gh_sfmt(key, sizeof key, "%s%s", job ? "" : "node:", job ? job : s->node ? s->node : "?");
    long idx;
    struct cjob *c = gh_ctx_value(e, n->cjobs, key, sizeof *c, &idx, NULL);
    if (!c)
        return;
    if (!c->pending) {
        if (n->n_pending >= MAX_WATCH)
            return;
        c->pending = true;
        c->first_ts = ent->ts_ns;
        c->deadline = ent->ts_ns + st->hold_ns;
        n->pending[n->n_pending++] = idx;
    }
    c->n_fail++;
    if (c->n_ev < GH_FINDING_MAX_EVIDENCE)
        c->ev[c->n_ev++] = gh_tl_ref(ent);
}

static void decide_collective(struct net *n, struct gh_engine *e, const char *key, struct cjob *c,
                              int64_t now)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    bool surrogate = strncmp(key, "node:", 5) == 0;
    const char *job = surrogate ? NULL : key;
    const char *first_node = c->n_ev ? c->ev[0]->sig.node : NULL;
    if (hw_explains(e, job, first_node, c->first_ts - st->hardware_lookback_ns, now, true) ||
        (job && gh_ctx_job_episode(e, job, now, NULL))) {
        for (size_t i = 0; i < c->n_ev; i++)
            gh_ctx_absorbed(e, c->ev[i]);
        return;
    }
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_NETWORK;
    f.kind = GH_KIND_POD_FAILED;
    f.severity = GH_SEV_MEDIUM;
    f.job = job;
    f.first_ts = c->first_ts;
    for (size_t i = 0; i < c->n_ev; i++)
        gh_finding_add(&f, c->ev[i]);
    /* Who stopped first: the ranks whose last step is behind the others'. */
    char loc[200] = "";
    struct gh_topology *topo = gh_ctx_topology(e);
    long jid = job ? gh_topology_find_job(topo, job) : -1;
    struct jsteps *js = NULL;
    if (job) {
        long si = gh_strmap_find(n->steps, job);
        js = si >= 0 ? gh_strmap_value(n->steps, (size_t)si) : NULL;
    }
    if (js && jid >= 0) {
        int64_t max_step = -1;
        int reporting = 0;
        for (int r = 0; r < js->cap; r++)
            if (js->step[r] >= 0) {
                reporting++;
                if (js->step[r] > max_step)
                    max_step = js->step[r];
            }
        const char *lag_node = NULL;
        int lagging = 0, lag_rank = -1;
        bool one_node = true;
        for (int r = 0; r < js->cap; r++) {
            if (js->step[r] < 0 || js->step[r] >= max_step)
                continue;
            const char *nn = NULL;
            int g = -1;
            lagging++;
            if (lag_rank < 0 || js->step[r] < js->step[lag_rank])
                lag_rank = r;
            if (!gh_topology_rank_location(topo, (size_t)jid, r, &nn, &g) || !nn) {
                one_node = false;
                continue;
            }
            if (!lag_node)
                lag_node = nn;
            else if (strcmp(lag_node, nn) != 0)
                one_node = false;
        }
        if (lagging > 0 && one_node && lag_node && lagging * 2 <= reporting) {
            f.node = lag_node;
            gh_sfmt(loc, sizeof loc, "; rank %d on %s stopped reporting first (step %lld, others %lld)",
                     lag_rank, lag_node, (long long)js->step[lag_rank], (long long)max_step);
        }
    }
    const char *msg = c->n_ev && c->ev[0]->sig.msg ? c->ev[0]->sig.msg : "collective timeout";
    gh_sfmt(f.what, sizeof f.what,
             "%s: %d pod%s failed with a collective timeout (\"%.80s\") and no GPU or link evidence%s",
             job ? job : key, c->n_fail, c->n_fail == 1 ? "" : "s", msg, loc);
    gh_ctx_report(e, &f);
}

static void net_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct net *n = state;
    switch (ent->sig.kind) {
    case GH_KIND_NIC:
        on_nic(n, e, ent);
        break;
    case GH_KIND_STEP:
        on_step(n, e, ent);
        break;
    case GH_KIND_POD_FAILED:
        on_pod_failed(n, e, ent);
        break;
    default:
        break;
    }
}

static void net_on_deadline(void *state, struct gh_engine *e, int64_t now)
{
    struct net *n = state;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    int keep = 0;
    for (int i = 0; i < n->n_watch; i++) {
        struct port *p = gh_strmap_value(n->ports, (size_t)n->watch[i]);
        if (p->down_since == INT64_MIN) {
            p->watched = false;
            continue;
        }
        if (p->down_since + st->link_dead_ns > now) {
            n->watch[keep++] = n->watch[i];
            continue;
        }
        p->watched = false;
        if (p->dead_reported || !p->down_ev)
            continue;
        p->dead_reported = true;
        char name[300], what[320];
        port_name(&p->down_ev->sig, name, sizeof name);
        gh_sfmt(what, sizeof what, "%s has been down for %.0fs: a dead link, not a flap", name,
                 (double)(now - p->down_since) / 1e9);
        report_nic(e, &p->down_ev->sig, GH_SEV_HIGH, (double)(now - p->down_since) / 1e9,
                   p->down_since, p->down_ev, NULL, what);
    }
    n->n_watch = keep;
    keep = 0;
    for (int i = 0; i < n->n_pending; i++) {
        long idx = n->pending[i];
        struct cjob *c = gh_strmap_value(n->cjobs, (size_t)idx);
        if (c->deadline > now) {
            n->pending[keep++] = idx;
            continue;
        }
        decide_collective(n, e, gh_strmap_key(n->cjobs, (size_t)idx), c, now);
        for (size_t k = 0; k < c->n_ev; k++)
            gh_tl_unref(c->ev[k]);
        memset(c, 0, sizeof *c);
    }
    n->n_pending = keep;
}

static int64_t net_next_deadline(void *state)
{
    struct net *n = state;
    int64_t d = INT64_MAX;
    for (int i = 0; i < n->n_watch; i++) {
        const struct port *p = gh_strmap_value(n->ports, (size_t)n->watch[i]);
        if (p->down_since != INT64_MIN && !p->dead_reported && p->down_since + n->dead_ns < d)
            d = p->down_since + n->dead_ns;
    }
    for (int i = 0; i < n->n_pending; i++) {
        struct cjob *c = gh_strmap_value(n->cjobs, (size_t)n->pending[i]);
        if (c->deadline < d)
            d = c->deadline;
    }
    return d;
}

struct net_expire {
    struct gh_engine *e;
    int64_t now, window, before;
};

static bool drop_port(const char *key, void *value, void *ctx)
{
    const struct net_expire *x = ctx;
    struct port *p = value;
    (void)key;
    /* Up, unwatched and no flap left in the window: the default state. */
    if (p && (p->down_since != INT64_MIN || p->watched || p->down_ev ||
              (p->n_flaps && p->flap_ts[p->n_flaps - 1] > x->now - x->window)))
        return false;
    free(p);
    return true;
}

static bool drop_ectr(const char *key, void *value, void *ctx)
{
    const struct net_expire *x = ctx;
    struct ectr *c = value;
    (void)key;
    /* Not read for long: the next reading is a new baseline. */
    if (c && c->seen >= x->before)
        return false;
    free(c);
    return true;
}

static bool drop_cjob(const char *key, void *value, void *ctx)
{
    struct cjob *c = value;
    (void)key;
    (void)ctx;
    if (c && c->pending)
        return false; /* its index is in the pending list */
    for (size_t k = 0; c && k < c->n_ev; k++)
        gh_tl_unref(c->ev[k]);
    free(c);
    return true;
}

static bool drop_steps(const char *key, void *value, void *ctx)
{
    const struct net_expire *x = ctx;
    struct jsteps *s = value;
    if (s && (s->last_ts >= x->before || gh_ctx_job_seen(x->e, key) >= x->before))
        return false;
    if (s) {
        free(s->step);
        free(s->ts);
        free(s->acc);
        free(s->nodes);
    }
    free(s);
    return true;
}

static void net_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct net *n = state;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    int64_t idle = st->job_idle_ns;
    struct net_expire x = {e, now, st->nic_window_ns, INT64_MIN};
    gh_strmap_remove_if(n->ports, drop_port, &x);
    gh_strmap_remove_if(n->cjobs, drop_cjob, &x);
    if (idle <= 0)
        return;
    int64_t keep = idle > st->nic_window_ns ? idle : st->nic_window_ns;
    if (now < INT64_MIN + keep)
        return;
    x.before = now - keep;
    gh_strmap_remove_if(n->ectrs, drop_ectr, &x);
    x.before = now - idle;
    n->last_job = NULL;
    n->last_js = NULL;
    gh_strmap_remove_if(n->steps, drop_steps, &x);
}

static size_t net_memory(const void *state)
{
    const struct net *n = state;
    size_t b = sizeof *n + gh_strmap_memory(n->ports) + gh_strmap_memory(n->ectrs) +
               gh_strmap_memory(n->cjobs) + gh_strmap_memory(n->steps) +
               gh_strmap_live(n->ports) * sizeof(struct port) +
               gh_strmap_live(n->ectrs) * sizeof(struct ectr) +
               gh_strmap_live(n->cjobs) * sizeof(struct cjob);
    for (size_t i = 0; i < gh_strmap_count(n->steps); i++) {
        const struct jsteps *s = gh_strmap_value(n->steps, i);
        if (s)
            b += sizeof *s + (size_t)s->cap * (2 * sizeof(int64_t) + sizeof(int16_t)) +
                 (size_t)s->cap_nodes * sizeof(struct ncomm);
    }
    return b;
}

const struct gh_detector_ops gh_det_network = {
    .name = "network",
    .kinds = GH_KIND_BIT(GH_KIND_NIC) | GH_KIND_BIT(GH_KIND_STEP) | GH_KIND_BIT(GH_KIND_POD_FAILED),
    .create = net_create,
    .destroy = net_destroy,
    .on_signal = net_on_signal,
    .on_deadline = net_on_deadline,
    .next_deadline = net_next_deadline,
    .expire = net_expire,
    .memory = net_memory,
};
