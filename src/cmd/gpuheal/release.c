/* release.c - `gpuheal release node/NAME... | --all`: takes back what
 * gpuheal itself put on nodes, for an uninstall (or a node returned by
 * hand): its cordon and taint (only those its ownership annotations
 * gpuheal.io/cordoned-by and gpuheal.io/tainted-by say it set; a cordon or
 * taint of anyone else stays), its annotations (isolated-at,
 * replace-incident, replace-reason), its label gpuheal.io/replace and the
 * agent's Node condition GPUHealthy. With --db the release is recorded in
 * the audit store under the incident that isolated the node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "cmd/gpuheal/commands.h"
#include "common/json.h"
#include "common/timeutil.h"
#include "control/actuator.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"

#define NODES_MAX 10000

static const char *const own_annotations[] = {GH_ANN_ISOLATED_AT, "gpuheal.io/replace-incident",
                                              "gpuheal.io/replace-reason"};
#define N_OWN (sizeof own_annotations / sizeof own_annotations[0])
#define COND "GPUHealthy"

/* What was taken off one node. */
struct took {
    char incident[64]; /* who isolated it (cordoned-by, else tainted-by), or "" */
    bool uncordoned, untainted, label;
    int annotations;
    char annotation[200]; /* their keys, ", "-separated (as many as fit) */
    bool condition;
};

static const char *ann_of(const json_t *node, const char *k)
{
    return gh_json_str(node, "metadata", "annotations", k);
}

static bool has_condition(const json_t *node)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *t = gh_json_str(c, "type");
        if (t && !strcmp(t, COND))
            return true;
    }
    return false;
}

/* Whether gpuheal left anything on node. */
static bool marked(const json_t *node)
{
    if (ann_of(node, GH_ANN_CORDONED_BY) || ann_of(node, GH_ANN_TAINTED_BY) || has_condition(node))
        return true;
    for (size_t i = 0; i < N_OWN; i++)
        if (ann_of(node, own_annotations[i]))
            return true;
    return json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"),
                           GH_LABEL_REPLACE) != NULL;
}

#define NOTHING 1000

/* Removes annotation k from ann when there, counted and named in t. */
static void drop_annotation(struct took *t, json_t *ann, const char *k)
{
    if (!json_object_get(ann, k))
        return;
    json_object_del(ann, k);
    size_t u = strlen(t->annotation);
    snprintf(t->annotation + u, sizeof t->annotation - u, "%s%s", u ? ", " : "", k);
    t->annotations++;
}

static int mutate(void *ud, json_t *node)
{
    struct took *t = ud;
    bool cond = t->condition; /* set before: a status matter, not this update's */
    memset(t, 0, sizeof *t);
    t->condition = cond;
    json_t *meta = json_object_get(node, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    json_t *labels = json_object_get(meta, "labels");
    json_t *spec = json_object_get(node, "spec");
    const char *by = gh_json_str(ann, GH_ANN_CORDONED_BY);
    if (!by)
        by = gh_json_str(ann, GH_ANN_TAINTED_BY);
    snprintf(t->incident, sizeof t->incident, "%s", by ? by : "");
    if (json_object_get(ann, GH_ANN_CORDONED_BY)) {
        json_object_del(spec, "unschedulable");
        drop_annotation(t, ann, GH_ANN_CORDONED_BY);
        t->uncordoned = true;
    }
    if (json_object_get(ann, GH_ANN_TAINTED_BY)) {
        json_t *taints = json_object_get(spec, "taints"), *keep = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(taints, i, x) {
            const char *k = gh_json_str(x, "key");
            if (!k || strcmp(k, GH_TAINT_KEY) != 0)
                json_array_append(keep, x);
        }
        json_object_set_new(spec, "taints", keep);
        drop_annotation(t, ann, GH_ANN_TAINTED_BY);
        t->untainted = true;
    }
    for (size_t i = 0; i < N_OWN; i++)
        drop_annotation(t, ann, own_annotations[i]);
    if (json_object_get(labels, GH_LABEL_REPLACE)) {
        json_object_del(labels, GH_LABEL_REPLACE);
        t->label = true;
    }
    return t->uncordoned || t->untainted || t->annotations || t->label ? GH_OK : NOTHING;
}

static void words(const struct took *t, char *buf, size_t cap)
{
    size_t u = 0;
    buf[0] = '\0';
#define ADD(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(buf + u, cap - u, "%s", u ? ", " : "");                                  \
        u += w_ > 0 && (size_t)w_ < cap - u ? (size_t)w_ : 0;                                      \
        w_ = snprintf(buf + u, cap - u, __VA_ARGS__);                                              \
        u += w_ > 0 && (size_t)w_ < cap - u ? (size_t)w_ : 0;                                      \
    } while (0)
    if (t->uncordoned)
        ADD("uncordoned");
    if (t->untainted)
        ADD("removed taint %s", GH_TAINT_KEY);
    if (t->annotations)
        ADD("removed %d annotation%s (%s)", t->annotations, t->annotations == 1 ? "" : "s",
            t->annotation);
    if (t->label)
        ADD("removed label %s", GH_LABEL_REPLACE);
    if (t->condition)
        ADD("removed condition " COND);
#undef ADD
}

/* Takes gpuheal's marks off node name; prints what it did. 0 ok, 1 failed. */
static int release_one(struct gh_kube_client *c, struct gh_audit *a, const char *name,
                       bool dry_run, const char *by)
{
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, name};
    struct gh_err err = {{0}};
    json_t *node = NULL;
    if (gh_kube_get(c, &ref, &node, NULL, &err)) {
        fprintf(stderr, "gpuheal release: node/%s: %s\n", name, err.msg);
        return 1;
    }
    struct took t = {0};
    bool cond = has_condition(node);
    bool foreign_cordon = json_is_true(json_object_get(json_object_get(node, "spec"),
                                                       "unschedulable")) &&
                          !ann_of(node, GH_ANN_CORDONED_BY);
    if (dry_run) {
        json_t *copy = json_deep_copy(node);
        t.condition = cond;
        int r = copy ? mutate(&t, copy) : NOTHING;
        json_decref(copy);
        char w[256];
        words(&t, w, sizeof w);
        printf("node/%s: %s (dry run)%s\n", name, r == NOTHING && !cond ? "nothing of gpuheal's" : w,
               foreign_cordon ? "; its cordon is someone else's: left" : "");
        json_decref(node);
        return 0;
    }
    json_decref(node);
    int64_t t0 = gh_clock_now(gh_clock_real());
    int rc = gh_kube_update_retry(c, &ref, NULL, mutate, &t, 5, NULL, NULL, NULL, &err);
    if (rc && rc != NOTHING) {
        fprintf(stderr, "gpuheal release: node/%s: %s\n", name, err.msg);
        return 1;
    }
    if (cond) { /* the agent's condition (a strategic merge keyed by type) */
        json_t *p = json_pack("{s:{s:[{s:s, s:s}]}}", "status", "conditions", "type", COND,
                              "$patch", "delete");
        if (!p || gh_kube_patch(c, &ref, "status", GH_KUBE_PATCH_STRATEGIC, p, NULL, NULL, &err)) {
            fprintf(stderr, "gpuheal release: node/%s: condition %s not removed: %s\n", name,
                    COND, p ? err.msg : "out of memory");
            json_decref(p);
            return 1;
        }
        json_decref(p);
        t.condition = true;
    }
    char w[256];
    words(&t, w, sizeof w);
    bool any = w[0] != '\0';
    printf("node/%s: %s%s\n", name, any ? w : "nothing of gpuheal's",
           foreign_cordon ? "; its cordon is someone else's: left" : "");
    if (a && any) {
        char target[300], detail[600];
        snprintf(target, sizeof target, "node/%s", name);
        snprintf(detail, sizeof detail, "gpuheal release by %s: %s", by, w);
        if (!t.incident[0]) {
            printf("  not recorded in the audit store: no incident isolated node/%s\n", name);
        } else {
            struct gh_audit_action rec = {t.incident, NULL, "release_node", target, t0,
                                          gh_clock_now(gh_clock_real()), "succeeded", 200,
                                          "gpuheal release", detail};
            struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
            snprintf(s.name, sizeof s.name, "%s", t.incident);
            struct gh_audit_incident_rec *recs = NULL;
            size_t n = 0;
            if (gh_audit_query(a, &s, 0, 1, &recs, &n, &err) != GH_OK || n != 1)
                printf("  not recorded in the audit store: incident %s is not in it\n",
                       t.incident);
            else if (gh_audit_record_action(a, &rec, &err) != GH_OK)
                fprintf(stderr, "gpuheal release: node/%s released, not recorded: %s\n", name,
                        err.msg);
            else
                printf("  recorded under incident %s\n", t.incident);
            gh_audit_recs_free(recs, n);
        }
    }
    return 0;
}

struct names {
    char **v;
    size_t n;
};

static int collect(void *ud, json_t *node)
{
    struct names *l = ud;
    const char *name = gh_kube_meta_name(node);
    if (!name || !marked(node))
        return 0;
    if (l->n >= NODES_MAX)
        return GH_ELIMIT;
    char *d = strdup(name);
    if (!d)
        return GH_ENOMEM;
    l->v[l->n++] = d;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuheal release (node/NAME... | --all) [--kubeconfig PATH] [--context NAME]\n"
               "                       [--db URL] [--by NAME] [--dry-run]\n");
}

int gh_cmd_release(int argc, char **argv)
{
    const char *kubeconfig = NULL, *context = NULL, *db = NULL, *by = NULL;
    bool all = false, dry_run = false;
    int nn = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kubeconfig") && i + 1 < argc) {
            kubeconfig = argv[++i];
        } else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
            context = argv[++i];
        } else if (!strcmp(argv[i], "--db") && i + 1 < argc) {
            db = argv[++i];
        } else if (!strcmp(argv[i], "--by") && i + 1 < argc) {
            by = argv[++i];
        } else if (!strcmp(argv[i], "--all")) {
            all = true;
        } else if (!strcmp(argv[i], "--dry-run")) {
            dry_run = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            printf("Takes back what gpuheal set on nodes (for an uninstall, or a node you\n"
                   "returned yourself): its cordon and taint %s (only where its annotations\n"
                   "%s / %s say gpuheal set them: a cordon or taint\n"
                   "of anyone else stays), its annotations, its label %s and the\n"
                   "agent's condition %s. --all: every node with any of these. --db: record\n"
                   "the release in the audit store under the incident that isolated the node.\n"
                   "Stop the controller first, or it may isolate the node again.\n",
                   GH_TAINT_KEY, GH_ANN_CORDONED_BY, GH_ANN_TAINTED_BY, GH_LABEL_REPLACE, COND);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "gpuheal release: unknown option \"%s\"\n", argv[i]);
            return 2;
        } else if (strncmp(argv[i], "node/", 5) != 0 || !argv[i][5]) {
            fprintf(stderr, "gpuheal release: \"%s\": expected node/NAME\n", argv[i]);
            return 2;
        } else {
            nn++;
        }
    }
    if (all == (nn > 0)) {
        fprintf(stderr, "gpuheal release: name nodes (node/NAME) or --all, not both or neither\n");
        usage(stderr);
        return 2;
    }
    if (!by)
        by = getenv("USER") && *getenv("USER") ? getenv("USER") : "gpuheal-cli";
    struct gh_err err = {{0}};
    struct gh_kube_client *c = gh_cmd_kube_client("release", kubeconfig, context);
    if (!c)
        return 1;
    int rc = 0;
    struct gh_audit *a = NULL;
    if (db && !dry_run && gh_audit_open_existing(db, &a, &err)) {
        fprintf(stderr, "gpuheal release: %s\n", err.msg);
        gh_kube_client_free(c);
        return 1;
    }
    int status = 0;
    if (all) {
        struct names l = {calloc(NODES_MAX, sizeof(char *)), 0};
        char rv[64];
        struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, NULL};
        rc = l.v ? gh_kube_list_all(c, &ref, NULL, collect, &l, rv, sizeof rv, NULL, &err)
                 : gh_err_set(&err, GH_ENOMEM, "out of memory");
        if (rc) {
            fprintf(stderr, "gpuheal release: listing nodes: %s\n", err.msg);
            status = 1;
        } else if (l.n == 0) {
            printf("no node carries anything of gpuheal's\n");
        }
        for (size_t i = 0; !rc && i < l.n; i++)
            status |= release_one(c, a, l.v[i], dry_run, by);
        for (size_t i = 0; i < l.n; i++)
            free(l.v[i]);
        free(l.v);
    } else {
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--kubeconfig") || !strcmp(argv[i], "--context") ||
                !strcmp(argv[i], "--db") || !strcmp(argv[i], "--by")) {
                i++;
                continue;
            }
            if (!strncmp(argv[i], "node/", 5))
                status |= release_one(c, a, argv[i] + 5, dry_run, by);
        }
    }
    gh_audit_close(a);
    gh_kube_client_free(c);
    return status;
}
