/* sim.c - the simulation loop: cluster, jobs and failure processes; the
 * signals they emit fed to the real engine; its incidents turned into
 * simulated actions; and the accounting of where GPU-time goes.
 *
 * Time is seconds since the start of the run (the engine sees T0 + t). Nodes
 * and jobs are arrays indexed by number; events carry indices and a
 * generation number, so that a state change cancels the events scheduled for
 * the state it left. A job's progress between events is arithmetic
 * (advance): compute at 1/slowdown, a checkpoint stall every tau of compute. */
#include "sim/sim.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "sim/daly.h"
#include "sim/evq.h"
#include "sim/layout.h"
#include "sim/rng.h"

#define T0_NS 1767225600000000000LL /* 2026-01-01T00:00:00Z is simulated time 0 */
#define EPS_S 0.001                  /* a tick lands this long after what it waits for */
#define MAX_EVENTS ((size_t)1 << 22)
#define MAX_ACTS 65536               /* incidents decided but not yet acted on */
#define MAX_SLOW 8                   /* slow nodes reported per telemetry step */
#define MAX_SAMPLE 24                /* healthy nodes sampled per telemetry window */
#define CK_RING 4                    /* recent checkpoints remembered per job */
#define FINE_S 10.0                  /* after signals, tick every second this long ... */
#define COARSE_S 5.0                 /* ... then every 5 s ... */
#define HORIZON_S 300.0              /* ... until this long after the latest signal */
#define PROGRESS_S 300.0             /* every-step telemetry after a correlated signal [A] */

/* ---- model ------------------------------------------------------------ */

enum { N_FREE, N_BUSY, N_REPAIR, N_OUT };
#define F_LEMON 0x01u    /* a flapping node */
#define F_SDC 0x02u      /* a GPU that computes wrong results */
#define F_CORDON 0x04u   /* isolated or drained: leaves its job at the next restart */
#define F_NOTREADY 0x08u /* host down or in maintenance */
#define F_LINK 0x10u     /* an InfiniBand link is down */
#define C_CHECK 0x01u    /* corr: the misfiring check's condition is True on it */

/* Signals of a correlated process carry an id "sim-corr/CLASS/..." (spec
 * section 1: the emitter's unique id), so that an incident whose evidence
 * holds one is attributed to the process. */
#define CORR_ID "sim-corr/"

/* How a broken node's fault shows (again at each start on it). */
enum { FK_NONE, FK_XID, FK_ECC, FK_REMAP, FK_LINK };

struct node {
    int32_t job, pos, free_idx;
    uint32_t gen;      /* bumps when the node changes hands */
    uint8_t state, flags, broken, broken_cls, repair, kind;
    int8_t gpu;
    uint8_t corr;       /* C_* flags of correlated processes (not faults of its own) */
    uint8_t rails_down; /* rails whose leaf switch is down (bit per rail) */
    uint16_t driver;    /* driver version number (layout.h): rollouts raise it */
    int16_t code;      /* the XID of its fault */
    float slow;        /* compute slowdown, 1 = none */
    uint32_t slow_seq; /* names the current slow episode */
    int32_t link_downed, ecc;
    double fault_t;
};

enum { J_RUN, J_DOWN, J_RESTART, J_WAIT };

struct job {
    char name[GH_SIM_NAME_MAX];
    int slot, inst, n_nodes;
    int32_t *nodes;     /* per position; -1 while waiting for a node */
    int32_t *announced; /* the node the engine last saw at each position */
    double gpus;
    uint8_t state;
    uint32_t gen, done_gen, win_gen;
    /* progress (work in healthy compute seconds) */
    double work_need, seg_work, t_upd, stall_end, slow;
    long ck_k;          /* checkpoints so far: durable work = ck_k * tau */
    bool in_stall;
    int ck_n;
    double ck_t[CK_RING];
    long ck_kk[CK_RING];
    double ck_flushed;
    /* outages */
    double down_since;  /* < 0: not in an outage */
    int cls;            /* class of the current outage; -1 none */
    int backoff_n;
    long restore_k;     /* pending restart's checkpoint */
    double extra_s;     /* pending restart's in-place repair time */
    double corrupt_work;/* < 0: clean; else the work from which results are wrong */
    int corrupt_id;     /* names the current corruption, for the person who finds it */
    int32_t diverged;   /* the node whose replica diverged (its checksums differ); -1 none */
    /* every-step telemetry around a correlated process's signals */
    double prog_until; /* reports every step until then ... */
    uint32_t prog_gen; /* ... in the run of this generation */
    /* straggler telemetry window */
    bool win;
    int win_steps, n_sample;
    long win_last_step;
    int32_t sample[MAX_SAMPLE];
};

/* An incident waiting for the controller to act. */
struct act {
    bool used;
    int cls;             /* enum gh_class */
    int node, gpu, slot, inst;
    int n;
    uint8_t actions[GH_INCIDENT_MAX_ACTIONS];
    long ck_k;           /* -1: none named */
    int corr;            /* the correlated process (class) of a signal in its evidence; -1 none */
};

enum { EV_ARRIVAL, EV_EMIT, EV_TICK, EV_JOB, EV_NODE, EV_ACTION, EV_STEP, EV_CORR };
enum {
    JE_RESTART_DONE,
    JE_K8S,
    JE_NCCL,
    JE_EVICT,
    JE_DONE,
    JE_PLANNED,
    JE_SDC_CHECK,
    JE_HUMAN_SDC,
    JE_CK_COMPARE,
    JE_REPORT,
    JE_PROGRESS
};
enum { NE_REPAIR_DONE, NE_SLOW_END, NE_HUMAN, NE_HOST_BACK };
enum { EM_XID, EM_GPU_LOST, EM_ECC, EM_REMAP, EM_NIC_DOWN, EM_NIC_UP, EM_NOTREADY, EM_READY, EM_XID13 };
/* What a correlated process's event does to one node (EV_CORR's sub). */
enum { CE_LEAF_DOWN, CE_LEAF_UP, CE_ROLLOUT, CE_CHECK_TRUE, CE_CHECK_FALSE };

struct sim {
    const struct gh_sim_config *c;
    struct gh_rng rng;
    struct gh_rng ck_rng; /* the replicas an agreeing comparison shows: its own stream, so
                           * that comparing more often changes no fault */
    struct gh_rng loss_rng; /* the ranks and noise of the sampled step reports, and whether a
                             * corruption shows as a loss spike: streams of their own too */
    struct gh_rng corr_rng; /* the correlated processes: turning them on changes no fault */
    struct gh_evq *q;
    struct gh_engine *eng;
    struct gh_clock clock;
    FILE *trace;
    double now, end, tau, window_s;
    int s_max, G;
    double tick_batch, fine_until, busy_until, horizon_s;
    bool chain;
    int n_nodes, n_jobs, n_free, n_lemons;
    struct node *nodes;
    struct job *jobs;
    int32_t *free_list, *lemons;
    int n_leaf_groups, rails, drivers;  /* layout.h; drivers: versions installed so far */
    uint32_t corr_events;               /* correlated events so far (names their signals) */
    double rate_h[GH_SIM_CLASS__COUNT]; /* cluster-wide arrivals per second */
    struct act acts[MAX_ACTS];
    int act_hint;
    int rc;
    /* accounting, GPU-seconds */
    double waste[GH_SIM_W__COUNT], waste_cls[GH_SIM_CLASS__COUNT], productive;
    double waste_cb[GH_SIM_CLASS__COUNT][GH_SIM_W__COUNT];
    double interrupts[GH_SIM_CLASS__COUNT], mttr_sum;
    long mttr_n, isolations, false_iso, human_iso, human_rollbacks, incidents, signals, jobs_done,
        acts_dropped, false_corr, false_cls[GH_SIM_CLASS__COUNT];
};

static int64_t ns(double t) { return T0_NS + (int64_t)llround(t * 1e9); }

static void push(struct sim *s, double t, uint8_t type, uint8_t sub, int32_t a, int32_t b,
                 uint32_t gen)
{
    struct gh_ev e = {.t = t, .type = type, .sub = sub, .a = a, .b = b, .gen = gen};
    int rc = gh_evq_push(s->q, &e);
    if (rc != GH_OK && s->rc == GH_OK)
        s->rc = rc;
}

static void node_name(int n, char *buf, size_t cap) { snprintf(buf, cap, "node-%05d", n); }

static void trace(struct sim *s, const char *what, int node, int job, const char *detail)
{
    if (!s->trace)
        return;
    fprintf(s->trace, "{\"t\":%.3f,\"event\":\"%s\"", s->now, what);
    if (node >= 0)
        fprintf(s->trace, ",\"node\":\"node-%05d\"", node);
    if (job >= 0)
        fprintf(s->trace, ",\"job\":\"%s\"", s->jobs[job].name);
    if (detail)
        fprintf(s->trace, ",\"detail\":\"%s\"", detail);
    fputs("}\n", s->trace);
}

/* ---- signals ---------------------------------------------------------- */

static void setstr(struct sim *s, char **f, const char *v)
{
    if (gh_signal_set_str(f, v, strlen(v)) != GH_OK && s->rc == GH_OK)
        s->rc = GH_ENOMEM;
}

static struct gh_signal sig(struct sim *s, enum gh_kind k, enum gh_source src, int node, int gpu)
{
    struct gh_signal g;
    gh_signal_init(&g);
    g.kind = k;
    g.source = src;
    g.ts_ns = ns(s->now);
    g.gpu = gpu;
    if (node >= 0) {
        char name[32];
        node_name(node, name, sizeof name);
        setstr(s, &g.node, name);
    }
    return g;
}

/* Feeds g (consumed) to the engine at its own time. */
static void ingest_raw(struct sim *s, struct gh_signal *g)
{
    int rc = gh_engine_ingest_steal(s->eng, g, g->ts_ns, NULL);
    gh_signal_clear(g);
    if (rc == GH_ENOMEM && s->rc == GH_OK)
        s->rc = GH_ENOMEM;
    s->signals++;
}

/* Feeds g and makes sure the engine is ticked as a controller would: once
 * as soon as the reorder window has passed g, then every second for a while
 * and every few seconds until the detectors' deadlines after g (holds,
 * dead-link and checksum waits) have surely passed. */
static void ingest(struct sim *s, struct gh_signal *g)
{
    ingest_raw(s, g);
    if (s->tick_batch == s->now)
        return;
    s->tick_batch = s->now;
    double t = s->now + s->window_s + EPS_S;
    push(s, t, EV_TICK, 0, 0, 0, 0);
    if (t + FINE_S > s->fine_until)
        s->fine_until = t + FINE_S;
    if (t + s->horizon_s > s->busy_until)
        s->busy_until = t + s->horizon_s;
    if (!s->chain) {
        s->chain = true;
        push(s, t + 1, EV_TICK, 1, 0, 0, 0);
    }
}

static void emit_pod_failed(struct sim *s, const struct job *j, int pos, const char *reason,
                            int exit_code, const char *msg)
{
    int n = j->nodes[pos];
    struct gh_signal g = sig(s, GH_KIND_POD_FAILED, GH_SRC_KUBE, n, -1);
    char pod[GH_SIM_NAME_MAX + 16];
    const char *slash = strchr(j->name, '/');
    snprintf(pod, sizeof pod, "%s-w%d", slash ? slash + 1 : j->name, pos);
    setstr(s, &g.namespace_, "train");
    setstr(s, &g.pod, pod);
    setstr(s, &g.job, j->name);
    setstr(s, &g.reason, reason);
    g.has_exit_code = true;
    g.exit_code = exit_code;
    setstr(s, &g.msg, msg);
    ingest(s, &g);
}

/* One rank's step signal of job j: its step time and, when shorter, its
 * compute time (the rest is communication). */
static struct gh_signal step_signal(struct sim *s, const struct job *j, int pos, int gpu, long step,
                                    double step_ms, double compute_ms)
{
    struct gh_signal g = sig(s, GH_KIND_STEP, GH_SRC_TELEMETRY, j->nodes[pos], gpu);
    setstr(s, &g.job, j->name);
    g.has_rank = true;
    g.rank = pos * s->G + gpu;
    g.has_step = true;
    g.step = step;
    g.step_ms = step_ms;
    if (compute_ms < step_ms) {
        g.has_comm_ms = true;
        g.comm_ms = step_ms - compute_ms;
    }
    return g;
}

static void emit_step(struct sim *s, const struct job *j, int pos, int gpu, long step,
                      double step_ms, double compute_ms)
{
    struct gh_signal g = step_signal(s, j, pos, gpu, step, step_ms, compute_ms);
    ingest(s, &g);
}

/* Before a node-level signal from a node the engine has not seen in its
 * job: one step of that node's telemetry, from which the engine learns
 * where the job's ranks run (what the controller learns from the API). */
static void announce(struct sim *s, int n)
{
    struct node *nd = &s->nodes[n];
    if (nd->state != N_BUSY)
        return;
    struct job *j = &s->jobs[nd->job];
    if (j->announced[nd->pos] == n)
        return;
    j->announced[nd->pos] = n;
    long step = (long)(((double)j->ck_k * s->tau + j->seg_work) / s->c->step_s);
    emit_step(s, j, nd->pos, 0, step, s->c->step_s * 1000, s->c->step_s * 1000);
}

/* The signal of kind `what` about node n's GPU (or NIC) `gpu`, observed now. */
static void emit_node(struct sim *s, int n, int what, int gpu)
{
    struct node *nd = &s->nodes[n];
    announce(s, n);
    struct gh_signal g;
    char dev[16];
    switch (what) {
    case EM_XID:
    case EM_XID13:
        g = sig(s, GH_KIND_XID, GH_SRC_KMSG, n, gpu);
        g.code = what == EM_XID13 ? 13 : nd->code;
        setstr(s, &g.msg, "NVRM: Xid (simulated)");
        break;
    case EM_GPU_LOST: g = sig(s, GH_KIND_GPU_LOST, GH_SRC_NVML, n, gpu); break;
    case EM_ECC:
        g = sig(s, GH_KIND_ECC, GH_SRC_NVML, n, gpu);
        g.bits = GH_ECC_DOUBLE;
        g.is_volatile = true;
        g.has_count = true;
        g.count = ++nd->ecc;
        break;
    case EM_REMAP:
        g = sig(s, GH_KIND_ROW_REMAP, GH_SRC_NVML, n, gpu);
        g.failure = true;
        g.uncorrectable = 8;
        break;
    case EM_NIC_DOWN:
    case EM_NIC_UP:
        g = sig(s, GH_KIND_NIC, GH_SRC_HOST, n, -1);
        snprintf(dev, sizeof dev, "mlx5_%d", gpu >= 0 ? gpu : 0);
        setstr(s, &g.device, dev);
        g.has_port = true;
        g.port = 1;
        setstr(s, &g.counter, "link_downed");
        g.has_count = true;
        if (what == EM_NIC_DOWN)
            nd->link_downed++;
        g.count = nd->link_downed;
        g.state = what == EM_NIC_DOWN ? GH_LINK_DOWN : GH_LINK_UP;
        break;
    case EM_NOTREADY:
        g = sig(s, GH_KIND_NODE_NOT_READY, GH_SRC_KUBE, n, -1);
        break;
    default:
        g = sig(s, GH_KIND_NODE_READY, GH_SRC_KUBE, n, -1);
        break;
    }
    ingest(s, &g);
}

/* ---- job progress ----------------------------------------------------- */

static double work_now(const struct sim *s, const struct job *j)
{
    return (double)j->ck_k * s->tau + j->seg_work;
}

static void charge(struct sim *s, const struct job *j, int w, double gpu_s)
{
    s->waste[w] += gpu_s;
    if (j->cls >= 0 && w != GH_SIM_W_CHECKPOINT && w != GH_SIM_W_SLOWDOWN) {
        s->waste_cls[j->cls] += gpu_s;
        s->waste_cb[j->cls][w] += gpu_s;
    }
}

/* Moves job j's clock to t: progress and checkpoints while running, time
 * charged to the state otherwise. */
static void advance(struct sim *s, struct job *j, double t)
{
    if (!(t > j->t_upd))
        return;
    if (j->state != J_RUN) {
        static const int w[] = {[J_DOWN] = GH_SIM_W_DETECTION, [J_RESTART] = GH_SIM_W_RESTART,
                                [J_WAIT] = GH_SIM_W_WAITING};
        charge(s, j, w[j->state], (t - j->t_upd) * j->gpus);
        j->t_upd = t;
        return;
    }
    while (j->t_upd < t) {
        if (j->in_stall) {
            double e = j->stall_end < t ? j->stall_end : t;
            s->waste[GH_SIM_W_CHECKPOINT] += (e - j->t_upd) * j->gpus;
            j->t_upd = e;
            if (e < j->stall_end)
                break;
            j->in_stall = false;
            j->ck_k++;
            j->seg_work = 0;
            int at = j->ck_n < CK_RING ? j->ck_n++ : CK_RING - 1;
            if (at == CK_RING - 1 && j->ck_n == CK_RING) {
                memmove(j->ck_t, j->ck_t + 1, (CK_RING - 1) * sizeof j->ck_t[0]);
                memmove(j->ck_kk, j->ck_kk + 1, (CK_RING - 1) * sizeof j->ck_kk[0]);
            }
            j->ck_t[at] = e;
            j->ck_kk[at] = j->ck_k;
            continue;
        }
        double need = s->tau - j->seg_work, left = j->work_need - work_now(s, j);
        bool last = left <= need;
        if (last)
            need = left > 0 ? left : 0;
        double wall = need * j->slow;
        if (j->t_upd + wall <= t) {
            s->waste[GH_SIM_W_SLOWDOWN] += (wall - need) * j->gpus;
            j->seg_work += need;
            j->t_upd += wall;
            if (last) {
                j->t_upd = t; /* finished: JE_DONE takes it from here */
                break;
            }
            j->in_stall = true;
            j->stall_end = j->t_upd + s->c->ckpt_stall_s;
        } else {
            double dt = t - j->t_upd, dw = dt / j->slow;
            s->waste[GH_SIM_W_SLOWDOWN] += (dt - dw) * j->gpus;
            j->seg_work += dw;
            j->t_upd = t;
        }
    }
}

/* When job j (running, advanced to now) completes its work at its current speed. */
static double finish_time(const struct sim *s, const struct job *j)
{
    if (!isfinite(j->work_need))
        return INFINITY;
    double t = j->t_upd, ck = (double)j->ck_k * s->tau, seg = j->seg_work;
    if (j->in_stall) {
        t = j->stall_end;
        ck += s->tau;
        seg = 0;
    }
    double left = j->work_need - ck - seg, first = s->tau - seg;
    if (left <= first)
        return t + (left > 0 ? left : 0) * j->slow;
    t += first * j->slow + s->c->ckpt_stall_s;
    left -= first;
    double full = floor(left / s->tau);
    if (left - full * s->tau <= 1e-9 * s->tau)
        full -= 1;
    if (full < 0)
        full = 0;
    t += full * (s->tau * j->slow + s->c->ckpt_stall_s);
    return t + (left - full * s->tau) * j->slow;
}

static double job_slow(const struct sim *s, const struct job *j)
{
    double m = 1;
    for (int p = 0; p < j->n_nodes; p++)
        if (j->nodes[p] >= 0 && s->nodes[j->nodes[p]].slow > m)
            m = s->nodes[j->nodes[p]].slow;
    return m;
}

static void schedule_done(struct sim *s, struct job *j)
{
    j->done_gen++;
    double t = finish_time(s, j);
    if (t < s->end)
        push(s, t, EV_JOB, JE_DONE, j->slot, 0, j->done_gen);
}

/* The job's speed may have changed (a node became slow or recovered). */
static void respeed(struct sim *s, struct job *j)
{
    if (j->state != J_RUN)
        return;
    advance(s, j, s->now);
    j->slow = job_slow(s, j);
    schedule_done(s, j);
}

/* ---- nodes ------------------------------------------------------------ */

static bool node_healthy(const struct node *nd)
{
    return !nd->broken && !(nd->flags & (F_LEMON | F_SDC | F_NOTREADY | F_LINK)) && nd->slow <= 1.0f;
}

static void free_add(struct sim *s, int n)
{
    struct node *nd = &s->nodes[n];
    nd->state = N_FREE;
    nd->job = -1;
    nd->free_idx = s->n_free;
    s->free_list[s->n_free++] = n;
}

static void free_remove(struct sim *s, int n)
{
    struct node *nd = &s->nodes[n];
    int i = nd->free_idx, last = s->free_list[--s->n_free];
    s->free_list[i] = last;
    s->nodes[last].free_idx = i;
    nd->free_idx = -1;
}

static double fix_time(const struct sim *s, int level)
{
    switch (level) {
    case 0: return 0;
    case 1: return s->c->repair_reset_s;
    case 2: return s->c->repair_reboot_s;
    default: return s->c->repair_replace_s;
    }
}

static void go_repair(struct sim *s, int n)
{
    struct node *nd = &s->nodes[n];
    nd->state = N_REPAIR;
    nd->job = -1;
    nd->gen++;
    double d;
    if (nd->repair >= 4) {
        int need = nd->broken ? nd->broken : (nd->flags & (F_LEMON | F_SDC)) ? 3 : 0;
        d = s->c->repair_diag_s + fix_time(s, need);
    } else {
        d = fix_time(s, nd->repair);
    }
    push(s, s->now + d, EV_NODE, NE_REPAIR_DONE, n, 0, nd->gen);
}

static void wake_waiting(struct sim *s);

/* Node n leaves its job (at a restart, or when the job ends). */
static void node_leave(struct sim *s, int n)
{
    struct node *nd = &s->nodes[n];
    nd->job = -1;
    nd->gen++;
    if (nd->flags & F_CORDON)
        go_repair(s, n);
    else if (nd->flags & F_NOTREADY)
        nd->state = N_OUT;
    else
        free_add(s, n);
}

/* Isolates (or drains) node n for a fault of class cls (the incident's, as
 * sim_class_of gives it): counted, and sent to repair at `level` once it is
 * out of its job. A healthy node isolated for a correlated process was
 * taken out for a cause it shares, not its own. */
static void cordon(struct sim *s, int n, int level, bool human, int cls)
{
    struct node *nd = &s->nodes[n];
    if ((nd->flags & F_CORDON) || nd->state == N_REPAIR || nd->state == N_OUT)
        return;
    s->isolations++;
    if (node_healthy(nd)) {
        s->false_iso++;
        if (cls >= 0 && cls < GH_SIM_CLASS__COUNT)
            s->false_cls[cls]++;
        s->false_corr += cls >= GH_SIM_CORRELATED_FIRST && cls < GH_SIM_CLASS__COUNT;
    }
    s->human_iso += human;
    nd->flags |= F_CORDON;
    nd->repair = (uint8_t)level;
    trace(s, human ? "human_isolates" : "isolate", n, nd->job, node_healthy(nd) ? "healthy" : NULL);
    if (nd->state == N_FREE) {
        free_remove(s, n);
        go_repair(s, n);
    }
}

static void repair_done(struct sim *s, int n)
{
    struct node *nd = &s->nodes[n];
    int lv = nd->repair;
    if (lv >= 3) {
        nd->broken = 0;
        nd->flags &= (uint8_t)~(F_LEMON | F_SDC | F_LINK);
    } else if (nd->broken && nd->broken <= lv) {
        nd->broken = 0;
        nd->flags &= (uint8_t)~F_LINK;
    }
    if (!nd->broken) {
        nd->code = 0;
        nd->kind = FK_NONE;
    }
    if (lv >= 2) {
        nd->slow = 1;
        nd->slow_seq++;
    }
    nd->flags &= (uint8_t)~F_CORDON;
    nd->repair = 0;
    nd->gen++;
    trace(s, nd->broken ? "repaired_still_broken" : "repaired", n, -1, NULL);
    if (nd->flags & F_NOTREADY)
        nd->state = N_OUT;
    else
        free_add(s, n);
    wake_waiting(s);
}

/* ---- jobs: outages and restarts --------------------------------------- */

static void set_state(struct sim *s, struct job *j, int st)
{
    advance(s, j, s->now);
    j->state = (uint8_t)st;
    j->gen++;
    j->t_upd = s->now;
    if (st != J_RUN)
        j->win = false;
}

/* A fault (or a decision) stops job j. Returns true when it was running or
 * restarting (an interruption); work since its last checkpoint is lost. */
static bool interrupt(struct sim *s, struct job *j, int cls)
{
    advance(s, j, s->now);
    if (j->state == J_DOWN || j->state == J_WAIT)
        return false;
    if (j->state == J_RUN) {
        j->cls = cls;
        charge(s, j, GH_SIM_W_LOST_WORK, j->seg_work * j->gpus);
        j->seg_work = 0;
        j->in_stall = false;
        j->down_since = s->now;
    } else {
        j->cls = cls;
        if (j->down_since < 0)
            j->down_since = s->now;
    }
    s->interrupts[cls]++;
    trace(s, "interrupt", -1, j->slot, gh_sim_class_name((enum gh_sim_class)cls));
    set_state(s, j, J_DOWN);
    return true;
}

static bool must_leave(const struct node *nd)
{
    return (nd->flags & (F_CORDON | F_NOTREADY)) || nd->state == N_OUT;
}

/* Gives job j nodes for every empty or unusable position and starts the
 * restart; waits when the pool is empty. */
static void fill_and_go(struct sim *s, struct job *j)
{
    for (int p = 0; p < j->n_nodes; p++) {
        int n = j->nodes[p];
        if (n >= 0 && must_leave(&s->nodes[n])) {
            node_leave(s, n);
            j->nodes[p] = -1;
        }
        if (j->nodes[p] < 0 && s->n_free > 0) {
            int i = (int)gh_rng_below(&s->rng, (uint64_t)s->n_free), m = s->free_list[i];
            free_remove(s, m);
            struct node *nd = &s->nodes[m];
            nd->state = N_BUSY;
            nd->job = j->slot;
            nd->pos = p;
            nd->gen++;
            j->nodes[p] = m;
        }
    }
    for (int p = 0; p < j->n_nodes; p++)
        if (j->nodes[p] < 0) {
            if (j->state != J_WAIT)
                set_state(s, j, J_WAIT);
            return;
        }
    set_state(s, j, J_RESTART);
    /* An in-place reset or reboot runs while the job is rescheduled. */
    double d = s->c->restart_s > j->extra_s ? s->c->restart_s : j->extra_s;
    push(s, s->now + d, EV_JOB, JE_RESTART_DONE, j->slot, 0, j->gen);
    j->extra_s = 0;
}

/* Restarts job j from checkpoint k (< 0: its latest), in place except on
 * nodes that must leave. */
static void restart(struct sim *s, struct job *j, long k, double extra_s)
{
    advance(s, j, s->now);
    if (j->state == J_RUN)
        interrupt(s, j, j->cls >= 0 ? j->cls : GH_SIM_HANG);
    if (k >= 0 && k < j->ck_k) {
        charge(s, j, GH_SIM_W_LOST_WORK, (double)(j->ck_k - k) * s->tau * j->gpus);
        j->ck_k = k;
    }
    if (j->corrupt_work >= 0 && (double)j->ck_k * s->tau <= j->corrupt_work + 1e-6)
        j->corrupt_work = -1; /* resumed from before the corruption */
    j->seg_work = 0;
    j->in_stall = false;
    if (extra_s > j->extra_s)
        j->extra_s = extra_s;
    fill_and_go(s, j);
}

static void wake_waiting(struct sim *s)
{
    for (int i = 0; i < s->n_jobs && s->n_free > 0; i++)
        if (s->jobs[i].state == J_WAIT)
            fill_and_go(s, &s->jobs[i]);
}

static void k8s_restart_later(struct sim *s, struct job *j)
{
    double b = s->c->backoff_s * pow(2.0, j->backoff_n < 30 ? j->backoff_n : 30);
    if (b > s->c->backoff_max_s)
        b = s->c->backoff_max_s;
    j->backoff_n++;
    push(s, s->now + s->c->lat_kube_s + b, EV_JOB, JE_K8S, j->slot, 0, j->gen);
}

static void job_name(struct job *j)
{
    snprintf(j->name, sizeof j->name, "train/j%d-%d", j->slot, j->inst);
}

static long current_step(const struct sim *s, const struct job *j)
{
    return (long)(work_now(s, j) / s->c->step_s);
}

/* The training loss a healthy rank reports at step: a falling curve with 2%
 * noise between ranks and steps [A]. */
static double healthy_loss(struct gh_rng *r, long step)
{
    double l = 1.7 + 2.3 / sqrt(1.0 + (double)step / 2000.0);
    return l * (1.0 + 0.02 * gh_rng_normal(r));
}

/* One sample of job j's per-step telemetry at its current step: the step
 * time and loss of two fixed ranks (GPU 0 of positions spread over the job,
 * as a reporter that ships the loss of one rank per group), as the reporter
 * ships every step. When spike_node >= 0 its bad GPU's rank comes first,
 * its loss a spike (the signature of a harmful wrong result), with four
 * fixed ranks normal. Healthy reports ask the engine for no decision and go in
 * without ticks. */
static void report_steps(struct sim *s, struct job *j, int spike_node, struct gh_rng *r)
{
    if (j->n_nodes < 1 || s->G < 1)
        return;
    long step = current_step(s, j);
    double base = s->c->step_s * 1000, job_ms = base * j->slow;
    int m = 0, pos[5], gpu[5];
    if (spike_node >= 0) {
        pos[0] = s->nodes[spike_node].pos;
        gpu[0] = s->nodes[spike_node].gpu;
        m = 1;
    }
    int want = spike_node >= 0 ? 4 : 2; /* a spike is judged against the others of its step */
    for (int k = 0; k < want; k++) {
        int p = (int)((long)k * j->n_nodes / want);
        if (j->nodes[p] >= 0 && (m == 0 || pos[0] != p || gpu[0] != 0)) {
            pos[m] = p;
            gpu[m] = 0;
            m++;
        }
    }
    for (int k = 0; k < m; k++) {
        double ms = base * s->nodes[j->nodes[pos[k]]].slow;
        struct gh_signal g = step_signal(s, j, pos[k], gpu[k], step, job_ms > ms ? job_ms : ms, ms);
        g.has_loss = true;
        g.loss = healthy_loss(r, step) * (k == 0 && spike_node >= 0 ? 20.0 : 1.0);
        if (spike_node >= 0)
            ingest(s, &g);
        else
            ingest_raw(s, &g);
    }
}

/* A bad GPU starts corrupting job j's state: checksums disagree after a
 * silent period; a person notices after sdc_human_s if nothing else did. A
 * fraction sdc_spike of onsets show at once as a loss spike on its rank. */
static void sdc_onset(struct sim *s, struct job *j, int n)
{
    advance(s, j, s->now);
    double w = work_now(s, j);
    if (j->corrupt_work < 0) {
        j->corrupt_work = w;
        j->corrupt_id++;
        push(s, s->now + s->c->sdc_human_s, EV_JOB, JE_HUMAN_SDC, j->slot, j->inst,
             (uint32_t)j->corrupt_id);
    } else if (w < j->corrupt_work) {
        j->corrupt_work = w;
    }
    double silent = s->c->sdc_silent_s > 0 ? gh_rng_exp(&s->rng, 1.0 / s->c->sdc_silent_s) : 0;
    push(s, s->now + silent, EV_JOB, JE_SDC_CHECK, j->slot, n, j->gen);
    if (s->c->report_s > 0 && s->c->sdc_spike > 0 && gh_rng_unit(&s->loss_rng) < s->c->sdc_spike) {
        trace(s, "sdc_loss_spike", n, j->slot, NULL);
        report_steps(s, j, n, &s->loss_rng);
    }
}

static void window_start(struct sim *s, struct job *j);

static void restart_done(struct sim *s, struct job *j)
{
    advance(s, j, s->now);
    /* A start on a broken node fails at once: the fault shows again. */
    for (int p = 0; p < j->n_nodes; p++) {
        struct node *nd = &s->nodes[j->nodes[p]];
        if (!nd->broken)
            continue;
        int n = j->nodes[p];
        if (nd->kind == FK_XID || nd->kind == FK_ECC)
            emit_node(s, n, EM_XID, nd->gpu);
        if (nd->kind == FK_XID && nd->code == 79)
            emit_node(s, n, EM_GPU_LOST, nd->gpu);
        emit_pod_failed(s, j, p, "Error", 1,
                        nd->kind == FK_LINK
                            ? "RuntimeError: NCCL error: unhandled system error (ibv_modify_qp failed)"
                            : "RuntimeError: CUDA error: no CUDA-capable device is detected");
        j->cls = nd->broken_cls;
        if (j->down_since < 0)
            j->down_since = s->now;
        set_state(s, j, J_DOWN);
        trace(s, "start_failed", n, j->slot, NULL);
        k8s_restart_later(s, j);
        return;
    }
    set_state(s, j, J_RUN);
    j->in_stall = false;
    j->seg_work = 0;
    j->backoff_n = 0;
    if (j->down_since >= 0) {
        s->mttr_sum += s->now - j->down_since;
        s->mttr_n++;
        j->down_since = -1;
    }
    j->cls = -1;
    j->slow = job_slow(s, j);
    schedule_done(s, j);
    /* Every replica loaded the same checkpoint: they agree again, even
     * when what they loaded was already wrong. */
    j->diverged = -1;
    if (s->c->sdc_check_s > 0)
        push(s, s->now + s->c->sdc_check_s, EV_JOB, JE_CK_COMPARE, j->slot, 0, j->gen);
    if (s->c->report_s > 0)
        push(s, s->now + s->c->report_s, EV_JOB, JE_REPORT, j->slot, 0, j->gen);
    for (int p = 0; p < j->n_nodes; p++)
        if (s->nodes[j->nodes[p]].flags & F_SDC)
            sdc_onset(s, j, j->nodes[p]);
    if (j->slow > 1)
        window_start(s, j);
}

static void job_done(struct sim *s, struct job *j)
{
    advance(s, j, s->now);
    if (j->work_need - work_now(s, j) > 1e-6 * s->tau) {
        schedule_done(s, j); /* not yet (rounding): try again */
        return;
    }
    s->productive += j->work_need * j->gpus;
    s->jobs_done++;
    trace(s, "job_done", -1, j->slot, NULL);
    for (int p = 0; p < j->n_nodes; p++) {
        node_leave(s, j->nodes[p]);
        j->nodes[p] = -1;
        j->announced[p] = -1;
    }
    j->inst++;
    job_name(j);
    j->ck_k = 0;
    j->seg_work = 0;
    j->in_stall = false;
    j->ck_n = 0;
    j->corrupt_work = -1;
    j->cls = -1;
    j->down_since = -1;
    j->backoff_n = 0;
    j->state = J_DOWN; /* from here on a job start, charged as restart time */
    j->gen++;
    fill_and_go(s, j);
    wake_waiting(s);
}

/* ---- straggler telemetry ---------------------------------------------- */

static void pick_sample(struct sim *s, struct job *j, int want)
{
    if (want > MAX_SAMPLE)
        want = MAX_SAMPLE;
    for (int tries = 0; j->n_sample < want && tries < 8 * want; tries++) {
        int p = (int)gh_rng_below(&s->rng, (uint64_t)j->n_nodes);
        bool dup = s->nodes[j->nodes[p]].slow > 1;
        for (int i = 0; i < j->n_sample && !dup; i++)
            dup = j->sample[i] == p;
        if (!dup)
            j->sample[j->n_sample++] = p;
    }
}

static void window_start(struct sim *s, struct job *j)
{
    if (j->state != J_RUN || s->G < 1)
        return;
    j->win_steps = 0;
    if (j->win)
        return;
    j->win = true;
    j->win_gen++;
    j->n_sample = 0;
    j->win_last_step = -1;
    push(s, s->now, EV_STEP, 0, j->slot, 0, j->win_gen);
}

/* One step of telemetry: every rank of the slow nodes and of a sample of
 * healthy ones, compute time from each node's own speed, step time from the
 * slowest (the ranks wait for each other in collectives). */
static void window_step(struct sim *s, struct job *j)
{
    int slow[MAX_SLOW], n_slow = 0;
    for (int p = 0; p < j->n_nodes && n_slow < MAX_SLOW; p++)
        if (s->nodes[j->nodes[p]].slow > 1)
            slow[n_slow++] = p;
    if (n_slow == 0 || j->win_steps >= s->s_max || j->n_nodes < 3) {
        trace(s, "window_end", -1, j->slot, n_slow == 0 ? "none_slow" : "s_max");
        j->win = false;
        return;
    }
    advance(s, j, s->now);
    long step = current_step(s, j);
    double base = s->c->step_s * 1000, job_ms = base * j->slow;
    if (step > j->win_last_step) {
        j->win_last_step = step;
        pick_sample(s, j, 2 * n_slow + 2 < j->n_nodes - n_slow ? 2 * n_slow + 2 : j->n_nodes - n_slow);
        for (int i = 0; i < n_slow + j->n_sample; i++) {
            int p = i < n_slow ? slow[i] : j->sample[i - n_slow];
            if (i >= n_slow && s->nodes[j->nodes[p]].slow > 1)
                continue; /* became slow: reported with the slow ones */
            double f = s->nodes[j->nodes[p]].slow;
            for (int g = 0; g < s->G; g++) {
                double ms = base * f * (1 + s->c->step_jitter * gh_rng_normal(&s->rng));
                if (ms < 0.1 * base)
                    ms = 0.1 * base;
                emit_step(s, j, p, g, step, job_ms > ms ? job_ms : ms, ms);
            }
        }
        j->win_steps++;
    }
    push(s, s->now + s->c->step_s * j->slow, EV_STEP, 0, j->slot, 0, j->win_gen);
}

/* ---- faults ----------------------------------------------------------- */

struct code_w {
    int code;
    double w;
};

/* Which XID a GPU hard fault shows [A]: the Llama 3 rows (faulty GPU, SRAM,
 * GSP, thermal) have no published per-code split. */
static const struct code_w hard_codes[] = {
    {79, 0.35}, {46, 0.10}, {109, 0.05}, {158, 0.10}, {119, 0.15},
    {120, 0.10}, {62, 0.05}, {143, 0.05}, {169, 0.05},
};

static int draw_code(struct sim *s)
{
    double u = gh_rng_unit(&s->rng), acc = 0;
    for (size_t i = 0; i < sizeof hard_codes / sizeof hard_codes[0]; i++) {
        acc += hard_codes[i].w;
        if (u < acc)
            return hard_codes[i].code;
    }
    return 79;
}

/* What repair a fault needs: the least its code calls for (a GPU reset; a
 * node reboot for a GPU off the bus), or a replacement for the fraction that
 * a reset or reboot does not fix [A]. */
static int draw_need(struct sim *s, int least)
{
    return gh_rng_unit(&s->rng) < s->c->replace_fraction ? 3 : least;
}

/* The GPU or NIC is the fault's own, fixed now: a later fault on the node
 * (a second link flap, an SDC) draws another. */
static void emit_later(struct sim *s, int n, int what, double delay)
{
    push(s, s->now + delay, EV_EMIT, (uint8_t)what, n, s->nodes[n].gpu, 0);
}

/* A hardware fault that breaks node n until repaired: the job hangs (its
 * collectives wait for the broken rank), the node's agent reports it after
 * the source's latency, a person looks after human_s. */
static void hw_fault(struct sim *s, int n, int cls)
{
    struct node *nd = &s->nodes[n];
    if (nd->broken)
        return;
    const struct gh_sim_config *c = s->c;
    nd->gpu = (int8_t)gh_rng_below(&s->rng, (uint64_t)s->G);
    nd->broken_cls = (uint8_t)cls;
    nd->fault_t = s->now;
    if (cls == GH_SIM_GPU_HARD) {
        nd->code = (int16_t)draw_code(s);
        nd->kind = FK_XID;
        nd->broken = (uint8_t)draw_need(s, nd->code == 79 ? 2 : 1);
        emit_later(s, n, EM_XID, c->lat_kmsg_s);
        if (nd->code == 79)
            emit_later(s, n, EM_GPU_LOST, c->lat_nvml_s);
    } else if (cls == GH_SIM_HBM_ECC) {
        double u = gh_rng_unit(&s->rng);
        if (u < 0.6) { /* double-bit ECC: XID 48 and the volatile counter */
            nd->code = 48;
            nd->kind = FK_ECC;
            nd->broken = (uint8_t)draw_need(s, 1);
            emit_later(s, n, EM_XID, c->lat_kmsg_s);
            emit_later(s, n, EM_ECC, c->lat_nvml_s);
        } else if (u < 0.8) { /* uncontained */
            nd->code = 95;
            nd->kind = FK_XID;
            nd->broken = (uint8_t)draw_need(s, 1);
            emit_later(s, n, EM_XID, c->lat_kmsg_s);
        } else if (u < 0.9) { /* no spare rows left */
            nd->code = 64;
            nd->kind = FK_REMAP;
            nd->broken = 3;
            emit_later(s, n, EM_XID, c->lat_kmsg_s);
            emit_later(s, n, EM_REMAP, c->lat_nvml_s);
        } else { /* contained: a reset clears it */
            nd->code = 94;
            nd->kind = FK_XID;
            nd->broken = (uint8_t)draw_need(s, 1);
            emit_later(s, n, EM_XID, c->lat_kmsg_s);
        }
    } else { /* network, nic: a link down for good */
        nd->kind = FK_LINK;
        nd->code = 0;
        nd->flags |= F_LINK;
        nd->broken = (uint8_t)(cls == GH_SIM_NIC ? draw_need(s, 2) : 3);
        emit_later(s, n, EM_NIC_DOWN, cls == GH_SIM_NIC ? c->lat_nic_s : c->lat_link_s);
    }
    trace(s, gh_sim_class_name((enum gh_sim_class)cls), n, nd->job, NULL);
    push(s, s->now + c->human_s, EV_NODE, NE_HUMAN, n, 0, nd->gen);
    struct job *j = &s->jobs[nd->job];
    if (interrupt(s, j, cls))
        push(s, s->now + c->nccl_timeout_s, EV_JOB, JE_NCCL, j->slot, 0, j->gen);
}

static void corr_arrival(struct sim *s, int cls);

static void on_arrival(struct sim *s, int cls)
{
    if (cls >= GH_SIM_CORRELATED_FIRST) {
        corr_arrival(s, cls);
        return;
    }
    double rate = s->rate_h[cls];
    push(s, s->now + gh_rng_exp(&s->rng, rate), EV_ARRIVAL, (uint8_t)cls, 0, 0, 0);
    int n;
    if (cls == GH_SIM_FLAPPING)
        n = s->lemons[gh_rng_below(&s->rng, (uint64_t)s->n_lemons)];
    else
        n = (int)gh_rng_below(&s->rng, (uint64_t)s->n_nodes);
    struct node *nd = &s->nodes[n];
    if (nd->state != N_BUSY) /* thinning: only GPUs in jobs fail */
        return;
    struct job *j = &s->jobs[nd->job];
    const struct gh_sim_config *c = s->c;
    switch (cls) {
    case GH_SIM_GPU_HARD:
    case GH_SIM_HBM_ECC:
    case GH_SIM_NETWORK:
    case GH_SIM_NIC:
        hw_fault(s, n, cls);
        break;
    case GH_SIM_SDC:
        if (nd->flags & F_SDC)
            break;
        nd->flags |= F_SDC;
        nd->gpu = (int8_t)gh_rng_below(&s->rng, (uint64_t)s->G);
        trace(s, "sdc", n, j->slot, NULL);
        if (j->state == J_RUN)
            sdc_onset(s, j, n);
        break;
    case GH_SIM_HOST:
        if (nd->flags & F_NOTREADY)
            break;
        nd->flags |= F_NOTREADY;
        trace(s, "host", n, j->slot, NULL);
        emit_later(s, n, EM_NOTREADY, c->lat_notready_s);
        push(s, s->now + c->repair_host_s, EV_NODE, NE_HOST_BACK, n, 0, 0);
        if (interrupt(s, j, cls)) {
            push(s, s->now + c->lat_notready_s + c->pod_evict_s, EV_JOB, JE_EVICT, j->slot, 0, j->gen);
            push(s, s->now + c->nccl_timeout_s, EV_JOB, JE_NCCL, j->slot, 0, j->gen);
        }
        break;
    case GH_SIM_SOFTWARE:
        if (j->state != J_RUN)
            break;
        trace(s, "software", n, j->slot, NULL);
        emit_pod_failed(s, j, nd->pos, "Error", 1,
                        "RuntimeError: expected all tensors to have the same shape (user code)");
        interrupt(s, j, cls);
        k8s_restart_later(s, j);
        break;
    case GH_SIM_HANG:
        if (j->state != J_RUN)
            break;
        trace(s, "hang", n, j->slot, NULL);
        if (interrupt(s, j, cls))
            push(s, s->now + c->nccl_timeout_s, EV_JOB, JE_NCCL, j->slot, 0, j->gen);
        break;
    case GH_SIM_PLANNED: {
        if (j->state != J_RUN)
            break;
        advance(s, j, s->now);
        /* Drained at the next checkpoint. */
        double t = j->in_stall ? j->stall_end
                               : s->now + (s->tau - j->seg_work) * j->slow + c->ckpt_stall_s;
        push(s, t, EV_JOB, JE_PLANNED, j->slot, n, j->gen);
        break;
    }
    case GH_SIM_STRAGGLER: {
        if (nd->slow > 1)
            break;
        nd->slow = (float)gh_rng_loguniform(&s->rng, c->straggler_slow_min, c->straggler_slow_max);
        double d = gh_rng_loguniform(&s->rng, c->straggler_dur_min_s, c->straggler_dur_max_s);
        nd->slow_seq++;
        push(s, s->now + d, EV_NODE, NE_SLOW_END, n, (int32_t)nd->slow_seq, 0);
        trace(s, "straggler", n, j->slot, NULL);
        respeed(s, j);
        window_start(s, j);
        break;
    }
    case GH_SIM_FLAPPING:
        if (j->state != J_RUN)
            break;
        trace(s, "flapping", n, j->slot, NULL);
        nd->gpu = (int8_t)gh_rng_below(&s->rng, (uint64_t)s->G);
        if (gh_rng_unit(&s->rng) < 0.5)
            emit_later(s, n, EM_XID13, c->lat_kmsg_s);
        emit_pod_failed(s, j, nd->pos, "Error", 1,
                        "RuntimeError: CUDA error: an illegal memory access was encountered");
        interrupt(s, j, cls);
        k8s_restart_later(s, j);
        break;
    case GH_SIM_LINK_FLAP:
        if (nd->flags & F_LINK)
            break;
        nd->gpu = (int8_t)gh_rng_below(&s->rng, (uint64_t)s->G);
        emit_node(s, n, EM_NIC_DOWN, nd->gpu);
        emit_later(s, n, EM_NIC_UP, 1 + gh_rng_unit(&s->rng) * (c->flap_up_max_s - 1));
        break;
    default:
        break;
    }
}

/* ---- correlated processes --------------------------------------------- */

/* PCI bus of each GPU of a DGX H100, for the driver's lines. */
static const unsigned char pci_bus[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};

/* Whether node n's agent reports and its NICs are on the fabric: not while
 * it is in repair or out (host down, maintenance). */
static bool node_on(const struct node *nd) { return nd->state == N_FREE || nd->state == N_BUSY; }

/* Node n's labels after its driver changed (a rollout reached it). */
static void relabel(struct sim *s, int n)
{
    struct gh_sim_labels lb;
    char name[32];
    gh_sim_node_labels(s->c, n, s->nodes[n].driver, &lb);
    node_name(n, name, sizeof name);
    int rc = gh_engine_set_node_labels(s->eng, name, lb.keys, lb.values, lb.n);
    if (rc == GH_ENOMEM && s->rc == GH_OK)
        s->rc = rc;
}

/* A correlated signal about a node of job j: for PROGRESS_S after it the
 * job's sampled step reports come every step instead of every report_s,
 * as the reporter ships them (every rank, every step; the 60 s sample is
 * the simulator's shortcut for cost): the engine can see whether the job
 * still advances, which is what the signal did to it. On a stream of its
 * own, so that it changes no fault. */
static void progress_window(struct sim *s, struct job *j)
{
    if (j->state != J_RUN || s->c->report_s <= 0)
        return;
    bool going = j->prog_gen == j->gen && s->now < j->prog_until;
    j->prog_until = s->now + PROGRESS_S;
    if (going)
        return;
    j->prog_gen = j->gen;
    push(s, s->now + s->c->step_s * j->slow, EV_JOB, JE_PROGRESS, j->slot, 0, j->gen);
}

/* One correlated event's signal about node n (e: EV_CORR; b the rail or
 * GPU, gen the event's number). Its id marks it as the process's. */
static void on_corr(struct sim *s, const struct gh_ev *e)
{
    int n = e->a, b = e->b;
    struct node *nd = &s->nodes[n];
    struct gh_signal g;
    int cls;
    const char *what;
    switch (e->sub) {
    case CE_LEAF_DOWN:
    case CE_LEAF_UP: {
        /* The leaf's ports go down and come back whatever the node does;
         * a node off the fabric reports neither. */
        uint8_t bit = (uint8_t)(1u << b);
        bool down = e->sub == CE_LEAF_DOWN;
        if (down ? !node_on(nd) || (nd->rails_down & bit) : !(nd->rails_down & bit))
            return;
        nd->rails_down = down ? nd->rails_down | bit : nd->rails_down & (uint8_t)~bit;
        announce(s, n);
        g = sig(s, GH_KIND_NIC, GH_SRC_HOST, n, -1);
        char dev[16];
        snprintf(dev, sizeof dev, "mlx5_%d", b);
        setstr(s, &g.device, dev);
        g.has_port = true;
        g.port = 1;
        setstr(s, &g.counter, "link_downed");
        g.has_count = true;
        if (down)
            nd->link_downed++;
        g.count = nd->link_downed;
        g.state = down ? GH_LINK_DOWN : GH_LINK_UP;
        cls = GH_SIM_LEAF_REBOOT;
        what = down ? "leaf_link_down" : "leaf_link_up";
        break;
    }
    case CE_ROLLOUT: {
        /* The node runs the new driver; it says so in its labels, and in
         * the one line the new driver logs. */
        int drv = b / 64, gpu = b % 64;
        if (drv > nd->driver) {
            nd->driver = (uint16_t)drv;
            relabel(s, n);
        }
        if (!node_on(nd))
            return;
        announce(s, n);
        g = sig(s, GH_KIND_XID, GH_SRC_KMSG, n, gpu);
        g.code = 149;
        char msg[160];
        snprintf(msg, sizeof msg,
                 "NVRM: Xid (PCI:0000:%02x:00): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 01 "
                 "(0x00082226 0x00000001 0x00000000 0x00000000 0x00000000 0x00000000)",
                 pci_bus[gpu % 8]);
        setstr(s, &g.msg, msg);
        cls = GH_SIM_ROLLOUT;
        what = "rollout_line";
        break;
    }
    default: {
        bool on = e->sub == CE_CHECK_TRUE;
        if (on ? !node_on(nd) || (nd->corr & C_CHECK) : !(nd->corr & C_CHECK))
            return;
        nd->corr = on ? nd->corr | C_CHECK : nd->corr & (uint8_t)~C_CHECK;
        announce(s, n);
        g = sig(s, GH_KIND_NODE_CONDITION, GH_SRC_KUBE, n, -1);
        const char *cond = s->c->misfire_condition;
        bool kd = strcmp(cond, "KernelDeadlock") == 0; /* node-problem-detector's own words */
        setstr(s, &g.condition, cond);
        g.cond_status = on ? GH_COND_TRUE : GH_COND_FALSE;
        setstr(s, &g.reason,
               on ? (kd ? "DockerHung" : "CheckFailed")
                  : (kd ? "KernelHasNoDeadlock" : "CheckPassed"));
        if (on && kd)
            setstr(s, &g.msg, "task docker:7 blocked for more than 120 seconds.");
        cls = GH_SIM_CHECK_MISFIRE;
        what = on ? "check_true" : "check_false";
        break;
    }
    }
    char id[96];
    snprintf(id, sizeof id, CORR_ID "%s/%u/%d/%d/%d", gh_sim_class_name((enum gh_sim_class)cls),
             e->gen, n, e->sub, b);
    setstr(s, &g.id, id);
    if (s->trace) {
        /* the device (leaf) or GPU (rollout), and the event's number */
        char detail[48];
        if (e->sub <= CE_LEAF_UP)
            snprintf(detail, sizeof detail, "mlx5_%d/1 #%u", b, e->gen);
        else
            snprintf(detail, sizeof detail, "%d #%u", b % 64, e->gen);
        trace(s, what, n, nd->state == N_BUSY ? nd->job : -1, detail);
    }
    ingest(s, &g);
    if (nd->state == N_BUSY)
        progress_window(s, &s->jobs[nd->job]);
}

/* A correlated process starts (cls): it schedules one EV_CORR per node it
 * reaches, from a random stream of its own. None of it harms a job or
 * breaks a node; the engine's actions on it may. */
static void corr_arrival(struct sim *s, int cls)
{
    const struct gh_sim_config *c = s->c;
    struct gh_rng *r = &s->corr_rng;
    push(s, s->now + gh_rng_exp(r, s->rate_h[cls]), EV_ARRIVAL, (uint8_t)cls, 0, 0, 0);
    uint32_t ev = ++s->corr_events;
    char detail[GH_SIM_NAME_MAX + 16], ver[24];
    if (cls == GH_SIM_LEAF_REBOOT) {
        /* One rail of one scalable unit: every node's NIC on it goes down
         * within a second, and up again when the switch is back. */
        int su = (int)gh_rng_below(r, (uint64_t)s->n_leaf_groups);
        int rail = (int)gh_rng_below(r, (uint64_t)s->rails);
        double up = s->now + gh_rng_loguniform(r, c->leaf_down_min_s, c->leaf_down_max_s);
        snprintf(detail, sizeof detail, "su%03d-rail%d #%u", su, rail, ev);
        trace(s, "leaf_reboot", -1, -1, detail);
        int first = su * c->nodes_per_leaf;
        for (int n = first; n < first + c->nodes_per_leaf && n < s->n_nodes; n++) {
            push(s, s->now + gh_rng_unit(r), EV_CORR, CE_LEAF_DOWN, n, rail, ev);
            push(s, up + gh_rng_unit(r), EV_CORR, CE_LEAF_UP, n, rail, ev);
        }
    } else if (cls == GH_SIM_ROLLOUT) {
        /* The next driver reaches every node in random order. */
        int drv = ++s->drivers;
        gh_sim_driver_version(drv, ver, sizeof ver);
        snprintf(detail, sizeof detail, "%s #%u", ver, ev);
        trace(s, "rollout", -1, -1, detail);
        for (int n = 0; n < s->n_nodes; n++) {
            int gpu = (int)gh_rng_below(r, (uint64_t)s->G);
            push(s, s->now + gh_rng_unit(r) * c->rollout_s, EV_CORR, CE_ROLLOUT, n, drv * 64 + gpu,
                 ev);
        }
    } else {
        /* A check goes wrong on a share of the nodes within minutes; it is
         * fixed, and its condition cleared, hours later. */
        double fix = s->now + gh_rng_loguniform(r, c->misfire_fix_min_s, c->misfire_fix_max_s);
        snprintf(detail, sizeof detail, "%s #%u", c->misfire_condition, ev);
        trace(s, "check_misfire", -1, -1, detail);
        for (int n = 0; n < s->n_nodes; n++) {
            if (!(gh_rng_unit(r) < c->misfire_fraction))
                continue;
            push(s, s->now + gh_rng_unit(r) * c->misfire_spread_s, EV_CORR, CE_CHECK_TRUE, n, 0,
                 ev);
            push(s, fix + gh_rng_unit(r) * c->misfire_spread_s, EV_CORR, CE_CHECK_FALSE, n, 0, ev);
        }
    }
}

/* ---- the engine's decisions ------------------------------------------- */

static int parse_node(const char *name)
{
    if (!name || strncmp(name, "node-", 5) != 0)
        return -1;
    char *end;
    long v = strtol(name + 5, &end, 10);
    return *end == '\0' && v >= 0 && v < INT32_MAX ? (int)v : -1;
}

static bool parse_job(const char *name, int *slot, int *inst)
{
    if (!name || strncmp(name, "train/j", 7) != 0)
        return false;
    char *end;
    long a = strtol(name + 7, &end, 10);
    if (*end != '-')
        return false;
    long b = strtol(end + 1, &end, 10);
    if (*end != '\0' || a < 0 || a > INT32_MAX || b < 0 || b > INT32_MAX)
        return false;
    *slot = (int)a;
    *inst = (int)b;
    return true;
}

/* The correlated process whose signal is in inc's evidence (its class),
 * -1 when none is. */
static int corr_class_of(const struct gh_incident *inc)
{
    for (size_t k = 0; k < inc->n_evidence; k++) {
        const char *id = inc->evidence[k] ? inc->evidence[k]->sig.id : NULL;
        if (!id || strncmp(id, CORR_ID, sizeof CORR_ID - 1) != 0)
            continue;
        id += sizeof CORR_ID - 1;
        for (int c = GH_SIM_CORRELATED_FIRST; c < GH_SIM_CLASS__COUNT; c++) {
            const char *name = gh_sim_class_name((enum gh_sim_class)c);
            size_t l = strlen(name);
            if (strncmp(id, name, l) == 0 && id[l] == '/')
                return c;
        }
    }
    return -1;
}

static void on_incident(void *ctx, const struct gh_incident *inc)
{
    struct sim *s = ctx;
    s->incidents++;
    if (s->trace) {
        char *json = NULL;
        if (gh_incident_encode(inc, &json, NULL) == GH_OK)
            fprintf(s->trace, "{\"t\":%.3f,\"event\":\"incident\",\"incident\":%s}\n", s->now, json);
        free(json);
    }
    int i = -1;
    for (int k = 0; k < MAX_ACTS && i < 0; k++) {
        int x = (s->act_hint + k) % MAX_ACTS;
        if (!s->acts[x].used)
            i = x;
    }
    if (i < 0) {
        s->acts_dropped++;
        return;
    }
    s->act_hint = (i + 1) % MAX_ACTS;
    struct act *a = &s->acts[i];
    memset(a, 0, sizeof *a);
    a->used = true;
    a->cls = inc->cls;
    a->node = parse_node(inc->node);
    if (a->node >= s->n_nodes)
        a->node = -1;
    a->gpu = inc->gpu;
    a->slot = -1;
    if (!parse_job(inc->job, &a->slot, &a->inst) || a->slot >= s->n_jobs)
        a->slot = -1;
    a->n = inc->n_actions;
    for (int k = 0; k < inc->n_actions; k++)
        a->actions[k] = (uint8_t)inc->actions[k];
    a->ck_k = -1;
    a->corr = corr_class_of(inc);
    const char *p = inc->has_checkpoint && inc->checkpoint_path ? strstr(inc->checkpoint_path, "/ckpt-")
                                                                : NULL;
    if (p) {
        char *end;
        long k = strtol(p + 6, &end, 10);
        if (*end == '\0' && k >= 0)
            a->ck_k = k;
    }
    push(s, s->now + s->c->act_s, EV_ACTION, 0, i, 0, 0);
}

static int sim_class_of(const struct sim *s, const struct act *a)
{
    if (a->node >= 0 && s->nodes[a->node].broken)
        return s->nodes[a->node].broken_cls;
    if (a->corr >= 0)
        return a->corr;
    switch (a->cls) {
    case GH_CLASS_STRAGGLER: return GH_SIM_STRAGGLER;
    case GH_CLASS_SILENT_DATA_CORRUPTION: return GH_SIM_SDC;
    case GH_CLASS_FLAPPING_NODE: return GH_SIM_FLAPPING;
    case GH_CLASS_GPU_MEMORY: return GH_SIM_HBM_ECC;
    case GH_CLASS_NETWORK: return GH_SIM_NETWORK;
    case GH_CLASS_APPLICATION: return GH_SIM_SOFTWARE;
    case GH_CLASS_UNKNOWN: return GH_SIM_HANG;
    default: return GH_SIM_GPU_HARD;
    }
}

/* The controller carries out an incident's actions. */
static void on_action(struct sim *s, struct act *a)
{
    bool iso = false, drain = false, rst = false, retry = false;
    int level = 0;
    for (int i = 0; i < a->n; i++) {
        switch (a->actions[i]) {
        case GH_ACT_ISOLATE_NODE: iso = true; break;
        case GH_ACT_DRAIN_NODE: drain = true; break;
        case GH_ACT_RESTART_FROM_CHECKPOINT: rst = true; break;
        case GH_ACT_RETRY_IN_PLACE: retry = true; break;
        case GH_ACT_RESET_GPU: level = level > 1 ? level : 1; break;
        case GH_ACT_REBOOT_NODE: level = level > 2 ? level : 2; break;
        case GH_ACT_REPLACE_NODE: level = level > 3 ? level : 3; break;
        case GH_ACT_RUN_DIAGNOSTICS: level = 4; break;
        default: break;
        }
    }
    struct job *j = NULL;
    if (a->slot >= 0 && s->jobs[a->slot].inst == a->inst)
        j = &s->jobs[a->slot];
    int cls = sim_class_of(s, a);
    if (a->node >= 0 && (iso || drain))
        cordon(s, a->node, level ? level : 4, false, cls);
    /* A reset or reboot without isolation happens in place, during the restart. */
    double extra = 0;
    if (a->node >= 0 && !iso && !drain && (level == 1 || level == 2) && j &&
        s->nodes[a->node].job == j->slot && (rst || retry)) {
        struct node *nd = &s->nodes[a->node];
        extra = fix_time(s, level);
        if (nd->broken && nd->broken <= level) {
            nd->broken = 0;
            nd->kind = FK_NONE;
            nd->flags &= (uint8_t)~F_LINK;
        }
        if (level >= 2)
            nd->slow = 1;
    }
    if (!j)
        return;
    if (rst) {
        bool moved = false;
        for (int p = 0; p < j->n_nodes && !moved; p++)
            moved = j->nodes[p] >= 0 && must_leave(&s->nodes[j->nodes[p]]);
        if (j->state == J_RUN) {
            interrupt(s, j, cls);
            restart(s, j, a->ck_k, extra);
        } else if (j->state == J_DOWN || j->state == J_WAIT ||
                   (j->state == J_RESTART && (moved || extra > 0 || (a->ck_k >= 0 && a->ck_k < j->ck_k)))) {
            /* An outage a correlated process's incident prolongs is its
             * from now on (the time so far stays the earlier cause's). */
            advance(s, j, s->now);
            if (cls >= GH_SIM_CORRELATED_FIRST)
                j->cls = cls;
            restart(s, j, a->ck_k, extra);
        }
    } else if (retry && j->state == J_DOWN) {
        restart(s, j, -1, extra);
    }
}

/* ---- the loop --------------------------------------------------------- */

/* Feeds the engine the checkpoints saved since the last tick, at the times
 * they were saved (only the few newest: older ones cannot be chosen). */
static void flush_checkpoints(struct sim *s)
{
    for (int i = 0; i < s->n_jobs; i++) {
        struct job *j = &s->jobs[i];
        if (j->state == J_RUN)
            advance(s, j, s->now);
        for (int k = 0; k < j->ck_n; k++) {
            if (!(j->ck_t[k] > j->ck_flushed) || j->ck_t[k] > s->now)
                continue;
            struct gh_signal g;
            gh_signal_init(&g);
            g.kind = GH_KIND_CHECKPOINT;
            g.source = GH_SRC_TELEMETRY;
            g.ts_ns = ns(j->ck_t[k]);
            setstr(s, &g.job, j->name);
            g.has_step = true;
            g.step = (int64_t)((double)j->ck_kk[k] * s->tau / s->c->step_s);
            char path[GH_SIM_NAME_MAX + 32];
            snprintf(path, sizeof path, "sim://%s/ckpt-%ld", j->name, j->ck_kk[k]);
            setstr(s, &g.path, path);
            g.ckpt_state = GH_CKPT_SAVED;
            ingest_raw(s, &g);
        }
        j->ck_flushed = s->now;
    }
}

/* One replica-checksum comparison of job j at its current step: four
 * replicas (the diverged one on node n first when n >= 0, its value
 * differing), as the job's reporter ships it. Agreeing comparisons ask the
 * engine for no decision: they go in without the ticks a fault needs. */
static void compare_checksums(struct sim *s, struct job *j, int n)
{
    long step = current_step(s, j);
    int pos[4] = {-1, -1, -1, -1}, m = 0;
    if (n >= 0)
        pos[m++] = s->nodes[n].pos;
    struct gh_rng *r = n >= 0 ? &s->rng : &s->ck_rng;
    for (int tries = 0; m < 4 && tries < 64 && (n < 0 || j->n_nodes >= 4); tries++) {
        int p = (int)gh_rng_below(r, (uint64_t)j->n_nodes);
        bool dup = false;
        for (int k = 0; k < m; k++)
            dup |= pos[k] == p;
        if (!dup && j->nodes[p] >= 0 && !(s->nodes[j->nodes[p]].flags & F_SDC))
            pos[m++] = p;
    }
    if (n >= 0)
        trace(s, "sdc_checksums_disagree", n, j->slot, NULL);
    for (int k = 0; k < m; k++) {
        int gpu = k == 0 && n >= 0 ? s->nodes[n].gpu : 0;
        struct gh_signal g = sig(s, GH_KIND_REPLICA_CHECKSUM, GH_SRC_TELEMETRY, j->nodes[pos[k]],
                                 gpu);
        setstr(s, &g.job, j->name);
        g.has_rank = true;
        g.rank = pos[k] * s->G + gpu;
        g.has_step = true;
        g.step = step;
        g.replica = k;
        char v[32];
        snprintf(v, sizeof v, "%016llx",
                 (unsigned long long)((uint64_t)step * 0x9e3779b97f4a7c15ULL ^
                                      (k == 0 && n >= 0 ? 0xbadULL : 0)));
        setstr(s, &g.value, v);
        if (n >= 0)
            ingest(s, &g);
        else
            ingest_raw(s, &g);
    }
}

static void on_job_event(struct sim *s, const struct gh_ev *e)
{
    struct job *j = &s->jobs[e->a];
    const struct gh_sim_config *c = s->c;
    if (e->sub == JE_HUMAN_SDC) {
        /* A person sees the corruption (loss, evals) and rolls back past it. */
        if (j->inst != e->b || j->corrupt_work < 0 || (uint32_t)j->corrupt_id != e->gen)
            return;
        trace(s, "human_rolls_back_sdc", -1, j->slot, NULL);
        s->human_rollbacks++;
        for (int p = 0; p < j->n_nodes; p++)
            if (j->nodes[p] >= 0 && (s->nodes[j->nodes[p]].flags & F_SDC))
                cordon(s, j->nodes[p], 4, true, GH_SIM_SDC);
        interrupt(s, j, GH_SIM_SDC);
        restart(s, j, (long)floor(j->corrupt_work / s->tau + 1e-9), 0);
        return;
    }
    if (e->sub == JE_DONE) {
        if (e->gen == j->done_gen && j->state == J_RUN)
            job_done(s, j);
        return;
    }
    if (e->gen != j->gen)
        return;
    switch (e->sub) {
    case JE_RESTART_DONE:
        restart_done(s, j);
        break;
    case JE_K8S:
        restart(s, j, -1, 0);
        break;
    case JE_NCCL: {
        /* The watchdog ends the hang: pods fail with a collective timeout. */
        int p0 = 0, p1 = (int)gh_rng_below(&s->rng, (uint64_t)j->n_nodes);
        static const char msg[] =
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE) ran "
            "for 600000 milliseconds before timing out";
        if (j->nodes[p0] >= 0)
            emit_pod_failed(s, j, p0, "Error", 1, msg);
        if (p1 != p0 && j->nodes[p1] >= 0)
            emit_pod_failed(s, j, p1, "Error", 1, msg);
        push(s, s->now + c->lat_kube_s, EV_JOB, JE_K8S, j->slot, 0, j->gen);
        break;
    }
    case JE_EVICT:
        restart(s, j, -1, 0);
        break;
    case JE_PLANNED: {
        int n = e->b;
        if (j->state != J_RUN || s->nodes[n].job != j->slot)
            break;
        advance(s, j, s->now);
        if (j->in_stall && j->stall_end - s->now < 1e-6) {
            advance(s, j, j->stall_end); /* the checkpoint it waited for, to rounding */
        } else if (j->seg_work > 1e-6 * s->tau || j->in_stall) {
            double t = j->in_stall ? j->stall_end
                                   : s->now + (s->tau - j->seg_work) * j->slow + c->ckpt_stall_s;
            push(s, t, EV_JOB, JE_PLANNED, j->slot, n, j->gen);
            break;
        }
        trace(s, "planned", n, j->slot, NULL);
        interrupt(s, j, GH_SIM_PLANNED);
        s->nodes[n].flags |= F_NOTREADY; /* in maintenance */
        push(s, s->now + c->planned_maint_s, EV_NODE, NE_HOST_BACK, n, 1, 0);
        restart(s, j, -1, 0);
        break;
    }
    case JE_SDC_CHECK: {
        /* The bad GPU's replica diverges: its checksums differ from now on. */
        int n = e->b;
        if (j->state != J_RUN || s->nodes[n].job != j->slot || !(s->nodes[n].flags & F_SDC))
            break;
        if (c->sdc_check_s > 0) {
            j->diverged = n; /* the job's next comparison shows it */
            break;
        }
        advance(s, j, s->now);
        compare_checksums(s, j, n);
        break;
    }
    case JE_CK_COMPARE: {
        int n = j->diverged;
        if (j->state != J_RUN)
            break;
        if (n >= 0 && (s->nodes[n].job != j->slot || !(s->nodes[n].flags & F_SDC)))
            n = j->diverged = -1;
        advance(s, j, s->now);
        compare_checksums(s, j, n);
        push(s, s->now + c->sdc_check_s, EV_JOB, JE_CK_COMPARE, j->slot, 0, j->gen);
        break;
    }
    case JE_REPORT:
        if (j->state != J_RUN)
            break;
        advance(s, j, s->now);
        report_steps(s, j, -1, &s->loss_rng);
        push(s, s->now + c->report_s, EV_JOB, JE_REPORT, j->slot, 0, j->gen);
        break;
    case JE_PROGRESS:
        if (j->state != J_RUN)
            break;
        advance(s, j, s->now);
        report_steps(s, j, -1, &s->corr_rng);
        if (s->now + c->step_s * j->slow <= j->prog_until)
            push(s, s->now + c->step_s * j->slow, EV_JOB, JE_PROGRESS, j->slot, 0, j->gen);
        break;
    default:
        break;
    }
}

static void on_node_event(struct sim *s, const struct gh_ev *e)
{
    int n = e->a;
    struct node *nd = &s->nodes[n];
    switch (e->sub) {
    case NE_REPAIR_DONE:
        if (e->gen == nd->gen && nd->state == N_REPAIR)
            repair_done(s, n);
        break;
    case NE_SLOW_END:
        if ((uint32_t)e->b != nd->slow_seq || nd->slow <= 1)
            break;
        nd->slow = 1;
        trace(s, "slow_end", n, nd->job, NULL);
        if (nd->state == N_BUSY)
            respeed(s, &s->jobs[nd->job]);
        break;
    case NE_HUMAN:
        /* A person isolates a node that still breaks its job. */
        if (e->gen != nd->gen || !nd->broken || nd->state != N_BUSY || (nd->flags & F_CORDON))
            break;
        cordon(s, n, 4, true, nd->broken_cls);
        struct job *j = &s->jobs[nd->job];
        if (j->state == J_DOWN || j->state == J_RESTART)
            restart(s, j, -1, 0);
        break;
    case NE_HOST_BACK:
        nd->flags &= (uint8_t)~F_NOTREADY;
        if (e->b == 0)
            emit_node(s, n, EM_READY, -1);
        if (nd->state == N_OUT) {
            if (nd->flags & F_CORDON)
                go_repair(s, n);
            else
                free_add(s, n);
            wake_waiting(s);
        }
        break;
    default:
        break;
    }
}

static void dispatch(struct sim *s, const struct gh_ev *e)
{
    switch (e->type) {
    case EV_ARRIVAL:
        on_arrival(s, e->sub);
        break;
    case EV_EMIT:
        if (e->sub == EM_NIC_UP && !(s->nodes[e->a].flags & F_LINK))
            emit_node(s, e->a, EM_NIC_UP, e->b);
        else if (e->sub != EM_NIC_UP)
            emit_node(s, e->a, e->sub, e->b);
        break;
    case EV_TICK:
        flush_checkpoints(s);
        gh_engine_tick(s->eng, ns(s->now));
        if (e->sub == 1) {
            if (s->now < s->busy_until)
                push(s, s->now + (s->now < s->fine_until ? 1 : COARSE_S), EV_TICK, 1, 0, 0, 0);
            else
                s->chain = false;
        }
        break;
    case EV_JOB:
        on_job_event(s, e);
        break;
    case EV_NODE:
        on_node_event(s, e);
        break;
    case EV_ACTION:
        if (e->a >= 0 && e->a < MAX_ACTS && s->acts[e->a].used) {
            on_action(s, &s->acts[e->a]);
            s->acts[e->a].used = false;
        }
        break;
    case EV_CORR: on_corr(s, e); break;
    case EV_STEP: {
        struct job *j = &s->jobs[e->a];
        if (j->win && e->gen == j->win_gen && j->state == J_RUN)
            window_step(s, j);
        break;
    }
    default:
        break;
    }
}

/* ---- set-up and one run ----------------------------------------------- */

static void sim_free(struct sim *s)
{
    gh_engine_free(s->eng);
    gh_evq_free(s->q);
    if (s->jobs)
        for (int i = 0; i < s->n_jobs; i++) {
            free(s->jobs[i].nodes);
            free(s->jobs[i].announced);
        }
    free(s->jobs);
    free(s->nodes);
    free(s->free_list);
    free(s->lemons);
}

static int64_t clock_now(void *ctx)
{
    const struct sim *s = ctx;
    return ns(s->now);
}

static int setup(struct sim *s, const struct gh_sim_config *c, const struct gh_policy *policy,
                 uint64_t seed, int run, struct gh_err *err)
{
    s->c = c;
    s->G = c->gpus_per_node;
    gh_rng_seed(&s->rng, seed, (uint64_t)run);
    gh_rng_seed(&s->ck_rng, seed, (uint64_t)run + (1ull << 32));
    gh_rng_seed(&s->loss_rng, seed, (uint64_t)run + (2ull << 32));
    gh_rng_seed(&s->corr_rng, seed, (uint64_t)run + (3ull << 32));
    s->end = c->days * 86400.0;
    s->tau = gh_sim_interval_s(c);
    s->tick_batch = -1;
    long job_nodes = c->gpus / c->gpus_per_node;
    long per_job = (c->job_gpus > 0 && c->job_gpus < c->gpus ? c->job_gpus : c->gpus) / c->gpus_per_node;
    s->n_jobs = (int)((job_nodes + per_job - 1) / per_job);
    long spares = (long)ceil((double)job_nodes * c->spare_fraction - 1e-9);
    s->n_nodes = (int)(job_nodes + spares);
    s->n_leaf_groups = gh_sim_leaf_groups(c, s->n_nodes);
    s->rails = gh_sim_rails(c);
    s->nodes = calloc((size_t)s->n_nodes, sizeof *s->nodes);
    s->free_list = malloc((size_t)s->n_nodes * sizeof *s->free_list);
    s->lemons = malloc((size_t)s->n_nodes * sizeof *s->lemons);
    s->jobs = calloc((size_t)s->n_jobs, sizeof *s->jobs);
    s->q = gh_evq_new(MAX_EVENTS);
    struct gh_topology *topo = gh_topology_new();
    const char **names = malloc((size_t)per_job * sizeof *names);
    char *namebuf = malloc((size_t)per_job * 16);
    if (!s->nodes || !s->free_list || !s->lemons || !s->jobs || !s->q || !topo || !names || !namebuf)
        goto oom;
    for (int n = 0; n < s->n_nodes; n++) {
        struct node *nd = &s->nodes[n];
        nd->job = -1;
        nd->free_idx = -1;
        nd->slow = 1;
        nd->gpu = -1;
        char nm[32];
        node_name(n, nm, sizeof nm);
        if (gh_topology_add_node(topo, nm) < 0)
            goto oom;
        /* Its rack, leaf switches and driver, as the Node's labels say. */
        struct gh_sim_labels lb;
        gh_sim_node_labels(c, n, 0, &lb);
        if (gh_topology_set_node_labels(topo, nm, lb.keys, lb.values, lb.n) != GH_OK)
            goto oom;
        if (c->flapping_fraction > 0 && gh_rng_unit(&s->rng) < c->flapping_fraction) {
            nd->flags |= F_LEMON;
            s->lemons[s->n_lemons++] = n;
        }
    }
    double job_days = c->job_days > 0 ? c->job_days : INFINITY;
    long next = 0;
    for (int i = 0; i < s->n_jobs; i++) {
        struct job *j = &s->jobs[i];
        j->slot = i;
        j->n_nodes = (int)(job_nodes - next < per_job ? job_nodes - next : per_job);
        j->gpus = (double)j->n_nodes * c->gpus_per_node;
        j->nodes = malloc((size_t)j->n_nodes * sizeof *j->nodes);
        j->announced = malloc((size_t)j->n_nodes * sizeof *j->announced);
        if (!j->nodes || !j->announced)
            goto oom;
        job_name(j);
        j->work_need = job_days * 86400.0;
        j->cls = -1;
        j->down_since = -1;
        j->corrupt_work = -1;
        j->slow = 1;
        j->state = J_RUN;
        for (int p = 0; p < j->n_nodes; p++, next++) {
            struct node *nd = &s->nodes[next];
            nd->state = N_BUSY;
            nd->job = i;
            nd->pos = p;
            j->nodes[p] = (int32_t)next;
            j->announced[p] = (int32_t)next;
            node_name((int)next, namebuf + (size_t)p * 16, 16);
            names[p] = namebuf + (size_t)p * 16;
        }
        long tj = gh_topology_add_job(topo, j->name, names, (size_t)j->n_nodes, c->gpus_per_node);
        if (tj < 0)
            goto oom;
        gh_topology_set_job_costs(topo, tj, isfinite(job_days) ? job_days * 86400.0 : s->end,
                                  c->restart_s);
        schedule_done(s, j);
        j->diverged = -1;
        if (c->sdc_check_s > 0)
            push(s, c->sdc_check_s, EV_JOB, JE_CK_COMPARE, j->slot, 0, j->gen);
        if (c->report_s > 0)
            push(s, c->report_s, EV_JOB, JE_REPORT, j->slot, 0, j->gen);
    }
    for (int n = (int)job_nodes; n < s->n_nodes; n++)
        free_add(s, n);
    free(names);
    names = NULL;
    free(namebuf);
    namebuf = NULL;
    /* The engine, on simulated time. */
    s->clock.now = clock_now;
    s->clock.ctx = s;
    s->eng = gh_engine_new(policy, topo, &s->clock, NULL, on_incident, s, err);
    gh_topology_free(topo);
    topo = NULL;
    if (!s->eng)
        return GH_ENOMEM;
    const struct gh_policy_settings *st = &gh_engine_policy(s->eng)->settings;
    s->window_s = (double)st->reorder_window_ns / 1e9;
    double longest = (double)(st->hold_ns > st->link_dead_ns ? st->hold_ns : st->link_dead_ns) / 1e9;
    s->horizon_s = HORIZON_S > 2 * longest + 60 ? HORIZON_S : 2 * longest + 60;
    s->s_max = st->straggler_n + 12;
    /* Failure processes: thinned over all nodes (or all flapping nodes). */
    for (int k = 0; k < GH_SIM_CLASS__COUNT; k++) {
        if (!(c->class_mask & (1u << k)))
            continue;
        double per_h;
        if (k == GH_SIM_STRAGGLER || k == GH_SIM_LINK_FLAP)
            per_h = c->rate[k] * s->n_nodes;
        else if (k == GH_SIM_LEAF_REBOOT)
            per_h = c->rate[k] * s->n_leaf_groups * s->rails;
        else if (k == GH_SIM_ROLLOUT || k == GH_SIM_CHECK_MISFIRE)
            per_h = c->rate[k];
        else if (k == GH_SIM_FLAPPING)
            per_h = c->rate[k] * s->n_lemons;
        else
            per_h = c->rate[k] * s->n_nodes * c->gpus_per_node;
        s->rate_h[k] = per_h * c->rate_scale / 3600.0;
        struct gh_rng *r = k >= GH_SIM_CORRELATED_FIRST ? &s->corr_rng : &s->rng;
        if (s->rate_h[k] > 0)
            push(s, gh_rng_exp(r, s->rate_h[k]), EV_ARRIVAL, (uint8_t)k, 0, 0, 0);
    }
    return s->rc;
oom:
    free(names);
    free(namebuf);
    gh_topology_free(topo);
    return gh_err_set(err, GH_ENOMEM, "simulate: out of memory");
}

static int run_once(const struct gh_sim_config *c, const struct gh_policy *policy, uint64_t seed,
                    int run, FILE *tr, struct gh_sim_result *r, struct gh_err *err)
{
    struct sim *s = calloc(1, sizeof *s);
    if (!s)
        return gh_err_set(err, GH_ENOMEM, "simulate: out of memory");
    s->trace = tr;
    int rc = setup(s, c, policy, seed, run, err);
    struct gh_ev e;
    while (rc == GH_OK && gh_evq_pop(s->q, &e)) {
        if (e.t > s->end)
            break;
        s->now = e.t;
        dispatch(s, &e);
        rc = s->rc;
    }
    if (rc != GH_OK) {
        if (rc == GH_ELIMIT)
            gh_err_set(err, rc, "simulate: more than %zu pending events", MAX_EVENTS);
        else if (rc == GH_ENOMEM)
            gh_err_set(err, rc, "simulate: out of memory");
        sim_free(s);
        free(s);
        return rc;
    }
    s->now = s->end;
    double job_gpu_s = 0;
    for (int i = 0; i < s->n_jobs; i++) {
        struct job *j = &s->jobs[i];
        advance(s, j, s->end);
        /* The job goes on after the window: work in progress counts. */
        s->productive += work_now(s, j) * j->gpus;
        job_gpu_s += j->gpus * s->end;
    }
    struct gh_engine_stats es;
    gh_engine_stats(s->eng, &es);
    memset(r, 0, sizeof *r);
    r->runs = 1;
    r->job_gpu_hours = job_gpu_s / 3600;
    r->cluster_gpu_hours = (double)s->n_nodes * s->G * s->end / 3600;
    r->productive_gpu_hours = s->productive / 3600;
    r->ettr = job_gpu_s > 0 ? s->productive / job_gpu_s : 0;
    r->goodput = r->cluster_gpu_hours > 0 ? r->productive_gpu_hours / r->cluster_gpu_hours : 0;
    r->mttr_s = s->mttr_n ? s->mttr_sum / (double)s->mttr_n : 0;
    for (int k = 0; k < GH_SIM_CLASS__COUNT; k++) {
        r->interruptions[k] = s->interrupts[k];
        r->interruptions_total += s->interrupts[k];
        r->wasted_by_class_gpu_hours[k] = s->waste_cls[k] / 3600;
        for (int w = 0; w < GH_SIM_W__COUNT; w++)
            r->wasted_class_bucket_gpu_hours[k][w] = s->waste_cb[k][w] / 3600;
    }
    for (int w = 0; w < GH_SIM_W__COUNT; w++)
        r->wasted_gpu_hours[w] = s->waste[w] / 3600;
    r->isolations = (double)s->isolations;
    r->false_isolations = (double)s->false_iso;
    r->false_isolations_correlated = (double)s->false_corr;
    for (int k = 0; k < GH_SIM_CLASS__COUNT; k++)
        r->false_isolations_by_class[k] = (double)s->false_cls[k];
    r->cluster_gpu_days = r->cluster_gpu_hours / 24;
    r->human_isolations = (double)s->human_iso;
    r->human_rollbacks = (double)s->human_rollbacks;
    r->incidents = (double)s->incidents;
    r->signals = (double)s->signals;
    r->late_signals = (double)es.timeline.late;
    r->jobs_completed = (double)s->jobs_done;
    r->checkpoint_interval_s = s->tau;
    r->job_mtbf_s = gh_sim_job_mtbf_s(c);
    r->daly_ettr = gh_daly_ettr(r->job_mtbf_s, s->tau, c->ckpt_stall_s,
                                c->restart_s + c->lat_kmsg_s + s->window_s + EPS_S + c->act_s);
    sim_free(s);
    free(s);
    return GH_OK;
}

int gh_sim_run_traced(const struct gh_sim_config *c, const struct gh_policy *policy, uint64_t seed,
                      int runs, FILE *tr, struct gh_sim_result *out, struct gh_err *err)
{
    int rc = gh_sim_config_check(c, err);
    if (rc != GH_OK)
        return rc;
    if (runs < 1)
        return gh_err_set(err, GH_EINVAL, "runs must be >= 1");
    struct gh_sim_result sum, r;
    memset(&sum, 0, sizeof sum);
    double e2 = 0;
    for (int i = 0; i < runs; i++) {
        rc = run_once(c, policy, seed, i, tr, &r, err);
        if (rc != GH_OK)
            return rc;
        _Static_assert(offsetof(struct gh_sim_result, runs) % sizeof(double) == 0,
                       "the figures before runs are doubles");
        double *a = (double *)&sum;
        const double *b = (const double *)&r;
        /* Every figure before `runs` is a double: sum them. */
        for (size_t k = 0; k < offsetof(struct gh_sim_result, runs) / sizeof(double); k++)
            a[k] += b[k];
        e2 += r.ettr * r.ettr;
    }
    double *a = (double *)&sum;
    for (size_t k = 0; k < offsetof(struct gh_sim_result, runs) / sizeof(double); k++)
        a[k] /= runs;
    sum.runs = runs;
    double var = runs > 1 ? (e2 - runs * sum.ettr * sum.ettr) / (runs - 1) : 0;
    sum.ettr_stderr = runs > 1 && var > 0 ? sqrt(var / runs) : 0;
    *out = sum;
    return GH_OK;
}

int gh_sim_run(const struct gh_sim_config *c, const struct gh_policy *policy, uint64_t seed,
               int runs, struct gh_sim_result *out, struct gh_err *err)
{
    return gh_sim_run_traced(c, policy, seed, runs, NULL, out, err);
}
