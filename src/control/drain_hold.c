/* drain_hold.c - drains held for a checkpoint, in the audit store: the
 * hold's record, its release, and its resumption after a restart (see
 * drain_hold.h). */
#include "control/drain_hold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/timeutil.h"
#include "control/decision.h"

#define HOLD_IDS_MAX 4096 /* holds resumed at one leadership */

static void hold_intent_id(const char *inc_id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/hold", inc_id);
}

static void node_target(const json_t *inc, char *buf, size_t cap)
{
    snprintf(buf, cap, "node/%s", gh_json_str(inc, "node") ? gh_json_str(inc, "node") : "-");
}

static const char *const outcomes[] = {"allowed", "denied", "dry_run", "awaiting_approval"};
/* the guard names guard.c uses (a verdict keeps a pointer to a static) */
static const char *const guards[] = {"none", "budget", "rate", "cooldown", "storm",
                                     "dry_run", "approval", "all"};

static const char *guard_static(const char *g)
{
    for (size_t i = 0; g && i < sizeof guards / sizeof guards[0]; i++)
        if (!strcmp(g, guards[i]))
            return guards[i];
    return "none";
}

/* "ns/a, ns/b" */
static void jobs_text(const json_t *jobs, char *buf, size_t cap)
{
    size_t used = 0, i;
    json_t *j;
    buf[0] = '\0';
    json_array_foreach(jobs, i, j) {
        int m = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "",
                         json_string_value(j) ? json_string_value(j) : "?");
        if (m < 0 || (size_t)m >= cap - used)
            break;
        used += (size_t)m;
    }
}

json_t *gh_drain_hold_payload(const struct gh_task *t, const char *const *jobs, int n,
                              int64_t since_ns, int64_t deadline_ns)
{
    json_t *v = json_array(), *js = json_array();
    json_t *p = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "task",
                          t->kind == GH_TASK_APPROVED ? "approved" : "decision", "mode", t->mode,
                          "approver", t->approver, "since_ns", (json_int_t)since_ns,
                          "deadline_ns", (json_int_t)deadline_ns, "first_arrival_ns",
                          (json_int_t)t->first_arrival_ns);
    if (!v || !js || !p) {
        json_decref(v);
        json_decref(js);
        json_decref(p);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        json_array_append_new(js, json_string(jobs[i]));
    for (int i = 0; i < t->n; i++)
        json_array_append_new(
            v, json_pack("{s:s, s:s, s:s, s:s}", "action", gh_action_name(t->v[i].action),
                         "outcome", outcomes[t->v[i].outcome], "guard",
                         t->v[i].guard ? t->v[i].guard : "none", "detail", t->v[i].detail));
    json_object_set_new(p, "jobs", js);
    json_object_set_new(p, "verdicts", v);
    return p;
}

int gh_drain_hold_record(struct gh_audit *a, const json_t *inc, const json_t *payload,
                         int64_t now_ns, char *detail, size_t cap, struct gh_err *err)
{
    const char *id = gh_json_str(inc, "id");
    if (!id)
        return gh_err_set(err, GH_EINVAL, "drain hold: incident without id");
    char jobs[700], until[GH_RFC3339_MAX], target[GH_AUDIT_ID_MAX];
    jobs_text(json_object_get(payload, "jobs"), jobs, sizeof jobs);
    int64_t since = json_integer_value(json_object_get(payload, "since_ns"));
    int64_t deadline = json_integer_value(json_object_get(payload, "deadline_ns"));
    gh_time_format_rfc3339(deadline, until, sizeof until);
    const char *approver = gh_json_str(payload, "approver");
    snprintf(detail, cap, "%s%sheld until the next checkpoint of %s, at most until %s (%.0f s)",
             approver && *approver ? approver : "", approver && *approver ? "; " : "", jobs,
             until, (double)(deadline - since) / 1e9);
    node_target(inc, target, sizeof target);
    char *text = json_dumps(payload, JSON_COMPACT);
    if (!text)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    struct gh_audit_intent it;
    memset(&it, 0, sizeof it);
    hold_intent_id(id, it.id, sizeof it.id);
    snprintf(it.incident_id, sizeof it.incident_id, "%s", id);
    it.seq = -1;
    snprintf(it.action, sizeof it.action, "hold_drain");
    snprintf(it.target, sizeof it.target, "%s", target);
    it.created_ns = now_ns;
    it.payload = text;
    bool existing = false;
    int rc = gh_audit_intent_begin(a, &it, &existing, err);
    gh_audit_intent_clear(&it);
    if (!rc && existing)
        rc = gh_err_set(err, GH_EINVAL, "drain hold of %s: held before", id);
    if (!rc)
        rc = gh_audit_intent_finish(a, it.id, "held", now_ns, err);
    struct gh_audit_guard g = {id,        now_ns,       "drain_node", target, "checkpoint",
                               "held_for_checkpoint", detail};
    if (!rc)
        rc = gh_audit_record_guard(a, &g, err);
    if (!rc)
        rc = gh_audit_set_phase(a, id, GH_PHASE_HELD, err);
    return rc;
}

/* "released: job X saved checkpoint step N after 3.1 s" or the timeout. */
static void release_text(const json_t *dw, char *buf, size_t cap)
{
    bool ckpt = gh_json_str(dw, "outcome") && !strcmp(gh_json_str(dw, "outcome"), "checkpoint");
    double waited = json_number_value(json_object_get(dw, "waited_s"));
    size_t used = 0, i;
    json_t *j;
    int m = snprintf(buf, cap, "released: %s", ckpt ? "" : "timeout; ");
    used = m > 0 && (size_t)m < cap ? (size_t)m : 0;
    json_array_foreach(json_object_get(dw, "jobs"), i, j) {
        json_t *step = json_object_get(j, "step");
        if (json_is_true(json_object_get(j, "checkpoint_saved")) && json_is_integer(step))
            m = snprintf(buf + used, cap - used, "%sjob %s saved checkpoint step %lld",
                         i ? ", " : "", gh_json_str(j, "job"), (long long)json_integer_value(step));
        else
            m = snprintf(buf + used, cap - used, "%sjob %s %s", i ? ", " : "", gh_json_str(j, "job"),
                         json_is_true(json_object_get(j, "checkpoint_saved"))
                             ? "saved a checkpoint"
                             : "saved no checkpoint");
        if (m < 0 || (size_t)m >= cap - used)
            return;
        used += (size_t)m;
    }
    snprintf(buf + used, cap - used, " (held %.1f s)", waited);
}

int gh_drain_hold_release(struct gh_audit *a, const json_t *inc, int64_t now_ns, bool *released,
                          struct gh_err *err)
{
    *released = false;
    const char *id = gh_json_str(inc, "id");
    const json_t *dw = json_object_get(inc, "drain_wait");
    if (!id || !dw)
        return GH_OK;
    /* the flip first: of two releases (a restart, a new leader while the
     * old one still acts), one finds the phase held */
    bool swapped = false;
    int rc = gh_audit_swap_phase(a, id, GH_PHASE_HELD, "Acting", &swapped, err);
    if (rc || !swapped)
        return rc;
    char detail[1024], target[GH_AUDIT_ID_MAX], iid[GH_AUDIT_ID_MAX];
    release_text(dw, detail, sizeof detail);
    node_target(inc, target, sizeof target);
    hold_intent_id(id, iid, sizeof iid);
    struct gh_audit_guard g = {id, now_ns, "drain_node", target, "checkpoint", "released", detail};
    char *text = json_dumps(inc, JSON_COMPACT);
    if (!text)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    rc = gh_audit_record_guard(a, &g, err);
    if (!rc)
        rc = gh_audit_set_reason(a, id, gh_json_str(inc, "reason") ? gh_json_str(inc, "reason") : "", text, err);
    free(text);
    if (!rc)
        rc = gh_audit_intent_finish(a, iid, "released", now_ns, err);
    if (!rc)
        *released = true;
    return rc;
}

/* ---- resumption */

struct held_ids {
    char (*id)[64];
    size_t n;
};

static int held_id(void *ud, const char *id, const char *phase)
{
    struct held_ids *h = ud;
    if (strcmp(phase, GH_PHASE_HELD) != 0 || h->n == HOLD_IDS_MAX)
        return GH_OK;
    snprintf(h->id[h->n++], sizeof h->id[0], "%s", id);
    return GH_OK;
}

/* The hold's task from its payload p and the stored incident (stolen). */
static bool hold_from(struct gh_drain_hold *h, const char *id, const char *mode, const json_t *p,
                      json_t *inc)
{
    memset(h, 0, sizeof *h);
    bool approved = gh_json_str(p, "task") && !strcmp(gh_json_str(p, "task"), "approved");
    h->t.kind = approved ? GH_TASK_APPROVED : GH_TASK_DECISION;
    snprintf(h->t.id, sizeof h->t.id, "%s", id);
    snprintf(h->t.mode, sizeof h->t.mode, "%s", approved ? "" : mode ? mode : "act");
    snprintf(h->t.approver, sizeof h->t.approver, "%s", gh_json_str(p, "approver") ? gh_json_str(p, "approver") : "");
    h->t.first_arrival_ns = 0; /* a deliberate wait is no decision latency */
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(p, "verdicts"), i, v) {
        int a = gh_action_from_name(gh_json_str(v, "action") ? gh_json_str(v, "action") : "");
        if (a < 0 || h->t.n >= GH_TASK_MAX_ACTIONS)
            continue;
        struct gh_guard_verdict *gv = &h->t.v[h->t.n++];
        gv->action = (enum gh_action)a;
        gv->outcome = GH_GUARD_DENY;
        for (size_t k = 0; k < sizeof outcomes / sizeof outcomes[0]; k++)
            if (gh_json_str(v, "outcome") && !strcmp(gh_json_str(v, "outcome"), outcomes[k]))
                gv->outcome = (enum gh_guard_outcome)k;
        gv->guard = guard_static(gh_json_str(v, "guard"));
        snprintf(gv->detail, sizeof gv->detail, "%s", gh_json_str(v, "detail") ? gh_json_str(v, "detail") : "");
    }
    json_t *j;
    json_array_foreach(json_object_get(p, "jobs"), i, j) {
        if (json_string_value(j) && h->n < GH_DRAIN_WAIT_JOBS)
            snprintf(h->jobs[h->n++], sizeof h->jobs[0], "%s", json_string_value(j));
    }
    h->since_ns = json_integer_value(json_object_get(p, "since_ns"));
    h->deadline_ns = json_integer_value(json_object_get(p, "deadline_ns"));
    h->t.incident = inc;
    gh_decision_read(&h->t.d, inc);
    return h->n > 0 && h->deadline_ns > 0;
}

/* Reads the hold of incident id and writes its "hold_resumed" row. */
static int resume_one(struct gh_audit *a, const char *id, int64_t now_ns, const char *who,
                      struct gh_drain_hold *h, struct gh_err *err)
{
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", id);
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    int rc = gh_audit_query(a, &s, 0, 1, &recs, &n, err);
    json_t *inc = !rc && n == 1 && recs[0].json ? json_loads(recs[0].json, 0, NULL) : NULL;
    char mode[16];
    snprintf(mode, sizeof mode, "%s", !rc && n == 1 && recs[0].mode ? recs[0].mode : "act");
    gh_audit_recs_free(recs, n);
    if (rc)
        return rc;
    if (!inc)
        return gh_err_set(err, GH_ENOTFOUND, "incident %s: no record", id);
    /* the intent exists (written with the phase); begin() loads it and
     * counts the resumption in its attempts */
    struct gh_audit_intent it;
    memset(&it, 0, sizeof it);
    hold_intent_id(id, it.id, sizeof it.id);
    snprintf(it.incident_id, sizeof it.incident_id, "%s", id);
    snprintf(it.action, sizeof it.action, "hold_drain");
    it.seq = -1;
    it.created_ns = now_ns;
    bool existing = false;
    if ((rc = gh_audit_begin(a, err))) {
        json_decref(inc);
        return rc;
    }
    rc = gh_audit_intent_begin(a, &it, &existing, err);
    json_t *p = !rc && existing && it.payload ? json_loads(it.payload, 0, NULL) : NULL;
    if (!rc && (!existing || strcmp(it.state, "held") != 0 || !p))
        rc = gh_err_set(err, GH_ENOTFOUND, "incident %s: no hold recorded", id);
    gh_audit_intent_clear(&it);
    if (!rc) {
        bool readable = hold_from(h, id, mode, p, inc);
        inc = NULL; /* h owns it */
        if (!readable)
            rc = gh_err_set(err, GH_EINVAL, "incident %s: hold record unreadable", id);
    }
    json_decref(p);
    json_decref(inc);
    if (!rc) {
        char detail[400], until[GH_RFC3339_MAX], target[GH_AUDIT_ID_MAX];
        gh_time_format_rfc3339(h->deadline_ns, until, sizeof until);
        if (h->deadline_ns > now_ns)
            snprintf(detail, sizeof detail, "resumed by %s on becoming leader: %.1f s left, until %s",
                     who, (double)(h->deadline_ns - now_ns) / 1e9, until);
        else
            snprintf(detail, sizeof detail, "resumed by %s on becoming leader: the deadline %s "
                     "passed %.1f s ago, drains now", who, until,
                     (double)(now_ns - h->deadline_ns) / 1e9);
        node_target(h->t.incident, target, sizeof target);
        struct gh_audit_guard g = {id, now_ns, "drain_node", target, "checkpoint", "hold_resumed",
                                   detail};
        rc = gh_audit_record_guard(a, &g, err);
    }
    if (!rc)
        rc = gh_audit_commit(a, err);
    else
        gh_audit_rollback(a);
    if (rc) {
        json_decref(h->t.incident);
        h->t.incident = NULL;
    }
    return rc;
}

int gh_drain_holds_resume(struct gh_audit *a, int64_t since_ns, int64_t now_ns, const char *who,
                          gh_drain_hold_fn fn, gh_drain_hold_skip_fn skipped, void *ud,
                          struct gh_err *err)
{
    struct held_ids ids = {calloc(HOLD_IDS_MAX, sizeof *ids.id), 0};
    if (!ids.id)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    int rc = gh_audit_incident_ids(a, since_ns, held_id, &ids, err);
    for (size_t i = 0; !rc && i < ids.n; i++) {
        struct gh_drain_hold h;
        struct gh_err e;
        memset(&h, 0, sizeof h);
        if (resume_one(a, ids.id[i], now_ns, who, &h, &e) != GH_OK) {
            if (skipped)
                skipped(ud, ids.id[i], &e);
            continue;
        }
        fn(ud, &h);
    }
    free(ids.id);
    return rc;
}
