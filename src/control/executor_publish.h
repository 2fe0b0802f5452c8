/* executor_publish.h - what the executor's workers publish about an
 * incident: the Incident object (spec, then status with the phase and the
 * per-action results) and Kubernetes Events on the Incident, the node, the
 * job and the pods in the evidence. Called on a worker thread with that
 * worker's client. Failures are never fatal: the audit store is the
 * record, these are its view. */
#ifndef GH_CONTROL_EXECUTOR_PUBLISH_H
#define GH_CONTROL_EXECUTOR_PUBLISH_H

#include <jansson.h>
#include <stddef.h>

#include "common/timeutil.h"
#include "control/executor.h"
#include "control/task-t.h"
#include "kube/api.h"
#include "kube/client.h"

/* Who publishes: all borrowed (a worker's client, the executor's clock
 * and identity, the Events' reporting instance). */
struct gh_exec_pub {
    struct gh_kube_client *c;
    const struct gh_clock *clock;
    const char *identity;
};

/* The Incident status result for an action result or guard verdict r
 * (NULL: "Pending"): Succeeded, Failed, Running, Blocked, Pending, Skipped. */
const char *gh_exec_cr_result(const char *r);

/* Splits job "ns/name" into ns[0..nscap) and name[0..namecap) (a job
 * without a namespace is in "default"; NULL: "default" and ""). */
/* The PCI bus id of the first evidence on incident inc's blamed node that
 * names one (borrowed from inc), NULL when none: a kernel-log XID names
 * only the bus, and a GPU's index may never be known. */
const char *gh_exec_incident_pci(const json_t *inc);
void gh_exec_split_job(const char *job, char *ns, size_t nscap, char *name, size_t namecap);

/* Creates or updates the Incident object of inc (borrowed; server-side
 * apply) and its status: phase, message, status_actions (borrowed; NULL:
 * none). The first failure goes to rep->warning (rep may be NULL). */
void gh_exec_publish_incident(const struct gh_exec_pub *p, const json_t *inc, const char *mode,
                              const char *phase, const json_t *status_actions, const char *message,
                              struct gh_exec_report *rep);

/* An Event about the object of type res named ns/name (ns NULL for a
 * cluster-scoped one), with its uid so that `kubectl describe` shows it. */
void gh_exec_event(const struct gh_exec_pub *p, const struct gh_kube_res *res, const char *ns,
                   const char *name, const char *type, const char *reason, const char *action,
                   const char *note);

/* The Warning Event reason for an incident of class cls (enum gh_class, -1
 * unknown): "GPUFault" for the GPU's own classes (gpu_hardware,
 * gpu_memory, interconnect, thermal_power), "Straggler", "DataCorruption",
 * "FlappingNode", "ApplicationFault", "NetworkFault", else "NodeFault". The
 * evidence pods' Events add "Diagnosed". A static string. */
const char *gh_exec_event_reason(int cls);

/* The note of the SharedCause Event about decision d (a cause several
 * nodes share): its id, scope, component and number of affected nodes,
 * into buf[0..cap). */
void gh_exec_shared_cause_note(const struct gh_decision *d, char *buf, size_t cap);

/* Events about decision d on the Incident object, the node, the job and
 * the pods in its evidence; summary is the reason (a dry run says so
 * first). A shared cause (d->scope set, no node) adds one Warning Event
 * SharedCause on the Incident (gh_exec_shared_cause_note), none per node. */
void gh_exec_decision_events(const struct gh_exec_pub *p, const struct gh_decision *d,
                             const char *mode, const char *summary);

#endif
