/* topology.h - which nodes and jobs exist and where each job's ranks run:
 * the part of the cluster the engine would otherwise learn from the
 * Kubernetes API. Built from a scenario header (spec section 2) or by hand,
 * and extended as signals name new jobs, nodes and ranks.
 *
 * Nodes and jobs are referred to by index (in order of first appearance).
 * A node's index is stable for the topology's life; a job's until the job
 * is removed (gh_topology_remove_job), after which a new job may take the
 * index: whoever keeps a job index across signals checks it with
 * gh_topology_generation(). Names returned are owned by the topology. */
#ifndef GH_ENGINE_TOPOLOGY_H
#define GH_ENGINE_TOPOLOGY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define GH_TOPO_MAX_NODES 65536
#define GH_TOPO_MAX_JOBS 65536
#define GH_TOPO_MAX_RANKS (1 << 20)

struct gh_topology;

/* An empty topology; caller frees with gh_topology_free. NULL on OOM. */
struct gh_topology *gh_topology_new(void);
void gh_topology_free(struct gh_topology *t);
/* Deep copy; NULL on OOM. */
struct gh_topology *gh_topology_clone(const struct gh_topology *t);

/* From a scenario header object (borrowed):
 *   {"scenario":NAME, "nodes":[...], "gpus_per_node":N,
 *    "jobs":[{"name":J, "nodes":[...], "ranks_per_node":R,
 *             "remaining_s":S (opt), "restart_cost_s":C (opt)}]}
 * Unknown fields are ignored; a wrongly typed known field is an error. */
int gh_topology_from_header(const json_t *hdr, struct gh_topology **out, struct gh_err *err);

/* Index of node (added when absent), or -1 when full/OOM. */
long gh_topology_add_node(struct gh_topology *t, const char *node);
/* Replaces node's labels (added when absent) with the n pairs keys[i] =
 * values[i] (borrowed; copied). A Node's labels as the API shows them; the
 * engine reads the topology ones (rack, NVLink domain, switch, ...) to name
 * a cause several nodes share. GH_ELIMIT when the node table is full. */
int gh_topology_set_node_labels(struct gh_topology *t, const char *node, const char *const *keys,
                                const char *const *values, size_t n);
/* Node i's labels as one block "k1\0v1\0k2\0v2\0\0" (borrowed, valid until
 * they are set again), NULL when it has none. Walk it with
 * gh_topology_label_next. */
const char *gh_topology_node_labels(const struct gh_topology *t, size_t node);
/* The next label of a block walk started at gh_topology_node_labels: its
 * key and value (borrowed), *it moved past them. false at the end. */
bool gh_topology_label_next(const char **it, const char **key, const char **value);
/* The value of label key on node i, NULL when it has none. */
const char *gh_topology_node_label(const struct gh_topology *t, size_t node, const char *key);
/* Declares a job (idempotent: nodes are merged). ranks_per_node 0 = unknown.
 * Returns its index, or -1 when full/OOM. */
long gh_topology_add_job(struct gh_topology *t, const char *job, const char *const *nodes,
                         size_t n_nodes, int ranks_per_node);
void gh_topology_set_job_costs(struct gh_topology *t, long job, double remaining_s,
                               double restart_cost_s);
/* Learns from a signal: job (may be NULL) runs on node (may be NULL), and
 * rank (>= 0) sits on node/gpu when both are known. Returns the job index
 * or -1 when there is no job. */
long gh_topology_note(struct gh_topology *t, const char *job, const char *node, int rank, int gpu);

/* What runs now. job_leave: job j's pods on node ended (pod_succeeded);
 * when none is left on any node the job has ended. job_end: the job is over
 * (job_finished, or its telemetry ended with its final checkpoint). A later
 * gh_topology_note of the job (a pod started, a step) undoes both for the
 * node it names. gh_topology_job_on_node skips ended jobs and nodes a job
 * left. job_ended: when it ended, 0 while it runs. marked: how many jobs
 * are ended or gone from a node (0: nothing to undo). */
void gh_topology_job_leave(struct gh_topology *t, size_t j, const char *node, int64_t ts);
void gh_topology_job_end(struct gh_topology *t, size_t j, int64_t ts);
int64_t gh_topology_job_ended(const struct gh_topology *t, size_t j);
bool gh_topology_job_gone(const struct gh_topology *t, size_t j, const char *node);
size_t gh_topology_marked(const struct gh_topology *t);

/* Forgets job j (its placement and costs). Its index becomes free. */
void gh_topology_remove_job(struct gh_topology *t, size_t j);
/* Counts job removals: a job index kept from an earlier generation must be
 * looked up again by name. */
uint64_t gh_topology_generation(const struct gh_topology *t);

const char *gh_topology_scenario(const struct gh_topology *t); /* NULL when none */
int gh_topology_gpus_per_node(const struct gh_topology *t);    /* 0 when unknown */
size_t gh_topology_node_count(const struct gh_topology *t);
const char *gh_topology_node_name(const struct gh_topology *t, size_t i);
long gh_topology_find_node(const struct gh_topology *t, const char *node);
/* The job index range (some indices may be free after removals). */
size_t gh_topology_job_count(const struct gh_topology *t);
/* The number of jobs held now. */
size_t gh_topology_jobs_live(const struct gh_topology *t);
/* NULL for a free index. */
const char *gh_topology_job_name(const struct gh_topology *t, size_t j);
long gh_topology_find_job(const struct gh_topology *t, const char *job);
/* Node indices of job j: *out borrowed, valid until the topology changes. */
size_t gh_topology_job_nodes(const struct gh_topology *t, size_t j, const unsigned **out);
bool gh_topology_job_has_node(const struct gh_topology *t, size_t j, const char *node);
/* True when job j was declared (a scenario header, the API), not only
 * learned from signals: then its node list is complete. */
bool gh_topology_job_declared(const struct gh_topology *t, size_t j);
/* Expected number of ranks (declared nodes x ranks_per_node, or highest rank
 * seen + 1); 0 when unknown. */
int gh_topology_job_ranks(const struct gh_topology *t, size_t j);
/* Where rank runs: learned placement first, then the declared layout (rank r
 * on node r / ranks_per_node, GPU r % ranks_per_node). */
bool gh_topology_rank_location(const struct gh_topology *t, size_t j, int rank,
                               const char **node, int *gpu);
/* The job on node (and GPU, when gpu >= 0 and placements are known): the
 * first declared job that holds the node and still runs there; -1 when
 * none. */
long gh_topology_job_on_node(const struct gh_topology *t, const char *node, int gpu);
/* Remaining run time and restart cost of job j in seconds; < 0 = unknown. */
double gh_topology_job_remaining_s(const struct gh_topology *t, size_t j);
double gh_topology_job_restart_cost_s(const struct gh_topology *t, size_t j);
size_t gh_topology_memory(const struct gh_topology *t);
/* Allocations that failed inside gh_topology_note (what it learned is then
 * missing; it returns only the job index). */
uint64_t gh_topology_nomem(const struct gh_topology *t);

#endif
