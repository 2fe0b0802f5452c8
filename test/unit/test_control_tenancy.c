/* test_control_tenancy.c - unit tests of control/tenancy.h: which node may
 * send which job's training telemetry (a pod of the job on that node; with
 * a stamped pod UID, that very pod), "retry" before the pods are listed,
 * pods that move, finish and go; a checkpoint path under the job's declared
 * prefix only, with the prefix matched safely (a '/' boundary, no "..",
 * no escaped dots or slashes); and bad prefixes refused with the reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include <cmocka.h>

#include "control/tenancy.h"

static void test_path_under(void **state)
{
    (void)state;
    /* under, at a boundary */
    assert_true(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/step-1"));
    assert_true(gh_tenancy_path_under("s3://ckpt/job", "s3://ckpt/job/step-1"));
    assert_true(gh_tenancy_path_under("s3://ckpt/job", "s3://ckpt/job"));
    assert_true(gh_tenancy_path_under("/ckpt/pt/", "/ckpt/pt/900"));
    assert_true(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/a.b/..c/x..y/.hidden"));
    /* beside it */
    assert_false(gh_tenancy_path_under("s3://ckpt/job", "s3://ckpt/job-evil/step-1"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job", "s3://ckpt/jobx"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://attacker/x"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "S3://ckpt/job/x"));
    /* out of it by dots or escapes */
    assert_false(gh_tenancy_path_under("s3://ckpt/job", "s3://ckpt/job/../other"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/.."));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/./x"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/a/../../b"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/%2e%2e/x"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/%2E%2e/x"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", "s3://ckpt/job/a%2fb"));
    assert_false(gh_tenancy_path_under("/ckpt/", "/ckpt/..\\\\etc"));
    assert_false(gh_tenancy_path_under("/ckpt/", "/ckpt/a\nb"));
    /* no prefix covers nothing */
    assert_false(gh_tenancy_path_under(NULL, "s3://ckpt/job/x"));
    assert_false(gh_tenancy_path_under("", "s3://ckpt/job/x"));
    assert_false(gh_tenancy_path_under("s3://ckpt/job/", NULL));
    /* an unsafe prefix covers nothing either */
    assert_false(gh_tenancy_path_under("/ckpt/../", "/ckpt/../etc/x"));
}

static void test_prefix_check(void **state)
{
    (void)state;
    struct gh_err err;
    assert_int_equal(gh_tenancy_prefix_check("s3://ckpt/job/", &err), GH_OK);
    assert_int_equal(gh_tenancy_prefix_check("", &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "empty"));
    assert_int_equal(gh_tenancy_prefix_check(NULL, &err), GH_EINVAL);
    assert_int_equal(gh_tenancy_prefix_check("/ckpt/../", &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "gpuheal.io/checkpoint-prefix"));
    char big[GH_TENANCY_PREFIX_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(gh_tenancy_prefix_check(big, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "at most"));
}

static struct gh_signal line(enum gh_kind kind, const char *job, const char *pod_uid,
                             const char *path)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.source = GH_SRC_TELEMETRY;
    s.kind = kind;
    s.job = (char *)job;
    s.pod_uid = (char *)pod_uid;
    s.path = (char *)path;
    return s;
}

static int admit(struct gh_tenancy *t, const char *node, const struct gh_signal *s, char *why)
{
    why[0] = '\0';
    int rc = gh_tenancy_admit(t, node, s, why, 240);
    if (why[0])
        printf("  %s: %s\n", rc == GH_EAGAIN ? "retry" : "refused", why);
    return rc;
}

#define PA "aaaaaaaa-0000-0000-0000-000000000001"
#define PB "bbbbbbbb-0000-0000-0000-000000000002"

static void test_admit(void **state)
{
    (void)state;
    struct gh_tenancy *t = NULL;
    char why[240];
    assert_int_equal(gh_tenancy_new(0, &t, NULL), GH_OK);
    struct gh_signal a_n1 = line(GH_KIND_STEP, "ns/a", NULL, NULL);
    struct gh_signal a_pa = line(GH_KIND_STEP, "ns/a", PA, NULL);
    struct gh_signal a_pb = line(GH_KIND_REPLICA_CHECKSUM, "ns/a", PB, NULL);
    struct gh_signal xid = line(GH_KIND_XID, NULL, NULL, NULL);
    xid.source = GH_SRC_KMSG;

    /* before the pods are listed: "retry", never a silent yes */
    assert_int_equal(admit(t, "n1", &a_n1, why), GH_EAGAIN);
    assert_non_null(strstr(why, "not listed the pods and training jobs yet"));
    assert_int_equal(admit(t, "n1", &a_pa, why), GH_EAGAIN);
    assert_int_equal(admit(t, "n1", &xid, why), GH_OK); /* not training telemetry */
    assert_int_equal(gh_tenancy_pod(t, PA, "ns/a", "n1"), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, PB, "ns/b", "n2"), GH_OK);
    /* the pods listed, the jobs not yet: a's prefix may still come, so even
     * a known pod's checkpoint waits (the race CI met: a path beside the
     * prefix taken before the JobSet informer listed) */
    gh_tenancy_set_listed(t, GH_TENANCY_PODS, true);
    struct gh_signal ck_early = line(GH_KIND_CHECKPOINT, "ns/a", PA, "s3://ckpt/a-evil/x");
    assert_int_equal(admit(t, "n1", &ck_early, why), GH_EAGAIN);
    assert_non_null(strstr(why, "not listed the training jobs yet"));
    assert_int_equal(admit(t, "n1", &a_pa, why), GH_EAGAIN);
    gh_tenancy_set_listed(t, GH_TENANCY_JOBS, true);

    /* a's pod on n1 */
    assert_int_equal(admit(t, "n1", &a_n1, why), GH_OK);
    assert_int_equal(admit(t, "n1", &a_pa, why), GH_OK);
    /* n2 runs no pod of a */
    assert_int_equal(admit(t, "n2", &a_n1, why), GH_EINVAL);
    assert_non_null(strstr(why, "job \"ns/a\" has no pod on node \"n2\""));
    /* a's pod's UID, claimed from n2: the pod is on n1 */
    assert_int_equal(admit(t, "n2", &a_pa, why), GH_EINVAL);
    assert_non_null(strstr(why, "is a pod of job \"ns/a\" on node \"n1\""));
    /* b's pod (on n2) speaking for a */
    assert_int_equal(admit(t, "n2", &a_pb, why), GH_EINVAL);
    assert_non_null(strstr(why, "is a pod of job \"ns/b\""));
    /* a pod the controller does not know, once listed */
    struct gh_signal a_px = line(GH_KIND_STEP, "ns/a", "cccccccc-0000-0000-0000-000000000003",
                                 NULL);
    assert_int_equal(admit(t, "n1", &a_px, why), GH_EINVAL);

    /* checkpoint paths: any without a prefix declared; then only under it */
    struct gh_signal ck_own = line(GH_KIND_CHECKPOINT, "ns/a", PA, "s3://ckpt/a/step-1");
    struct gh_signal ck_evil = line(GH_KIND_CHECKPOINT, "ns/a", PA, "s3://attacker/x.pkl");
    struct gh_signal ck_side = line(GH_KIND_CHECKPOINT, "ns/a", PA, "s3://ckpt/a-evil/x");
    struct gh_signal ck_up = line(GH_KIND_CHECKPOINT, "ns/a", PA, "s3://ckpt/a/../b/x");
    assert_int_equal(admit(t, "n1", &ck_evil, why), GH_OK);
    struct gh_err err;
    assert_int_equal(gh_tenancy_set_prefix(t, "ns/a", "s3://ckpt/a", &err), GH_OK);
    assert_int_equal(admit(t, "n1", &ck_own, why), GH_OK);
    assert_int_equal(admit(t, "n1", &ck_evil, why), GH_EINVAL);
    assert_non_null(strstr(why, "not under job \"ns/a\"'s declared checkpoint prefix"));
    assert_int_equal(admit(t, "n1", &ck_side, why), GH_EINVAL);
    assert_int_equal(admit(t, "n1", &ck_up, why), GH_EINVAL);
    /* a bad prefix is refused and leaves none */
    assert_int_equal(gh_tenancy_set_prefix(t, "ns/a", "s3://ckpt/a/../", &err), GH_EINVAL);
    assert_int_equal(admit(t, "n1", &ck_evil, why), GH_OK);
    assert_int_equal(gh_tenancy_set_prefix(t, "ns/a", "s3://ckpt/a/", &err), GH_OK);
    assert_int_equal(gh_tenancy_set_prefix(t, "ns/a", NULL, &err), GH_OK); /* undeclared */
    assert_int_equal(admit(t, "n1", &ck_evil, why), GH_OK);

    /* the pod moves (a restart elsewhere), then finishes */
    assert_int_equal(gh_tenancy_pod(t, PA, "ns/a", "n3"), GH_OK);
    assert_int_equal(admit(t, "n1", &a_n1, why), GH_EINVAL);
    assert_int_equal(admit(t, "n3", &a_pa, why), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, PA, NULL, NULL), GH_OK);
    assert_int_equal(admit(t, "n3", &a_n1, why), GH_EINVAL);
    assert_int_equal(admit(t, "n3", &a_pa, why), GH_EINVAL);
    /* two pods of a on n4: one going leaves the node a's */
    assert_int_equal(gh_tenancy_pod(t, "p1", "ns/a", "n4"), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, "p2", "ns/a", "n4"), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, "p1", NULL, NULL), GH_OK);
    assert_int_equal(admit(t, "n4", &a_n1, why), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, "p2", NULL, NULL), GH_OK);
    assert_int_equal(admit(t, "n4", &a_n1, why), GH_EINVAL);

    struct gh_tenancy_stats st;
    gh_tenancy_stats(t, &st);
    assert_int_equal(st.pods, 1); /* PB */
    assert_int_equal(st.placements, 1);
    assert_true(st.refused >= 10 && st.retried == 4);
    gh_tenancy_free(t);
}

static void test_bounded(void **state)
{
    (void)state;
    struct gh_tenancy *t = NULL;
    assert_int_equal(gh_tenancy_new(2, &t, NULL), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, "p1", "ns/a", "n1"), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, "p2", "ns/a", "n2"), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, "p3", "ns/a", "n3"), GH_ELIMIT);
    gh_tenancy_set_listed(t, GH_TENANCY_PODS, true);
    gh_tenancy_set_listed(t, GH_TENANCY_JOBS, true);
    char why[240];
    struct gh_signal s = line(GH_KIND_STEP, "ns/a", NULL, NULL);
    assert_int_equal(admit(t, "n3", &s, why), GH_EINVAL); /* not recorded: refused */
    assert_int_equal(admit(t, "n2", &s, why), GH_OK);
    gh_tenancy_free(t);
    gh_tenancy_free(NULL);
}

/* The loop writes while ingest threads admit (run under TSan too):
 * pods moving between two nodes, a prefix changing; every answer is one of
 * the three, and a pod that never moves is always admitted. */
struct churn {
    struct gh_tenancy *t;
    int iters;
};

static void *admitter(void *arg)
{
    struct churn *c = arg;
    char why[240];
    struct gh_signal still = line(GH_KIND_STEP, "ns/still", "still-pod", NULL);
    struct gh_signal moving = line(GH_KIND_CHECKPOINT, "ns/m", "m-pod", "s3://m/x");
    for (int i = 0; i < c->iters; i++) {
        assert_int_equal(gh_tenancy_admit(c->t, "n0", &still, why, sizeof why), GH_OK);
        int rc = gh_tenancy_admit(c->t, i % 2 ? "n1" : "n2", &moving, why, sizeof why);
        assert_true(rc == GH_OK || rc == GH_EINVAL);
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    struct gh_tenancy *t = NULL;
    assert_int_equal(gh_tenancy_new(0, &t, NULL), GH_OK);
    assert_int_equal(gh_tenancy_pod(t, "still-pod", "ns/still", "n0"), GH_OK);
    gh_tenancy_set_listed(t, GH_TENANCY_PODS, true);
    gh_tenancy_set_listed(t, GH_TENANCY_JOBS, true);
    struct churn c = {t, 20000};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, admitter, &c), 0);
    for (int i = 0; i < c.iters; i++) {
        assert_int_equal(gh_tenancy_pod(t, "m-pod", "ns/m", i % 2 ? "n1" : "n2"), GH_OK);
        assert_int_equal(gh_tenancy_set_prefix(t, "ns/m", i % 3 ? "s3://m/" : "s3://other/", NULL),
                         GH_OK);
        if (i % 7 == 0)
            assert_int_equal(gh_tenancy_pod(t, "m-pod", NULL, NULL), GH_OK);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    struct gh_tenancy_stats st;
    gh_tenancy_stats(t, &st);
    printf("  admitted %llu, refused %llu over 3 threads x %d x 2\n",
           (unsigned long long)st.admitted, (unsigned long long)st.refused, c.iters);
    assert_int_equal(st.admitted + st.refused, 3ull * 2 * (unsigned long long)c.iters);
    gh_tenancy_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_under),
        cmocka_unit_test(test_prefix_check),
        cmocka_unit_test(test_admit),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
