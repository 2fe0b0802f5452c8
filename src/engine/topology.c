/* topology.c - nodes, jobs and rank placement, declared or learned. */
#include "engine/topology.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

struct job {
    unsigned *nodes;
    size_t n_nodes, cap_nodes;
    int ranks_per_node;
    int max_rank;
    int32_t *rank_node; /* learned placement, -1 = unknown */
    int16_t *rank_gpu;
    size_t rank_cap;
    double remaining_s, restart_cost_s;
    uint64_t touched; /* when a signal last placed the job (topology clock) */
    bool declared;    /* added by gh_topology_add_job, not only learned */
    uint8_t *gone;    /* per nodes[i]: its pods there ended (pod_succeeded) */
    size_t n_gone;
    int64_t ended_ts; /* when the job ended (0: it runs) */
};

struct gh_topology {
    char *scenario;
    uint64_t clock; /* counts gh_topology_note calls: "most recently seen" */
    uint64_t generation; /* counts job removals */
    size_t n_marked;     /* jobs ended or gone from a node: gh_topology_note clears them */
    int gpus_per_node;
    uint64_t nomem; /* allocations that failed in gh_topology_note */
    struct gh_strmap *nodes;
    struct gh_strmap *jobs; /* values: struct job * */
};

struct gh_topology *gh_topology_new(void)
{
    struct gh_topology *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->nodes = gh_strmap_new(GH_TOPO_MAX_NODES);
    t->jobs = gh_strmap_new(GH_TOPO_MAX_JOBS);
    if (!t->nodes || !t->jobs) {
        gh_topology_free(t);
        return NULL;
    }
    return t;
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    free(j->nodes);
    free(j->gone);
    free(j->rank_node);
    free(j->rank_gpu);
    free(j);
}

void gh_topology_free(struct gh_topology *t)
{
    if (!t)
        return;
    if (t->jobs)
        for (size_t i = 0; i < gh_strmap_count(t->jobs); i++)
            job_free(gh_strmap_value(t->jobs, i));
    gh_strmap_free(t->jobs);
    if (t->nodes)
        for (size_t i = 0; i < gh_strmap_count(t->nodes); i++)
            free(gh_strmap_value(t->nodes, i));
    gh_strmap_free(t->nodes);
    free(t->scenario);
    free(t);
}

long gh_topology_add_node(struct gh_topology *t, const char *node)
{
    if (!node || !*node)
        return -1;
    return gh_strmap_intern(t->nodes, node, NULL, NULL);
}

/* A node's labels are one block "k1\0v1\0k2\0v2\0\0" (the node's value in
 * t->nodes, NULL when it has none): one allocation per node, read in order. */
static size_t labels_size(const char *b)
{
    const char *p = b;
    while (*p)
        p += strlen(p) + 1; /* a key, then its value */
    return (size_t)(p - b) + 1;
}

int gh_topology_set_node_labels(struct gh_topology *t, const char *node, const char *const *keys,
                                const char *const *values, size_t n)
{
    long i = gh_topology_add_node(t, node);
    if (i < 0)
        return gh_strmap_full(t->nodes) ? GH_ELIMIT : GH_ENOMEM;
    size_t size = 1;
    for (size_t k = 0; k < n; k++) {
        if (!keys[k] || !*keys[k] || !values[k])
            continue;
        size += strlen(keys[k]) + strlen(values[k]) + 2;
    }
    char *b = NULL;
    if (size > 1) {
        b = malloc(size);
        if (!b)
            return GH_ENOMEM;
        char *p = b;
        for (size_t k = 0; k < n; k++) {
            if (!keys[k] || !*keys[k] || !values[k])
                continue;
            size_t kl = strlen(keys[k]) + 1, vl = strlen(values[k]) + 1;
            memcpy(p, keys[k], kl);
            p += kl;
            memcpy(p, values[k], vl);
            p += vl;
        }
        *p = '\0';
    }
    free(gh_strmap_value(t->nodes, (size_t)i));
    gh_strmap_set_value(t->nodes, (size_t)i, b);
    return GH_OK;
}

const char *gh_topology_node_labels(const struct gh_topology *t, size_t node)
{
    return node < gh_strmap_count(t->nodes) ? gh_strmap_value(t->nodes, node) : NULL;
}

bool gh_topology_label_next(const char **it, const char **key, const char **value)
{
    const char *p = *it;
    if (!p || !*p)
        return false;
    *key = p;
    *value = p + strlen(p) + 1;
    *it = *value + strlen(*value) + 1;
    return true;
}

const char *gh_topology_node_label(const struct gh_topology *t, size_t node, const char *key)
{
    const char *it = gh_topology_node_labels(t, node), *k, *v;
    while (gh_topology_label_next(&it, &k, &v))
        if (strcmp(k, key) == 0)
            return v;
    return NULL;
}

static struct job *job_get(struct gh_topology *t, const char *name, long *idx)
{
    bool created;
    long j = gh_strmap_intern(t->jobs, name, &created, NULL);
    if (j < 0) {
        if (!gh_strmap_full(t->jobs))
            t->nomem++;
        return NULL;
    }
    struct job *jb = gh_strmap_value(t->jobs, (size_t)j);
    if (!jb) {
        jb = calloc(1, sizeof *jb);
        if (!jb) {
            /* no key without a job: every reader of the table takes the
             * value for granted */
            if (created)
                gh_strmap_remove(t->jobs, (size_t)j);
            t->nomem++;
            return NULL;
        }
        jb->max_rank = -1;
        jb->remaining_s = -1;
        jb->restart_cost_s = -1;
        gh_strmap_set_value(t->jobs, (size_t)j, jb);
    }
    *idx = j;
    return jb;
}

static int job_add_node(struct job *jb, unsigned node)
{
    for (size_t i = 0; i < jb->n_nodes; i++)
        if (jb->nodes[i] == node)
            return GH_OK;
    if (jb->n_nodes >= GH_TOPO_MAX_NODES)
        return GH_ELIMIT;
    if (jb->n_nodes == jb->cap_nodes) {
        size_t ncap = jb->cap_nodes ? jb->cap_nodes * 2 : 4;
        unsigned *nn = realloc(jb->nodes, ncap * sizeof *nn);
        if (!nn)
            return GH_ENOMEM;
        jb->nodes = nn;
        uint8_t *ng = realloc(jb->gone, ncap * sizeof *ng);
        if (!ng)
            return GH_ENOMEM;
        jb->gone = ng;
        jb->cap_nodes = ncap;
    }
    jb->gone[jb->n_nodes] = 0;
    jb->nodes[jb->n_nodes++] = node;
    return GH_OK;
}

long gh_topology_add_job(struct gh_topology *t, const char *job, const char *const *nodes,
                         size_t n_nodes, int ranks_per_node)
{
    long j;
    struct job *jb = job_get(t, job, &j);
    if (!jb)
        return -1;
    jb->declared = true;
    if (ranks_per_node > 0)
        jb->ranks_per_node = ranks_per_node;
    for (size_t i = 0; i < n_nodes; i++) {
        long n = gh_topology_add_node(t, nodes[i]);
        if (n < 0 || job_add_node(jb, (unsigned)n) != GH_OK)
            return -1;
    }
    return j;
}

void gh_topology_set_job_costs(struct gh_topology *t, long job, double remaining_s,
                               double restart_cost_s)
{
    if (job < 0 || (size_t)job >= gh_strmap_count(t->jobs))
        return;
    struct job *jb = gh_strmap_value(t->jobs, (size_t)job);
    if (!jb)
        return;
    jb->remaining_s = remaining_s;
    jb->restart_cost_s = restart_cost_s;
}

static int grow_ranks(struct job *jb, int rank)
{
    size_t need = (size_t)rank + 1;
    if (need <= jb->rank_cap)
        return GH_OK;
    size_t ncap = jb->rank_cap ? jb->rank_cap : 64;
    while (ncap < need)
        ncap *= 2;
    int32_t *rn = realloc(jb->rank_node, ncap * sizeof *rn);
    if (!rn)
        return GH_ENOMEM;
    jb->rank_node = rn;
    int16_t *rg = realloc(jb->rank_gpu, ncap * sizeof *rg);
    if (!rg)
        return GH_ENOMEM;
    jb->rank_gpu = rg;
    for (size_t i = jb->rank_cap; i < ncap; i++) {
        rn[i] = -1;
        rg[i] = -1;
    }
    jb->rank_cap = ncap;
    return GH_OK;
}

static bool marked(const struct job *jb) { return jb->ended_ts || jb->n_gone; }

/* A signal placed jb on node n (-1: none named): it runs (there). */
static void unmark(struct gh_topology *t, struct job *jb, long n)
{
    bool was = marked(jb);
    jb->ended_ts = 0;
    for (size_t i = 0; n >= 0 && i < jb->n_nodes; i++)
        if (jb->nodes[i] == (unsigned)n && jb->gone[i]) {
            jb->gone[i] = 0;
            jb->n_gone--;
        }
    if (was && !marked(jb))
        t->n_marked--;
}

long gh_topology_note(struct gh_topology *t, const char *job, const char *node, int rank, int gpu)
{
    if (!job || !*job)
        return -1;
    long j;
    struct job *jb = job_get(t, job, &j);
    if (!jb)
        return -1;
    long n = node && *node ? gh_strmap_intern(t->nodes, node, NULL, NULL) : -1;
    if (n >= 0 ? job_add_node(jb, (unsigned)n) == GH_ENOMEM
               : node && *node && !gh_strmap_full(t->nodes))
        t->nomem++;
    if (jb->ended_ts || jb->n_gone)
        unmark(t, jb, n);
    jb->touched = ++t->clock;
    if (rank >= 0 && rank < GH_TOPO_MAX_RANKS) {
        if (rank > jb->max_rank)
            jb->max_rank = rank;
        int grc = n >= 0 ? grow_ranks(jb, rank) : GH_EINVAL;
        if (grc == GH_ENOMEM)
            t->nomem++;
        if (grc == GH_OK) {
            jb->rank_node[rank] = (int32_t)n;
            jb->rank_gpu[rank] = (int16_t)(gpu >= 0 && gpu < INT16_MAX ? gpu : -1);
        }
    }
    return j;
}

void gh_topology_job_leave(struct gh_topology *t, size_t j, const char *node, int64_t ts)
{
    struct job *jb = j < gh_strmap_count(t->jobs) ? gh_strmap_value(t->jobs, j) : NULL;
    long n = gh_topology_find_node(t, node);
    if (!jb || n < 0)
        return;
    bool was = marked(jb);
    size_t left = 0;
    for (size_t i = 0; i < jb->n_nodes; i++) {
        if (jb->nodes[i] == (unsigned)n && !jb->gone[i]) {
            jb->gone[i] = 1;
            jb->n_gone++;
        }
        left += !jb->gone[i];
    }
    if (left == 0 && !jb->ended_ts)
        jb->ended_ts = ts; /* no pod of it left anywhere */
    if (!was && marked(jb))
        t->n_marked++;
}

void gh_topology_job_end(struct gh_topology *t, size_t j, int64_t ts)
{
    struct job *jb = j < gh_strmap_count(t->jobs) ? gh_strmap_value(t->jobs, j) : NULL;
    if (!jb || jb->ended_ts)
        return;
    bool was = marked(jb);
    jb->ended_ts = ts;
    if (!was)
        t->n_marked++;
}

int64_t gh_topology_job_ended(const struct gh_topology *t, size_t j)
{
    const struct job *jb = j < gh_strmap_count(t->jobs) ? gh_strmap_value(t->jobs, j) : NULL;
    return jb ? jb->ended_ts : 0;
}

bool gh_topology_job_gone(const struct gh_topology *t, size_t j, const char *node)
{
    const struct job *jb = j < gh_strmap_count(t->jobs) ? gh_strmap_value(t->jobs, j) : NULL;
    long n = gh_topology_find_node(t, node);
    if (!jb || n < 0 || !jb->n_gone)
        return false;
    for (size_t i = 0; i < jb->n_nodes; i++)
        if (jb->nodes[i] == (unsigned)n)
            return jb->gone[i];
    return false;
}

size_t gh_topology_marked(const struct gh_topology *t) { return t->n_marked; }

void gh_topology_remove_job(struct gh_topology *t, size_t j)
{
    if (j >= gh_strmap_count(t->jobs) || !gh_strmap_key(t->jobs, j))
        return;
    if (marked(gh_strmap_value(t->jobs, j)))
        t->n_marked--;
    job_free(gh_strmap_value(t->jobs, j));
    gh_strmap_remove(t->jobs, j);
    t->generation++;
}

uint64_t gh_topology_generation(const struct gh_topology *t) { return t->generation; }

const char *gh_topology_scenario(const struct gh_topology *t) { return t->scenario; }
int gh_topology_gpus_per_node(const struct gh_topology *t) { return t->gpus_per_node; }
size_t gh_topology_node_count(const struct gh_topology *t) { return gh_strmap_count(t->nodes); }
const char *gh_topology_node_name(const struct gh_topology *t, size_t i)
{
    return gh_strmap_key(t->nodes, i);
}
long gh_topology_find_node(const struct gh_topology *t, const char *node)
{
    return node ? gh_strmap_find(t->nodes, node) : -1;
}
size_t gh_topology_job_count(const struct gh_topology *t) { return gh_strmap_count(t->jobs); }
size_t gh_topology_jobs_live(const struct gh_topology *t) { return gh_strmap_live(t->jobs); }
const char *gh_topology_job_name(const struct gh_topology *t, size_t j)
{
    return gh_strmap_key(t->jobs, j);
}
long gh_topology_find_job(const struct gh_topology *t, const char *job)
{
    return job ? gh_strmap_find(t->jobs, job) : -1;
}

static const struct job *job_at(const struct gh_topology *t, size_t j)
{
    return j < gh_strmap_count(t->jobs) ? gh_strmap_value(t->jobs, j) : NULL;
}

size_t gh_topology_job_nodes(const struct gh_topology *t, size_t j, const unsigned **out)
{
    const struct job *jb = job_at(t, j);
    *out = jb ? jb->nodes : NULL;
    return jb ? jb->n_nodes : 0;
}

bool gh_topology_job_has_node(const struct gh_topology *t, size_t j, const char *node)
{
    const struct job *jb = job_at(t, j);
    long n = gh_topology_find_node(t, node);
    if (!jb || n < 0)
        return false;
    for (size_t i = 0; i < jb->n_nodes; i++)
        if (jb->nodes[i] == (unsigned)n)
            return true;
    return false;
}

bool gh_topology_job_declared(const struct gh_topology *t, size_t j)
{
    const struct job *jb = job_at(t, j);
    return jb && jb->declared;
}

int gh_topology_job_ranks(const struct gh_topology *t, size_t j)
{
    const struct job *jb = job_at(t, j);
    if (!jb)
        return 0;
    long declared = jb->ranks_per_node > 0 ? (long)jb->ranks_per_node * (long)jb->n_nodes : 0;
    long seen = (long)jb->max_rank + 1;
    long r = declared > seen ? declared : seen;
    return r > GH_TOPO_MAX_RANKS ? GH_TOPO_MAX_RANKS : (int)r;
}

bool gh_topology_rank_location(const struct gh_topology *t, size_t j, int rank,
                               const char **node, int *gpu)
{
    const struct job *jb = job_at(t, j);
    if (!jb || rank < 0)
        return false;
    if ((size_t)rank < jb->rank_cap && jb->rank_node[rank] >= 0) {
        *node = gh_strmap_key(t->nodes, (size_t)jb->rank_node[rank]);
        *gpu = jb->rank_gpu[rank];
        return true;
    }
    if (jb->ranks_per_node > 0 && (size_t)(rank / jb->ranks_per_node) < jb->n_nodes) {
        *node = gh_strmap_key(t->nodes, jb->nodes[rank / jb->ranks_per_node]);
        *gpu = rank % jb->ranks_per_node;
        return true;
    }
    return false;
}

long gh_topology_job_on_node(const struct gh_topology *t, const char *node, int gpu)
{
    /* Among the jobs holding the node, prefer one with a rank placed on this
     * very GPU, then the one seen most recently (jobs come and go on a
     * node), then the first declared. */
    long n = gh_topology_find_node(t, node), best = -1;
    int best_rank = -1;
    uint64_t best_touch = 0;
    if (n < 0)
        return -1;
    for (size_t j = 0; j < gh_strmap_count(t->jobs); j++) {
        const struct job *jb = job_at(t, j);
        if (!jb)
            continue;
        if (jb->ended_ts)
            continue; /* over: nothing of it runs */
        bool holds = false;
        for (size_t i = 0; i < jb->n_nodes && !holds; i++)
            holds = jb->nodes[i] == (unsigned)n && !jb->gone[i];
        if (!holds)
            continue;
        int rank = 0;
        if (gpu >= 0)
            for (size_t r = 0; r < jb->rank_cap && !rank; r++)
                if (jb->rank_node[r] == (int32_t)n && jb->rank_gpu[r] == gpu)
                    rank = 1;
        if (best < 0 || rank > best_rank || (rank == best_rank && jb->touched > best_touch)) {
            best = (long)j;
            best_rank = rank;
            best_touch = jb->touched;
        }
    }
    return best;
}

double gh_topology_job_remaining_s(const struct gh_topology *t, size_t j)
{
    const struct job *jb = job_at(t, j);
    return jb ? jb->remaining_s : -1;
}

double gh_topology_job_restart_cost_s(const struct gh_topology *t, size_t j)
{
    const struct job *jb = job_at(t, j);
    return jb ? jb->restart_cost_s : -1;
}

uint64_t gh_topology_nomem(const struct gh_topology *t) { return t->nomem; }

size_t gh_topology_memory(const struct gh_topology *t)
{
    size_t b = sizeof *t + gh_strmap_memory(t->nodes) + gh_strmap_memory(t->jobs);
    for (size_t i = 0; i < gh_strmap_count(t->nodes); i++) {
        const char *l = gh_strmap_value(t->nodes, i);
        if (l)
            b += labels_size(l);
    }
    for (size_t j = 0; j < gh_strmap_count(t->jobs); j++) {
        const struct job *jb = job_at(t, j);
        if (jb)
            b += sizeof *jb + jb->cap_nodes * sizeof(unsigned) +
                 jb->rank_cap * (sizeof(int32_t) + sizeof(int16_t));
    }
    return b;
}

struct gh_topology *gh_topology_clone(const struct gh_topology *t)
{
    struct gh_topology *c = gh_topology_new();
    if (!c)
        return NULL;
    if (t->scenario && !(c->scenario = strdup(t->scenario)))
        goto fail;
    c->gpus_per_node = t->gpus_per_node;
    c->clock = t->clock;
    for (size_t i = 0; i < gh_strmap_count(t->nodes); i++) {
        if (gh_topology_add_node(c, gh_strmap_key(t->nodes, i)) != (long)i)
            goto fail;
        const char *b = gh_strmap_value(t->nodes, i);
        if (b) {
            size_t size = labels_size(b);
            char *copy = malloc(size);
            if (!copy)
                goto fail;
            memcpy(copy, b, size);
            gh_strmap_set_value(c->nodes, i, copy);
        }
    }
    for (size_t j = 0; j < gh_strmap_count(t->jobs); j++) {
        const struct job *jb = job_at(t, j);
        if (!gh_strmap_key(t->jobs, j))
            continue; /* a free index */
        long cj;
        struct job *cb = job_get(c, gh_strmap_key(t->jobs, j), &cj);
        if (!cb || !jb)
            goto fail;
        cb->ranks_per_node = jb->ranks_per_node;
        cb->max_rank = jb->max_rank;
        cb->remaining_s = jb->remaining_s;
        cb->restart_cost_s = jb->restart_cost_s;
        cb->touched = jb->touched;
        cb->declared = jb->declared;
        for (size_t i = 0; i < jb->n_nodes; i++) {
            if (job_add_node(cb, jb->nodes[i]) != GH_OK)
                goto fail;
            cb->gone[i] = jb->gone[i];
        }
        cb->n_gone = jb->n_gone;
        cb->ended_ts = jb->ended_ts;
        c->n_marked += marked(cb);
        if (jb->rank_cap) {
            if (grow_ranks(cb, (int)jb->rank_cap - 1) != GH_OK)
                goto fail;
            memcpy(cb->rank_node, jb->rank_node, jb->rank_cap * sizeof *cb->rank_node);
            memcpy(cb->rank_gpu, jb->rank_gpu, jb->rank_cap * sizeof *cb->rank_gpu);
        }
    }
    return c;
fail:
    gh_topology_free(c);
    return NULL;
}

static int str_array(const json_t *a, const char *what, const char ***out, size_t *n,
                     struct gh_err *err)
{
    *out = NULL;
    *n = 0;
    if (!a)
        return GH_OK;
    if (!json_is_array(a))
        return gh_err_set(err, GH_EINVAL, "header: \"%s\" is not an array", what);
    size_t len = json_array_size(a);
    if (len > GH_TOPO_MAX_NODES)
        return gh_err_set(err, GH_ELIMIT, "header: \"%s\" has more than %d entries", what,
                          GH_TOPO_MAX_NODES);
    const char **v = calloc(len ? len : 1, sizeof *v);
    if (!v)
        return gh_err_set(err, GH_ENOMEM, "header: out of memory");
    for (size_t i = 0; i < len; i++) {
        const json_t *s = json_array_get(a, i);
        if (!json_is_string(s)) {
            free(v);
            return gh_err_set(err, GH_EINVAL, "header: \"%s\"[%zu] is not a string", what, i);
        }
        v[i] = json_string_value(s);
    }
    *out = v;
    *n = len;
    return GH_OK;
}

static int opt_number(const json_t *o, const char *key, double *v, struct gh_err *err)
{
    const json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x))
        return GH_OK;
    if (!json_is_number(x))
        return gh_err_set(err, GH_EINVAL, "header: \"%s\" is not a number", key);
    *v = json_number_value(x);
    return GH_OK;
}

/* Why adding names[0..n) to t failed (gh_topology_add_node/_add_job say
 * only -1): an empty name, a full table, or else out of memory. */
static int add_error(const struct gh_topology *t, const char *const *names, size_t n,
                     struct gh_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (!names[i][0])
            return gh_err_set(err, GH_EINVAL, "header: empty node name");
    if (gh_strmap_count(t->nodes) >= GH_TOPO_MAX_NODES ||
        gh_strmap_count(t->jobs) >= GH_TOPO_MAX_JOBS)
        return gh_err_set(err, GH_ELIMIT, "header: too many jobs or nodes");
    return gh_err_set(err, GH_ENOMEM, "header: out of memory");
}

/* "node_labels": {"NODE": {"KEY": "VALUE", ...}, ...} (spec section 2).
 * Labels that are not strings are ignored, as unknown fields are. */
static int header_labels(struct gh_topology *t, const json_t *nl, struct gh_err *err)
{
    if (!nl || json_is_null(nl))
        return GH_OK;
    if (!json_is_object(nl))
        return gh_err_set(err, GH_EINVAL, "header: \"node_labels\" is not an object");
    const char *node;
    const json_t *labels;
    json_object_foreach((json_t *)nl, node, labels)
    {
        if (!json_is_object(labels))
            return gh_err_set(err, GH_EINVAL, "header: node_labels[\"%s\"] is not an object", node);
        size_t n = json_object_size(labels), k = 0;
        const char **keys = calloc(n ? n : 1, sizeof *keys);
        const char **values = calloc(n ? n : 1, sizeof *values);
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)labels, key, v)
        {
            if (keys && values && json_is_string(v)) {
                keys[k] = key;
                values[k++] = json_string_value(v);
            }
        }
        int rc = keys && values ? gh_topology_set_node_labels(t, node, keys, values, k) : GH_ENOMEM;
        free(keys);
        free(values);
        if (rc == GH_ELIMIT)
            return gh_err_set(err, rc, "header: more than %d nodes", GH_TOPO_MAX_NODES);
        if (rc)
            return gh_err_set(err, rc, "header: out of memory");
    }
    return GH_OK;
}

int gh_topology_from_header(const json_t *hdr, struct gh_topology **out, struct gh_err *err)
{
    int rc = GH_OK;
    const char **names = NULL;
    size_t n = 0;
    struct gh_topology *t = gh_topology_new();
    *out = NULL;
    if (!t)
        return gh_err_set(err, GH_ENOMEM, "header: out of memory");
    if (!json_is_object(hdr)) {
        rc = gh_err_set(err, GH_EINVAL, "header: not a JSON object");
        goto out;
    }
    const json_t *sc = json_object_get(hdr, "scenario");
    if (json_is_string(sc) && !(t->scenario = strdup(json_string_value(sc)))) {
        rc = gh_err_set(err, GH_ENOMEM, "header: out of memory");
        goto out;
    }
    const json_t *g = json_object_get(hdr, "gpus_per_node");
    if (g && !json_is_null(g)) {
        if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) > 4096) {
            rc = gh_err_set(err, GH_EINVAL, "header: \"gpus_per_node\" is not an integer in 0..4096");
            goto out;
        }
        t->gpus_per_node = (int)json_integer_value(g);
    }
    if ((rc = str_array(json_object_get(hdr, "nodes"), "nodes", &names, &n, err)))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (gh_topology_add_node(t, names[i]) < 0) {
            rc = add_error(t, names + i, 1, err);
            goto out;
        }
    free(names);
    names = NULL;
    if ((rc = header_labels(t, json_object_get(hdr, "node_labels"), err)))
        goto out;
    const json_t *jobs = json_object_get(hdr, "jobs");
    if (jobs && !json_is_null(jobs) && !json_is_array(jobs)) {
        rc = gh_err_set(err, GH_EINVAL, "header: \"jobs\" is not an array");
        goto out;
    }
    size_t ji;
    const json_t *jo;
    json_array_foreach(jobs, ji, jo)
    {
        const json_t *name = json_object_get(jo, "name");
        if (!json_is_object(jo) || !json_is_string(name)) {
            rc = gh_err_set(err, GH_EINVAL, "header: jobs[%zu] needs a string \"name\"", ji);
            goto out;
        }
        const json_t *rpn = json_object_get(jo, "ranks_per_node");
        long r = 0;
        if (rpn && !json_is_null(rpn)) {
            if (!json_is_integer(rpn) || json_integer_value(rpn) < 0 ||
                json_integer_value(rpn) > 4096) {
                rc = gh_err_set(err, GH_EINVAL,
                                "header: jobs[%zu].ranks_per_node is not an integer in 0..4096", ji);
                goto out;
            }
            r = (long)json_integer_value(rpn);
        } else if (t->gpus_per_node > 0) {
            r = t->gpus_per_node;
        }
        if ((rc = str_array(json_object_get(jo, "nodes"), "jobs[].nodes", &names, &n, err)))
            goto out;
        long j = gh_topology_add_job(t, json_string_value(name), names, n, (int)r);
        if (j < 0) {
            rc = add_error(t, names, n, err);
            goto out;
        }
        free(names);
        names = NULL;
        double remaining = -1, cost = -1;
        if ((rc = opt_number(jo, "remaining_s", &remaining, err)) ||
            (rc = opt_number(jo, "restart_cost_s", &cost, err)))
            goto out;
        gh_topology_set_job_costs(t, j, remaining, cost);
    }
out:
    free(names);
    if (rc)
        gh_topology_free(t);
    else
        *out = t;
    return rc;
}
