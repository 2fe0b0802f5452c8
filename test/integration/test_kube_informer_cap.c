/* test_kube_informer_cap.c - an informer with max_objects against the real
 * control plane: three times the bound of objects listed and watched leave
 * the cache at the bound (the latest added kept, the first dropped, no
 * delete handler called), and a relist keeps it there. The controller runs
 * its Event informers so (controller.c, EVENTS_CACHED_MAX). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/api.h"
#include "kube/informer.h"
#include "kube/testenv.h"

#define CAP 10
#define LISTED (3 * CAP)
#define WATCHED 5

struct env {
    struct gh_kube_client *c;
    char ns[64];
    struct gh_kube_informer *inf;
};

struct seen {
    int adds, updates, deletes, errors;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (!e || gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "infcap", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gh_kube_informer_free(e->inf);
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static void h_add(void *ud, const json_t *obj)
{
    (void)obj;
    ((struct seen *)ud)->adds++;
}
static void h_update(void *ud, const json_t *old, const json_t *obj)
{
    (void)old;
    (void)obj;
    ((struct seen *)ud)->updates++;
}
static void h_delete(void *ud, const json_t *obj)
{
    (void)obj;
    ((struct seen *)ud)->deletes++;
}
static void h_error(void *ud, int rc, const struct gh_kube_status *st, const char *msg)
{
    (void)rc;
    (void)st;
    (void)msg;
    ((struct seen *)ud)->errors++;
}

static void put_cm(struct gh_kube_client *c, const char *ns, int i)
{
    char name[32];
    snprintf(name, sizeof name, "cm-%03d", i);
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s}}", "apiVersion", "v1",
                           "kind", "ConfigMap", "metadata", "name", name, "namespace", ns,
                           "labels", "cap", "yes", "data", "v", name);
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, ns, name};
    struct gh_err err;
    int rc = gh_kube_patch(c, &ref, NULL, GH_KUBE_PATCH_APPLY, cm, NULL, NULL, &err);
    json_decref(cm);
    if (rc)
        fail_msg("apply %s: %s", name, err.msg);
}

struct want {
    struct gh_kube_informer *inf;
    struct seen *s;
    int adds;
    unsigned long lists;
};

static bool reached(void *ud)
{
    struct want *w = ud;
    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(w->inf, &st);
    return gh_kube_informer_synced(w->inf) && w->s->adds >= w->adds && st.lists >= w->lists;
}

static bool cached(const struct gh_kube_informer *inf, const char *ns, int i)
{
    char name[32];
    snprintf(name, sizeof name, "cm-%03d", i);
    return gh_kube_store_get(gh_kube_informer_store(inf), ns, name) != NULL;
}

static void test_cache_stays_bounded(void **state)
{
    struct env *e = *state;
    for (int i = 0; i < LISTED; i++)
        put_cm(e->c, e->ns, i);
    struct seen s = {0};
    struct gh_kube_handlers h = {h_add, h_update, h_delete, NULL, h_error};
    struct gh_kube_informer_opts o = {.res = &gh_kube_res_configmaps,
                                      .ns = e->ns,
                                      .label_selector = "cap=yes",
                                      .page_size = 7, /* several pages */
                                      .max_objects = CAP};
    struct gh_err err;
    assert_int_equal(gh_kube_informer_new(e->c, &o, &h, &s, &e->inf, &err), GH_OK);
    assert_int_equal(gh_kube_informer_start(e->inf, &err), GH_OK);

    /* the list: every object reaches the handlers, the cache keeps CAP */
    struct want w = {e->inf, &s, LISTED, 1};
    assert_true(gh_kube_testenv_until(e->c, reached, &w, 30000));
    const struct gh_kube_store *st = gh_kube_informer_store(e->inf);
    struct gh_kube_informer_stats stats;
    gh_kube_informer_stats(e->inf, &stats);
    assert_int_equal(s.adds, LISTED);
    assert_int_equal(gh_kube_store_count(st), CAP);
    assert_int_equal(stats.evicted, LISTED - CAP);
    assert_int_equal(s.deletes, 0); /* leaving the cache is no deletion */
    assert_true(cached(e->inf, e->ns, LISTED - 1));
    assert_false(cached(e->inf, e->ns, 0));

    /* the watch: new objects push the first ones out */
    for (int i = LISTED; i < LISTED + WATCHED; i++)
        put_cm(e->c, e->ns, i);
    w.adds = LISTED + WATCHED;
    assert_true(gh_kube_testenv_until(e->c, reached, &w, 30000));
    gh_kube_informer_stats(e->inf, &stats);
    assert_int_equal(gh_kube_store_count(st), CAP);
    assert_int_equal(stats.evicted, LISTED + WATCHED - CAP);
    for (int i = LISTED + WATCHED - CAP; i < LISTED + WATCHED; i++)
        assert_true(cached(e->inf, e->ns, i));
    assert_false(cached(e->inf, e->ns, LISTED + WATCHED - CAP - 1));

    /* a relist: the objects no longer cached come back as adds, the cache
     * stays at the bound, nothing is reported deleted */
    int before = s.adds;
    gh_kube_informer_relist(e->inf);
    w.lists = 2;
    w.adds = before + (LISTED + WATCHED - CAP);
    assert_true(gh_kube_testenv_until(e->c, reached, &w, 30000));
    assert_true(gh_kube_store_count(st) <= CAP);
    assert_int_equal(s.deletes, 0);
    assert_true(cached(e->inf, e->ns, LISTED + WATCHED - 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_stays_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
