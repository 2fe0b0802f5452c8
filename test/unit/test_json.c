/* test_json.c - the key-path accessors: present values are found, and a
 * missing key, a non-object on the way, a wrong type or a NULL object give
 * NULL or the default, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "common/json.h"

static void test_paths(void **state)
{
    (void)state;
    json_error_t err;
    json_t *pod = json_loads("{\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"b\"},\"n\":7},"
                             "\"spec\":\"notanobject\",\"status\":{\"phase\":3}}",
                             0, &err);
    assert_non_null(pod);
    assert_string_equal(gh_json_str(pod, "metadata", "name"), "p");
    assert_string_equal(gh_json_str(pod, "metadata", "labels", "a"), "b");
    assert_null(gh_json_str(pod, "metadata", "labels", "missing"));
    assert_null(gh_json_str(pod, "spec", "nodeName"));   /* not an object on the way */
    assert_null(gh_json_str(pod, "status", "phase"));    /* not a string */
    assert_null(gh_json_str(NULL, "metadata"));
    assert_non_null(gh_json_get(pod, "metadata", "labels"));
    assert_int_equal(gh_json_int(pod, -1, "metadata", "n"), 7);
    assert_int_equal(gh_json_int(pod, -1, "metadata", "name"), -1);
    assert_int_equal(gh_json_int(pod, -1, "status", "phase"), 3);
    assert_int_equal(gh_json_int(NULL, 5, "x"), 5);
    json_decref(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_paths)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
