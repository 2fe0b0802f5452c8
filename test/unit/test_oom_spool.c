/* test_oom_spool.c - the agent's disk spool under allocation failure
 * (alloc_fail.h): open, append (signals and lines, hardware and telemetry,
 * across segment rotations), flush, read, ack, close, and open again. At
 * every failure point the call that failed returns an error, and a spool
 * opened again without injection still holds every record whose append
 * returned GH_OK and whose ack did not (duplicates allowed, never loss,
 * never a record that was not appended); ASan's leak check at exit finds
 * what a failed call left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/spool.h"
#include "alloc_fail.h"
#include "signal/signal_json.h"

#define MAX_POINTS 20000
#define N_RECORDS 120

static int64_t fixed_now(void *ctx)
{
    (void)ctx;
    return 1800000000LL * GH_NS_PER_S;
}
static const struct gh_clock fixed_clock = {fixed_now, NULL};

struct rec {
    uint64_t seq;
    char line[640]; /* the payload as the spool must give it back */
    bool appended, acked;
};

struct spool_ctx {
    char dir[64];
    struct rec recs[N_RECORDS];
    size_t n_recs;
    /* the spool's counters when it is opened again, without injection */
    bool have_want;
    struct gh_spool_stats want;
};

/* The i-th signal: kernel-log xids with a long msg (a few segments' worth)
 * and, every fifth, a telemetry step line. */
static void make_signal(size_t i, struct gh_signal *s)
{
    char msg[400];
    gh_signal_init(s);
    s->ts_ns = 1800000000LL * GH_NS_PER_S + (int64_t)i * GH_NS_PER_S;
    if (i % 5 == 4) {
        s->source = GH_SRC_TELEMETRY;
        s->kind = GH_KIND_STEP;
        assert_int_equal(gh_signal_set_str(&s->job, "ml/llm", 6), GH_OK);
        s->has_rank = true;
        s->rank = 0;
        s->has_step = true;
        s->step = (int64_t)i;
        s->step_ms = 1000;
        return;
    }
    s->source = GH_SRC_KMSG;
    s->kind = GH_KIND_XID;
    s->code = 79;
    s->gpu = (int)(i % 8);
    assert_int_equal(gh_signal_set_str(&s->node, "n1", 2), GH_OK);
    memset(msg, 'a' + (int)(i % 26), sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    assert_int_equal(gh_signal_set_str(&s->msg, msg, strlen(msg)), GH_OK);
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

static int open_spool(const char *dir, struct gh_spool **sp)
{
    struct gh_spool_opts o = {.dir = dir, .node = "n1", .boot_id = "b00t",
                              .max_bytes = 64 * 1024, .segment_bytes = 16 * 1024,
                              .clock = &fixed_clock};
    struct gh_err err;
    return gh_spool_open(&o, sp, &err);
}

static struct rec *find_rec(struct spool_ctx *c, uint64_t seq)
{
    for (size_t i = 0; i < c->n_recs; i++)
        if (c->recs[i].appended && c->recs[i].seq == seq)
            return &c->recs[i];
    return NULL;
}

/* Checks batch b against what was appended; marks each record seen. */
static void check_batch(struct spool_ctx *c, const struct gh_spool_batch *b, bool *seen)
{
    const char *p = b->body;
    for (size_t i = 0; i < b->n; i++) {
        const char *nl = memchr(p, '\n', b->len - (size_t)(p - b->body));
        assert_non_null(nl);
        struct rec *r = find_rec(c, b->seqs[i]);
        if (!r) {
            fail_msg("seq %llu was read but never appended", (unsigned long long)b->seqs[i]);
            return;
        }
        assert_int_equal((size_t)(nl - p), strlen(r->line));
        assert_memory_equal(p, r->line, strlen(r->line));
        seen[r - c->recs] = true;
        p = nl + 1;
    }
}

/* The run under injection; returns the first error an API call gave. The
 * first run (no injection) records the counters of the spool opened again
 * in c->want. */
static int spool_run(struct spool_ctx *c)
{
    struct gh_spool *sp = NULL;
    struct gh_err err;
    int rc = open_spool(c->dir, &sp);
    if (rc)
        return rc;
    for (size_t i = 0; i < N_RECORDS && !rc; i++) {
        struct rec *r = &c->recs[c->n_recs];
        memset(r, 0, sizeof *r);
        c->n_recs++;
        if (i % 7 == 3) { /* an already-encoded line, as the ingest-side inject path spools */
            snprintf(r->line, sizeof r->line,
                     "{\"ts\":\"2027-01-15T08:00:00.000000Z\",\"node\":\"n1\",\"source\":"
                     "\"host\",\"kind\":\"nic\",\"device\":\"mlx5_0\",\"port\":1,\"counter\":"
                     "\"link_downed\",\"count\":%zu,\"id\":\"line-%zu\"}", i, i);
            rc = gh_spool_append_line(sp, r->line, strlen(r->line), &r->seq, &err);
        } else {
            struct gh_signal s;
            gh_af_pause();
            make_signal(i, &s);
            gh_af_resume();
            rc = gh_spool_append(sp, &s, &r->seq, &err);
            if (!rc) {
                char *line = NULL;
                gh_af_pause();
                assert_int_equal(gh_signal_encode(&s, &line, NULL), GH_OK);
                gh_af_resume();
                assert_true(strlen(line) < sizeof r->line);
                snprintf(r->line, sizeof r->line, "%s", line);
                free(line);
            }
            gh_af_pause();
            gh_signal_clear(&s);
            gh_af_resume();
        }
        if (!rc)
            r->appended = true;
        else if (rc != GH_ENOMEM)
            print_error("append %zu: %s\n", i, err.msg);
        if (!rc && i % 40 == 39)
            rc = gh_spool_flush(sp, &err);
    }
    /* two batches read and acked; the rest stays pending */
    for (int k = 0; k < 2 && !rc; k++) {
        struct gh_spool_batch b = {0};
        rc = gh_spool_read(sp, 30, 1 << 20, &b, &err);
        if (!rc)
            rc = gh_spool_ack(sp, &b, &err);
        if (!rc)
            for (size_t i = 0; i < b.n; i++) {
                struct rec *r = find_rec(c, b.seqs[i]);
                assert_non_null(r);
                r->acked = true;
            }
        gh_spool_batch_clear(&b);
    }
    gh_spool_close(sp);
    sp = NULL;
    if (rc)
        return rc;
    /* opened again under injection too */
    rc = open_spool(c->dir, &sp);
    if (rc)
        return rc;
    /* what it restored is what it restores without injection: every
     * segment's telemetry bytes (telemetry's share), pending records */
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    if (!c->have_want) {
        c->want = st;
        c->have_want = true;
    }
    assert_int_equal(st.telemetry_bytes, c->want.telemetry_bytes);
    assert_int_equal(st.pending, c->want.pending);
    assert_int_equal(st.segments, c->want.segments);
    assert_int_equal(st.next_seq, c->want.next_seq);
    struct gh_spool_batch b = {0};
    rc = gh_spool_read(sp, 10, 1 << 20, &b, &err);
    gh_spool_batch_clear(&b);
    gh_spool_close(sp);
    return rc;
}

/* After a run: the spool, opened without injection, holds every record
 * appended and not acked, in seq order, and nothing else. */
static void check_spool(struct spool_ctx *c)
{
    static bool seen[N_RECORDS];
    memset(seen, 0, sizeof seen);
    struct gh_spool *sp = NULL;
    assert_int_equal(open_spool(c->dir, &sp), GH_OK);
    for (;;) {
        struct gh_spool_batch b = {0};
        assert_int_equal(gh_spool_read(sp, 50, 1 << 20, &b, NULL), GH_OK);
        if (b.n == 0)
            break;
        check_batch(c, &b, seen);
        assert_int_equal(gh_spool_ack(sp, &b, NULL), GH_OK);
        gh_spool_batch_clear(&b);
    }
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_int_equal(st.lost, 0);
    gh_spool_close(sp);
    for (size_t i = 0; i < c->n_recs; i++)
        if (c->recs[i].appended && !c->recs[i].acked && !seen[i])
            fail_msg("record %zu (seq %llu) was appended and not acked, but is gone", i,
                     (unsigned long long)c->recs[i].seq);
}

static int op_spool(void *arg)
{
    struct spool_ctx *c = arg;
    gh_af_pause();
    snprintf(c->dir, sizeof c->dir, "/tmp/gh-oom-spool-XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    gh_af_resume();
    c->n_recs = 0;
    int rc = spool_run(c);
    gh_af_pause();
    if (rc)
        assert_true(rc == GH_ENOMEM || rc == GH_EIO);
    check_spool(c);
    rm_dir(c->dir);
    gh_af_resume();
    return rc;
}

static void test_spool(void **state)
{
    (void)state;
    static struct spool_ctx c;
    /* without injection: every record comes back, across rotations */
    assert_int_equal(op_spool(&c), GH_OK);
    size_t pending = 0;
    for (size_t i = 0; i < c.n_recs; i++)
        pending += c.recs[i].appended && !c.recs[i].acked;
    assert_int_equal(c.n_recs, N_RECORDS);
    assert_int_equal(pending, N_RECORDS - 60);
    assert_true(c.want.telemetry_bytes > 0);
    assert_true(c.want.segments >= 3);
    /* every failure is reported by the call it happened in */
    unsigned long points = gh_af_each(op_spool, &c, true, MAX_POINTS);
    print_message("spool: %lu failure points\n", points);
    assert_true(points > N_RECORDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_spool, gh_af_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
