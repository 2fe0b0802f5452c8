/* explain.c - renders audit records as a causal chain in plain words and as
 * an aligned text timeline. */
#include "audit/explain.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/timeutil.h"

static const char *ts(int64_t ns, char *buf)
{
    return gh_time_format_rfc3339(ns, buf, GH_RFC3339_MAX);
}

static const char *or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

/* Appends to buf (cap bytes) the measured values of e's signal, which the
 * record keeps only in its JSON: a step's time, a counter's count, a
 * temperature. "" for kinds whose message says it all. */
static void ev_facts(char *buf, size_t cap, const struct gh_audit_ev_rec *e)
{
    buf[0] = '\0';
    json_t *j = e->json ? json_loads(e->json, 0, NULL) : NULL;
    if (!j || !e->kind)
        goto out;
    const json_t *v;
#define NUM(k) ((v = json_object_get(j, k)) && json_is_number(v))
#define STR(k)                                                                                     \
    (json_is_string(json_object_get(j, k)) ? json_string_value(json_object_get(j, k)) : NULL)
    size_t u = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = u < cap ? snprintf(buf + u, cap - u, __VA_ARGS__) : 0;                            \
        u += w_ > 0 ? (size_t)w_ : 0;                                                              \
    } while (0)
    if (!strcmp(e->kind, "step")) {
        if (NUM("rank"))
            PUT(" rank %lld", (long long)json_integer_value(v));
        if (NUM("step"))
            PUT(" step %lld", (long long)json_integer_value(v));
        if (NUM("step_ms"))
            PUT(": %.1f ms", json_number_value(v));
        if (NUM("comm_ms"))
            PUT(" (communication %.1f ms)", json_number_value(v));
        if (NUM("loss"))
            PUT(", loss %.4g", json_number_value(v));
        else if (STR("loss"))
            PUT(", loss %s", STR("loss"));
    } else if (!strcmp(e->kind, "checkpoint")) {
        if (NUM("step"))
            PUT(" step %lld", (long long)json_integer_value(v));
        if (STR("state"))
            PUT(" %s", STR("state"));
        if (STR("path"))
            PUT(" at %.200s", STR("path"));
    } else if (!strcmp(e->kind, "replica_checksum")) {
        if (NUM("rank"))
            PUT(" rank %lld", (long long)json_integer_value(v));
        if (NUM("replica"))
            PUT(" replica %lld", (long long)json_integer_value(v));
        if (NUM("step"))
            PUT(" step %lld", (long long)json_integer_value(v));
        if (STR("value"))
            PUT(": %.40s", STR("value"));
    } else if (!strcmp(e->kind, "thermal") || !strcmp(e->kind, "power")) {
        if (NUM("celsius"))
            PUT(" %.0f C", json_number_value(v));
        if (NUM("watts"))
            PUT(" %.0f W", json_number_value(v));
        if (json_is_true(json_object_get(j, "throttled")))
            PUT(", throttled");
    } else if (!strcmp(e->kind, "nvlink") || !strcmp(e->kind, "pcie") || !strcmp(e->kind, "nic") ||
               !strcmp(e->kind, "ecc")) {
        if (STR("device"))
            PUT(" %.40s", STR("device"));
        if (NUM("port"))
            PUT(" port %lld", (long long)json_integer_value(v));
        if (NUM("link"))
            PUT(" link %lld", (long long)json_integer_value(v));
        if (STR("bits"))
            PUT(" %s-bit", STR("bits"));
        if (STR("counter"))
            PUT(" %.40s", STR("counter"));
        if (NUM("count"))
            PUT(" = %lld", (long long)json_integer_value(v));
        if (STR("state"))
            PUT(", link %s", STR("state"));
    } else if (!strcmp(e->kind, "node_condition")) {
        if (STR("condition"))
            PUT(" %.60s=%s", STR("condition"), or (STR("status"), "?"));
        if (STR("reason"))
            PUT(" (%.60s)", STR("reason"));
    } else if (!strcmp(e->kind, "probe_result")) {
        if (STR("check"))
            PUT(" %.60s", STR("check"));
        PUT(json_is_true(json_object_get(j, "passed")) ? " passed" : " failed");
    }
#undef PUT
#undef STR
#undef NUM
out:
    json_decref(j);
}

/* "kmsg on gpu-17 GPU 3: xid 79" */
static void ev_head(char *buf, size_t cap, const struct gh_audit_ev_rec *e)
{
    size_t u = 0;
    int w = snprintf(buf, cap, "%s", or(e->source, "?"));
    u = w > 0 ? (size_t)w : 0;
    if (e->node && u < cap) {
        w = snprintf(buf + u, cap - u, " on %s", e->node);
        u += w > 0 ? (size_t)w : 0;
    }
    if (e->gpu >= 0 && u < cap) {
        w = snprintf(buf + u, cap - u, " GPU %d", e->gpu);
        u += w > 0 ? (size_t)w : 0;
    }
    if (e->pod && u < cap) {
        w = snprintf(buf + u, cap - u, " pod %s", e->pod);
        u += w > 0 ? (size_t)w : 0;
    }
    if (u < cap) {
        w = snprintf(buf + u, cap - u, ": %s", or(e->kind, "?"));
        u += w > 0 ? (size_t)w : 0;
    }
    if (e->code >= 0 && u < cap) {
        w = snprintf(buf + u, cap - u, " %ld", e->code);
        u += w > 0 ? (size_t)w : 0;
    }
    if (u < cap)
        ev_facts(buf + u, cap - u, e);
}

static const char *verdict_words(const char *v)
{
    if (!v)
        return "?";
    if (strcmp(v, "allowed") == 0)
        return "allowed";
    if (strcmp(v, "denied") == 0)
        return "not acted";
    if (strcmp(v, "dry_run") == 0)
        return "not acted (dry run)";
    if (strcmp(v, "awaiting_approval") == 0)
        return "waiting for approval";
    if (strcmp(v, "approved") == 0)
        return "approved";
    return v;
}

static double ms(int64_t a, int64_t b) { return (double)(b - a) / 1e6; }

/* What the incident left for a safe moment (its impact.deferred): a
 * follow-up incident runs it when the GPU is idle or the job has ended. */
static void deferred_lines(FILE *out, const struct gh_audit_incident_rec *r)
{
    json_t *inc = r->json ? json_loads(r->json, 0, NULL) : NULL;
    json_t *d = json_object_get(json_object_get(inc, "impact"), "deferred");
    size_t i;
    json_t *a;
    json_array_foreach(d, i, a)
    {
        if (!json_is_string(a))
            continue;
        fprintf(out, "    %s node/%s", json_string_value(a), or (r->node, "-"));
        if (r->gpu >= 0 && strcmp(json_string_value(a), "reset_gpu") == 0)
            fprintf(out, " GPU %d", r->gpu);
        fprintf(out, ": waiting for a safe moment (the GPU idle or the job ended; a follow-up "
                     "incident runs it)\n");
    }
    json_decref(inc);
}

/* A cause several nodes share (spec section 3, 2026-12-07): its scope,
 * component and every affected node, as the record keeps them (the
 * Incident object names only the first ones). */
static void shared_cause_lines(FILE *out, const struct gh_audit_incident_rec *r)
{
    json_t *inc = r->json ? json_loads(r->json, 0, NULL) : NULL;
    const char *scope = json_string_value(json_object_get(inc, "scope"));
    const char *comp = json_string_value(json_object_get(inc, "component"));
    json_t *an = json_object_get(inc, "affected_nodes");
    if (scope && json_array_size(an)) {
        fprintf(out,
                "  Shared cause: scope %s, component %s; none of its nodes is taken out "
                "of service for it\n",
                scope, comp ? comp : "unknown (no Node label names it)");
        fprintf(out, "  Affected nodes (%zu):", json_array_size(an));
        size_t i;
        json_t *n;
        json_array_foreach(an, i, n)
        {
            if (json_is_string(n))
                fprintf(out, "%s %s", i ? "," : "", json_string_value(n));
        }
        fprintf(out, "\n");
    }
    json_decref(inc);
}

/* The rung of the recovery ladder a restart used, from its detail ("mode
 * NAME: ..." or "mode full_recreate (WHY): ...", control/job_inplace.h),
 * and why not a faster one. */
static void way_back(FILE *out, const struct gh_audit_action_rec *x)
{
    const char *d = x->detail;
    if (!d || strncmp(d, "mode ", 5) != 0)
        return;
    d += 5;
    size_t n = strcspn(d, " :");
    if (n == strlen("in_place") && strncmp(d, "in_place", n) == 0)
        fprintf(out, "  Way back: in place - the job's containers restarted in their pods "
                     "(same nodes, no rescheduling), the fastest rung; no node was excluded\n");
    else if (n == strlen("replace_lost") && strncmp(d, "replace_lost", n) == 0)
        fprintf(out, "  Way back: replace only what is lost - the pods of the excluded node "
                     "recreated elsewhere, the others restarted in place; not all in place: "
                     "a node was excluded\n");
    else if (n == strlen("full_recreate") && strncmp(d, "full_recreate", n) == 0) {
        const char *why = d + n;
        int wl = 0;
        if (*why == ' ' && why[1] == '(') {
            why += 2;
            const char *end = strstr(why, "): ");
            wl = end ? (int)(end - why) : (int)strlen(why);
        }
        fprintf(out, "  Way back: full recreate - the whole job deleted and created again%s%.*s\n",
                wl ? "; not a faster rung: " : "", wl, why);
    }
}

static void explain_one(FILE *out, size_t k, const struct gh_audit_incident_rec *r)
{
    char t1[GH_RFC3339_MAX], t2[GH_RFC3339_MAX];
    fprintf(out, "[%zu] %s: %s", k, r->id, or(r->cls, "?"));
    if (r->severity)
        fprintf(out, ", %s", r->severity);
    if (r->node) {
        fprintf(out, " - node %s", r->node);
        if (r->gpu >= 0)
            fprintf(out, " GPU %d", r->gpu);
    } else {
        fprintf(out, " - no node blamed");
    }
    if (r->job)
        fprintf(out, ", job %s", r->job);
    fprintf(out, "\n");
    shared_cause_lines(out, r);

    fprintf(out, "  What was seen:\n");
    if (r->n_ev == 0)
        fprintf(out, "    (no evidence recorded)\n");
    for (size_t i = 0; i < r->n_ev; i++) {
        const struct gh_audit_ev_rec *e = &r->ev[i];
        char head[512];
        ev_head(head, sizeof head, e);
        fprintf(out, "    %s  %s%s\n", ts(e->ts_ns, t1), head, e->injected ? " (injected)" : "");
        if (e->msg)
            fprintf(out, "        \"%s\"\n", e->msg);
    }
    if (r->n_joined)
        fprintf(out, "  Joined later (after the decision, %zu signal%s%s):\n", r->n_joined,
                r->n_joined == 1 ? "" : "s",
                r->n_joined >= GH_AUDIT_JOINED_MAX ? ", the most kept" : "");
    for (size_t i = 0; i < r->n_joined; i++) {
        const struct gh_audit_ev_rec *e = &r->joined[i];
        char head[512];
        ev_head(head, sizeof head, e);
        fprintf(out, "    %s  %s (joined later)\n", ts(e->ts_ns, t1), head);
        if (e->msg)
            fprintf(out, "        \"%s\"\n", e->msg);
    }

    fprintf(out, "  What was decided (%s, %.0f ms after the first evidence):\n",
            ts(r->decided_ns, t1), ms(r->first_ns, r->decided_ns));
    fprintf(out, "    rule %s chose: %s\n", or(r->rule, "(none)"), or(r->actions, "none"));
    if (r->reason)
        fprintf(out, "    why: %s\n", r->reason);
    if (r->ckpt_step >= 0)
        fprintf(out, "    resume from: checkpoint step %lld at %s\n", (long long)r->ckpt_step,
                or(r->ckpt_path, "(no path)"));
    if (r->mode && strcmp(r->mode, "act") != 0)
        fprintf(out, "    mode: %s\n",
                strcmp(r->mode, "dry_run") == 0 ? "dry run (decide and record, do not act)"
                                                : "approval required before acting");

    if (r->n_guards) {
        fprintf(out, "  Guards:\n");
        for (size_t i = 0; i < r->n_guards; i++) {
            const struct gh_audit_guard_rec *g = &r->guards[i];
            fprintf(out, "    %s %s: %s", or(g->action, "(all)"), or(g->target, ""),
                    verdict_words(g->verdict));
            if (g->guard && strcmp(g->guard, "all") != 0)
                fprintf(out, " [%s]", g->guard);
            if (g->detail)
                fprintf(out, " - %s", g->detail);
            fprintf(out, "\n");
        }
    }

    fprintf(out, "  What was done:\n");
    if (r->n_actions == 0)
        fprintf(out, "    nothing\n");
    for (size_t i = 0; i < r->n_actions; i++) {
        const struct gh_audit_action_rec *x = &r->acts[i];
        fprintf(out, "    %s  %s %s: %s in %.0f ms", ts(x->started_ns, t2), or(x->action, "?"),
                or(x->target, ""), or(x->result, "?"), ms(x->started_ns, x->finished_ns));
        if (x->detail)
            fprintf(out, " - %s", x->detail);
        if (x->api_result)
            fprintf(out, " (%s)", x->api_result);
        fprintf(out, "\n");
    }
    for (size_t i = 0; i < r->n_actions; i++)
        way_back(out, &r->acts[i]);
    deferred_lines(out, r);
    fprintf(out, "  Outcome: %s\n", or(r->phase, "?"));
}

void gh_explain_write(FILE *out, const struct gh_audit_subject *subj, int64_t since_ns,
                      const struct gh_audit_incident_rec *recs, size_t n)
{
    char name[GH_AUDIT_ID_MAX + 16], t[GH_RFC3339_MAX];
    gh_audit_subject_str(subj, name, sizeof name);
    fprintf(out, "%s: %zu incident%s", name, n, n == 1 ? "" : "s");
    if (since_ns)
        fprintf(out, " since %s", ts(since_ns, t));
    fprintf(out, "\n");
    if (n == 0) {
        fprintf(out, "gpuheal recorded no decision about %s.\n", name);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "\n");
        explain_one(out, i + 1, &recs[i]);
    }
}

/* ---- timeline */

struct row {
    int64_t t;
    int order; /* ties: seen < decided < guard < action */
    size_t seq;
    char what[12];
    char subject[160];
    char detail[1200];
    const char *sig; /* a seen row: its signal's JSON (borrowed from the records) */
};

static int cmp_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->order != y->order)
        return x->order - y->order;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void gh_timeline_write(FILE *out, const struct gh_audit_subject *subj,
                       const struct gh_audit_incident_rec *recs, size_t n)
{
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += 1 + recs[i].n_ev + recs[i].n_joined + recs[i].n_guards + recs[i].n_actions;
    char name[GH_AUDIT_ID_MAX + 16];
    gh_audit_subject_str(subj, name, sizeof name);
    struct row *rows = cap ? calloc(cap, sizeof *rows) : NULL;
    if (cap && !rows) {
        fprintf(out, "%s: out of memory\n", name);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const struct gh_audit_incident_rec *r = &recs[i];
        for (size_t k = 0; k < r->n_ev; k++) {
            const struct gh_audit_ev_rec *e = &r->ev[k];
            /* the same signal may support several incidents: show it once
             * (the same signal, all of it: two pods failing at once with one
             * message on one node are two rows) */
            bool dup = false;
            for (size_t j = 0; j < m && !dup; j++)
                dup = rows[j].order == 0 && rows[j].t == e->ts_ns && e->json && rows[j].sig &&
                      strcmp(rows[j].sig, e->json) == 0;
            if (dup)
                continue;
            struct row *w = &rows[m++];
            w->t = e->ts_ns;
            w->order = 0;
            w->seq = m;
            w->sig = e->json;
            snprintf(w->what, sizeof w->what, "seen");
            if (e->gpu >= 0)
                snprintf(w->subject, sizeof w->subject, "%s GPU %d", or(e->node, "-"), e->gpu);
            else
                snprintf(w->subject, sizeof w->subject, "%s", or(e->node, or(e->pod, "-")));
            char head[512];
            ev_head(head, sizeof head, e);
            snprintf(w->detail, sizeof w->detail, "%s%s%s%s", head, e->msg ? ": " : "",
                     or(e->msg, ""), e->injected ? " (injected)" : "");
        }
        struct row *d = &rows[m++];
        d->t = r->decided_ns;
        d->order = 1;
        d->seq = m;
        snprintf(d->what, sizeof d->what, "decided");
        snprintf(d->subject, sizeof d->subject, "%s", r->id);
        char mode[32] = "";
        if (r->mode && strcmp(r->mode, "act") != 0)
            snprintf(mode, sizeof mode, " [%s]", r->mode);
        snprintf(d->detail, sizeof d->detail, "%s by rule %s -> %s%s", or(r->cls, "?"),
                 or(r->rule, "(none)"), or(r->actions, "none"), mode);
        for (size_t k = 0; k < r->n_joined; k++) {
            const struct gh_audit_ev_rec *e = &r->joined[k];
            struct row *w = &rows[m++];
            w->t = e->ts_ns;
            w->order = 0;
            w->seq = m;
            snprintf(w->what, sizeof w->what, "joined");
            if (e->gpu >= 0)
                snprintf(w->subject, sizeof w->subject, "%s GPU %d", or (e->node, "-"), e->gpu);
            else
                snprintf(w->subject, sizeof w->subject, "%s", or (e->node, "-"));
            char head[512];
            ev_head(head, sizeof head, e);
            snprintf(w->detail, sizeof w->detail, "%s%s%s (joined %.40s later)", head,
                     e->msg ? ": " : "", or (e->msg, ""), or (r->id, "?"));
        }
        for (size_t k = 0; k < r->n_guards; k++) {
            const struct gh_audit_guard_rec *g = &r->guards[k];
            struct row *w = &rows[m++];
            w->t = g->ts_ns;
            w->order = 2;
            w->seq = m;
            snprintf(w->what, sizeof w->what, "guard");
            snprintf(w->subject, sizeof w->subject, "%s", or(g->target, r->id));
            snprintf(w->detail, sizeof w->detail, "%s: %s%s%s", or(g->action, "(all)"),
                     verdict_words(g->verdict), g->detail ? " - " : "", or(g->detail, ""));
        }
        for (size_t k = 0; k < r->n_actions; k++) {
            const struct gh_audit_action_rec *x = &r->acts[k];
            struct row *w = &rows[m++];
            w->t = x->started_ns;
            w->order = 3;
            w->seq = m;
            snprintf(w->what, sizeof w->what, "action");
            snprintf(w->subject, sizeof w->subject, "%s", or(x->target, r->id));
            snprintf(w->detail, sizeof w->detail, "%s %s (%.0f ms)%s%s", or(x->action, "?"),
                     or(x->result, "?"), ms(x->started_ns, x->finished_ns),
                     x->detail ? ": " : "", or(x->detail, ""));
        }
    }
    if (m > 1)
        qsort(rows, m, sizeof *rows, cmp_rows);
    int wsub = 7;
    for (size_t i = 0; i < m; i++) {
        int l = (int)strlen(rows[i].subject);
        if (l > wsub)
            wsub = l > 48 ? 48 : l;
    }
    fprintf(out, "%s: %zu incident%s\n", name, n, n == 1 ? "" : "s");
    fprintf(out, "%-27s  %-7s  %-*s  %s\n", "TIME", "EVENT", wsub, "SUBJECT", "DETAIL");
    char t[GH_RFC3339_MAX];
    for (size_t i = 0; i < m; i++)
        fprintf(out, "%-27s  %-7s  %-*s  %s\n", ts(rows[i].t, t), rows[i].what, wsub,
                rows[i].subject, rows[i].detail);
    free(rows);
}
