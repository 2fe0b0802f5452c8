/* events.c - builds and posts events.k8s.io/v1 Events. */
#include "kube/events.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "kube/api.h"

static bool valid_short(const char *s, size_t max) { return s && s[0] && strlen(s) <= max; }

int gh_kube_event_build(const struct gh_kube_event_spec *s, const struct gh_clock *clock,
                        json_t **out, struct gh_err *err)
{
    *out = NULL;
    if (!s->regarding_kind || !s->regarding_name || !s->regarding_api_version ||
        !s->reporting_instance || !s->reporting_instance[0])
        return gh_err_set(err, GH_EINVAL, "event: regarding kind/name/apiVersion and "
                                          "reporting instance are required");
    if (!valid_short(s->reason, 128) || !valid_short(s->action, 128))
        return gh_err_set(err, GH_EINVAL, "event: reason and action are required (<= 128 bytes)");
    const char *type = s->type ? s->type : "Normal";
    if (strcmp(type, "Normal") != 0 && strcmp(type, "Warning") != 0)
        return gh_err_set(err, GH_EINVAL, "event: type must be Normal or Warning");
    if (!clock)
        clock = gh_clock_real();
    int64_t t = gh_clock_now(clock);
    char ts[GH_RFC3339_MAX], name[254];
    gh_time_format_rfc3339(t, ts, sizeof ts);
    snprintf(name, sizeof name, "%.220s.%llx", s->regarding_name, (unsigned long long)t);
    const char *ns = s->regarding_ns && s->regarding_ns[0] ? s->regarding_ns : "default";
    char note[GH_KUBE_EVENT_NOTE_MAX + 1];
    snprintf(note, sizeof note, "%s", s->note ? s->note : "");
    /* do not cut a UTF-8 sequence in half */
    size_t nl = strlen(note);
    if (nl == GH_KUBE_EVENT_NOTE_MAX)
        while (nl > 0 && ((unsigned char)note[nl - 1] & 0xC0) == 0x80)
            note[--nl] = '\0';
    if (nl > 0 && ((unsigned char)note[nl - 1] & 0xC0) == 0xC0)
        note[--nl] = '\0';

    json_t *reg = json_pack("{s:s, s:s, s:s}", "apiVersion", s->regarding_api_version, "kind",
                            s->regarding_kind, "name", s->regarding_name);
    if (reg && s->regarding_ns && s->regarding_ns[0])
        json_object_set_new(reg, "namespace", json_string(s->regarding_ns));
    if (reg && s->regarding_uid && s->regarding_uid[0])
        json_object_set_new(reg, "uid", json_string(s->regarding_uid));
    if (reg && s->regarding_rv && s->regarding_rv[0])
        json_object_set_new(reg, "resourceVersion", json_string(s->regarding_rv));
    json_t *ev = reg ? json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}",
                                 "apiVersion", "events.k8s.io/v1", "kind", "Event", "metadata",
                                 "name", name, "namespace", ns, "eventTime", ts,
                                 "reportingController",
                                 s->reporting_controller ? s->reporting_controller
                                                         : "gpuheal.io/controller",
                                 "reportingInstance", s->reporting_instance, "type", type,
                                 "reason", s->reason, "action", s->action, "note", note,
                                 "regarding", reg)
                     : NULL;
    if (!ev)
        return gh_err_set(err, GH_EINVAL, "event: cannot build (invalid UTF-8 or out of memory)");
    *out = ev;
    return GH_OK;
}

int gh_kube_event_post(struct gh_kube_client *c, const struct gh_kube_event_spec *s, json_t **out,
                       struct gh_kube_status *st, struct gh_err *err)
{
    if (out)
        *out = NULL;
    if (st)
        gh_kube_status_reset(st);
    json_t *ev = NULL;
    int rc = gh_kube_event_build(s, gh_kube_client_clock(c), &ev, err);
    if (rc)
        return rc;
    struct gh_kube_ref ref = {&gh_kube_res_events, gh_kube_meta_namespace(ev), NULL};
    rc = gh_kube_create(c, &ref, ev, out, st, err);
    json_decref(ev);
    return rc;
}

int gh_kube_event_post_about(struct gh_kube_client *c, const struct gh_kube_res *res,
                             const struct gh_kube_event_spec *s, json_t **out,
                             struct gh_kube_status *st, struct gh_err *err)
{
    struct gh_kube_event_spec t = *s;
    char api[128], uid[128] = "", rv[64] = "";
    t.regarding_api_version = gh_kube_api_version(res, api, sizeof api);
    t.regarding_kind = res->kind;
    t.regarding_ns = res->namespaced ? s->regarding_ns : NULL;
    json_t *obj = NULL;
    struct gh_err gerr;
    struct gh_kube_ref ref = {res, t.regarding_ns, s->regarding_name};
    if (s->regarding_name && gh_kube_get(c, &ref, &obj, NULL, &gerr) == GH_OK) {
        json_t *md = json_object_get(obj, "metadata");
        const char *u = gh_json_str(md, "uid");
        const char *r = gh_json_str(md, "resourceVersion");
        snprintf(uid, sizeof uid, "%s", u ? u : "");
        snprintf(rv, sizeof rv, "%s", r ? r : "");
    }
    json_decref(obj);
    t.regarding_uid = uid;
    t.regarding_rv = rv;
    return gh_kube_event_post(c, &t, out, st, err);
}
