/* test_oom_engine.c - the detection engine under allocation failure
 * (alloc_fail.h): gh_engine_new, then scenario files fed through
 * gh_engine_ingest / gh_engine_ingest_steal and gh_engine_tick as `gpuheal
 * diagnose` feeds them, and gh_engine_finish. At every failure point the run either says so (an
 * error from gh_engine_new or gh_engine_ingest, or stats.nomem counting an
 * allocation the engine could not make while deciding) or decides exactly
 * the incidents it decides without injection; ASan's leak check at exit
 * finds what a failure left behind. Small scenarios are failed at every
 * allocation, long ones at points spread over the run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "engine/engine.h"
#include "engine/incident.h"
#include "engine/topology.h"
#include "signal/signal_json.h"

#define SCEN GH_SOURCE_DIR "/test/scenarios/"

struct scenario {
    struct gh_topology *topo; /* NULL when the file has no header */
    struct gh_signal *sigs;
    size_t n;
};

/* Reads a scenario file (injector paused) and sorts it by time, as
 * diagnose does. */
static int cmp_ts(const void *a, const void *b)
{
    const struct gh_signal *x = a, *y = b;
    return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

static void load(const char *name, struct scenario *sc)
{
    char path[512];
    snprintf(path, sizeof path, SCEN "%s.jsonl", name);
    gh_af_pause();
    memset(sc, 0, sizeof *sc);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    struct gh_signal_reader *r = gh_signal_reader_new(f);
    assert_non_null(r);
    size_t cap = 0;
    for (;;) {
        struct gh_signal s;
        json_t *hdr = NULL;
        int rc = gh_signal_reader_next(r, &s, &hdr, NULL);
        if (rc == GH_ENOTFOUND)
            break;
        if (rc == GH_EINVAL)
            continue;
        assert_int_equal(rc, GH_OK);
        if (hdr) {
            if (!sc->topo)
                assert_int_equal(gh_topology_from_header(hdr, &sc->topo, NULL), GH_OK);
            json_decref(hdr);
            continue;
        }
        if (sc->n == cap) {
            cap = cap ? cap * 2 : 64;
            struct gh_signal *ns = realloc(sc->sigs, cap * sizeof *ns);
            assert_non_null(ns);
            sc->sigs = ns;
        }
        sc->sigs[sc->n++] = s;
    }
    gh_signal_reader_free(r);
    fclose(f);
    qsort(sc->sigs, sc->n, sizeof *sc->sigs, cmp_ts);
    gh_af_resume();
}

static void unload(struct scenario *sc)
{
    for (size_t i = 0; i < sc->n; i++)
        gh_signal_clear(&sc->sigs[i]);
    free(sc->sigs);
    gh_topology_free(sc->topo);
}

/* The incidents of one run, encoded, one a line. */
struct decided {
    char *text;
    size_t len, cap;
    size_t n;
};

static void on_incident(void *ctx, const struct gh_incident *inc)
{
    struct decided *d = ctx;
    char *line = NULL;
    gh_af_pause();
    assert_int_equal(gh_incident_encode(inc, &line, NULL), GH_OK);
    size_t n = strlen(line);
    if (d->len + n + 2 > d->cap) {
        d->cap = (d->len + n + 2) * 2;
        char *nt = realloc(d->text, d->cap);
        assert_non_null(nt);
        d->text = nt;
    }
    memcpy(d->text + d->len, line, n);
    d->len += n;
    d->text[d->len++] = '\n';
    d->text[d->len] = '\0';
    d->n++;
    free(line);
    gh_af_resume();
}

struct run_ctx {
    const struct scenario *sc;
    const struct gh_policy *policy;
    struct decided want, got;
    bool have_want;
};

static int op_engine(void *arg)
{
    struct run_ctx *c = arg;
    struct decided *d = c->have_want ? &c->got : &c->want;
    d->len = 0;
    d->n = 0;
    if (d->text)
        d->text[0] = '\0';
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    struct gh_err err;
    struct gh_engine *e = gh_engine_new(c->policy, c->sc->topo, NULL, &cfg, on_incident, d, &err);
    if (!e)
        return GH_ENOMEM;
    int rc = GH_OK;
    for (size_t i = 0; i < c->sc->n; i++) {
        /* every other signal taken as diagnose and the controller give
         * them (gh_engine_ingest_steal), the others copied */
        int irc;
        if (i % 2) {
            struct gh_signal own;
            gh_af_pause();
            assert_int_equal(gh_signal_copy(&own, &c->sc->sigs[i], NULL), GH_OK);
            gh_af_resume();
            irc = gh_engine_ingest_steal(e, &own, c->sc->sigs[i].ts_ns, &err);
            gh_signal_clear(&own); /* left cleared when taken; freed here when not */
        } else {
            irc = gh_engine_ingest(e, &c->sc->sigs[i], c->sc->sigs[i].ts_ns, &err);
        }
        if (irc == GH_ENOMEM)
            rc = irc; /* reported: the signal was not taken */
        else
            assert_true(irc == GH_OK || irc == GH_EAGAIN);
        gh_engine_tick(e, c->sc->sigs[i].ts_ns);
    }
    gh_engine_finish(e, INT64_MAX);
    struct gh_engine_stats st;
    gh_engine_stats(e, &st);
    gh_engine_free(e);
    if (!rc && st.nomem)
        rc = GH_ENOMEM; /* reported: a decision may be missing */
    if (!c->have_want) {
        c->have_want = true;
        return rc;
    }
    if (!rc) {
        if (!d->text || strcmp(d->text, c->want.text ? c->want.text : "") != 0)
            fail_msg("an allocation failed unreported and the incidents differ:\n"
                     "got:\n%s\nwant:\n%s", d->text ? d->text : "", c->want.text);
    }
    return rc;
}

static void run_scenario(const char *name, const struct gh_policy *policy, unsigned long points)
{
    static struct scenario sc;
    static struct run_ctx c;
    load(name, &sc);
    free(c.want.text);
    free(c.got.text);
    memset(&c, 0, sizeof c);
    c.sc = &sc;
    c.policy = policy;
    assert_int_equal(op_engine(&c), GH_OK);
    assert_true(c.want.n > 0); /* the scenario decides something */
    unsigned long total = points ? gh_af_sample(op_engine, &c, false, points)
                                 : gh_af_each(op_engine, &c, false, 100000);
    print_message("%s: %zu signals, %zu incidents, %lu allocations\n", name, sc.n, c.want.n,
                  total);
    unload(&sc);
    free(c.want.text);
    free(c.got.text);
    memset(&c, 0, sizeof c);
}

static struct gh_policy *policy;

static int group_setup(void **state)
{
    (void)state;
    policy = gh_policy_new_default();
    return policy ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    gh_policy_free(policy);
    return 0;
}

/* gh_engine_new alone, with the built-in policy it parses itself. */
static int op_new(void *arg)
{
    (void)arg;
    struct gh_err err;
    struct gh_engine *e = gh_engine_new(NULL, NULL, NULL, NULL, NULL, NULL, &err);
    if (!e)
        return GH_ENOMEM;
    gh_engine_free(e);
    return 0;
}

static void test_new(void **state)
{
    (void)state;
    assert_true(gh_af_each(op_new, NULL, true, 100000) > 0);
}

static void test_small_scenarios(void **state)
{
    (void)state;
    static const char *const names[] = {"ext-flapping-node", "app-then-hardware",
                                        "ext-nvlink-burst", "crash-loop",
                                        "ext2-xid45-caused-by-79"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        run_scenario(names[i], policy, 0);
}

static void test_long_scenarios(void **state)
{
    (void)state;
    static const char *const names[] = {"ext-two-faults", "ext-xid79-recurs-escalates",
                                        "ext-straggler-slow-node", "ext-sdc-checksum",
                                        "ext-hang-who-stopped", "ext-nic-dead-link",
                                        "ext-thermal-sustained"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        run_scenario(names[i], policy, 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_new, gh_af_setup),
        cmocka_unit_test_setup(test_small_scenarios, gh_af_setup),
        cmocka_unit_test_setup(test_long_scenarios, gh_af_setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
