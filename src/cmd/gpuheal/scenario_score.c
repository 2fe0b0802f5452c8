/* scenario_score.c - `gpuheal scenario score [--verbose] [--policy FILE] DIR`:
 * replays every DIR/NAME.jsonl that has a DIR/NAME.expect.json through the
 * engine and compares the incidents with the expected ones. Prints per
 * scenario the verdict and the time to decide (decided_ts - first_ts), then
 * class accuracy, blamed-node accuracy, false isolations, missed restarts and
 * extra incidents. Each false isolation (an isolating or draining action on
 * a node no expected incident names) and each missed restart (an expected
 * incident that includes restart_from_checkpoint with no incident of its
 * class, and job when named, restarting) is also printed on its own line
 * under its scenario.
 * Exit 0 when every scenario passes.
 *
 * NAME.expect.json:
 *   {"description": "...",
 *    "incidents": [ {"class": "gpu_hardware",      required
 *                    "node": "gpu-02" | null,      null: must blame no node; absent: any
 *                    "gpu": 3, "job": "ml/llm",    optional
 *                    "actions_include": [...], "actions_exclude": [...],
 *                    "checkpoint_step": 1000,      optional
 *                    "max_decide_s": 5,            optional
 *                    "scope": "switch",            optional: the incident's scope
 *                    "affected_nodes": [...],      optional: each among its affected_nodes
 *                    "count_min": 1, "count_max": 3 }   optional (default exactly 1)
 *                 ],
 *    "allow_extra": false}                         extra incidents fail the scenario */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"
#include "common/json.h"

#define MAX_GOT 4096

struct got {
    enum gh_class cls;
    char node[128], job[128], rule[64];
    int gpu, n_actions;
    enum gh_action actions[GH_INCIDENT_MAX_ACTIONS];
    bool has_ckpt, matched;
    int64_t ckpt_step, first_ts, decided_ts;
    const char *broken; /* a spec section 3 rule the incident breaks (static), or NULL */
    enum gh_scope scope;
    char *affected; /* "\nN1\nN2\n" (owned; NULL when none), for lookups */
};

struct gotlist {
    int n;
    struct got v[MAX_GOT];
};

static void collect(void *ctx, const struct gh_incident *inc)
{
    struct gotlist *l = ctx;
    if (l->n >= MAX_GOT)
        return;
    struct got *g = &l->v[l->n++];
    memset(g, 0, sizeof *g);
    g->cls = inc->cls;
    snprintf(g->node, sizeof g->node, "%s", inc->node ? inc->node : "");
    snprintf(g->job, sizeof g->job, "%s", inc->job ? inc->job : "");
    snprintf(g->rule, sizeof g->rule, "%s", inc->rule ? inc->rule : "");
    g->gpu = inc->gpu;
    g->n_actions = inc->n_actions;
    memcpy(g->actions, inc->actions, (size_t)inc->n_actions * sizeof inc->actions[0]);
    g->has_ckpt = inc->has_checkpoint;
    g->ckpt_step = inc->checkpoint_step;
    g->first_ts = inc->first_ts;
    g->decided_ts = inc->decided_ts;
    g->scope = inc->scope;
    if (inc->n_affected) {
        size_t len = 2;
        for (size_t i = 0; i < inc->n_affected; i++)
            len += strlen(inc->affected_nodes[i]) + 1;
        g->affected = malloc(len);
        if (g->affected) {
            size_t at = 0;
            g->affected[at++] = '\n';
            for (size_t i = 0; i < inc->n_affected; i++)
                at += (size_t)snprintf(g->affected + at, len - at, "%s\n", inc->affected_nodes[i]);
        }
    }
    /* What spec section 3 says of every incident, whatever the scenario. */
    for (size_t i = 1; i < inc->n_evidence && !g->broken; i++)
        if (inc->evidence[i]->ts_ns < inc->evidence[i - 1]->ts_ns)
            g->broken = "evidence not oldest first";
    if (!g->broken && inc->n_evidence == 0)
        g->broken = "no evidence";
    if (!g->broken && inc->evidence[0]->ts_ns != inc->first_ts)
        g->broken = "first_ts is not the ts of the earliest evidence";
    if (!g->broken && inc->decided_ts < inc->first_ts)
        g->broken = "decided_ts before first_ts";
    if (!g->broken && inc->cls == GH_CLASS_APPLICATION && inc->node)
        g->broken = "an application fault blames a node";
    for (int i = 0; i < inc->n_actions && !g->broken; i++)
        if (inc->cls == GH_CLASS_APPLICATION &&
            (inc->actions[i] == GH_ACT_ISOLATE_NODE || inc->actions[i] == GH_ACT_DRAIN_NODE ||
             inc->actions[i] == GH_ACT_REPLACE_NODE))
            g->broken = "an application fault takes a node out of service";
    /* a shared cause blames no single node and takes none out for it */
    if (!g->broken && inc->n_affected && inc->node)
        g->broken = "a shared cause blames a node";
    for (int i = 0; i < inc->n_actions && !g->broken && inc->n_affected; i++)
        if (inc->actions[i] == GH_ACT_ISOLATE_NODE || inc->actions[i] == GH_ACT_DRAIN_NODE ||
            inc->actions[i] == GH_ACT_REPLACE_NODE || inc->actions[i] == GH_ACT_RESET_GPU ||
            inc->actions[i] == GH_ACT_REBOOT_NODE)
            g->broken = "a shared cause acts on its nodes";
}

static bool affected(const struct got *g, const char *node)
{
    if (!g->affected)
        return false;
    size_t len = strlen(node);
    for (const char *p = g->affected; (p = strstr(p, node)); p++)
        if (p[-1] == '\n' && p[len] == '\n')
            return true;
    return false;
}

static bool has_action(const struct got *g, enum gh_action a)
{
    for (int i = 0; i < g->n_actions; i++)
        if (g->actions[i] == a)
            return true;
    return false;
}

static bool isolates(const struct got *g)
{
    return g->node[0] && (has_action(g, GH_ACT_ISOLATE_NODE) || has_action(g, GH_ACT_DRAIN_NODE) ||
                          has_action(g, GH_ACT_REPLACE_NODE));
}

/* Whether g blames the node e expects (null: none; absent: any). */
static bool node_matches(const json_t *e, const struct got *g)
{
    const json_t *node = json_object_get(e, "node");
    if (!node)
        return true;
    if (json_is_null(node))
        return g->node[0] == '\0';
    return json_is_string(node) && strcmp(json_string_value(node), g->node) == 0;
}

/* Why actual g does not satisfy expected e (NULL when it does). Class is
 * checked by the caller. */
static const char *mismatch(const json_t *e, const struct got *g, char *buf, size_t cap)
{
    const json_t *node = json_object_get(e, "node");
    if (node && json_is_null(node) && g->node[0]) {
        snprintf(buf, cap, "blames %s, expected no node", g->node);
        return buf;
    }
    if (json_is_string(node) && strcmp(json_string_value(node), g->node) != 0) {
        snprintf(buf, cap, "blames %s, expected %s", g->node[0] ? g->node : "no node",
                 json_string_value(node));
        return buf;
    }
    const json_t *gpu = json_object_get(e, "gpu");
    if (gpu && json_is_null(gpu) && g->gpu >= 0) {
        snprintf(buf, cap, "blames GPU %d, expected none", g->gpu);
        return buf;
    }
    if (json_is_integer(gpu) && json_integer_value(gpu) != g->gpu) {
        snprintf(buf, cap, "blames GPU %d, expected %lld", g->gpu, (long long)json_integer_value(gpu));
        return buf;
    }
    const json_t *job = json_object_get(e, "job");
    if (json_is_string(job) && strcmp(json_string_value(job), g->job) != 0) {
        snprintf(buf, cap, "job %s, expected %s", g->job[0] ? g->job : "none", json_string_value(job));
        return buf;
    }
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(e, "actions_include"), i, a)
    {
        int act = json_is_string(a) ? gh_action_from_name(json_string_value(a)) : -1;
        if (act < 0 || !has_action(g, (enum gh_action)act)) {
            snprintf(buf, cap, "lacks action %s", json_is_string(a) ? json_string_value(a) : "?");
            return buf;
        }
    }
    json_array_foreach(json_object_get(e, "actions_exclude"), i, a)
    {
        int act = json_is_string(a) ? gh_action_from_name(json_string_value(a)) : -1;
        if (act >= 0 && has_action(g, (enum gh_action)act)) {
            snprintf(buf, cap, "has excluded action %s", json_string_value(a));
            return buf;
        }
    }
    const json_t *ck = json_object_get(e, "checkpoint_step");
    if (json_is_integer(ck) && (!g->has_ckpt || g->ckpt_step != json_integer_value(ck))) {
        snprintf(buf, cap, "checkpoint %s%lld, expected %lld", g->has_ckpt ? "step " : "none/",
                 (long long)g->ckpt_step, (long long)json_integer_value(ck));
        return buf;
    }
    const char *scope = gh_json_str(e, "scope");
    if (scope && strcmp(scope, gh_scope_name(g->scope)) != 0) {
        snprintf(buf, cap, "scope %s, expected %s", g->scope ? gh_scope_name(g->scope) : "none",
                 scope);
        return buf;
    }
    json_array_foreach(json_object_get(e, "affected_nodes"), i, a)
    {
        if (!json_is_string(a) || !affected(g, json_string_value(a))) {
            snprintf(buf, cap, "%s not among its affected nodes",
                     json_is_string(a) ? json_string_value(a) : "?");
            return buf;
        }
    }
    const json_t *md = json_object_get(e, "max_decide_s");
    if (json_is_number(md) && (double)(g->decided_ts - g->first_ts) / 1e9 > json_number_value(md)) {
        snprintf(buf, cap, "decided after %.1fs, expected within %.1fs",
                 (double)(g->decided_ts - g->first_ts) / 1e9, json_number_value(md));
        return buf;
    }
    return NULL;
}

struct totals {
    int scenarios, passed;
    int units, class_ok, node_ok;
    int false_isolations, missed_restarts, extras, broken;
    int fan_out;             /* most nodes isolated or reset for one cause in a scenario */
    char fan_out_where[128]; /* the scenario and rule */
    double decide_sum;
    int decide_n;
    double decide_max;
    double decides[MAX_GOT]; /* for the median */
};

static bool hits_node(const struct got *g)
{
    return g->node[0] &&
           (isolates(g) || has_action(g, GH_ACT_RESET_GPU) || has_action(g, GH_ACT_REBOOT_NODE));
}

/* By cause (class, rule), then node, then the order they were decided. */
static int cmp_hit(const void *a, const void *b)
{
    const struct got *x = *(const struct got *const *)a, *y = *(const struct got *const *)b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    int c = strcmp(x->rule, y->rule);
    if (!c)
        c = strcmp(x->node, y->node);
    return c ? c : x < y ? -1 : x > y;
}

/* Fan-out: the nodes one cause (a rule, within one class) took out of
 * service or reset, however many incidents it took; the largest so far is
 * kept in t (the cause decided first wins a tie). */
static void fan_out(const struct gotlist *got, const char *name, struct totals *t)
{
    const struct got **hit = malloc((size_t)(got->n ? got->n : 1) * sizeof *hit);
    if (!hit)
        return; /* out of memory: the fan-out line says less, nothing else */
    int n = 0;
    for (int k = 0; k < got->n; k++)
        if (hits_node(&got->v[k]))
            hit[n++] = &got->v[k];
    qsort(hit, (size_t)n, sizeof hit[0], cmp_hit);
    int best = 0;
    const struct got *best_first = NULL;
    for (int i = 0; i < n;) {
        const struct got *first = hit[i];
        int nodes = 0, j = i;
        for (; j < n && hit[j]->cls == hit[i]->cls && strcmp(hit[j]->rule, hit[i]->rule) == 0;
             j++) {
            nodes += j == i || strcmp(hit[j]->node, hit[j - 1]->node) != 0;
            if (hit[j] < first)
                first = hit[j];
        }
        if (nodes > best || (nodes == best && best_first && first < best_first)) {
            best = nodes;
            best_first = first;
        }
        i = j;
    }
    if (best > t->fan_out) {
        t->fan_out = best;
        snprintf(t->fan_out_where, sizeof t->fan_out_where, "%.80s, rule %.40s", name,
                 best_first->rule);
    }
    free(hit);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool score_one(const char *dir, const char *name, const struct gh_policy *policy, bool verbose,
                      struct totals *t, struct gotlist *got)
{
    char path[4096], epath[4096], why[256] = "", buf[200];
    snprintf(path, sizeof path, "%s/%s.jsonl", dir, name);
    snprintf(epath, sizeof epath, "%s/%s.expect.json", dir, name);
    json_error_t je;
    json_t *exp = json_load_file(epath, 0, &je);
    if (!exp || !json_is_object(exp)) {
        printf("%-36s ERROR  %s: line %d: %s\n", name, epath, je.line, je.text);
        json_decref(exp);
        t->scenarios++;
        return false;
    }
    got->n = 0;
    struct gh_replay r = {.path = path, .policy = policy, .cb = collect, .cb_ctx = got, .diag = NULL};
    struct gh_err err;
    if (gh_replay_file(&r, &err) != GH_OK) {
        printf("%-36s ERROR  %s\n", name, err.msg);
        for (int k = 0; k < got->n; k++)
            free(got->v[k].affected);
        json_decref(exp);
        t->scenarios++;
        return false;
    }
    const json_t *want = json_object_get(exp, "incidents");
    bool allow_extra = json_is_true(json_object_get(exp, "allow_extra"));
    bool ok = true;
    double max_decide = 0;
    size_t i;
    const json_t *e;
    if (json_array_size(want) == 0) {
        t->units++;
        if (got->n == 0) {
            t->class_ok++;
            t->node_ok++;
        }
    }
    json_array_foreach(want, i, e)
    {
        const char *cls = gh_json_str(e, "class");
        int c = cls ? gh_class_from_name(cls) : -1;
        const json_t *cmin = json_object_get(e, "count_min"), *cmax = json_object_get(e, "count_max");
        long lo = json_is_integer(cmin) ? (long)json_integer_value(cmin) : 1;
        long hi = json_is_integer(cmax) ? (long)json_integer_value(cmax) : lo > 1 ? lo : 1;
        long matched = 0;
        bool class_seen = false, node_seen = false;
        const char *first_why = NULL;
        for (int k = 0; k < got->n && matched < hi; k++) {
            struct got *g = &got->v[k];
            if (g->matched || (int)g->cls != c)
                continue;
            class_seen = true;
            node_seen |= node_matches(e, g);
            const char *m = mismatch(e, g, buf, sizeof buf);
            if (m) {
                if (!first_why)
                    snprintf(why, sizeof why, "%.40s: %.200s", cls, m), first_why = why;
                continue;
            }
            g->matched = true;
            matched++;
            double d = (double)(g->decided_ts - g->first_ts) / 1e9;
            if (d > max_decide)
                max_decide = d;
            t->decide_sum += d;
            if (t->decide_n < MAX_GOT)
                t->decides[t->decide_n] = d;
            t->decide_n++;
            if (d > t->decide_max)
                t->decide_max = d;
        }
        t->units++;
        t->class_ok += class_seen;
        t->node_ok += node_seen;
        if (matched < lo) {
            ok = false;
            if (!first_why)
                snprintf(why, sizeof why, "%s: %s", cls ? cls : "?",
                         class_seen ? "too few matching incidents" : "no incident of this class");
        }
    }
    /* Expected restarts that no incident made. */
    char lines[8][200];
    int n_lines = 0, missed = 0;
    json_array_foreach(want, i, e)
    {
        bool wants_restart = false;
        size_t ai;
        const json_t *a;
        json_array_foreach(json_object_get(e, "actions_include"), ai, a)
            wants_restart |= json_is_string(a) &&
                             strcmp(json_string_value(a), "restart_from_checkpoint") == 0;
        if (!wants_restart)
            continue;
        const char *cls = gh_json_str(e, "class");
        const char *job = gh_json_str(e, "job");
        int c = cls ? gh_class_from_name(cls) : -1;
        bool done = false;
        for (int k = 0; k < got->n && !done; k++)
            done = (int)got->v[k].cls == c && (!job || strcmp(job, got->v[k].job) == 0) &&
                   has_action(&got->v[k], GH_ACT_RESTART_FROM_CHECKPOINT);
        if (done)
            continue;
        missed++;
        if (n_lines < 8)
            snprintf(lines[n_lines++], sizeof lines[0], "missed restart: %s%s (%s)",
                     job ? job : "the job", job ? "" : " of the expected incident",
                     cls ? cls : "?");
    }
    t->missed_restarts += missed;
    if (missed) {
        ok = false;
        if (!why[0])
            snprintf(why, sizeof why, "%d missed restart%s", missed, missed > 1 ? "s" : "");
    }
    /* What the engine did beyond the expectations. */
    int extras = 0, false_iso = 0;
    for (int k = 0; k < got->n; k++) {
        const struct got *g = &got->v[k];
        if (isolates(g)) {
            bool expected_node = false;
            json_array_foreach(want, i, e)
            {
                const json_t *n = json_object_get(e, "node");
                expected_node |= json_is_string(n) && strcmp(json_string_value(n), g->node) == 0;
            }
            if (!expected_node) {
                false_iso++;
                if (n_lines < 8)
                    snprintf(lines[n_lines++], sizeof lines[0],
                             "false isolation: %.64s (%s, rule %.40s)", g->node,
                             gh_class_name(g->cls), g->rule);
            }
        }
        if (!g->matched)
            extras++;
    }
    t->false_isolations += false_iso;
    t->extras += extras;
    fan_out(got, name, t);
    for (int k = 0; k < got->n; k++)
        if (got->v[k].broken) {
            t->broken++;
            if (ok || !why[0])
                snprintf(why, sizeof why, "spec section 3: %s (%s)", got->v[k].broken,
                         gh_class_name(got->v[k].cls));
            ok = false;
        }
    if (false_iso) {
        ok = false;
        if (!why[0])
            snprintf(why, sizeof why, "%d false isolation%s", false_iso, false_iso > 1 ? "s" : "");
    }
    if (extras && !allow_extra) {
        ok = false;
        if (!why[0])
            snprintf(why, sizeof why, "%d unexpected incident%s", extras, extras > 1 ? "s" : "");
    }
    t->scenarios++;
    t->passed += ok;
    printf("%-36s %-5s  %2zu/%-3d decide %6.1fs%s%s\n", name, ok ? "ok" : "FAIL", json_array_size(want),
           got->n, max_decide, why[0] ? "  " : "", why);
    for (int k = 0; k < n_lines; k++)
        printf("    %s\n", lines[k]);
    if (verbose || !ok)
        for (int k = 0; k < got->n; k++) {
            const struct got *g = &got->v[k];
            printf("    %s %-22s node=%-8s gpu=%-2d job=%-12s rule=%s%s\n", g->matched ? "=" : "+",
                   gh_class_name(g->cls), g->node[0] ? g->node : "-", g->gpu, g->job[0] ? g->job : "-",
                   g->rule, r.bad_lines ? " (bad lines in input)" : "");
        }
    for (int k = 0; k < got->n; k++)
        free(got->v[k].affected);
    json_decref(exp);
    return ok;
}

int gh_scenario_score(int argc, char **argv);
int gh_scenario_score(int argc, char **argv)
{
    const char *dir = NULL, *policy_path = NULL;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0)
            verbose = true;
        else if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc)
            policy_path = argv[++i];
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: gpuheal scenario score [--verbose] [--policy FILE] DIR\n");
            return 0;
        } else if (!dir)
            dir = argv[i];
        else {
            fprintf(stderr, "gpuheal scenario score: one directory\n");
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "usage: gpuheal scenario score [--verbose] [--policy FILE] DIR\n");
        return 2;
    }
    struct gh_policy *policy = NULL;
    if (policy_path && !(policy = gh_cmd_load_policy(policy_path)))
        return 1;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "gpuheal scenario score: %s: cannot open\n", dir);
        gh_policy_free(policy);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 6 || strcmp(de->d_name + len - 6, ".jsonl") != 0)
            continue;
        char epath[4096];
        snprintf(epath, sizeof epath, "%s/%.*s.expect.json", dir, (int)(len - 6), de->d_name);
        FILE *probe = fopen(epath, "r");
        if (!probe)
            continue;
        fclose(probe);
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap = ncap;
        }
        names[n] = strndup(de->d_name, len - 6);
        if (names[n])
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    static const struct totals zero;
    struct totals *tp = malloc(sizeof *tp);
    if (!tp) {
        fprintf(stderr, "gpuheal scenario score: out of memory\n");
        gh_policy_free(policy);
        return 1;
    }
    *tp = zero;
    struct gotlist *got = malloc(sizeof *got);
    if (!got) {
        fprintf(stderr, "gpuheal scenario score: out of memory\n");
        gh_policy_free(policy);
        return 1;
    }
    printf("%-36s %-5s  %-6s %s\n", "scenario", "", "exp/got", "time to decide (max)");
    for (size_t i = 0; i < n; i++)
        score_one(dir, names[i], policy, verbose, tp, got);
    free(got);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    gh_policy_free(policy);
    printf("\nscenarios passed      %d/%d\n", tp->passed, tp->scenarios);
    printf("class accuracy        %.1f%% (%d/%d expected outcomes)\n",
           tp->units ? 100.0 * tp->class_ok / tp->units : 0, tp->class_ok, tp->units);
    printf("blamed-node accuracy  %.1f%% (%d/%d)\n", tp->units ? 100.0 * tp->node_ok / tp->units : 0,
           tp->node_ok, tp->units);
    printf("false isolations      %d\n", tp->false_isolations);
    printf("missed restarts       %d\n", tp->missed_restarts);
    printf("unexpected incidents  %d\n", tp->extras);
    printf("spec violations       %d (evidence order, first_ts, decided_ts, application and "
           "shared-cause blame)\n",
           tp->broken);
    if (tp->fan_out)
        printf("largest fan-out       %d node%s isolated or reset for one cause (%s)\n",
               tp->fan_out, tp->fan_out > 1 ? "s" : "", tp->fan_out_where);
    else
        printf("largest fan-out       0 nodes isolated or reset for one cause\n");
    int nd = tp->decide_n < MAX_GOT ? tp->decide_n : MAX_GOT;
    qsort(tp->decides, (size_t)nd, sizeof tp->decides[0], cmp_double);
    printf("time to decide        median %.1fs, mean %.1fs, max %.1fs over %d incidents "
           "(hold, sustain and repetition rules set the long ones)\n",
           nd ? tp->decides[nd / 2] : 0, tp->decide_n ? tp->decide_sum / tp->decide_n : 0, tp->decide_max,
           tp->decide_n);
    int rc = tp->scenarios > 0 && tp->passed == tp->scenarios ? 0 : 1;
    free(tp);
    return rc;
}
