/* test_agent_inject.c - unit tests of the injection source: a file of spec
 * signals is emitted with injected=true and the node filled, bad lines are
 * reported with their numbers without stopping the rest, a scenario header
 * is skipped, oversized lines are rejected, a followed file and a FIFO with
 * writers coming and going are read by gh_inject_poll() as the agent's loop
 * calls it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/inject.h"
#include "signal/signal_json.h"

#define MAX_SIGS 64

struct recorder {
    pthread_mutex_t mu;
    struct gh_signal sigs[MAX_SIGS];
    int n;
    long reject_lines[MAX_SIGS];
    char reject_reason[MAX_SIGS][200];
    int nrej;
};

static void record(void *ctx, const struct gh_signal *s)
{
    struct recorder *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (r->n < MAX_SIGS && gh_signal_copy(&r->sigs[r->n], s, NULL) == GH_OK)
        r->n++;
    pthread_mutex_unlock(&r->mu);
}

static void on_reject(void *ctx, long line_no, const char *reason)
{
    struct recorder *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (r->nrej < MAX_SIGS) {
        r->reject_lines[r->nrej] = line_no;
        snprintf(r->reject_reason[r->nrej], sizeof r->reject_reason[0], "%s", reason);
        r->nrej++;
    }
    pthread_mutex_unlock(&r->mu);
}

static int count(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static char dir[64], path[128];
static struct recorder rec;

static int setup(void **st)
{
    (void)st;
    snprintf(dir, sizeof dir, "/tmp/gh-inject-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/signals.jsonl", dir);
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
    unlink(path);
    rmdir(dir);
    return 0;
}

static void put(const char *mode, const char *text)
{
    FILE *f = fopen(path, mode);
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static struct gh_inject *new_inject(bool follow)
{
    struct gh_inject_opts o;
    struct gh_inject *in = NULL;
    struct gh_err err;
    gh_inject_opts_init(&o);
    o.path = path;
    o.node = "gpu-01";
    o.follow = follow;
    o.emit = record;
    o.emit_ctx = &rec;
    o.on_reject = on_reject;
    o.reject_ctx = &rec;
    if (gh_inject_new(&o, &in, &err))
        fail_msg("gh_inject_new: %s", err.msg);
    return in;
}

#define XID "{\"ts\":\"2026-11-29T07:00:00.123456Z\",\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79}"

static void test_file(void **st)
{
    (void)st;
    put("w", "{\"scenario\":\"demo\",\"nodes\":[\"gpu-01\"]}\n" /* 1: header, skipped */
             XID "\n"                                           /* 2 */
             "\n"                                               /* 3: blank */
             "{\"ts\":\"2026-11-29T07:00:01Z\",\"node\":\"gpu-02\",\"source\":\"nvml\","
             "\"kind\":\"ecc\",\"bits\":\"double\",\"count\":1,\"volatile\":true}\n" /* 4 */
             "{\"ts\":\"2026-11-29T07:00:01Z\",\"source\":\"kmsg\",\"kind\":\"xid\"}\n" /* 5 */
             "{oops\n"                                          /* 6 */
             "{\"ts\":\"2026-11-29T07:00:02Z\",\"source\":\"kube\",\"kind\":\"pod_failed\","
             "\"namespace\":\"ml\",\"pod\":\"p\",\"reason\":\"Error\",\"injected\":false}" /* 7, no \n */);
    struct gh_inject *in = new_inject(false);
    assert_int_equal(gh_inject_poll(in, NULL), GH_ENOTFOUND);
    assert_true(gh_inject_done(in));
    assert_int_equal(gh_inject_poll(in, NULL), GH_ENOTFOUND);

    /* another node's line (4) and a kube-kind one (7) are refused here:
     * the controller takes neither from this agent (issue 15 #2) */
    assert_int_equal(rec.n, 1);
    assert_true(rec.sigs[0].injected);
    assert_string_equal(rec.sigs[0].node, "gpu-01"); /* filled */
    assert_int_equal(rec.sigs[0].code, 79);

    assert_int_equal(rec.nrej, 4);
    assert_int_equal(rec.reject_lines[0], 4);
    assert_string_equal(rec.reject_reason[0], "line 4: field \"node\": \"gpu-02\" is another "
                                              "node; this agent reports only for \"gpu-01\"");
    assert_int_equal(rec.reject_lines[1], 5);
    assert_string_equal(rec.reject_reason[1], "line 5: field \"code\": missing");
    assert_int_equal(rec.reject_lines[2], 6);
    assert_non_null(strstr(rec.reject_reason[2], "line 6: invalid JSON"));
    assert_int_equal(rec.reject_lines[3], 7);
    assert_string_equal(rec.reject_reason[3], "line 7: field \"source\": \"kube\" signals come "
                                              "only from the controller's informers");

    struct gh_inject_stats s;
    gh_inject_stats(in, &s);
    assert_int_equal(s.lines, 7);
    assert_int_equal(s.signals, 1);
    assert_int_equal(s.rejected, 4);
    struct gh_inject_reject rj[GH_INJECT_REJECTS_KEEP];
    assert_int_equal(gh_inject_rejects(in, rj, GH_INJECT_REJECTS_KEEP), 4);
    assert_int_equal(rj[2].line_no, 6);
    gh_inject_free(in);
}

static void test_oversized_and_bom(void **st)
{
    (void)st;
    size_t big = GH_SIGNAL_LINE_MAX + 100;
    char *text = malloc(big + 400);
    assert_non_null(text);
    size_t n = (size_t)snprintf(text, 400, "\xEF\xBB\xBF" XID "\n");
    memset(text + n, 'x', big);
    n += big;
    n += (size_t)snprintf(text + n, 400, "\n" XID "\n");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
    free(text);
    struct gh_inject *in = new_inject(false);
    while (gh_inject_poll(in, NULL) == GH_OK)
        ;
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.nrej, 1);
    assert_int_equal(rec.reject_lines[0], 2);
    assert_non_null(strstr(rec.reject_reason[0], "longer than"));
    gh_inject_free(in);
}

/* Polls as the agent's loop does; the data is in the file or pipe already,
 * so the first poll that finds nothing more is where the source is caught up. */
static void poll_all(struct gh_inject *in)
{
    int before;
    do {
        before = count(&rec);
        assert_int_equal(gh_inject_poll(in, NULL), GH_OK);
    } while (count(&rec) != before);
}

static void test_follow(void **st)
{
    (void)st;
    put("w", XID "\n");
    struct gh_inject *in = new_inject(true);
    poll_all(in);
    assert_int_equal(count(&rec), 1);
    put("a", XID "\n" XID "\n");
    poll_all(in);
    assert_int_equal(count(&rec), 3);
    put("a", XID); /* no newline yet: a followed file's line is awaited */
    poll_all(in);
    assert_int_equal(count(&rec), 3);
    put("a", "\n");
    poll_all(in);
    assert_int_equal(count(&rec), 4);
    assert_false(gh_inject_done(in));
    gh_inject_free(in);
}

static void test_fifo(void **st)
{
    (void)st;
    assert_int_equal(mkfifo(path, 0600), 0);
    struct gh_inject *in = new_inject(false);
    poll_all(in); /* no writer: nothing, never blocking */
    for (int w = 0; w < 3; w++) { /* writers come and go */
        int fd = open(path, O_WRONLY | O_NONBLOCK);
        assert_true(fd >= 0);
        const char *t = XID "\nnot json\n";
        assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
        close(fd);
        poll_all(in); /* no end of file after a writer left */
        assert_int_equal(count(&rec), w + 1);
    }
    assert_false(gh_inject_done(in));
    gh_inject_free(in);
    assert_int_equal(rec.nrej, 3);
    assert_int_equal(rec.reject_lines[2], 6); /* numbering goes on across writers */
}

static void test_bad_paths(void **st)
{
    (void)st;
    struct gh_inject_opts o;
    struct gh_inject *in = NULL;
    gh_inject_opts_init(&o);
    o.emit = record;
    assert_int_equal(gh_inject_new(&o, &in, NULL), GH_EINVAL);
    o.path = path;
    assert_int_equal(gh_inject_new(&o, &in, NULL), GH_ENOTFOUND);
    o.path = dir;
    assert_int_equal(gh_inject_new(&o, &in, NULL), GH_EINVAL);
    assert_null(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_and_bom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_paths, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
