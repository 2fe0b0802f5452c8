/* test_spool.c - unit tests of the agent's disk spool: append, replay in
 * order from the persisted cursor, ack, segment rotation and deletion, a
 * torn or corrupt last record truncated on open, the byte bound (oldest
 * dropped and counted), kill -9 of a writer, id assignment, telemetry's
 * share (a telemetry flood never evicts a hardware signal) and a full disk
 * (ENOSPC on a small tmpfs: what is on disk still ships, the hardware
 * signal written meanwhile is held in memory and written once acks free
 * space). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/spool.h"
#include "signal/signal_json.h"

static int64_t fixed_now(void *ctx)
{
    return *(int64_t *)ctx;
}

struct fixture {
    char dir[64];
    int64_t now;
    struct gh_clock clock;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gh-spool-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->now = 1800000000LL * GH_NS_PER_S;
    f->clock.now = fixed_now;
    f->clock.ctx = &f->now;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];
    umount2(f->dir, MNT_DETACH); /* the disk-full tests' tmpfs, if a check failed */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static struct gh_spool *open_spool(struct fixture *f, uint64_t max, uint64_t seg)
{
    struct gh_spool_opts o = {.dir = f->dir, .node = "n1", .boot_id = "b00t",
                              .max_bytes = max, .segment_bytes = seg, .clock = &f->clock};
    struct gh_spool *sp = NULL;
    struct gh_err err = {{0}};
    int rc = gh_spool_open(&o, &sp, &err);
    if (rc)
        fail_msg("open: %s", err.msg);
    return sp;
}

static void make_xid(struct gh_signal *s, int code, const char *msg)
{
    gh_signal_init(s);
    s->ts_ns = 1800000000LL * GH_NS_PER_S;
    s->source = GH_SRC_KMSG;
    s->kind = GH_KIND_XID;
    s->code = code;
    gh_signal_set_str(&s->node, "n1", 2);
    if (msg)
        gh_signal_set_str(&s->msg, msg, strlen(msg));
}

static uint64_t append_xid(struct gh_spool *sp, int code, const char *msg)
{
    struct gh_signal s;
    uint64_t seq = 0;
    struct gh_err err;
    make_xid(&s, code, msg);
    int rc = gh_spool_append(sp, &s, &seq, &err);
    if (rc)
        fail_msg("append: %s", err.msg);
    gh_signal_clear(&s);
    return seq;
}

/* Decodes each line of a batch and checks it against its seq. */
static void check_batch(const struct gh_spool_batch *b, uint64_t first_seq)
{
    const char *p = b->body;
    for (size_t i = 0; i < b->n; i++) {
        const char *nl = memchr(p, '\n', (size_t)(b->body + b->len - p));
        assert_non_null(nl);
        struct gh_signal s;
        struct gh_err err;
        assert_int_equal(gh_signal_decode(p, (size_t)(nl - p), 0, &s, &err), GH_OK);
        char want[64];
        snprintf(want, sizeof want, "n1/b00t/%llu", (unsigned long long)b->seqs[i]);
        assert_string_equal(s.id, want);
        if (first_seq)
            assert_int_equal(b->seqs[i], first_seq + i);
        gh_signal_clear(&s);
        p = nl + 1;
    }
}

static int count_segments(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".seg"))
            n++;
    closedir(d);
    return n;
}

static void test_append_read_ack(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 0, 0);
    struct gh_spool_stats st;
    struct gh_err err;
    uint64_t first = append_xid(sp, 79, "first");
    /* A new spool starts its seqs at the creation time in microseconds. */
    assert_int_equal(first, (uint64_t)(f->now / GH_NS_PER_US));
    for (int i = 1; i < 10; i++)
        assert_int_equal(append_xid(sp, 79, "more"), first + (uint64_t)i);
    gh_spool_stats(sp, &st);
    assert_int_equal(st.pending, 10);

    struct gh_spool_batch b;
    assert_int_equal(gh_spool_read(sp, 4, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(b.n, 4);
    check_batch(&b, first);
    /* Not acked: the same batch again. */
    struct gh_spool_batch b2;
    assert_int_equal(gh_spool_read(sp, 4, 1 << 20, &b2, &err), GH_OK);
    assert_int_equal(b2.n, 4);
    assert_int_equal(b2.seqs[0], first);
    assert_memory_equal(b.body, b2.body, b.len);
    gh_spool_batch_clear(&b2);
    assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
    gh_spool_batch_clear(&b);

    assert_int_equal(gh_spool_read(sp, 100, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(b.n, 6);
    check_batch(&b, first + 4);
    assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
    /* A second ack of the same batch is ignored. */
    assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
    gh_spool_batch_clear(&b);
    gh_spool_stats(sp, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.acked, 10);
    assert_int_equal(gh_spool_read(sp, 100, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(b.n, 0);
    gh_spool_close(sp);
}

static void test_byte_limit_of_batch(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 0, 0);
    struct gh_err err;
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 5; i++)
        append_xid(sp, 48, big);
    struct gh_spool_batch b;
    /* One line is always returned, even over the byte limit. */
    assert_int_equal(gh_spool_read(sp, 100, 10, &b, &err), GH_OK);
    assert_int_equal(b.n, 1);
    gh_spool_batch_clear(&b);
    assert_int_equal(gh_spool_read(sp, 100, 5000, &b, &err), GH_OK);
    assert_int_equal(b.n, 2);
    assert_true(b.len <= 5000);
    gh_spool_batch_clear(&b);
    gh_spool_close(sp);
}

static void test_reopen_resumes_cursor(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 0, 0);
    struct gh_err err;
    uint64_t first = append_xid(sp, 79, "a");
    for (int i = 1; i < 5; i++)
        append_xid(sp, 79, "a");
    struct gh_spool_batch b;
    assert_int_equal(gh_spool_read(sp, 3, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
    gh_spool_batch_clear(&b);
    gh_spool_close(sp);

    f->now += 3600 * GH_NS_PER_S; /* the clock does not matter for an existing spool */
    sp = open_spool(f, 0, 0);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_int_equal(st.pending, 2);
    assert_int_equal(st.next_seq, first + 5);
    assert_int_equal(gh_spool_read(sp, 100, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(b.n, 2);
    check_batch(&b, first + 3);
    gh_spool_batch_clear(&b);
    /* Seqs continue. */
    assert_int_equal(append_xid(sp, 79, "after"), first + 5);
    gh_spool_close(sp);
}

static void test_rotation_and_deletion(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 256 * 1024, 16 * 1024);
    struct gh_err err;
    char msg[300];
    memset(msg, 'm', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    uint64_t first = append_xid(sp, 31, msg);
    for (int i = 1; i < 300; i++) /* ~150 KB: about 10 segments */
        append_xid(sp, 31, msg);
    assert_int_equal(gh_spool_flush(sp, &err), GH_OK);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_true(st.segments >= 8);
    assert_int_equal(count_segments(f->dir), (int)st.segments);
    assert_int_equal(st.lost, 0);

    /* Reading across segment boundaries keeps the order; acking deletes
     * wholly acked segments but never the active one. */
    uint64_t want = first;
    for (;;) {
        struct gh_spool_batch b;
        assert_int_equal(gh_spool_read(sp, 37, 1 << 20, &b, &err), GH_OK);
        if (b.n == 0)
            break;
        check_batch(&b, want);
        want += b.n;
        assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
        gh_spool_batch_clear(&b);
    }
    assert_int_equal(want, first + 300);
    gh_spool_stats(sp, &st);
    assert_int_equal(st.segments, 1);
    assert_int_equal(count_segments(f->dir), 1);
    assert_int_equal(gh_spool_sync(sp, &err), GH_OK);
    gh_spool_close(sp);
    sp = open_spool(f, 256 * 1024, 16 * 1024);
    gh_spool_stats(sp, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.next_seq, first + 300);
    gh_spool_close(sp);
}

/* Path of the only (or newest) segment file. */
static void newest_segment(const char *dir, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char best[256] = "";
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".seg") && strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    closedir(d);
    snprintf(out, cap, "%s/%s", dir, best);
}

static void test_torn_record_truncated(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 0, 0);
    struct gh_err err;
    uint64_t first = append_xid(sp, 79, "one");
    for (int i = 1; i < 5; i++)
        append_xid(sp, 79, "one");
    gh_spool_close(sp);

    /* A crash in the middle of writing the sixth record's header. */
    char path[512];
    newest_segment(f->dir, path, sizeof path);
    struct stat st0;
    assert_int_equal(stat(path, &st0), 0);
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "\x40\x00\x00\x00\x12\x34\x56", 7), 7);
    close(fd);

    sp = open_spool(f, 0, 0);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_int_equal(st.torn_bytes, 7);
    assert_int_equal(st.pending, 5);
    struct stat st1;
    assert_int_equal(stat(path, &st1), 0);
    assert_int_equal(st1.st_size, st0.st_size);
    assert_int_equal(append_xid(sp, 79, "six"), first + 5);
    struct gh_spool_batch b;
    assert_int_equal(gh_spool_read(sp, 100, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(b.n, 6);
    check_batch(&b, first);
    gh_spool_batch_clear(&b);
    gh_spool_close(sp);

    /* A last record whose payload was only half written (its bytes are
     * there but wrong): the CRC catches it. */
    assert_int_equal(stat(path, &st0), 0);
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "ZZZZ", 4, st0.st_size - 6), 4);
    close(fd);
    sp = open_spool(f, 0, 0);
    gh_spool_stats(sp, &st);
    assert_true(st.torn_bytes > 16);
    assert_int_equal(st.pending, 5);
    assert_int_equal(st.next_seq, first + 5);
    gh_spool_close(sp);
}

static void test_corrupt_cursor_replays_all(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 0, 0);
    struct gh_err err;
    for (int i = 0; i < 4; i++)
        append_xid(sp, 79, "x");
    struct gh_spool_batch b;
    assert_int_equal(gh_spool_read(sp, 2, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
    gh_spool_batch_clear(&b);
    gh_spool_close(sp);
    char path[128];
    snprintf(path, sizeof path, "%s/cursor", f->dir);
    FILE *cf = fopen(path, "r+");
    assert_non_null(cf);
    fputs("garbage", cf);
    fclose(cf);
    /* Never loss: everything is pending again (the controller drops the
     * duplicates by id). */
    sp = open_spool(f, 0, 0);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_int_equal(st.pending, 4);
    gh_spool_close(sp);
}

static void test_full_drops_oldest_counted(void **state)
{
    struct fixture *f = *state;
    const uint64_t max = 64 * 1024;
    struct gh_spool *sp = open_spool(f, max, 16 * 1024);
    struct gh_err err;
    char msg[200];
    memset(msg, 'q', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    uint64_t first = append_xid(sp, 13, msg);
    const int total = 2000; /* ~680 KB into 64 KB */
    for (int i = 1; i < total; i++)
        append_xid(sp, 13, msg);
    assert_int_equal(gh_spool_flush(sp, &err), GH_OK);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_true(st.bytes <= max);
    assert_true(st.lost > 0);
    /* What is left is the newest, in order, and lost + left = appended. */
    uint64_t left = 0, expect = 0;
    for (;;) {
        struct gh_spool_batch b;
        assert_int_equal(gh_spool_read(sp, 500, 1 << 20, &b, &err), GH_OK);
        if (b.n == 0)
            break;
        if (!expect)
            expect = b.seqs[0];
        check_batch(&b, expect);
        expect += b.n;
        left += b.n;
        assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
        gh_spool_batch_clear(&b);
    }
    assert_int_equal(expect, first + total);
    assert_int_equal(st.lost + left, (uint64_t)total);
    /* On disk too. */
    uint64_t disk = 0;
    DIR *d = opendir(f->dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[512];
        struct stat sst;
        snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
        if (strstr(e->d_name, ".seg") && stat(p, &sst) == 0)
            disk += (uint64_t)sst.st_size;
    }
    closedir(d);
    assert_true(disk <= max);
    gh_spool_close(sp);
}

static void test_record_too_big_for_spool(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 64 * 1024, 16 * 1024);
    struct gh_err err;
    char *line = malloc(GH_SIGNAL_LINE_MAX + 2);
    memset(line, 'a', GH_SIGNAL_LINE_MAX + 1);
    /* Over the line cap: refused. */
    assert_int_equal(gh_spool_append_line(sp, line, GH_SIGNAL_LINE_MAX + 1, NULL, &err), GH_EINVAL);
    /* A line with a newline inside: refused. */
    assert_int_equal(gh_spool_append_line(sp, "a\nb", 3, NULL, &err), GH_EINVAL);
    free(line);
    gh_spool_close(sp);
}

static void test_kill9_writer(void **state)
{
    struct fixture *f = *state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct gh_spool *sp = open_spool(f, 0, 0);
        for (int i = 0; i < 1000; i++) {
            append_xid(sp, 79, "child");
            if (i % 10 == 9)
                gh_spool_flush(sp, NULL);
        }
        gh_spool_flush(sp, NULL);
        raise(SIGKILL); /* no close, no sync */
        _exit(1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    struct gh_spool *sp = open_spool(f, 0, 0);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_int_equal(st.pending, 1000);
    assert_int_equal(st.torn_bytes, 0);
    gh_spool_close(sp);
}

static void test_keeps_given_id(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = open_spool(f, 0, 0);
    struct gh_signal s;
    struct gh_err err;
    make_xid(&s, 79, NULL);
    gh_signal_set_str(&s.id, "n1/kernel/42", 12);
    assert_int_equal(gh_spool_append(sp, &s, NULL, &err), GH_OK);
    assert_string_equal(s.id, "n1/kernel/42");
    gh_signal_clear(&s);
    /* A signal the codec refuses is not appended and keeps no id. */
    make_xid(&s, 79, NULL);
    s.kind = GH_KIND_STEP; /* step without job: invalid */
    s.source = GH_SRC_TELEMETRY;
    assert_int_equal(gh_spool_append(sp, &s, NULL, &err), GH_EINVAL);
    assert_null(s.id);
    gh_signal_clear(&s);
    struct gh_spool_batch b;
    assert_int_equal(gh_spool_read(sp, 10, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(b.n, 1);
    assert_non_null(strstr(b.body, "\"id\":\"n1/kernel/42\""));
    gh_spool_batch_clear(&b);
    gh_spool_close(sp);
}

static void test_bad_options(void **state)
{
    struct fixture *f = *state;
    struct gh_spool *sp = NULL;
    struct gh_err err;
    struct gh_spool_opts o = {.dir = f->dir, .node = "n1", .boot_id = NULL};
    assert_int_equal(gh_spool_open(&o, &sp, &err), GH_EINVAL);
    o.boot_id = "b";
    o.max_bytes = 1000;
    assert_int_equal(gh_spool_open(&o, &sp, &err), GH_EINVAL);
    o.max_bytes = 0;
    o.dir = "/proc/no-such-dir/spool";
    assert_int_equal(gh_spool_open(&o, &sp, &err), GH_EIO);
    assert_null(sp);
    gh_spool_close(NULL);
}


/* A telemetry step line (source telemetry). */
static int append_step(struct gh_spool *sp, long step, struct gh_err *err)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = 1800000000LL * GH_NS_PER_S + step;
    s.source = GH_SRC_TELEMETRY;
    s.kind = GH_KIND_STEP;
    s.has_step = true;
    s.step = step;
    s.step_ms = 850.5;
    s.has_rank = true;
    s.rank = 3;
    gh_signal_set_str(&s.node, "n1", 2);
    gh_signal_set_str(&s.job, "train/job-a", 11);
    int rc = gh_spool_append(sp, &s, NULL, err);
    gh_signal_clear(&s);
    return rc;
}

/* Reads every pending record, acking, and returns how many were XIDs with
 * the given code (and the total in *n). */
static int drain_count_xid(struct gh_spool *sp, int code, uint64_t *n)
{
    struct gh_err err;
    int found = 0;
    *n = 0;
    for (;;) {
        struct gh_spool_batch b;
        assert_int_equal(gh_spool_read(sp, 500, 1 << 20, &b, &err), GH_OK);
        if (b.n == 0)
            break;
        const char *p = b.body;
        for (size_t i = 0; i < b.n; i++) {
            const char *nl = memchr(p, '\n', (size_t)(b.body + b.len - p));
            struct gh_signal s;
            assert_int_equal(gh_signal_decode(p, (size_t)(nl - p), 0, &s, &err), GH_OK);
            if (s.kind == GH_KIND_XID && s.code == code)
                found++;
            gh_signal_clear(&s);
            p = nl + 1;
        }
        *n += b.n;
        assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
        gh_spool_batch_clear(&b);
    }
    return found;
}

/* Issue 15 item 9: a telemetry flood (receiver down) far larger than the
 * spool: the XID 79 written before it is still there, telemetry stopped at
 * its share and was counted, hardware after the flood still fits. */
static void test_telemetry_never_evicts_hardware(void **state)
{
    struct fixture *f = *state;
    const uint64_t max = 256 * 1024;
    struct gh_spool *sp = open_spool(f, max, 16 * 1024);
    struct gh_err err;
    append_xid(sp, 79, "GPU has fallen off the bus.");
    int ok = 0, dropped = 0;
    for (long i = 0; i < 20000; i++) { /* ~2.5 MB of step lines into 256 KiB */
        int rc = append_step(sp, i, &err);
        if (rc == GH_OK)
            ok++;
        else {
            assert_int_equal(rc, GH_ELIMIT);
            dropped++;
        }
    }
    assert_int_equal(gh_spool_flush(sp, &err), GH_OK);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_int_equal(st.lost, 0);
    assert_int_equal(st.telemetry_dropped, (uint64_t)dropped);
    assert_true(dropped > 0 && ok > 0);
    assert_true(st.telemetry_bytes <= st.telemetry_max_bytes);
    assert_int_equal(st.telemetry_max_bytes, max / 4);
    /* Hardware still has the rest of the spool: 300 more XIDs, none lost. */
    for (int i = 0; i < 300; i++)
        append_xid(sp, 48, "DBE");
    gh_spool_stats(sp, &st);
    assert_int_equal(st.lost, 0);
    /* Reopened: telemetry's share is counted from the files. */
    gh_spool_close(sp);
    sp = open_spool(f, max, 16 * 1024);
    gh_spool_stats(sp, &st);
    assert_true(st.telemetry_bytes > max / 4 - 4096 && st.telemetry_bytes <= max / 4);
    assert_int_equal(append_step(sp, 1, &err), GH_ELIMIT);
    uint64_t n;
    assert_int_equal(drain_count_xid(sp, 79, &n), 1);
    assert_int_equal(n, 1 + (uint64_t)ok + 300);
    /* Shipped: telemetry's share is free again. */
    gh_spool_stats(sp, &st);
    assert_true(st.telemetry_bytes < 16 * 1024);
    assert_int_equal(append_step(sp, 2, &err), GH_OK);
    gh_spool_close(sp);
}

/* A tmpfs of `size` bytes mounted on f->dir (root only): 0, or -1 when this
 * process may not mount (the test is then skipped). */
static int mount_small(struct fixture *f, const char *size)
{
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=0700", size);
    return mount("tmpfs", f->dir, "tmpfs", 0, opts);
}

/* Fills the file system of dir with a file until ENOSPC. */
static void fill_disk(const char *dir)
{
    char p[256];
    snprintf(p, sizeof p, "%s/filler", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    char buf[4096];
    memset(buf, 'f', sizeof buf);
    for (;;) {
        ssize_t w = write(fd, buf, sizeof buf);
        if (w < (ssize_t)sizeof buf) {
            if (w > 0)
                continue;
            break;
        }
    }
    close(fd);
}

/* Issue 15 item 8: ENOSPC. Reading must not fail (it used to flush first
 * and give up), so what is on disk ships and its acks free the space; the
 * XID appended while the disk is full is held in memory, not lost, and is
 * written and shipped once a flush succeeds; telemetry is dropped while
 * writes fail, counted. */
static void test_disk_full_keeps_shipping(void **state)
{
    struct fixture *f = *state;
    if (mount_small(f, "256k") != 0) {
        print_message("mount tmpfs: %s - skipped (needs root)\n", strerror(errno));
        skip();
    }
    char dir[128];
    snprintf(dir, sizeof dir, "%s/spool", f->dir);
    struct gh_spool_opts o = {.dir = dir, .node = "n1", .boot_id = "b00t",
                              .max_bytes = 4 << 20, .segment_bytes = 16 * 1024,
                              .clock = &f->clock};
    struct gh_spool *sp = NULL;
    struct gh_err err;
    assert_int_equal(gh_spool_open(&o, &sp, &err), GH_OK);
    char msg[200];
    memset(msg, 'q', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    for (int i = 0; i < 200; i++) /* ~60 KB: four segments */
        append_xid(sp, 13, msg);
    assert_int_equal(gh_spool_flush(sp, &err), GH_OK);
    fill_disk(f->dir);

    /* The disk is full (past the last page of the active segment): the XID
     * and what follows it are held, telemetry is dropped. */
    append_xid(sp, 79, "GPU has fallen off the bus.");
    for (int i = 0; i < 20; i++) /* ~6 KB: more than a page */
        append_xid(sp, 13, msg);
    assert_int_equal(gh_spool_flush(sp, &err), GH_EIO);
    assert_non_null(strstr(err.msg, "No space left"));
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_true(st.write_failing);
    assert_int_equal(st.held, 21);
    assert_true(st.write_errors >= 1);
    assert_int_equal(append_step(sp, 1, &err), GH_ELIMIT);
    gh_spool_stats(sp, &st);
    assert_int_equal(st.telemetry_dropped, 1);
    assert_int_equal(st.lost, 0);

    /* What is on disk ships; its acks free whole segments; the held XID is
     * then written and ships too. */
    uint64_t total = 0;
    int found = 0;
    for (int round = 0; round < 10; round++) {
        struct gh_spool_batch b;
        assert_int_equal(gh_spool_read(sp, 50, 1 << 20, &b, &err), GH_OK);
        if (b.n && strstr(b.body, "\"code\":79"))
            found = 1;
        total += b.n;
        assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
        gh_spool_batch_clear(&b);
    }
    assert_int_equal(found, 1);
    assert_int_equal(total, 221);
    gh_spool_stats(sp, &st);
    assert_false(st.write_failing);
    assert_int_equal(st.held, 0);
    assert_int_equal(st.lost, 0);
    gh_spool_close(sp);
    assert_int_equal(umount(f->dir), 0);
}

/* While writes fail the memory hold is bounded: hardware signals beyond it
 * are lost and counted, never an unbounded buffer. */
static void test_disk_full_hold_bounded(void **state)
{
    struct fixture *f = *state;
    if (mount_small(f, "64k") != 0) {
        print_message("mount tmpfs: %s - skipped (needs root)\n", strerror(errno));
        skip();
    }
    char dir[128];
    snprintf(dir, sizeof dir, "%s/spool", f->dir);
    struct gh_spool_opts o = {.dir = dir, .node = "n1", .boot_id = "b00t",
                              .max_bytes = 4 << 20, .clock = &f->clock};
    struct gh_spool *sp = NULL;
    struct gh_err err;
    assert_int_equal(gh_spool_open(&o, &sp, &err), GH_OK);
    fill_disk(f->dir);
    char msg[200];
    memset(msg, 'q', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    int lost = 0;
    for (int i = 0; i < 2000; i++) {
        struct gh_signal s;
        make_xid(&s, 13, msg);
        if (gh_spool_append(sp, &s, NULL, &err) != GH_OK) {
            assert_non_null(strstr(err.msg, "signal lost"));
            lost++;
        }
        gh_signal_clear(&s);
    }
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_true(lost > 0);
    assert_int_equal(st.lost, (uint64_t)lost);
    assert_true(st.held > 0 && st.held < 2000);
    /* Nothing was read from an empty disk: an empty batch, not an error. */
    struct gh_spool_batch b;
    assert_int_equal(gh_spool_read(sp, 50, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(b.n, 0);
    gh_spool_batch_clear(&b);
    gh_spool_close(sp);
    assert_int_equal(umount(f->dir), 0);
}

/* gh_spool_peek (gpuheal-agent --check) reads what an open spool holds
 * without opening it: the same pending count, segments and bytes as the
 * owner's stats, a torn tail not counted, a missing directory not an error. */
static void test_peek_matches_stats(void **state)
{
    struct fixture *f = *state;
    struct gh_spool_peek pk;
    struct gh_err err = {{0}};
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none", f->dir);
    assert_int_equal(gh_spool_peek(missing, &pk, &err), GH_OK);
    assert_false(pk.exists);

    struct gh_spool *sp = open_spool(f, 256 * 1024, 16 * 1024);
    assert_int_equal(gh_spool_peek(f->dir, &pk, &err), GH_OK);
    assert_true(pk.exists);
    assert_int_equal(pk.pending, 0);
    char msg[200];
    memset(msg, 'x', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    for (int i = 0; i < 300; i++)
        append_xid(sp, 79, msg);
    assert_int_equal(gh_spool_flush(sp, &err), GH_OK);
    struct gh_spool_batch b;
    assert_int_equal(gh_spool_read(sp, 120, 1 << 20, &b, &err), GH_OK);
    assert_int_equal(gh_spool_ack(sp, &b, &err), GH_OK);
    gh_spool_batch_clear(&b);
    struct gh_spool_stats st;
    gh_spool_stats(sp, &st);
    assert_true(st.segments > 1);
    assert_int_equal(gh_spool_peek(f->dir, &pk, &err), GH_OK);
    assert_true(pk.have_cursor);
    assert_int_equal(pk.pending, st.pending);
    assert_int_equal(pk.pending, 180);
    assert_int_equal(pk.cursor_seq, st.cursor_seq);
    assert_int_equal(pk.next_seq, st.next_seq);
    assert_int_equal(pk.segments, st.segments);
    assert_int_equal(pk.bytes, st.bytes);

    /* A torn last record (a crash mid-write): not counted. */
    char name[160];
    DIR *d = opendir(f->dir);
    struct dirent *e;
    uint64_t newest = 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".seg")) {
            uint64_t v = strtoull(e->d_name, NULL, 10);
            if (v > newest)
                newest = v;
        }
    closedir(d);
    snprintf(name, sizeof name, "%s/%020llu.seg", f->dir, (unsigned long long)newest);
    FILE *fp = fopen(name, "ab");
    assert_non_null(fp);
    unsigned char torn[20] = {200, 0, 0, 0};
    assert_int_equal(fwrite(torn, 1, sizeof torn, fp), sizeof torn);
    fclose(fp);
    assert_int_equal(gh_spool_peek(f->dir, &pk, &err), GH_OK);
    assert_int_equal(pk.pending, 180);
    assert_int_equal(pk.next_seq, st.next_seq);
    gh_spool_close(sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_read_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_byte_limit_of_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_resumes_cursor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_and_deletion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_record_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_cursor_replays_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_drops_oldest_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_too_big_for_spool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeps_given_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_telemetry_never_evicts_hardware, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_keeps_shipping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_hold_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peek_matches_stats, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
