/* simulate.c - `gpuheal simulate`: what-if goodput of a cluster under a
 * recovery policy (the real engine deciding on simulated signals), policy
 * comparison, and ETTR against the checkpoint interval (--sweep, SVG/PNG). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/gpuheal/commands.h"
#include "sim/daly.h"
#include "sim/sim.h"
#include "sim/svg.h"

extern char **environ;

#define SWEEP_POINTS_MAX 64

static void usage(FILE *f)
{
    fprintf(
        f, "usage: gpuheal simulate [--preset NAME] [--gpus N] [--gpus-per-node G] [--days D]\n"
           "                        [--rate-scale X] [--only-class CLASS[,CLASS...]]\n"
           "                        [--checkpoint-stall S] [--checkpoint-interval S|auto]\n"
           "                        [--restart S] [--policy NAME|FILE] [--seed N] [--runs K] "
           "[--json]\n"
           "                        [--job-gpus N] [--job-days D] [--spare-fraction F] [--trace "
           "FILE]\n"
           "                        [--sdc-silent S] [--sdc-check S] [--sdc-spike F] [--report S]\n"
           "                        [--leaf-reboot X] [--rollout X] [--check-misfire X] "
           "[--no-correlated]\n"
           "                        [--misfire-condition NAME]\n"
           "       gpuheal simulate --sweep checkpoint-interval [--out PREFIX] [--points N] "
           "[options]\n"
           "       gpuheal simulate --list-presets | --print-presets\n"
           "\n"
           "Simulates a GPU cluster with failures at published rates; the detection engine and\n"
           "the policy decide; prints ETTR, goodput, interruptions, MTTR and wasted GPU-hours.\n"
           "Policies: gpuheal (default), xid-only, k8s-default, or a policy file.\n"
           "Classes: ");
    for (int i = 0; i < GH_SIM_CLASS__COUNT; i++)
        fprintf(f, "%s%s", i ? ", " : "", gh_sim_class_name((enum gh_sim_class)i));
    fprintf(
        f, ".\nleaf_reboot, rollout and check_misfire are correlated processes (one cause on many\n"
           "nodes, none at fault): --leaf-reboot, --rollout and --check-misfire multiply their\n"
           "rates (0: off), --no-correlated turns all three off.\n"
           "--sweep writes PREFIX.svg (and PREFIX.png when rsvg-convert is installed);\n"
           "PREFIX defaults to sweep-checkpoint-interval.\n");
}

static bool num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool integer(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A policy by built-in name or file; *label is what to print. */
static struct gh_policy *load_policy(const char *name)
{
    struct gh_policy *p = NULL;
    struct gh_err err;
    int rc = gh_sim_policy_new(name, &p, &err);
    if (rc == GH_OK)
        return p;
    if (rc == GH_ENOTFOUND && access(name, R_OK) == 0)
        return gh_cmd_load_policy(name);
    fprintf(stderr, "gpuheal simulate: %s\n", err.msg);
    return NULL;
}

static json_t *class_obj(const double *v)
{
    json_t *o = json_object();
    for (int i = 0; o && i < GH_SIM_CLASS__COUNT; i++)
        json_object_set_new(o, gh_sim_class_name((enum gh_sim_class)i), json_real(v[i]));
    return o;
}

/* n per 10,000 GPU-days of the whole cluster (spares included). */
static double per_10k_gpu_days(const struct gh_sim_result *r, double n)
{
    return r->cluster_gpu_days > 0 ? n / r->cluster_gpu_days * 1e4 : 0;
}

static json_t *result_json(const struct gh_sim_config *c, const char *policy, uint64_t seed,
                           const struct gh_sim_result *r)
{
    json_t *o = json_object(), *w = json_object();
    if (!o || !w) {
        json_decref(o);
        json_decref(w);
        return NULL;
    }
    double total = 0;
    for (int i = 0; i < GH_SIM_W__COUNT; i++) {
        json_object_set_new(w, gh_sim_waste_name((enum gh_sim_waste)i), json_real(r->wasted_gpu_hours[i]));
        total += r->wasted_gpu_hours[i];
    }
    json_object_set_new(w, "total", json_real(total));
    json_t *intr = class_obj(r->interruptions);
    json_object_set_new(intr, "total", json_real(r->interruptions_total));
    long nodes = c->gpus / c->gpus_per_node;
    json_object_set_new(o, "preset", json_string(c->preset));
    json_object_set_new(o, "policy", json_string(policy));
    json_object_set_new(o, "gpus", json_integer(c->gpus));
    json_object_set_new(o, "gpus_per_node", json_integer(c->gpus_per_node));
    json_object_set_new(o, "nodes", json_integer(nodes));
    json_object_set_new(o, "spare_nodes", json_integer((long)ceil((double)nodes * c->spare_fraction - 1e-9)));
    json_object_set_new(o, "job_gpus", json_integer(c->job_gpus > 0 ? c->job_gpus : c->gpus));
    json_object_set_new(o, "days", json_real(c->days));
    json_object_set_new(o, "runs", json_integer(r->runs));
    json_object_set_new(o, "seed", json_integer((json_int_t)seed));
    json_object_set_new(o, "rate_scale", json_real(c->rate_scale));
    json_object_set_new(o, "checkpoint_interval_s", json_real(r->checkpoint_interval_s));
    json_object_set_new(o, "checkpoint_stall_s", json_real(c->ckpt_stall_s));
    json_object_set_new(o, "restart_s", json_real(c->restart_s));
    json_object_set_new(o, "job_mtbf_s", json_real(isfinite(r->job_mtbf_s) ? r->job_mtbf_s : -1));
    json_object_set_new(o, "ettr", json_real(r->ettr));
    json_object_set_new(o, "ettr_stderr", json_real(r->ettr_stderr));
    json_object_set_new(o, "goodput", json_real(r->goodput));
    json_object_set_new(o, "daly_ettr", json_real(isfinite(r->daly_ettr) ? r->daly_ettr : 1));
    json_object_set_new(o, "interruptions", intr);
    json_object_set_new(o, "mttr_s", json_real(r->mttr_s));
    json_object_set_new(o, "wasted_gpu_hours", w);
    json_object_set_new(o, "wasted_gpu_hours_by_class", class_obj(r->wasted_by_class_gpu_hours));
    json_object_set_new(o, "isolations", json_real(r->isolations));
    json_object_set_new(o, "false_isolations", json_real(r->false_isolations));
    json_object_set_new(o, "false_isolations_correlated",
                        json_real(r->false_isolations_correlated));
    json_object_set_new(o, "false_isolations_by_class", class_obj(r->false_isolations_by_class));
    json_object_set_new(o, "false_isolations_per_10k_gpu_days",
                        json_real(per_10k_gpu_days(r, r->false_isolations)));
    json_object_set_new(o, "false_isolations_correlated_per_10k_gpu_days",
                        json_real(per_10k_gpu_days(r, r->false_isolations_correlated)));
    json_object_set_new(o, "cluster_gpu_days", json_real(r->cluster_gpu_days));
    json_object_set_new(o, "human_isolations", json_real(r->human_isolations));
    json_object_set_new(o, "human_rollbacks", json_real(r->human_rollbacks));
    json_object_set_new(o, "jobs_completed", json_real(r->jobs_completed));
    json_object_set_new(o, "job_gpu_hours", json_real(r->job_gpu_hours));
    json_object_set_new(o, "cluster_gpu_hours", json_real(r->cluster_gpu_hours));
    json_object_set_new(o, "productive_gpu_hours", json_real(r->productive_gpu_hours));
    json_t *eng = json_object();
    json_object_set_new(eng, "incidents", json_real(r->incidents));
    json_object_set_new(eng, "signals", json_real(r->signals));
    json_object_set_new(eng, "late_signals", json_real(r->late_signals));
    json_object_set_new(o, "engine", eng);
    return o;
}

static void print_table(FILE *f, const struct gh_sim_config *c, const char *policy, uint64_t seed,
                        const struct gh_sim_result *r)
{
    long nodes = c->gpus / c->gpus_per_node;
    fprintf(f, "gpuheal simulate: %s, policy %s, %ld GPUs (%ld nodes + %ld spares, %d per node), "
               "%g days, %d run%s, seed %llu\n",
            c->preset, policy, c->gpus, nodes, (long)ceil((double)nodes * c->spare_fraction - 1e-9),
            c->gpus_per_node, c->days, r->runs, r->runs == 1 ? "" : "s", (unsigned long long)seed);
    fprintf(f, "checkpoint every %.0f s (%s), stall %g s, restart %g s; job MTBF %.2f h\n\n",
            r->checkpoint_interval_s, c->ckpt_interval_s > 0 ? "given" : "auto: Daly's optimum",
            c->ckpt_stall_s, c->restart_s, r->job_mtbf_s / 3600);
    fprintf(f, "  %-22s %.4f", "ETTR", r->ettr);
    if (r->runs > 1)
        fprintf(f, "  (+/- %.4f)", r->ettr_stderr);
    fprintf(f, "\n  %-22s %.4f\n", "Daly's model", r->daly_ettr);
    fprintf(f, "  %-22s %.4f\n", "goodput", r->goodput);
    /* counts: whole numbers for one run, means with a decimal for several */
    const int p = r->runs > 1 ? 1 : 0;
    if (r->runs > 1)
        fprintf(f, "  (counts below: means per run over %d runs)\n", r->runs);
    fprintf(f, "  %-22s %.*f\n", "interruptions", p, r->interruptions_total);
    for (int i = 0; i < GH_SIM_CLASS__COUNT; i++)
        if (r->interruptions[i] > 0)
            fprintf(f, "    %-20s %.*f\n", gh_sim_class_name((enum gh_sim_class)i), p,
                    r->interruptions[i]);
    fprintf(f, "  %-22s %.0f s\n", "MTTR", r->mttr_s);
    fprintf(f, "  %-22s %.*f (false %.*f, by people %.*f)\n", "isolations", p, r->isolations, p,
            r->false_isolations, p, r->human_isolations);
    fprintf(f, "  %-22s %.3f per 10,000 GPU-days; for correlated causes %.*f (%.3f per 10,000)\n",
            "false isolations", per_10k_gpu_days(r, r->false_isolations), p,
            r->false_isolations_correlated, per_10k_gpu_days(r, r->false_isolations_correlated));
    if (r->false_isolations > 0) {
        fprintf(f, "    %-20s", "by class");
        const char *sep = " ";
        for (int i = 0; i < GH_SIM_CLASS__COUNT; i++)
            if (r->false_isolations_by_class[i] > 0) {
                fprintf(f, "%s%s %.*f", sep, gh_sim_class_name((enum gh_sim_class)i), p,
                        r->false_isolations_by_class[i]);
                sep = ", ";
            }
        fputc('\n', f);
    }
    fprintf(f, "  %-22s %.*f\n", "rolled back by people", p, r->human_rollbacks);
    double total = 0;
    for (int i = 0; i < GH_SIM_W__COUNT; i++)
        total += r->wasted_gpu_hours[i];
    fprintf(f, "  %-22s %.0f of %.0f job GPU-hours\n", "wasted GPU-hours", total, r->job_gpu_hours);
    for (int i = 0; i < GH_SIM_W__COUNT; i++)
        fprintf(f, "    %-20s %.0f\n", gh_sim_waste_name((enum gh_sim_waste)i), r->wasted_gpu_hours[i]);
    fprintf(f, "  %-22s", "by class");
    bool first = true;
    for (int i = 0; i < GH_SIM_CLASS__COUNT; i++)
        if (r->wasted_by_class_gpu_hours[i] >= 0.5) {
            fprintf(f, "%s%s %.0f", first ? " " : ", ", gh_sim_class_name((enum gh_sim_class)i),
                    r->wasted_by_class_gpu_hours[i]);
            first = false;
        }
    fputc('\n', f);
    /* Where each class's outages went: the lost (rolled-back) work, the
     * time until a restart began, the restarts, the wait for nodes. */
    for (int i = 0; i < GH_SIM_CLASS__COUNT; i++) {
        if (r->wasted_by_class_gpu_hours[i] < 0.5)
            continue;
        fprintf(f, "    %-20s", gh_sim_class_name((enum gh_sim_class)i));
        const char *sep = " ";
        for (int w = 0; w < GH_SIM_W__COUNT; w++)
            if (r->wasted_class_bucket_gpu_hours[i][w] >= 0.5) {
                fprintf(f, "%s%s %.0f", sep, gh_sim_waste_name((enum gh_sim_waste)w),
                        r->wasted_class_bucket_gpu_hours[i][w]);
                sep = ", ";
            }
        fputc('\n', f);
    }
    fprintf(f, "  %-22s %.0f incidents, %.0f signals, %.0f late\n", "engine", r->incidents,
            r->signals, r->late_signals);
}

/* Finds prog in $PATH. */
static bool in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char buf[4096];
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && n < sizeof buf - strlen(prog) - 2) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
            if (access(buf, X_OK) == 0)
                return true;
        }
        p += n + (e ? 1 : 0);
        if (!e)
            break;
    }
    return false;
}

static int to_png(const char *svg, const char *png)
{
    if (!in_path("rsvg-convert"))
        return 1;
    char *argv[] = {"rsvg-convert", "-o", (char *)png, (char *)svg, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "rsvg-convert", NULL, NULL, argv, environ) != 0)
        return -1;
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return 0;
}

struct sweep_opts {
    const char *prefix;
    int points;
};

/* ETTR against the checkpoint interval, per policy, with Daly's model. */
static int sweep(const struct gh_sim_config *base, const char *policy_arg, uint64_t seed, int runs,
                 bool json, const struct sweep_opts *so)
{
    double m = gh_sim_job_mtbf_s(base), opt = gh_daly_optimum(m, base->ckpt_stall_s);
    if (!isfinite(opt) || opt <= 0)
        opt = 3600;
    int n = so->points;
    double xs[SWEEP_POINTS_MAX], lo = opt / 8, hi = opt * 8;
    if (lo < base->step_s)
        lo = base->step_s;
    for (int i = 0; i < n; i++)
        xs[i] = n == 1 ? opt : lo * pow(hi / lo, (double)i / (n - 1));
    const char *names[4] = {"k8s-default", "xid-only", "gpuheal", NULL};
    int n_pol = 3;
    if (policy_arg && strcmp(policy_arg, "gpuheal") != 0 && strcmp(policy_arg, "xid-only") != 0 &&
        strcmp(policy_arg, "k8s-default") != 0)
        names[n_pol++] = policy_arg;
    double ys[4][SWEEP_POINTS_MAX], daly[SWEEP_POINTS_MAX];
    struct gh_policy_settings st;
    gh_policy_settings_default(&st);
    double decide_s = base->lat_kmsg_s + (double)st.reorder_window_ns / 1e9 + base->act_s;
    for (int i = 0; i < n; i++)
        daly[i] = gh_daly_ettr(m, xs[i], base->ckpt_stall_s, base->restart_s + decide_s);
    for (int pi = 0; pi < n_pol; pi++) {
        struct gh_policy *pol = load_policy(names[pi]);
        if (!pol)
            return 1;
        for (int i = 0; i < n; i++) {
            struct gh_sim_config c = *base;
            c.ckpt_interval_s = xs[i];
            struct gh_sim_result r;
            struct gh_err err;
            if (gh_sim_run(&c, pol, seed, runs, &r, &err) != GH_OK) {
                fprintf(stderr, "gpuheal simulate: %s\n", err.msg);
                gh_policy_free(pol);
                return 1;
            }
            ys[pi][i] = r.ettr;
        }
        gh_policy_free(pol);
    }
    char svg[4096], png[4096];
    snprintf(svg, sizeof svg, "%s.svg", so->prefix);
    snprintf(png, sizeof png, "%s.png", so->prefix);
    struct gh_svg_series se[5];
    for (int pi = 0; pi < n_pol; pi++)
        se[pi] = (struct gh_svg_series){names[pi], (size_t)n, xs, ys[pi], false};
    se[n_pol] = (struct gh_svg_series){"Daly's model", (size_t)n, xs, daly, true};
    char title[256];
    snprintf(title, sizeof title, "ETTR against checkpoint interval: %s, %ld GPUs, stall %g s, restart %g s",
             base->preset, base->gpus, base->ckpt_stall_s, base->restart_s);
    struct gh_svg_chart ch = {title, "checkpoint interval (s, log scale)", "ETTR", true,
                              (size_t)n_pol + 1, se};
    FILE *f = fopen(svg, "w");
    int wrc = f ? gh_svg_write(f, &ch) : -1;
    if (f && fclose(f) != 0)
        wrc = -1;
    if (wrc != 0) {
        fprintf(stderr, "gpuheal simulate: cannot write %s\n", svg);
        return 1;
    }
    int prc = to_png(svg, png);
    if (json) {
        json_t *o = json_object(), *pts = json_array();
        json_object_set_new(o, "preset", json_string(base->preset));
        json_object_set_new(o, "runs", json_integer(runs));
        json_object_set_new(o, "seed", json_integer((json_int_t)seed));
        json_object_set_new(o, "daly_optimum_s", json_real(opt));
        for (int i = 0; i < n; i++) {
            json_t *p = json_object();
            json_object_set_new(p, "checkpoint_interval_s", json_real(xs[i]));
            json_object_set_new(p, "daly_ettr", json_real(daly[i]));
            for (int pi = 0; pi < n_pol; pi++)
                json_object_set_new(p, names[pi], json_real(ys[pi][i]));
            json_array_append_new(pts, p);
        }
        json_object_set_new(o, "points", pts);
        json_object_set_new(o, "svg", json_string(svg));
        json_object_set_new(o, "png", prc == 0 ? json_string(png) : json_null());
        char *s = json_dumps(o, JSON_COMPACT);
        if (s)
            puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("ETTR against checkpoint interval: %s, %d run%s per point, Daly's optimum %.0f s\n\n",
               base->preset, runs, runs == 1 ? "" : "s", opt);
        printf("  %10s", "interval_s");
        for (int pi = 0; pi < n_pol; pi++)
            printf("  %12.12s", names[pi]);
        printf("  %12s\n", "daly_model");
        for (int i = 0; i < n; i++) {
            printf("  %10.0f", xs[i]);
            for (int pi = 0; pi < n_pol; pi++)
                printf("  %12.4f", ys[pi][i]);
            printf("  %12.4f\n", daly[i]);
        }
        printf("\nwrote %s", svg);
        if (prc == 0)
            printf(" and %s\n", png);
        else if (prc > 0)
            printf("; PNG skipped: rsvg-convert not found (Debian package librsvg2-bin)\n");
        else
            printf("; PNG failed: rsvg-convert returned an error\n");
    }
    return 0;
}

int gh_cmd_simulate(int argc, char **argv)
{
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    struct gh_err err;
    /* The preset first: the other options change it. */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--preset") == 0 && gh_sim_preset(argv[i + 1], &c, &err) != GH_OK) {
            fprintf(stderr, "gpuheal simulate: %s\n", err.msg);
            return 2;
        }
    const char *policy = "gpuheal", *trace_path = NULL, *sweep_what = NULL;
    struct sweep_opts so = {"sweep-checkpoint-interval", 13};
    long long seed = 1, runs = 1;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        long long k;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
            continue;
        } else if (strcmp(a, "--no-correlated") == 0) {
            c.class_mask &= ~(uint32_t)GH_SIM_CORRELATED_MASK;
            continue;
        } else if (strcmp(a, "--list-presets") == 0) {
            for (int p = 0; p < gh_sim_preset_count(); p++)
                printf("%-14s %s\n", gh_sim_preset_name(p), gh_sim_preset_summary(p));
            return 0;
        } else if (strcmp(a, "--print-presets") == 0) {
            gh_sim_presets_write_yaml(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "gpuheal simulate: %s needs a value\n", a);
            return 2;
        }
        i++;
        bool ok = true;
        if (strcmp(a, "--preset") == 0)
            ;
        else if (strcmp(a, "--gpus") == 0)
            ok = integer(v, 1, 1LL << 22, &k) && (c.gpus = (long)k, true);
        else if (strcmp(a, "--gpus-per-node") == 0)
            ok = integer(v, 1, 64, &k) && (c.gpus_per_node = (int)k, true);
        else if (strcmp(a, "--job-gpus") == 0)
            ok = integer(v, 0, 1LL << 22, &k) && (c.job_gpus = (long)k, true);
        else if (strcmp(a, "--days") == 0)
            ok = num(v, 1e-3, 3660, &d) && (c.days = d, true);
        else if (strcmp(a, "--job-days") == 0)
            ok = num(v, 0, 3660, &d) && (c.job_days = d, true);
        else if (strcmp(a, "--spare-fraction") == 0)
            ok = num(v, 0, 1, &d) && (c.spare_fraction = d, true);
        else if (strcmp(a, "--rate-scale") == 0)
            ok = num(v, 0, 1e6, &d) && (c.rate_scale = d, true);
        else if (strcmp(a, "--checkpoint-stall") == 0)
            ok = num(v, 0, 1e7, &d) && (c.ckpt_stall_s = d, true);
        else if (strcmp(a, "--checkpoint-interval") == 0)
            ok = strcmp(v, "auto") == 0 ? (c.ckpt_interval_s = 0, true)
                                        : num(v, 1e-3, 1e9, &d) && (c.ckpt_interval_s = d, true);
        else if (strcmp(a, "--sdc-silent") == 0)
            ok = num(v, 0, 1e7, &d) && (c.sdc_silent_s = d, true);
        else if (strcmp(a, "--sdc-check") == 0)
            ok = num(v, 0, 1e7, &d) && (c.sdc_check_s = d, true);
        else if (strcmp(a, "--sdc-spike") == 0)
            ok = num(v, 0, 1, &d) && (c.sdc_spike = d, true);
        else if (strcmp(a, "--report") == 0)
            ok = num(v, 0, 1e7, &d) && (c.report_s = d, true);
        else if (strcmp(a, "--leaf-reboot") == 0)
            ok = num(v, 0, 1e6, &d) && (c.rate[GH_SIM_LEAF_REBOOT] *= d, true);
        else if (strcmp(a, "--rollout") == 0)
            ok = num(v, 0, 1e6, &d) && (c.rate[GH_SIM_ROLLOUT] *= d, true);
        else if (strcmp(a, "--check-misfire") == 0)
            ok = num(v, 0, 1e6, &d) && (c.rate[GH_SIM_CHECK_MISFIRE] *= d, true);
        else if (strcmp(a, "--misfire-condition") == 0)
            ok = v[0] && strlen(v) < sizeof c.misfire_condition &&
                 (snprintf(c.misfire_condition, sizeof c.misfire_condition, "%s", v), true);
        else if (strcmp(a, "--restart") == 0)
            ok = num(v, 0, 1e7, &d) && (c.restart_s = d, true);
        else if (strcmp(a, "--policy") == 0)
            policy = v;
        else if (strcmp(a, "--seed") == 0)
            ok = integer(v, 0, INT64_MAX, &seed);
        else if (strcmp(a, "--runs") == 0)
            ok = integer(v, 1, 100000, &runs);
        else if (strcmp(a, "--trace") == 0)
            trace_path = v;
        else if (strcmp(a, "--sweep") == 0)
            ok = strcmp(v, "checkpoint-interval") == 0 && (sweep_what = v, true);
        else if (strcmp(a, "--out") == 0)
            so.prefix = v;
        else if (strcmp(a, "--points") == 0)
            ok = integer(v, 1, SWEEP_POINTS_MAX, &k) && (so.points = (int)k, true);
        else if (strcmp(a, "--only-class") == 0) {
            uint32_t mask = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
                int cl = gh_sim_class_from_name(t);
                if (cl < 0)
                    ok = false;
                else
                    mask |= 1u << cl;
            }
            if (ok)
                c.class_mask = mask;
        } else {
            fprintf(stderr, "gpuheal simulate: unknown option \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "gpuheal simulate: bad value for %s: \"%s\"\n", a, v);
            return 2;
        }
    }
    if (gh_sim_config_check(&c, &err) != GH_OK) {
        fprintf(stderr, "gpuheal simulate: %s\n", err.msg);
        return 2;
    }
    if (sweep_what)
        return sweep(&c, strcmp(policy, "gpuheal") ? policy : NULL, (uint64_t)seed, (int)runs, json, &so);
    struct gh_policy *pol = load_policy(policy);
    if (!pol)
        return 1;
    FILE *tr = NULL;
    if (trace_path && !(tr = strcmp(trace_path, "-") == 0 ? stderr : fopen(trace_path, "w"))) {
        fprintf(stderr, "gpuheal simulate: cannot write %s\n", trace_path);
        gh_policy_free(pol);
        return 1;
    }
    struct gh_sim_result r;
    int rc = gh_sim_run_traced(&c, pol, (uint64_t)seed, (int)runs, tr, &r, &err);
    gh_policy_free(pol);
    if (tr && tr != stderr)
        fclose(tr);
    if (rc != GH_OK) {
        fprintf(stderr, "gpuheal simulate: %s\n", err.msg);
        return 1;
    }
    const char *slash = strrchr(policy, '/');
    const char *label = slash ? slash + 1 : policy;
    if (json) {
        json_t *o = result_json(&c, label, (uint64_t)seed, &r);
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
        if (!s) {
            json_decref(o);
            fprintf(stderr, "gpuheal simulate: out of memory\n");
            return 1;
        }
        puts(s);
        free(s);
        json_decref(o);
    } else {
        print_table(stdout, &c, label, (uint64_t)seed, &r);
    }
    return 0;
}
