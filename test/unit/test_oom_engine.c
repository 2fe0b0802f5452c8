/* test_oom_engine.c - the detection engine under allocation failure
 * (alloc_fail.h): gh_engine_new with the built-in policy. At every failure
 * point it returns NULL with GH_ENOMEM; ASan's leak check at exit finds
 * what a failure left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "alloc_fail.h"
#include "engine/engine.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_new, gh_af_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
