/* test_oom_parsers.c - the parsers outside the signal codec under
 * allocation failure (alloc_fail.h): the Prometheus text parser and the
 * dcgm-exporter scrape on it, the policy YAML loader, and the scenario
 * header (gh_topology_from_header, gh_topology_clone). At every failure
 * point the call returns an error, or its result equals the one without
 * injection; ASan's leak check at exit finds what a failed call left
 * behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/dcgm.h"
#include "alloc_fail.h"
#include "engine/policy.h"
#include "engine/topology.h"
#include "signal/signal_json.h"

#define MAX_POINTS 20000
#define CORPUS GH_SOURCE_DIR "/test/fuzz/promtext/"

/* The whole file, read with the injector paused; caller frees. */
static char *slurp(const char *path, size_t *len)
{
    gh_af_pause();
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    gh_af_resume();
    return buf;
}

/* A text digest of what a parse produced, for comparing runs: appended to a
 * fixed buffer, never allocated. */
struct digest {
    char text[1 << 16];
    size_t len;
};

static void digest_add(struct digest *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void digest_add(struct digest *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->text + d->len, sizeof d->text - d->len, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof d->text - d->len);
    d->len += (size_t)n;
}

/* ---- the Prometheus text parser --------------------------------------------- */

static int promtext_fn(void *ctx, const struct gh_dcgm_promtext_sample *s)
{
    struct digest *d = ctx;
    digest_add(d, "%ld %.*s", s->line, (int)s->name_len, s->name);
    for (size_t i = 0; i < s->nlabels; i++)
        digest_add(d, " %.*s=%.*s", (int)s->labels[i].name_len, s->labels[i].name,
                   (int)s->labels[i].value_len, s->labels[i].value);
    digest_add(d, " %.17g\n", s->value);
    return 0;
}

struct promtext_ctx {
    const char *text;
    size_t len;
    int want_rc;
    size_t want_bad;
    struct digest want, got;
};

static int op_promtext(void *arg)
{
    struct promtext_ctx *c = arg;
    size_t bad = 0;
    struct gh_err err;
    c->got.len = 0;
    c->got.text[0] = '\0';
    int rc = gh_dcgm_promtext_parse(c->text, c->len, promtext_fn, &c->got, &bad, &err);
    if (rc == GH_ENOMEM)
        return rc;
    assert_int_equal(rc, c->want_rc);
    assert_int_equal(bad, c->want_bad);
    assert_string_equal(c->got.text, c->want.text);
    return 0;
}

static void test_promtext(void **state)
{
    (void)state;
    static const char *const files[] = {"dcgm-exporter.txt", "edge-cases.txt", "malformed.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        static struct promtext_ctx c;
        char path[512];
        snprintf(path, sizeof path, CORPUS "%s", files[i]);
        char *text = slurp(path, &c.len);
        c.text = text;
        c.want.len = 0;
        c.want.text[0] = '\0';
        c.want_bad = 0;
        c.want_rc = gh_dcgm_promtext_parse(text, c.len, promtext_fn, &c.want, &c.want_bad, NULL);
        assert_true(c.want_rc == GH_OK || c.want_rc == GH_EINVAL);
        if (i == 0)
            assert_true(c.want.len > 0);
        assert_true(gh_af_each(op_promtext, &c, true, MAX_POINTS) > 0);
        free(text);
    }
}

/* ---- the dcgm-exporter scrape (parse + derive signals + state) --------------- */

static int64_t clock_now(void *ctx)
{
    (void)ctx;
    return 1764400000000000000LL;
}
static const struct gh_clock fixed_clock = {clock_now, NULL};

static void record(void *ctx, const struct gh_signal *sig)
{
    struct digest *d = ctx;
    char *json = NULL;
    gh_af_pause();
    assert_int_equal(gh_signal_encode(sig, &json, NULL), GH_OK);
    gh_af_resume();
    digest_add(d, "%s\n", json);
    free(json);
}

struct scrape_ctx {
    char *a, *b; /* two scrapes in turn */
    size_t a_len, b_len;
    struct digest want, got;
};

static int scrape_run(struct scrape_ctx *c, struct digest *d)
{
    d->len = 0;
    d->text[0] = '\0';
    struct gh_dcgm_exporter_opts o = {
        .url = "http://127.0.0.1:9/metrics",
        .node = "gpu-node-17",
        .clock = &fixed_clock,
        .emit = record,
        .emit_ctx = d,
    };
    struct gh_dcgm_exporter *ex = NULL;
    struct gh_err err;
    int rc = gh_dcgm_exporter_new(&o, &ex, &err);
    if (rc)
        return rc;
    /* a scrape with malformed lines (GH_EINVAL) still counts its good
     * ones: every scrape's result goes into the digest */
    for (int i = 0; i < 3 && rc != GH_ENOMEM; i++) {
        const char *text = i == 1 ? c->b : c->a;
        rc = gh_dcgm_exporter_ingest(ex, text, i == 1 ? c->b_len : c->a_len, &err);
        digest_add(d, "scrape %d: rc %d\n", i, rc);
    }
    struct gh_dcgm_exporter_stats st;
    gh_dcgm_exporter_stats(ex, &st);
    digest_add(d, "bad_lines %llu samples %llu signals %llu\n", (unsigned long long)st.bad_lines,
               (unsigned long long)st.samples, (unsigned long long)st.signals);
    gh_dcgm_exporter_free(ex);
    return rc == GH_ENOMEM ? rc : GH_OK;
}

static int op_scrape(void *arg)
{
    struct scrape_ctx *c = arg;
    int rc = scrape_run(c, &c->got);
    if (rc) {
        assert_int_equal(rc, GH_ENOMEM);
        return rc;
    }
    assert_string_equal(c->got.text, c->want.text);
    return 0;
}

static void test_exporter_ingest(void **state)
{
    (void)state;
    static struct scrape_ctx c;
    c.a = slurp(CORPUS "dcgm-exporter.txt", &c.a_len);
    c.b = slurp(CORPUS "two-scrapes.txt", &c.b_len);
    assert_int_equal(scrape_run(&c, &c.want), GH_OK);
    assert_true(c.want.len > 0); /* the scrapes emit signals */
    assert_true(gh_af_each(op_scrape, &c, true, MAX_POINTS) > 0);
    free(c.a);
    free(c.b);
}

/* ---- the policy YAML loader ----------------------------------------------------- */

struct policy_ctx {
    const char *text;
    struct gh_policy *want;
};

static int op_policy(void *arg)
{
    struct policy_ctx *c = arg;
    struct gh_policy *p = NULL;
    static struct gh_policy_diags diags;
    int rc = gh_policy_parse(c->text, strlen(c->text), &p, &diags);
    if (rc) {
        assert_null(p);
        return rc;
    }
    assert_non_null(p);
    assert_true(gh_policy_equal(p, c->want));
    gh_policy_free(p);
    return 0;
}

static void test_policy(void **state)
{
    (void)state;
    struct policy_ctx c = {gh_policy_default_yaml(), NULL};
    static struct gh_policy_diags diags;
    assert_int_equal(gh_policy_parse(c.text, strlen(c.text), &c.want, &diags), GH_OK);
    assert_true(gh_af_each(op_policy, &c, true, MAX_POINTS) > 0);
    gh_policy_free(c.want);
}

static int op_policy_default(void *arg)
{
    struct gh_policy *want = arg;
    struct gh_policy *p = gh_policy_new_default();
    if (!p)
        return GH_ENOMEM;
    assert_true(gh_policy_equal(p, want));
    gh_policy_free(p);
    return 0;
}

static void test_policy_default(void **state)
{
    (void)state;
    struct gh_policy *want = gh_policy_new_default();
    assert_non_null(want);
    assert_true(gh_af_each(op_policy_default, want, true, MAX_POINTS) > 0);
    gh_policy_free(want);
}

/* ---- the scenario header ---------------------------------------------------------- */

static const char header_text[] =
    "{\"scenario\":\"oom\",\"nodes\":[\"n0\",\"n1\",\"n2\",\"n3\"],\"gpus_per_node\":8,"
    "\"jobs\":[{\"name\":\"ml/llm\",\"nodes\":[\"n0\",\"n1\",\"n2\"],\"ranks_per_node\":8,"
    "\"remaining_s\":3600,\"restart_cost_s\":600},"
    "{\"name\":\"ml/small\",\"nodes\":[\"n3\",\"n4\"],\"ranks_per_node\":2}],"
    "\"extra\":{\"ignored\":true}}";

static void topology_digest(const struct gh_topology *t, struct digest *d)
{
    d->len = 0;
    d->text[0] = '\0';
    digest_add(d, "%s gpus=%d", gh_topology_scenario(t) ? gh_topology_scenario(t) : "-",
               gh_topology_gpus_per_node(t));
    for (size_t i = 0; i < gh_topology_node_count(t); i++)
        digest_add(d, " %s", gh_topology_node_name(t, i));
    for (size_t j = 0; j < gh_topology_job_count(t); j++) {
        if (!gh_topology_job_name(t, j))
            continue;
        const unsigned *nodes;
        size_t n = gh_topology_job_nodes(t, j, &nodes);
        digest_add(d, "\njob %s ranks=%d declared=%d:", gh_topology_job_name(t, j),
                   gh_topology_job_ranks(t, j), gh_topology_job_declared(t, j));
        for (size_t k = 0; k < n; k++)
            digest_add(d, " %u", nodes[k]);
    }
}

struct header_ctx {
    json_t *hdr;
    struct digest want, got;
};

static int op_header(void *arg)
{
    struct header_ctx *c = arg;
    struct gh_topology *t = NULL;
    struct gh_err err;
    int rc = gh_topology_from_header(c->hdr, &t, &err);
    if (rc) {
        assert_int_equal(rc, GH_ENOMEM);
        assert_null(t);
        return rc;
    }
    topology_digest(t, &c->got);
    assert_string_equal(c->got.text, c->want.text);
    struct gh_topology *copy = gh_topology_clone(t);
    gh_topology_free(t);
    if (!copy)
        return GH_ENOMEM;
    topology_digest(copy, &c->got);
    assert_string_equal(c->got.text, c->want.text);
    gh_topology_free(copy);
    return 0;
}

static void test_scenario_header(void **state)
{
    (void)state;
    static struct header_ctx c;
    c.hdr = json_loads(header_text, 0, NULL);
    assert_non_null(c.hdr);
    struct gh_topology *t = NULL;
    assert_int_equal(gh_topology_from_header(c.hdr, &t, NULL), GH_OK);
    topology_digest(t, &c.want);
    gh_topology_free(t);
    assert_non_null(strstr(c.want.text, "job ml/small"));
    assert_true(gh_af_each(op_header, &c, true, MAX_POINTS) > 0);
    json_decref(c.hdr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_promtext, gh_af_setup),
        cmocka_unit_test_setup(test_exporter_ingest, gh_af_setup),
        cmocka_unit_test_setup(test_policy, gh_af_setup),
        cmocka_unit_test_setup(test_policy_default, gh_af_setup),
        cmocka_unit_test_setup(test_scenario_header, gh_af_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
