/* journal.c - the signal journal (journal.h): batches of accepted signals
 * written to signal_journal in one committed transaction each (multi-row
 * INSERTs of up to GH_JOURNAL_ROWS_PER_INSERT rows, one round trip each on
 * PostgreSQL), pruned by age now and then, and read back in arrival order
 * on start. */
#include "audit/journal.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit_int.h"
#include "signal/signal_json.h"

#define KEY_MAX 80 /* "sigsha256:" or "sha256:" + 64 hex digits */

#define COLS 5 /* id, arrival_ns, seq, ts_ns, line */
#define ROWS GH_JOURNAL_ROWS_PER_INSERT
_Static_assert(ROWS * COLS <= GH_DB_MAX_PARAMS, "one INSERT's parameters fit gh_db_exec");
#define INSERT_HEAD "INSERT INTO signal_journal (id, arrival_ns, seq, ts_ns, line) VALUES "
#define INSERT_TAIL " ON CONFLICT DO NOTHING"
/* "($1276, $1277, $1278, $1279, $1280)," is 36 bytes; room for more */
#define SQL_CAP (sizeof INSERT_HEAD + sizeof INSERT_TAIL + (size_t)ROWS * 48)

struct gh_journal {
    struct gh_audit *a;           /* owned: this journal's own connection */
    struct gh_db *db;             /* borrowed from a */
    const struct gh_clock *clock; /* borrowed */
    int64_t retention_ns, prune_every_ns;
    int64_t last_prune_ns;        /* clock time of the last prune (0: none yet) */
    int64_t seq;                  /* order of rows appended by this process */
    /* one INSERT's rows, reused by every append (owned scratch) */
    char keys[ROWS][KEY_MAX];
    char *lines[ROWS];            /* owned while a chunk is written, else NULL */
    struct gh_db_val p[ROWS * COLS];
    char sql[SQL_CAP];
};

int gh_journal_open(const struct gh_journal_opts *o, struct gh_journal **out,
                    struct gh_err *err)
{
    *out = NULL;
    struct gh_journal *j = calloc(1, sizeof *j);
    if (!j)
        return gh_err_set(err, GH_ENOMEM, "journal: out of memory");
    int rc = gh_audit_open(o->db_url, &j->a, err);
    if (rc) {
        free(j);
        return gh_err_prefix(err, rc, "journal");
    }
    j->db = gh_audit__db(j->a);
    j->clock = o->clock ? o->clock : gh_clock_real();
    j->retention_ns = o->retention_ns > 0 ? o->retention_ns : GH_JOURNAL_DEFAULT_RETENTION_NS;
    j->prune_every_ns = o->prune_every_ns > 0 ? o->prune_every_ns
                                              : GH_JOURNAL_DEFAULT_PRUNE_EVERY_NS;
    *out = j;
    return GH_OK;
}

void gh_journal_close(struct gh_journal *j)
{
    if (!j)
        return;
    gh_audit_close(j->a);
    free(j);
}

/* The row key of s: with an id, a hash of its node, source, injected flag
 * and id together (the same id from another node, source or an injection
 * is another signal: issue 15 #1); else a hash of its encoding (line). */
static void row_key(const struct gh_signal *s, const char *line, char key[KEY_MAX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    bool has_id = s->id && *s->id;
    if (has_id) {
        const char *node = s->node ? s->node : "", *src = gh_source_name(s->source);
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL) ||
            !EVP_DigestUpdate(c, node, strlen(node) + 1) ||
            !EVP_DigestUpdate(c, src, strlen(src) + 1) ||
            !EVP_DigestUpdate(c, s->injected ? "i" : "r", 2) ||
            !EVP_DigestUpdate(c, s->id, strlen(s->id)) || !EVP_DigestFinal_ex(c, md, &mdlen))
            mdlen = 0;
        EVP_MD_CTX_free(c);
    } else if (!EVP_Digest(line, strlen(line), md, &mdlen, EVP_sha256(), NULL)) {
        mdlen = 0;
    }
    int p = snprintf(key, KEY_MAX, "%s", has_id ? "sigsha256:" : "sha256:");
    for (unsigned i = 0; i < mdlen && p + 3 <= KEY_MAX; i++)
        p += snprintf(key + p, (size_t)(KEY_MAX - p), "%02x", md[i]);
}

static int maybe_prune(struct gh_journal *j, struct gh_err *err)
{
    int64_t t = gh_clock_now(j->clock);
    if (j->last_prune_ns != 0 && t - j->last_prune_ns < j->prune_every_ns)
        return GH_OK;
    j->last_prune_ns = t;
    return gh_journal_prune(j, t - j->retention_ns, NULL, err);
}

/* The INSERT of rows rows into j->sql: VALUES ($1, ..., $5), ($6, ...) ... */
static int insert_sql(struct gh_journal *j, size_t rows, struct gh_err *err)
{
    size_t len = (size_t)snprintf(j->sql, sizeof j->sql, "%s", INSERT_HEAD);
    for (size_t r = 0; r < rows && len < sizeof j->sql; r++) {
        size_t b = r * COLS;
        len += (size_t)snprintf(j->sql + len, sizeof j->sql - len,
                                "%s($%zu, $%zu, $%zu, $%zu, $%zu)", r ? ", " : "", b + 1, b + 2,
                                b + 3, b + 4, b + 5);
    }
    if (len < sizeof j->sql)
        len += (size_t)snprintf(j->sql + len, sizeof j->sql - len, "%s", INSERT_TAIL);
    if (len >= sizeof j->sql)
        return gh_err_set(err, GH_ELIMIT, "INSERT of %zu rows over %zu bytes", rows,
                          sizeof j->sql);
    return GH_OK;
}

/* Writes sigs[0..n) (n <= ROWS) as one multi-row INSERT. Rows are numbered
 * from *seq on, a signal whose key is already stored (or earlier in the
 * same statement) keeps its first row, as row-by-row inserts would. */
static int insert_chunk(struct gh_journal *j, const struct gh_signal *sigs, size_t n,
                        int64_t arrival_ns, int64_t *seq, struct gh_err *err)
{
    int rc = GH_OK;
    size_t encoded = 0;
    for (; encoded < n; encoded++) {
        const struct gh_signal *s = &sigs[encoded];
        if ((rc = gh_signal_encode(s, &j->lines[encoded], err)))
            goto out;
        row_key(s, j->lines[encoded], j->keys[encoded]);
        struct gh_db_val *p = &j->p[encoded * COLS];
        p[0] = gh_db_text(j->keys[encoded]);
        p[1] = gh_db_int(arrival_ns);
        p[2] = gh_db_int((*seq)++);
        p[3] = gh_db_int(s->ts_ns);
        p[4] = gh_db_text(j->lines[encoded]);
    }
    if ((rc = insert_sql(j, n, err)))
        goto out;
    rc = gh_db_exec(j->db, j->sql, j->p, (int)(n * COLS), NULL, err);
out:
    for (size_t i = 0; i < encoded; i++) {
        free(j->lines[i]);
        j->lines[i] = NULL;
    }
    return rc;
}

int gh_journal_append(struct gh_journal *j, const struct gh_signal *sigs, size_t n,
                      int64_t arrival_ns, struct gh_err *err)
{
    if (n == 0)
        return GH_OK;
    int rc = gh_db_begin(j->db, err);
    if (rc)
        return gh_err_prefix(err, rc, "journal");
    int64_t seq = j->seq;
    for (size_t i = 0; i < n && rc == GH_OK; i += ROWS)
        rc = insert_chunk(j, sigs + i, n - i < ROWS ? n - i : ROWS, arrival_ns, &seq, err);
    if (rc == GH_OK)
        rc = gh_db_commit(j->db, err);
    if (rc) {
        gh_db_rollback(j->db);
        return gh_err_prefix(err, rc, "journal");
    }
    j->seq = seq;
    /* the batch is durable; a failed prune is retried at the next interval */
    struct gh_err perr;
    (void)maybe_prune(j, &perr);
    return GH_OK;
}

int gh_journal_prune(struct gh_journal *j, int64_t cutoff_ns, long *removed,
                     struct gh_err *err)
{
    struct gh_db_val p[] = {gh_db_int(cutoff_ns)};
    int rc = gh_db_exec(j->db, "DELETE FROM signal_journal WHERE arrival_ns < $1", p, 1, removed,
                        err);
    return rc ? gh_err_prefix(err, rc, "journal prune") : GH_OK;
}

struct replay_ctx {
    gh_journal_fn fn;
    void *ud;
    struct gh_journal_replay_stats st;
};

static int64_t num(const char *s) { return s ? strtoll(s, NULL, 10) : 0; }

static int replay_row(void *ud, int ncols, const char *const *vals)
{
    struct replay_ctx *r = ud;
    if (ncols < 3 || !vals[2]) {
        r->st.unreadable++;
        return GH_OK;
    }
    struct gh_signal s;
    if (gh_signal_decode(vals[2], strlen(vals[2]), 0, &s, NULL) != GH_OK) {
        r->st.unreadable++;
        return GH_OK;
    }
    /* the encoding keeps microseconds; the column keeps the exact time */
    s.ts_ns = num(vals[1]);
    r->st.replayed++;
    return r->fn(r->ud, &s, num(vals[0]));
}

int gh_journal_replay(struct gh_journal *j, int64_t since_ns, gh_journal_fn fn, void *ud,
                      struct gh_journal_replay_stats *st, struct gh_err *err)
{
    struct replay_ctx r = {fn, ud, {0, 0}};
    struct gh_db_val p[] = {gh_db_int(since_ns)};
    int rc = gh_db_query(j->db,
                         "SELECT arrival_ns, ts_ns, line FROM signal_journal WHERE arrival_ns >= $1 "
                         "ORDER BY arrival_ns, seq",
                         p, 1, replay_row, &r, err);
    if (st)
        *st = r.st;
    return rc ? gh_err_prefix(err, rc, "journal replay") : GH_OK;
}

void gh_journal_decision_key(const char *cls, const char *node, int gpu, int64_t first_ns,
                             const char *rule, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s|%s|%d|%lld|%s", cls ? cls : "", node ? node : "", gpu < 0 ? -1 : gpu,
             (long long)(first_ns / 1000), rule ? rule : "");
}

struct key_ctx {
    gh_journal_key_fn fn;
    void *ud;
};

static int key_row(void *ud, int ncols, const char *const *vals)
{
    struct key_ctx *k = ud;
    if (ncols < 5)
        return GH_OK;
    char key[512];
    gh_journal_decision_key(vals[0], vals[1], vals[2] ? (int)num(vals[2]) : -1, num(vals[3]),
                            vals[4], key, sizeof key);
    return k->fn(k->ud, key);
}

int gh_journal_decided(struct gh_journal *j, int64_t since_ns, gh_journal_key_fn fn, void *ud,
                       struct gh_err *err)
{
    struct key_ctx k = {fn, ud};
    struct gh_db_val p[] = {gh_db_int(since_ns)};
    int rc = gh_db_query(j->db,
                         "SELECT class, node, gpu, first_ns, rule FROM incidents "
                         "WHERE decided_ns >= $1",
                         p, 1, key_row, &k, err);
    return rc ? gh_err_prefix(err, rc, "journal: decided incidents") : GH_OK;
}

static int count_row(void *ud, int ncols, const char *const *vals)
{
    *(long *)ud = ncols > 0 ? (long)num(vals[0]) : 0;
    return GH_OK;
}

int gh_journal_count(struct gh_journal *j, long *n, struct gh_err *err)
{
    *n = 0;
    return gh_db_query(j->db, "SELECT COUNT(*) FROM signal_journal", NULL, 0, count_row, n, err);
}
