/* test_agent_nic.c - unit tests of the InfiniBand/RoCE source against a fake
 * sysfs tree in a temp dir: silent baselines, error counters that move,
 * traffic counters and resets that do not signal, link down/up with flap
 * counts, ports that vanish and return, custom watch lists, the thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/nic.h"
#include "signal/signal_json.h"

#define MAX_SIGS 64

struct recorder {
    pthread_mutex_t mu;
    struct gh_signal sigs[MAX_SIGS];
    int n;
    int bad_json;
};

static void record(void *ctx, const struct gh_signal *s)
{
    struct recorder *r = ctx;
    char *json = NULL;
    pthread_mutex_lock(&r->mu);
    if (gh_signal_encode(s, &json, NULL) != GH_OK)
        r->bad_json++;
    free(json);
    if (r->n < MAX_SIGS && gh_signal_copy(&r->sigs[r->n], s, NULL) == GH_OK)
        r->n++;
    pthread_mutex_unlock(&r->mu);
}

static char root[64];
static struct recorder rec;

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

static void put(const char *rel, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", text);
    fclose(f);
}

static int setup(void **st)
{
    (void)st;
    snprintf(root, sizeof root, "/tmp/gh-nic-XXXXXX");
    assert_non_null(mkdtemp(root));
    sh("mkdir -p %s/mlx5_0/ports/1/counters %s/mlx5_1/ports/1/counters %s/pci/0000:3b:00.0", root,
       root, root);
    sh("ln -s ../pci/0000:3b:00.0 %s/mlx5_0/device", root);
    put("mlx5_0/ports/1/state", "4: ACTIVE");
    put("mlx5_0/ports/1/counters/link_downed", "0");
    put("mlx5_0/ports/1/counters/symbol_error", "5");
    put("mlx5_0/ports/1/counters/port_rcv_errors", "0");
    put("mlx5_0/ports/1/counters/port_xmit_data", "123456");
    put("mlx5_1/ports/1/state", "4: ACTIVE");
    put("mlx5_1/ports/1/counters/link_downed", "2");
    memset(&rec, 0, sizeof rec);
    pthread_mutex_init(&rec.mu, NULL);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    for (int i = 0; i < rec.n; i++)
        gh_signal_clear(&rec.sigs[i]);
    pthread_mutex_destroy(&rec.mu);
    sh("rm -rf '%s'", root);
    return 0;
}

static struct gh_nic_source *new_src(const char *counters)
{
    struct gh_nic_opts o;
    struct gh_nic_source *src = NULL;
    struct gh_err err;
    gh_nic_opts_init(&o);
    o.root = root;
    o.node = "gpu-05";
    o.counters = counters;
    o.poll_interval_ns = 10 * GH_NS_PER_MS;
    o.emit = record;
    o.emit_ctx = &rec;
    if (gh_nic_source_new(&o, &src, &err))
        fail_msg("gh_nic_source_new: %s", err.msg);
    return src;
}

static const struct gh_signal *last(void)
{
    assert_true(rec.n > 0);
    return &rec.sigs[rec.n - 1];
}

static void test_counters(void **st)
{
    (void)st;
    struct gh_nic_source *src = new_src(NULL);
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 0); /* baselines, standing counts are silent */

    put("mlx5_0/ports/1/counters/port_xmit_data", "999999"); /* traffic: not watched */
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 0);

    put("mlx5_0/ports/1/counters/symbol_error", "9");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 1);
    const struct gh_signal *s = last();
    assert_int_equal(s->source, GH_SRC_HOST);
    assert_int_equal(s->kind, GH_KIND_NIC);
    assert_string_equal(s->node, "gpu-05");
    assert_string_equal(s->device, "mlx5_0");
    assert_true(s->has_port);
    assert_int_equal(s->port, 1);
    assert_string_equal(s->counter, "symbol_error");
    assert_true(s->has_count);
    assert_int_equal(s->count, 9);
    assert_int_equal(s->state, GH_LINK_UP);
    assert_string_equal(s->pci, "0000:3b:00.0");
    assert_string_equal(s->msg, "mlx5_0 port 1: symbol_error 5 -> 9");

    /* a reset re-baselines silently, the next rise signals */
    put("mlx5_0/ports/1/counters/symbol_error", "0");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 1);
    put("mlx5_0/ports/1/counters/symbol_error", "1");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 2);
    assert_int_equal(last()->count, 1);

    /* a counter file that appears later is baselined first */
    put("mlx5_0/ports/1/counters/link_error_recovery", "3");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 2);
    /* unreadable values are ignored */
    put("mlx5_0/ports/1/counters/port_rcv_errors", "N/A");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.bad_json, 0);
    gh_nic_source_free(src);
}

static void test_link_state(void **st)
{
    (void)st;
    struct gh_nic_source *src = new_src(NULL);
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);

    put("mlx5_1/ports/1/state", "1: DOWN");
    put("mlx5_1/ports/1/counters/link_downed", "3");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 2);
    assert_string_equal(rec.sigs[0].counter, "link_downed");
    assert_int_equal(rec.sigs[0].count, 3);
    assert_int_equal(rec.sigs[0].state, GH_LINK_DOWN);
    assert_null(rec.sigs[0].pci); /* no device link in the tree */
    assert_string_equal(rec.sigs[1].counter, "link_state");
    assert_int_equal(rec.sigs[1].state, GH_LINK_DOWN);
    assert_int_equal(rec.sigs[1].count, 1); /* flaps */
    assert_string_equal(rec.sigs[1].msg, "mlx5_1 port 1: 4: ACTIVE -> 1: DOWN");

    put("mlx5_1/ports/1/state", "4: ACTIVE");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 3);
    assert_int_equal(last()->state, GH_LINK_UP);
    assert_int_equal(last()->count, 1);

    put("mlx5_1/ports/1/state", "2: INIT"); /* not passing traffic: down */
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 4);
    assert_int_equal(last()->state, GH_LINK_DOWN);
    assert_int_equal(last()->count, 2);
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 4); /* no change, no signal */

    struct gh_nic_port_info ports[8];
    size_t np = gh_nic_source_ports(src, ports, 8);
    assert_int_equal(np, 2);
    for (size_t i = 0; i < np; i++)
        if (strcmp(ports[i].device, "mlx5_1") == 0) {
            assert_false(ports[i].up);
            assert_int_equal(ports[i].flaps, 2);
            assert_string_equal(ports[i].state, "2: INIT");
            assert_int_equal(ports[i].errors, 3);
        }
    gh_nic_source_free(src);
}

static void test_port_vanishes(void **st)
{
    (void)st;
    struct gh_nic_source *src = new_src(NULL);
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    sh("mv %s/mlx5_1 %s.gone", root, root);
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 1);
    assert_string_equal(last()->device, "mlx5_1");
    assert_int_equal(last()->state, GH_LINK_DOWN);
    assert_non_null(strstr(last()->msg, "gone"));
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 1);
    sh("mv %s.gone %s/mlx5_1", root, root);
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 2);
    assert_int_equal(last()->state, GH_LINK_UP);
    gh_nic_source_free(src);
}

static void test_counter_list(void **st)
{
    (void)st;
    struct gh_nic_opts o;
    struct gh_nic_source *src = NULL;
    gh_nic_opts_init(&o);
    o.root = root;
    o.node = "n";
    o.emit = record;
    o.counters = "a,../b";
    assert_int_equal(gh_nic_source_new(&o, &src, NULL), GH_EINVAL);
    o.node = NULL;
    o.counters = NULL;
    assert_int_equal(gh_nic_source_new(&o, &src, NULL), GH_EINVAL);

    src = new_src("port_xmit_data,");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    put("mlx5_0/ports/1/counters/symbol_error", "100");
    put("mlx5_0/ports/1/counters/port_xmit_data", "200000");
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    assert_int_equal(rec.n, 1);
    assert_string_equal(last()->counter, "port_xmit_data");
    gh_nic_source_free(src);
}

static void test_missing_root_and_thread(void **st)
{
    (void)st;
    struct gh_nic_opts o;
    struct gh_nic_source *src = NULL;
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none", root);
    gh_nic_opts_init(&o);
    o.root = missing;
    o.node = "n";
    o.emit = record;
    o.emit_ctx = &rec;
    assert_int_equal(gh_nic_source_new(&o, &src, NULL), GH_OK);
    assert_int_equal(gh_nic_source_poll_once(src, NULL), GH_OK);
    gh_nic_source_free(src);

    src = new_src(NULL);
    assert_int_equal(gh_nic_source_start(src, NULL), GH_OK);
    struct gh_nic_stats s;
    for (int i = 0; i < 5000; i++) { /* the first poll (the baseline) is done */
        gh_nic_source_stats(src, &s);
        if (s.polls >= 2)
            break;
        usleep(1000);
    }
    put("mlx5_0/ports/1/counters/link_downed", "1");
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&rec.mu);
        int n = rec.n;
        pthread_mutex_unlock(&rec.mu);
        if (n)
            break;
        usleep(1000);
    }
    gh_nic_source_stop(src);
    assert_int_equal(rec.n, 1);
    gh_nic_source_stats(src, &s);
    assert_true(s.polls >= 2);
    assert_int_equal(s.signals, 1);
    gh_nic_source_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_port_vanishes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_root_and_thread, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
