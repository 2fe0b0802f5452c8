/* test_kube_ratelimit.c - the shared token bucket: a full burst at once,
 * then tokens at the given rate with the right wait; several threads
 * together never take more than the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "common/timeutil.h"
#include "kube/ratelimit.h"

static void test_burst_then_rate(void **st)
{
    (void)st;
    struct gh_kube_ratelimit *rl;
    struct gh_err err;
    assert_int_equal(gh_kube_ratelimit_new(0, 10, &rl, &err), GH_EINVAL);
    assert_int_equal(gh_kube_ratelimit_new(10, 5, &rl, &err), GH_OK);
    int64_t t = 1000 * GH_NS_PER_S, wait = 0;
    for (int i = 0; i < 5; i++)
        assert_true(gh_kube_ratelimit_take(rl, t, &wait));
    assert_false(gh_kube_ratelimit_take(rl, t, &wait));
    assert_true(wait > 99 * 1000000LL && wait <= 100 * 1000000LL + 1); /* 1/10 s */
    assert_true(gh_kube_ratelimit_take(rl, t + wait, &wait));
    /* idle for a minute: back to the burst, not more */
    t += 60 * GH_NS_PER_S;
    int n = 0;
    while (gh_kube_ratelimit_take(rl, t, &wait))
        n++;
    assert_int_equal(n, 5);
    gh_kube_ratelimit_free(rl);
}

struct taker {
    struct gh_kube_ratelimit *rl;
    int64_t now;
    int got;
};

static void *take_all(void *arg)
{
    struct taker *tk = arg;
    int64_t wait;
    for (int i = 0; i < 1000; i++)
        if (gh_kube_ratelimit_take(tk->rl, tk->now, &wait))
            tk->got++;
    return NULL;
}

static void test_threads_share_one_budget(void **st)
{
    (void)st;
    struct gh_kube_ratelimit *rl;
    struct gh_err err;
    assert_int_equal(gh_kube_ratelimit_new(50, 100, &rl, &err), GH_OK);
    struct taker tk[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        tk[i] = (struct taker){rl, 5 * GH_NS_PER_S, 0};
        assert_int_equal(pthread_create(&th[i], NULL, take_all, &tk[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        total += tk[i].got;
    }
    assert_int_equal(total, 100); /* the burst, shared; the clock did not move */
    gh_kube_ratelimit_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_rate),
        cmocka_unit_test(test_threads_share_one_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
