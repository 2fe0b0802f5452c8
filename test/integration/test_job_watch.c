/* test_job_watch.c - the training-job informers (control/job_watch.h)
 * against the real control plane: the watch says its jobs are listed only
 * once every kind is either listed by its informer or not served, so the
 * ingest never judges a checkpoint path before the job's declared prefix
 * is known (issue 24: a path beside the prefix was taken in that window);
 * and a Job created afterwards is reported by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/job_watch.h"
#include "kube/api.h"
#include "kube/testenv.h"

struct env {
    struct gh_kube_client *c;
    char ns[64];
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "jobwatch", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

struct seen {
    struct gh_job_watch *w;
    int started, synced, not_served;
    bool listed_too_early; /* listed while some kind had not answered */
    char last_job[320];
};

static void changed(void *ud, const char *job, const char *part)
{
    (void)part;
    struct seen *s = ud;
    snprintf(s->last_job, sizeof s->last_job, "%s", job);
}

static void noted(void *ud, const struct gh_job_watch_note *n)
{
    struct seen *s = ud;
    if (n->what == GH_JOB_WATCH_INFORMER_STARTED) {
        s->started++;
        /* an informer just started has listed nothing */
        if (gh_job_watch_listed(s->w))
            s->listed_too_early = true;
    } else if (n->what == GH_JOB_WATCH_INFORMER_SYNCED) {
        s->synced++;
    } else if (n->what == GH_JOB_WATCH_NOT_SERVED) {
        s->not_served++;
    }
}

static bool listed(void *ud) { return gh_job_watch_listed(((struct seen *)ud)->w); }

static bool reported(void *ud)
{
    struct seen *s = ud;
    return strstr(s->last_job, "/trainer") != NULL;
}

static void test_listed_only_when_every_kind_is(void **state)
{
    struct env *e = *state;
    struct seen s = {0};
    struct gh_err err = {{0}};
    assert_int_equal(gh_job_watch_new(e->c, e->ns, changed, &s, &s.w, &err), GH_OK);
    gh_job_watch_on_note(s.w, noted, &s);
    assert_false(gh_job_watch_listed(s.w)); /* nothing asked yet */
    assert_int_equal(gh_job_watch_start(s.w, &err), GH_OK);
    assert_false(gh_job_watch_listed(s.w)); /* discovery in flight */
    assert_true(gh_kube_testenv_until(e->c, listed, &s, 30000));
    /* batch/v1 Job is always served; each kind answered one way */
    assert_true(s.started >= 1);
    assert_int_equal(s.synced, s.started);
    assert_int_equal(s.synced + s.not_served >= 3, true);
    assert_false(s.listed_too_early);
    assert_non_null(gh_job_watch_jobs(s.w));

    json_t *job = json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:s, s:[{s:s, s:s}]}}}}", "apiVersion",
                            "batch/v1", "kind", "Job", "metadata", "name", "trainer", "spec",
                            "template", "spec", "restartPolicy", "Never", "containers", "name", "c",
                            "image", "busybox");
    struct gh_kube_ref ref = {&gh_kube_res_jobs, e->ns, NULL};
    int rc = gh_kube_create(e->c, &ref, job, NULL, NULL, &err);
    json_decref(job);
    if (rc)
        fail_msg("create job: %s", err.msg);
    assert_true(gh_kube_testenv_until(e->c, reported, &s, 30000));
    char want[320];
    snprintf(want, sizeof want, "%s/trainer", e->ns);
    assert_string_equal(s.last_job, want);
    assert_true(gh_job_watch_listed(s.w));
    gh_job_watch_free(s.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listed_only_when_every_kind_is),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
