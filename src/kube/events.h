/* events.h - Kubernetes Events (events.k8s.io/v1) that explain what gpuheal
 * did, attached to the object acted on (Node, Pod, Incident ...). */
#ifndef GH_KUBE_EVENTS_H
#define GH_KUBE_EVENTS_H

#include <jansson.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/status.h"

#define GH_KUBE_EVENT_NOTE_MAX 1024 /* the API's limit; longer notes are truncated */

/* All strings borrowed. regarding_ns NULL for cluster-scoped objects; the
 * Event then lives in "default". */
struct gh_kube_event_spec {
    const char *regarding_api_version; /* "v1" */
    const char *regarding_kind;        /* "Node" */
    const char *regarding_name;
    const char *regarding_ns;
    const char *regarding_uid;         /* optional; kubectl describe finds the Event by it */
    const char *regarding_rv;          /* optional: the object's resourceVersion */
    const char *type;                  /* "Normal" or "Warning" */
    const char *reason;                /* UpperCamelCase, <= 128 */
    const char *action;                /* what was done, <= 128 */
    const char *note;                  /* human text, truncated to 1 KiB */
    const char *reporting_controller;  /* NULL: "gpuheal.io/controller" */
    const char *reporting_instance;    /* required: this process (pod name) */
};

/* Builds the Event object (new reference in *out), timestamped by clock
 * (NULL: real), named "<regarding>.<hex nanoseconds>". */
int gh_kube_event_build(const struct gh_kube_event_spec *s, const struct gh_clock *clock,
                        json_t **out, struct gh_err *err);

/* Builds and creates it (synchronous); *out (optional) gets the server's copy. */
int gh_kube_event_post(struct gh_kube_client *c, const struct gh_kube_event_spec *s, json_t **out,
                       struct gh_kube_status *st, struct gh_err *err);

/* The same about an object of type res (borrowed): regarding's apiVersion
 * and kind come from res, its uid and resourceVersion from a GET of the
 * object (s->regarding_api_version/kind/uid/rv are ignored), as kubelet and
 * kube-controller-manager set them; `kubectl describe` lists an Event only
 * when regarding.uid is the object's. An object that cannot be read (gone,
 * forbidden) still gets its Event, without a uid. */
int gh_kube_event_post_about(struct gh_kube_client *c, const struct gh_kube_res *res,
                             const struct gh_kube_event_spec *s, json_t **out,
                             struct gh_kube_status *st, struct gh_err *err);

#endif
