/* test_oom_replay.c - `gpuheal diagnose`'s replay (src/cmd/gpuheal/
 * scenario_io.c, gh_replay_file) under allocation failure (alloc_fail.h):
 * reading and indexing a scenario file, then the engine. At every failure
 * point the replay returns an error, or prints exactly the incidents it
 * prints without injection: a diagnosis that silently misses an incident
 * is the failure this guards against. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "cmd/gpuheal/commands.h"
#include "engine/incident.h"

#define SCEN GH_SOURCE_DIR "/test/scenarios/"

struct decided {
    char text[1 << 16];
    size_t len;
};

static void on_incident(void *ctx, const struct gh_incident *inc)
{
    struct decided *d = ctx;
    char *line = NULL;
    gh_af_pause();
    assert_int_equal(gh_incident_encode(inc, &line, NULL), GH_OK);
    gh_af_resume();
    int n = snprintf(d->text + d->len, sizeof d->text - d->len, "%s\n", line);
    assert_true(n > 0 && (size_t)n < sizeof d->text - d->len);
    d->len += (size_t)n;
    free(line);
}

struct replay_ctx {
    char path[512];
    struct decided want, got;
    bool have_want;
};

static int op_replay(void *arg)
{
    struct replay_ctx *c = arg;
    struct decided *d = c->have_want ? &c->got : &c->want;
    d->len = 0;
    d->text[0] = '\0';
    struct gh_replay r = {.path = c->path, .cb = on_incident, .cb_ctx = d};
    struct gh_err err;
    int rc = gh_replay_file(&r, &err);
    if (!c->have_want) {
        c->have_want = true;
        return rc;
    }
    if (rc == GH_OK && strcmp(c->got.text, c->want.text) != 0)
        fail_msg("an allocation failed, the replay returned GH_OK and its incidents "
                 "differ:\ngot:\n%s\nwant:\n%s", c->got.text, c->want.text);
    return rc;
}

static void test_replay(void **state)
{
    (void)state;
    static const char *const names[] = {"ext-flapping-node", "crash-loop", "ext-two-faults",
                                        "ext-xid79-recurs-escalates"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        static struct replay_ctx c;
        memset(&c, 0, sizeof c);
        snprintf(c.path, sizeof c.path, SCEN "%s.jsonl", names[i]);
        assert_int_equal(op_replay(&c), GH_OK);
        assert_true(c.want.len > 0);
        unsigned long total = gh_af_sample(op_replay, &c, false, 150);
        print_message("%s: %lu allocations\n", names[i], total);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_replay, gh_af_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
