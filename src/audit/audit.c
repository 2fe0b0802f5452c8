/* audit.c - the audit store: schema, the writes the controller makes around
 * each decision and action, and the reads that explain and timeline use,
 * written once over the SQL interface of db.h. */
#include "audit/audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit_int.h"
#include "audit/db.h"
#include "common/json.h"
#include "common/timeutil.h"

#define SCHEMA_VERSION "1"
/* the advisory lock key of schema creation ("gpuheal" in ASCII) */
#define SCHEMA_LOCK_KEY "29115572166156652"
#define REC_LIST_MAX 4096 /* evidence / guard / action rows loaded per incident */

struct gh_audit {
    struct gh_db *db;
    int depth; /* > 0 inside gh_audit_begin */
};

/* The schema; %s is the auto-increment primary key type of the backend. */
static const char schema_fmt[] =
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE IF NOT EXISTS incidents ("
    " id TEXT PRIMARY KEY, class TEXT NOT NULL, severity TEXT, node TEXT, gpu BIGINT, job TEXT,"
    " first_ns BIGINT NOT NULL, decided_ns BIGINT NOT NULL, recorded_ns BIGINT NOT NULL,"
    " rule TEXT, reason TEXT, actions TEXT, ckpt_step BIGINT, ckpt_path TEXT,"
    " mode TEXT NOT NULL, phase TEXT NOT NULL, controller TEXT, json TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS incidents_node ON incidents (node, decided_ns);"
    "CREATE INDEX IF NOT EXISTS incidents_job ON incidents (job, decided_ns);"
    "CREATE INDEX IF NOT EXISTS incidents_decided ON incidents (decided_ns);"
    "CREATE TABLE IF NOT EXISTS evidence ("
    " incident_id TEXT NOT NULL REFERENCES incidents (id), seq BIGINT NOT NULL,"
    " ts_ns BIGINT NOT NULL, source TEXT, kind TEXT, node TEXT, gpu BIGINT, code BIGINT,"
    " job TEXT, pod TEXT, msg TEXT, injected BIGINT NOT NULL DEFAULT 0, json TEXT NOT NULL,"
    " PRIMARY KEY (incident_id, seq));"
    "CREATE INDEX IF NOT EXISTS evidence_node ON evidence (node);"
    "CREATE INDEX IF NOT EXISTS evidence_job ON evidence (job);"
    "CREATE INDEX IF NOT EXISTS evidence_pod ON evidence (pod);"
    "CREATE TABLE IF NOT EXISTS guard_decisions ("
    " id %s, incident_id TEXT NOT NULL REFERENCES incidents (id), ts_ns BIGINT NOT NULL,"
    " action TEXT, target TEXT, guard TEXT NOT NULL, verdict TEXT NOT NULL, detail TEXT);"
    "CREATE INDEX IF NOT EXISTS guard_incident ON guard_decisions (incident_id);"
    "CREATE TABLE IF NOT EXISTS actions ("
    " id %s, incident_id TEXT NOT NULL REFERENCES incidents (id), intent_id TEXT,"
    " action TEXT NOT NULL, target TEXT, started_ns BIGINT NOT NULL, finished_ns BIGINT NOT NULL,"
    " result TEXT NOT NULL, http BIGINT, api_result TEXT, detail TEXT);"
    "CREATE INDEX IF NOT EXISTS actions_incident ON actions (incident_id);"
    "CREATE INDEX IF NOT EXISTS actions_target ON actions (target);"
    "CREATE TABLE IF NOT EXISTS intents ("
    " id TEXT PRIMARY KEY, incident_id TEXT NOT NULL, seq BIGINT NOT NULL, action TEXT NOT NULL,"
    " target TEXT, state TEXT NOT NULL, created_ns BIGINT NOT NULL, updated_ns BIGINT NOT NULL,"
    " attempts BIGINT NOT NULL DEFAULT 1, payload TEXT);"
    "CREATE INDEX IF NOT EXISTS intents_state ON intents (state, created_ns);"
    /* training telemetry for the report's step chart: one aggregate per
     * (job, rank) and time bucket, times in microseconds (telemetry.h) */
    "CREATE TABLE IF NOT EXISTS telemetry ("
    " job TEXT NOT NULL, rank_no BIGINT NOT NULL, bucket_ns BIGINT NOT NULL, node TEXT,"
    " gpu BIGINT, n BIGINT NOT NULL, sum_us BIGINT NOT NULL, min_us BIGINT NOT NULL,"
    " max_us BIGINT NOT NULL, last_step BIGINT, last_ns BIGINT NOT NULL,"
    " PRIMARY KEY (job, rank_no, bucket_ns));"
    "CREATE INDEX IF NOT EXISTS telemetry_bucket ON telemetry (bucket_ns);"
    /* accepted signals, committed before the ingest answers (journal.h) */
    "CREATE TABLE IF NOT EXISTS signal_journal (id TEXT PRIMARY KEY, arrival_ns BIGINT NOT NULL,"
    " seq BIGINT NOT NULL, ts_ns BIGINT NOT NULL, line TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS signal_journal_arrival ON signal_journal (arrival_ns, seq);"
    /* evidence that joined an incident after it was decided (its episode
     * absorbed it, or a node joined its shared cause): key is the signal's
     * id, else "h:" + a hash of its JSON; at most GH_AUDIT_JOINED_MAX rows
     * per incident */
    "CREATE TABLE IF NOT EXISTS joined_evidence ("
    " incident_id TEXT NOT NULL, sig_key TEXT NOT NULL, joined_ns BIGINT NOT NULL,"
    " ts_ns BIGINT NOT NULL, source TEXT, kind TEXT, node TEXT, gpu BIGINT, code BIGINT,"
    " job TEXT, msg TEXT, json TEXT NOT NULL, PRIMARY KEY (incident_id, sig_key));"
    "CREATE INDEX IF NOT EXISTS joined_evidence_node ON joined_evidence (node);";

static int open_store(const char *url, bool create, struct gh_audit **out, struct gh_err *err)
{
    *out = NULL;
    enum gh_db_kind kind;
    const char *target;
    if (!url || !*url)
        return gh_err_set(err, GH_EINVAL, "audit store: empty --db");
    if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0) {
        kind = GH_DB_POSTGRES;
        target = url;
    } else if (strncmp(url, "postgres:", 9) == 0) {
        kind = GH_DB_POSTGRES;
        target = url + 9;
    } else if (strncmp(url, "sqlite:", 7) == 0) {
        kind = GH_DB_SQLITE;
        target = url + 7;
        /* sqlite:///abs/path and sqlite://rel are accepted too */
        if (strncmp(target, "//", 2) == 0)
            target += 2;
    } else if (strstr(url, "://") || (strchr(url, ':') && !strchr(url, '/'))) {
        return gh_err_set(err, GH_EINVAL, "audit store: unknown scheme in \"%.64s\" "
                                          "(sqlite:PATH or postgres://...)", url);
    } else {
        kind = GH_DB_SQLITE;
        target = url;
    }
    if (!*target)
        return gh_err_set(err, GH_EINVAL, "audit store: no path in --db");

    if (!create && kind == GH_DB_SQLITE && access(target, F_OK) != 0)
        return gh_err_set(err, GH_ENOTFOUND, "audit store: no database at %s", target);
    struct gh_audit *a = calloc(1, sizeof *a);
    if (!a)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    int rc = gh_db_open(kind, target, &a->db, err);
    if (rc)
        goto fail;
    const char *idt = kind == GH_DB_SQLITE ? "INTEGER PRIMARY KEY" : "BIGSERIAL PRIMARY KEY";
    /* PostgreSQL: CREATE ... IF NOT EXISTS is no guard against a second
     * replica creating the same table at the same moment (a duplicate key
     * in pg_type); the script runs as one implicit transaction, holding an
     * advisory lock that serializes it across connections. SQLite: the
     * script takes the database's write lock. */
    const char *lock = kind == GH_DB_POSTGRES ? "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK_KEY ");"
                                              : "";
    char schema[sizeof schema_fmt + 160];
    int w = snprintf(schema, sizeof schema, "%s", lock);
    snprintf(schema + w, sizeof schema - (size_t)w, schema_fmt, idt, idt);
    rc = gh_db_script(a->db, schema, err);
    if (rc)
        goto fail;
    struct gh_db_val p[] = {gh_db_text("schema_version"), gh_db_text(SCHEMA_VERSION)};
    rc = gh_db_exec(a->db, "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    p, 2, NULL, err);
    if (rc)
        goto fail;
    *out = a;
    return GH_OK;
fail:
    gh_err_prefix(err, rc, "audit store");
    gh_audit_close(a);
    return rc;
}

int gh_audit_open(const char *url, struct gh_audit **out, struct gh_err *err)
{
    return open_store(url, true, out, err);
}

int gh_audit_open_existing(const char *url, struct gh_audit **out, struct gh_err *err)
{
    return open_store(url, false, out, err);
}

void gh_audit_close(struct gh_audit *a)
{
    if (!a)
        return;
    gh_db_close(a->db);
    free(a);
}

struct gh_db *gh_audit__db(struct gh_audit *a) { return a->db; }

const char *gh_audit_backend(const struct gh_audit *a)
{
    return gh_db_kind(a->db) == GH_DB_SQLITE ? "sqlite" : "postgres";
}

int gh_audit_begin(struct gh_audit *a, struct gh_err *err)
{
    int rc = gh_db_begin(a->db, err);
    if (!rc)
        a->depth = 1;
    return rc;
}

int gh_audit_commit(struct gh_audit *a, struct gh_err *err)
{
    a->depth = 0;
    int rc = gh_db_commit(a->db, err);
    if (rc)
        gh_db_rollback(a->db);
    return rc;
}

void gh_audit_rollback(struct gh_audit *a)
{
    a->depth = 0;
    gh_db_rollback(a->db);
}

/* ---- writes */

static int64_t jtime(const json_t *o, const char *k)
{
    const char *s = gh_json_str(o, k);
    int64_t ns = 0;
    if (!s || !gh_time_parse_rfc3339(s, strlen(s), &ns))
        return 0;
    return ns;
}

static struct gh_db_val jint_or_null(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? gh_db_int(json_integer_value(v)) : gh_db_null();
}

static int insert_evidence(struct gh_audit *a, const char *id, long seq, const json_t *ev,
                           struct gh_err *err)
{
    char *text = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    char pod[GH_AUDIT_ID_MAX] = "";
    const char *pns = gh_json_str(ev, "namespace"), *pname = gh_json_str(ev, "pod");
    if (pname)
        snprintf(pod, sizeof pod, "%s%s%s", pns ? pns : "", pns ? "/" : "", pname);
    int64_t ts = jtime(ev, "ts");
    struct gh_db_val p[] = {
        gh_db_text(id), gh_db_int(seq), gh_db_int(ts), gh_db_text(gh_json_str(ev, "source")),
        gh_db_text(gh_json_str(ev, "kind")), gh_db_text(gh_json_str(ev, "node")), jint_or_null(ev, "gpu"),
        jint_or_null(ev, "code"), gh_db_text(gh_json_str(ev, "job")), gh_db_text(pod[0] ? pod : NULL),
        gh_db_text(gh_json_str(ev, "msg")), gh_db_int(json_is_true(json_object_get(ev, "injected"))),
        gh_db_text(text)};
    int rc = gh_db_exec(a->db,
                        "INSERT INTO evidence (incident_id, seq, ts_ns, source, kind, node, gpu,"
                        " code, job, pod, msg, injected, json)"
                        " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)"
                        " ON CONFLICT DO NOTHING",
                        p, 13, NULL, err);
    free(text);
    return rc;
}

int gh_audit_record_incident(struct gh_audit *a, const json_t *inc, const char *mode,
                             const char *phase, const char *controller, int64_t now,
                             bool *inserted, struct gh_err *err)
{
    if (inserted)
        *inserted = false;
    const char *id = gh_json_str(inc, "id"), *cls = gh_json_str(inc, "class");
    if (!id || !*id || !cls)
        return gh_err_set(err, GH_EINVAL, "incident without id or class");
    char actions[512] = "";
    size_t used = 0, i;
    json_t *v;
    json_array_foreach(json_object_get(inc, "actions"), i, v) {
        const char *s = json_string_value(v);
        if (s && used < sizeof actions) {
            int w = snprintf(actions + used, sizeof actions - used, "%s%s", used ? "," : "", s);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    json_t *ck = json_object_get(inc, "checkpoint");
    char *text = json_dumps(inc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    bool own = a->depth == 0;
    int rc = own ? gh_db_begin(a->db, err) : GH_OK;
    if (rc) {
        free(text);
        return rc;
    }
    struct gh_db_val p[] = {
        gh_db_text(id), gh_db_text(cls), gh_db_text(gh_json_str(inc, "severity")),
        gh_db_text(gh_json_str(inc, "node")), jint_or_null(inc, "gpu"), gh_db_text(gh_json_str(inc, "job")),
        gh_db_int(jtime(inc, "first_ts")), gh_db_int(jtime(inc, "decided_ts")), gh_db_int(now),
        gh_db_text(gh_json_str(inc, "rule")), gh_db_text(gh_json_str(inc, "reason")), gh_db_text(actions),
        ck ? jint_or_null(ck, "step") : gh_db_null(), gh_db_text(ck ? gh_json_str(ck, "path") : NULL),
        gh_db_text(mode ? mode : "act"), gh_db_text(phase ? phase : "Pending")};
    /* 16 parameters is the interface's bound: controller and json follow in
     * a second statement. */
    long changed = 0;
    rc = gh_db_exec(a->db,
                    "INSERT INTO incidents (id, class, severity, node, gpu, job, first_ns,"
                    " decided_ns, recorded_ns, rule, reason, actions, ckpt_step, ckpt_path, mode,"
                    " phase, json) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,"
                    " '') ON CONFLICT DO NOTHING",
                    p, 16, &changed, err);
    if (!rc && changed > 0) {
        struct gh_db_val q[] = {gh_db_text(id), gh_db_text(controller), gh_db_text(text)};
        rc = gh_db_exec(a->db, "UPDATE incidents SET controller = $2, json = $3 WHERE id = $1", q,
                        3, NULL, err);
        json_array_foreach(json_object_get(inc, "evidence"), i, v) {
            if (rc)
                break;
            rc = insert_evidence(a, id, (long)i, v, err);
        }
    }
    free(text);
    if (own) {
        if (rc)
            gh_db_rollback(a->db);
        else
            rc = gh_db_commit(a->db, err);
    }
    if (!rc && inserted)
        *inserted = changed > 0;
    return rc;
}

int gh_audit_set_phase(struct gh_audit *a, const char *incident_id, const char *phase,
                       struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_text(incident_id), gh_db_text(phase)};
    return gh_db_exec(a->db, "UPDATE incidents SET phase = $2 WHERE id = $1", p, 2, NULL, err);
}

int gh_audit_swap_phase(struct gh_audit *a, const char *incident_id, const char *from,
                        const char *to, bool *swapped, struct gh_err *err)
{
    long changed = 0;
    struct gh_db_val p[] = {gh_db_text(incident_id), gh_db_text(from), gh_db_text(to)};
    int rc = gh_db_exec(a->db, "UPDATE incidents SET phase = $3 WHERE id = $1 AND phase = $2", p,
                        3, &changed, err);
    *swapped = rc == GH_OK && changed > 0;
    return rc;
}

int gh_audit_set_reason(struct gh_audit *a, const char *incident_id, const char *reason,
                        const char *json, struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_text(incident_id), gh_db_text(reason), gh_db_text(json)};
    return gh_db_exec(a->db, "UPDATE incidents SET reason = $2, json = $3 WHERE id = $1", p, 3,
                      NULL, err);
}

int gh_audit_record_guard(struct gh_audit *a, const struct gh_audit_guard *g, struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_text(g->incident_id), gh_db_int(g->ts_ns), gh_db_text(g->action),
                            gh_db_text(g->target),      gh_db_text(g->guard), gh_db_text(g->verdict),
                            gh_db_text(g->detail)};
    return gh_db_exec(a->db,
                      "INSERT INTO guard_decisions (incident_id, ts_ns, action, target, guard,"
                      " verdict, detail) VALUES ($1,$2,$3,$4,$5,$6,$7)",
                      p, 7, NULL, err);
}

int gh_audit_record_action(struct gh_audit *a, const struct gh_audit_action *r, struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_text(r->incident_id), gh_db_text(r->intent_id),
                            gh_db_text(r->action),      gh_db_text(r->target),
                            gh_db_int(r->started_ns),   gh_db_int(r->finished_ns),
                            gh_db_text(r->result),      gh_db_int(r->http),
                            gh_db_text(r->api_result),  gh_db_text(r->detail)};
    return gh_db_exec(a->db,
                      "INSERT INTO actions (incident_id, intent_id, action, target, started_ns,"
                      " finished_ns, result, http, api_result, detail)"
                      " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
                      p, 10, NULL, err);
}

/* ---- joined evidence */

static int count_one(void *ud, int ncols, const char *const *v)
{
    if (ncols >= 1 && v[0])
        *(long *)ud = strtol(v[0], NULL, 10);
    return 0;
}

int gh_audit_record_joined(struct gh_audit *a, const char *incident_id, const char *node,
                           const json_t *ev, int64_t joined_ns, enum gh_audit_joined *res,
                           struct gh_err *err)
{
    *res = GH_AUDIT_JOINED_DUPLICATE;
    if (!incident_id || !incident_id[0] || !json_is_object(ev))
        return gh_err_set(err, GH_EINVAL,
                          "joined evidence: an incident id and a signal object "
                          "are required");
    char *text = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_SORT_KEYS);
    if (!text)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    char key[GH_AUDIT_ID_MAX];
    const char *sid = gh_json_str(ev, "id");
    if (sid && sid[0]) {
        snprintf(key, sizeof key, "%s", sid);
    } else {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a of the signal's JSON */
        for (const char *c = text; *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        snprintf(key, sizeof key, "h:%016llx", (unsigned long long)h);
    }
    long n = 0;
    struct gh_db_val q[] = {gh_db_text(incident_id)};
    int rc = gh_db_query(a->db, "SELECT COUNT(*) FROM joined_evidence WHERE incident_id = $1", q, 1,
                         count_one, &n, err);
    if (rc)
        goto out;
    if (n >= GH_AUDIT_JOINED_MAX) {
        /* over the cap; a duplicate of a stored row is still a duplicate */
        long dup = 0;
        struct gh_db_val k[] = {gh_db_text(incident_id), gh_db_text(key)};
        rc = gh_db_query(a->db,
                         "SELECT COUNT(*) FROM joined_evidence WHERE incident_id = $1 AND"
                         " sig_key = $2",
                         k, 2, count_one, &dup, err);
        if (!rc && !dup)
            *res = GH_AUDIT_JOINED_CAPPED;
        goto out;
    }
    const char *en = gh_json_str(ev, "node");
    struct gh_db_val p[] = {gh_db_text(incident_id),
                            gh_db_text(key),
                            gh_db_int(joined_ns),
                            gh_db_int(jtime(ev, "ts")),
                            gh_db_text(gh_json_str(ev, "source")),
                            gh_db_text(gh_json_str(ev, "kind")),
                            gh_db_text(en ? en : node),
                            jint_or_null(ev, "gpu"),
                            jint_or_null(ev, "code"),
                            gh_db_text(gh_json_str(ev, "job")),
                            gh_db_text(gh_json_str(ev, "msg")),
                            gh_db_text(text)};
    long changed = 0;
    rc = gh_db_exec(a->db,
                    "INSERT INTO joined_evidence (incident_id, sig_key, joined_ns, ts_ns, source,"
                    " kind, node, gpu, code, job, msg, json)"
                    " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) ON CONFLICT DO NOTHING",
                    p, 12, &changed, err);
    if (!rc && changed > 0)
        *res = GH_AUDIT_JOINED_STORED;
out:
    free(text);
    return rc;
}

/* ---- intents */

void gh_audit_intent_clear(struct gh_audit_intent *it)
{
    if (!it)
        return;
    free(it->payload);
    it->payload = NULL;
}

static void copy_field(char *dst, size_t cap, const char *s) { snprintf(dst, cap, "%s", s ? s : ""); }

static int64_t num(const char *s) { return s ? strtoll(s, NULL, 10) : 0; }

/* Row: id incident_id seq action target state created_ns updated_ns attempts payload */
static int intent_from_row(struct gh_audit_intent *it, const char *const *v)
{
    copy_field(it->id, sizeof it->id, v[0]);
    copy_field(it->incident_id, sizeof it->incident_id, v[1]);
    it->seq = (int)num(v[2]);
    copy_field(it->action, sizeof it->action, v[3]);
    copy_field(it->target, sizeof it->target, v[4]);
    copy_field(it->state, sizeof it->state, v[5]);
    it->created_ns = num(v[6]);
    it->updated_ns = num(v[7]);
    it->attempts = (int)num(v[8]);
    free(it->payload);
    it->payload = v[9] ? strdup(v[9]) : NULL;
    return v[9] && !it->payload ? GH_ENOMEM : GH_OK;
}

#define INTENT_COLS "id, incident_id, seq, action, target, state, created_ns, updated_ns," \
                    " attempts, payload"

static int load_one_intent(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    return intent_from_row(ud, v);
}

int gh_audit_intent_begin(struct gh_audit *a, struct gh_audit_intent *it, bool *existing,
                          struct gh_err *err)
{
    if (existing)
        *existing = false;
    if (!it->id[0])
        return gh_err_set(err, GH_EINVAL, "intent without id");
    long changed = 0;
    struct gh_db_val p[] = {gh_db_text(it->id),     gh_db_text(it->incident_id),
                            gh_db_int(it->seq),     gh_db_text(it->action),
                            gh_db_text(it->target), gh_db_int(it->created_ns),
                            gh_db_text(it->payload)};
    int rc = gh_db_exec(a->db,
                        "INSERT INTO intents (id, incident_id, seq, action, target, state,"
                        " created_ns, updated_ns, attempts, payload)"
                        " VALUES ($1,$2,$3,$4,$5,'pending',$6,$6,1,$7) ON CONFLICT DO NOTHING",
                        p, 7, &changed, err);
    if (rc || changed > 0) {
        if (!rc)
            copy_field(it->state, sizeof it->state, "pending");
        return rc;
    }
    if (existing)
        *existing = true;
    struct gh_db_val q[] = {gh_db_text(it->id)};
    rc = gh_db_exec(a->db, "UPDATE intents SET attempts = attempts + 1 WHERE id = $1", q, 1, NULL,
                    err);
    if (!rc)
        rc = gh_db_query(a->db, "SELECT " INTENT_COLS " FROM intents WHERE id = $1", q, 1,
                         load_one_intent, it, err);
    return rc;
}

int gh_audit_intent_set_payload(struct gh_audit *a, const char *id, const char *payload,
                                struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_text(id), gh_db_text(payload)};
    return gh_db_exec(a->db, "UPDATE intents SET payload = $2 WHERE id = $1", p, 2, NULL, err);
}

int gh_audit_intent_finish(struct gh_audit *a, const char *id, const char *state, int64_t now,
                           struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_text(id), gh_db_text(state), gh_db_int(now)};
    return gh_db_exec(a->db, "UPDATE intents SET state = $2, updated_ns = $3 WHERE id = $1", p, 3,
                      NULL, err);
}

struct intent_walk {
    gh_audit_intent_fn fn;
    void *ud;
};

static int walk_intent(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct intent_walk *w = ud;
    struct gh_audit_intent it;
    memset(&it, 0, sizeof it);
    int rc = intent_from_row(&it, v);
    if (!rc)
        rc = w->fn(w->ud, &it);
    gh_audit_intent_clear(&it);
    return rc;
}

int gh_audit_intents_pending(struct gh_audit *a, gh_audit_intent_fn fn, void *ud,
                             struct gh_err *err)
{
    struct intent_walk w = {fn, ud};
    return gh_db_query(a->db,
                       "SELECT " INTENT_COLS " FROM intents WHERE state = 'pending'"
                       " ORDER BY created_ns, incident_id, seq",
                       NULL, 0, walk_intent, &w, err);
}

/* ---- reads */

struct id_walk {
    gh_audit_id_fn fn;
    void *ud;
};

static int walk_id(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct id_walk *w = ud;
    return v[0] ? w->fn(w->ud, v[0], v[1] ? v[1] : "") : GH_OK;
}

int gh_audit_incident_ids(struct gh_audit *a, int64_t since_ns, gh_audit_id_fn fn, void *ud,
                          struct gh_err *err)
{
    struct id_walk w = {fn, ud};
    struct gh_db_val p[] = {gh_db_int(since_ns)};
    return gh_db_query(a->db,
                       "SELECT id, phase FROM incidents WHERE decided_ns >= $1 ORDER BY decided_ns",
                       p, 1, walk_id, &w, err);
}

struct allowed_walk {
    gh_audit_allowed_fn fn;
    void *ud;
};

static int walk_allowed(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct allowed_walk *w = ud;
    if (!v[0] || !v[1])
        return GH_OK;
    return w->fn(w->ud, strtoll(v[0], NULL, 10), v[1], v[2] ? v[2] : "");
}

int gh_audit_allowed_since(struct gh_audit *a, int64_t since_ns, gh_audit_allowed_fn fn,
                           void *ud, struct gh_err *err)
{
    struct allowed_walk w = {fn, ud};
    struct gh_db_val p[] = {gh_db_int(since_ns)};
    return gh_db_query(a->db,
                       "SELECT ts_ns, action, target FROM guard_decisions WHERE ts_ns >= $1 AND "
                       "verdict IN ('allowed', 'approved') AND action IS NOT NULL AND "
                       "action <> 'release_node' ORDER BY ts_ns",
                       p, 1, walk_allowed, &w, err);
}

int gh_audit_subject_parse(const char *s, struct gh_audit_subject *out, struct gh_err *err)
{
    memset(out, 0, sizeof *out);
    const char *slash = s ? strchr(s, '/') : NULL;
    if (s && strncmp(s, "inc-", 4) == 0 && !slash) {
        out->kind = GH_AUDIT_INCIDENT;
        copy_field(out->name, sizeof out->name, s);
        return GH_OK;
    }
    if (!slash || !slash[1])
        return gh_err_set(err, GH_EINVAL,
                          "\"%.64s\": expected node/NAME, job/NS/NAME, pod/NS/NAME or incident/ID",
                          s ? s : "");
    size_t klen = (size_t)(slash - s);
    const char *rest = slash + 1;
    if (strlen(rest) >= sizeof out->name)
        return gh_err_set(err, GH_ELIMIT, "subject name too long");
    if (klen == 4 && strncmp(s, "node", 4) == 0)
        out->kind = GH_AUDIT_NODE;
    else if (klen == 3 && strncmp(s, "job", 3) == 0)
        out->kind = GH_AUDIT_JOB;
    else if (klen == 3 && strncmp(s, "pod", 3) == 0)
        out->kind = GH_AUDIT_POD;
    else if (klen == 8 && strncmp(s, "incident", 8) == 0)
        out->kind = GH_AUDIT_INCIDENT;
    else
        return gh_err_set(err, GH_EINVAL, "\"%.*s\": unknown kind (node, job, pod or incident)",
                          (int)(klen > 32 ? 32 : klen), s);
    /* Jobs and pods are namespaced: "job/ml" alone names no job (it would
     * match none and say "0 incidents"), so it is refused. */
    bool two = out->kind == GH_AUDIT_POD || out->kind == GH_AUDIT_JOB;
    if (out->kind == GH_AUDIT_NODE && strchr(rest, '/'))
        return gh_err_set(err, GH_EINVAL, "node/NAME takes no namespace");
    const char *sep = strchr(rest, '/');
    if (two && (!sep || sep[1] == '\0' || rest[0] == '/' || strchr(sep + 1, '/')))
        return gh_err_set(err, GH_EINVAL, "\"%.64s\": %s/NS/NAME needs a namespace and a name",
                          s, out->kind == GH_AUDIT_POD ? "pod" : "job");
    copy_field(out->name, sizeof out->name, rest);
    return GH_OK;
}

const char *gh_audit_subject_str(const struct gh_audit_subject *s, char *buf, size_t cap)
{
    static const char *const kinds[] = {"node", "job", "pod", "incident"};
    snprintf(buf, cap, "%s/%s", kinds[s->kind], s->name);
    return buf;
}

/* A growable array of ids, bounded. */
struct idlist {
    char **v;
    size_t n, cap, max;
    bool oom;
};

static int collect_id(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct idlist *l = ud;
    if (!v[0] || l->n >= l->max)
        return GH_OK;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->oom = true;
            return GH_ENOMEM;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n] = strdup(v[0]);
    if (!l->v[l->n]) {
        l->oom = true;
        return GH_ENOMEM;
    }
    l->n++;
    return GH_OK;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int incident_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct gh_audit_incident_rec *r = ud;
    /* id class severity node gpu job first_ns decided_ns recorded_ns rule
     * reason actions ckpt_step ckpt_path mode phase controller json */
    char **s[] = {&r->id, &r->cls, &r->severity, &r->node};
    for (int i = 0; i < 4; i++)
        *s[i] = dup_or_null(v[i]);
    r->gpu = v[4] ? (int)num(v[4]) : -1;
    r->job = dup_or_null(v[5]);
    r->first_ns = num(v[6]);
    r->decided_ns = num(v[7]);
    r->recorded_ns = num(v[8]);
    r->rule = dup_or_null(v[9]);
    r->reason = dup_or_null(v[10]);
    r->actions = dup_or_null(v[11]);
    r->ckpt_step = v[12] ? num(v[12]) : -1;
    r->ckpt_path = dup_or_null(v[13]);
    r->mode = dup_or_null(v[14]);
    r->phase = dup_or_null(v[15]);
    r->controller = dup_or_null(v[16]);
    r->json = dup_or_null(v[17]);
    return r->id ? GH_OK : GH_ENOMEM;
}

static int grow(void **v, size_t *n, size_t elem)
{
    if (*n >= REC_LIST_MAX)
        return GH_ELIMIT;
    /* capacity is 4, 8, 16, ...: grow when n reaches it */
    if (*n == 0 || (*n >= 4 && (*n & (*n - 1)) == 0)) {
        size_t nc = *n ? *n * 2 : 4;
        void *nv = realloc(*v, nc * elem);
        if (!nv)
            return GH_ENOMEM;
        *v = nv;
    }
    memset((char *)*v + *n * elem, 0, elem);
    return GH_OK;
}

/* The columns an evidence row and a joined row share, first in both:
 * ts_ns source kind node gpu code job. */
static void ev_signal_cols(struct gh_audit_ev_rec *e, const char *const *v)
{
    e->ts_ns = num(v[0]);
    e->source = dup_or_null(v[1]);
    e->kind = dup_or_null(v[2]);
    e->node = dup_or_null(v[3]);
    e->gpu = v[4] ? (int)num(v[4]) : -1;
    e->code = v[5] ? (long)num(v[5]) : -1;
    e->job = dup_or_null(v[6]);
}

static int ev_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct gh_audit_incident_rec *r = ud;
    int rc = grow((void **)&r->ev, &r->n_ev, sizeof *r->ev);
    if (rc == GH_ELIMIT)
        return GH_OK;
    if (rc)
        return rc;
    struct gh_audit_ev_rec *e = &r->ev[r->n_ev++];
    /* ts_ns source kind node gpu code job, then pod msg injected json */
    ev_signal_cols(e, v);
    e->pod = dup_or_null(v[7]);
    e->msg = dup_or_null(v[8]);
    e->injected = num(v[9]) != 0;
    e->json = dup_or_null(v[10]);
    return GH_OK;
}

static int guard_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct gh_audit_incident_rec *r = ud;
    int rc = grow((void **)&r->guards, &r->n_guards, sizeof *r->guards);
    if (rc == GH_ELIMIT)
        return GH_OK;
    if (rc)
        return rc;
    struct gh_audit_guard_rec *g = &r->guards[r->n_guards++];
    g->ts_ns = num(v[0]);
    g->action = dup_or_null(v[1]);
    g->target = dup_or_null(v[2]);
    g->guard = dup_or_null(v[3]);
    g->verdict = dup_or_null(v[4]);
    g->detail = dup_or_null(v[5]);
    return GH_OK;
}

static int action_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct gh_audit_incident_rec *r = ud;
    int rc = grow((void **)&r->acts, &r->n_actions, sizeof *r->acts);
    if (rc == GH_ELIMIT)
        return GH_OK;
    if (rc)
        return rc;
    struct gh_audit_action_rec *x = &r->acts[r->n_actions++];
    x->started_ns = num(v[0]);
    x->finished_ns = num(v[1]);
    x->action = dup_or_null(v[2]);
    x->target = dup_or_null(v[3]);
    x->result = dup_or_null(v[4]);
    x->http = (long)num(v[5]);
    x->api_result = dup_or_null(v[6]);
    x->detail = dup_or_null(v[7]);
    return GH_OK;
}

static int joined_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct gh_audit_incident_rec *r = ud;
    int rc = grow((void **)&r->joined, &r->n_joined, sizeof *r->joined);
    if (rc == GH_ELIMIT)
        return GH_OK;
    if (rc)
        return rc;
    struct gh_audit_ev_rec *e = &r->joined[r->n_joined++];
    /* ts_ns source kind node gpu code job, then msg json joined_ns */
    ev_signal_cols(e, v);
    e->msg = dup_or_null(v[7]);
    e->json = dup_or_null(v[8]);
    e->joined_ns = num(v[9]);
    return GH_OK;
}

static int load_incident(struct gh_audit *a, const char *id, struct gh_audit_incident_rec *r,
                         struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_text(id)};
    int rc = gh_db_query(a->db,
                         "SELECT id, class, severity, node, gpu, job, first_ns, decided_ns,"
                         " recorded_ns, rule, reason, actions, ckpt_step, ckpt_path, mode, phase,"
                         " controller, json FROM incidents WHERE id = $1",
                         p, 1, incident_row, r, err);
    if (!rc)
        rc = gh_db_query(a->db,
                         "SELECT ts_ns, source, kind, node, gpu, code, job, pod, msg, injected,"
                         " json FROM evidence WHERE incident_id = $1 ORDER BY seq",
                         p, 1, ev_row, r, err);
    if (!rc)
        rc = gh_db_query(a->db,
                         "SELECT ts_ns, action, target, guard, verdict, detail FROM guard_decisions"
                         " WHERE incident_id = $1 ORDER BY id",
                         p, 1, guard_row, r, err);
    if (!rc)
        rc = gh_db_query(a->db,
                         "SELECT started_ns, finished_ns, action, target, result, http, api_result,"
                         " detail FROM actions WHERE incident_id = $1 ORDER BY id",
                         p, 1, action_row, r, err);
    if (!rc)
        rc = gh_db_query(a->db,
                         "SELECT ts_ns, source, kind, node, gpu, code, job, msg, json, joined_ns"
                         " FROM joined_evidence WHERE incident_id = $1 ORDER BY ts_ns, sig_key",
                         p, 1, joined_row, r, err);
    if (rc == GH_ENOMEM)
        gh_err_set(err, rc, "out of memory");
    return rc;
}

int gh_audit_query(struct gh_audit *a, const struct gh_audit_subject *subj, int64_t since_ns,
                   size_t max, struct gh_audit_incident_rec **out, size_t *n, struct gh_err *err)
{
    *out = NULL;
    *n = 0;
    if (max == 0 || max > GH_AUDIT_QUERY_MAX)
        max = GH_AUDIT_QUERY_MAX;
    char target[GH_AUDIT_ID_MAX + 16];
    gh_audit_subject_str(subj, target, sizeof target);
    const char *sql = NULL;
    switch (subj->kind) {
    case GH_AUDIT_NODE:
        sql = "SELECT id FROM incidents WHERE decided_ns >= $2 AND (node = $1"
              " OR id IN (SELECT incident_id FROM evidence WHERE node = $1)"
              " OR id IN (SELECT incident_id FROM joined_evidence WHERE node = $1)"
              " OR id IN (SELECT incident_id FROM actions WHERE target = $3))"
              " ORDER BY decided_ns DESC, id LIMIT $4";
        break;
    case GH_AUDIT_JOB:
        sql = "SELECT id FROM incidents WHERE decided_ns >= $2 AND (job = $1"
              " OR id IN (SELECT incident_id FROM evidence WHERE job = $1)"
              " OR id IN (SELECT incident_id FROM actions WHERE target = $3))"
              " ORDER BY decided_ns DESC, id LIMIT $4";
        break;
    case GH_AUDIT_POD:
        sql = "SELECT id FROM incidents WHERE decided_ns >= $2 AND ("
              " id IN (SELECT incident_id FROM evidence WHERE pod = $1)"
              " OR id IN (SELECT incident_id FROM actions WHERE target = $3))"
              " ORDER BY decided_ns DESC, id LIMIT $4";
        break;
    case GH_AUDIT_INCIDENT:
        sql = "SELECT id FROM incidents WHERE id = $1 AND decided_ns >= $2"
              " AND CAST($3 AS TEXT) = CAST($3 AS TEXT) LIMIT $4";
        break;
    }
    struct idlist ids = {.max = max};
    struct gh_db_val p[] = {gh_db_text(subj->name), gh_db_int(since_ns), gh_db_text(target),
                            gh_db_int((int64_t)max)};
    int rc = gh_db_query(a->db, sql, p, 4, collect_id, &ids, err);
    if (rc == GH_ENOMEM && ids.oom)
        gh_err_set(err, rc, "out of memory");
    struct gh_audit_incident_rec *recs = NULL;
    if (!rc && ids.n) {
        recs = calloc(ids.n, sizeof *recs);
        if (!recs)
            rc = gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    /* newest first from the query; oldest first out */
    for (size_t i = 0; !rc && i < ids.n; i++)
        rc = load_incident(a, ids.v[ids.n - 1 - i], &recs[i], err);
    for (size_t i = 0; i < ids.n; i++)
        free(ids.v[i]);
    free(ids.v);
    if (rc) {
        gh_audit_recs_free(recs, ids.n);
        return rc;
    }
    *out = recs;
    *n = ids.n;
    return GH_OK;
}

void gh_audit_recs_free(struct gh_audit_incident_rec *v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++) {
        struct gh_audit_incident_rec *r = &v[i];
        char *s[] = {r->id,      r->cls,     r->severity, r->node,       r->job,
                     r->rule,    r->reason,  r->actions,  r->mode,       r->phase,
                     r->controller, r->ckpt_path, r->json};
        for (size_t k = 0; k < sizeof s / sizeof s[0]; k++)
            free(s[k]);
        for (size_t k = 0; k < r->n_ev + r->n_joined; k++) {
            struct gh_audit_ev_rec *e = k < r->n_ev ? &r->ev[k] : &r->joined[k - r->n_ev];
            free(e->source), free(e->kind), free(e->node), free(e->job), free(e->pod);
            free(e->msg), free(e->json);
        }
        for (size_t k = 0; k < r->n_guards; k++) {
            struct gh_audit_guard_rec *g = &r->guards[k];
            free(g->action), free(g->target), free(g->guard), free(g->verdict), free(g->detail);
        }
        for (size_t k = 0; k < r->n_actions; k++) {
            struct gh_audit_action_rec *x = &r->acts[k];
            free(x->action), free(x->target), free(x->result), free(x->api_result);
            free(x->detail);
        }
        free(r->ev);
        free(r->joined);
        free(r->guards);
        free(r->acts);
    }
    free(v);
}

static int count_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    *(long *)ud = (long)num(v[0]);
    return GH_OK;
}

int gh_audit_count(struct gh_audit *a, const char *what, long *n, struct gh_err *err)
{
    static const char *const tables[][2] = {
        {"incidents", "incidents"},   {"evidence", "evidence"}, {"guards", "guard_decisions"},
        {"actions", "actions"},       {"intents", "intents"},   {"telemetry", "telemetry"},
        {"joined", "joined_evidence"}};
    *n = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (strcmp(what, tables[i][0]) == 0) {
            char sql[64];
            snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", tables[i][1]);
            return gh_db_query(a->db, sql, NULL, 0, count_row, n, err);
        }
    return gh_err_set(err, GH_EINVAL, "unknown table \"%.32s\"", what);
}
