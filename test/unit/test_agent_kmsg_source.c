/* test_agent_kmsg_source.c - unit tests of the agent's kernel-log source:
 * a fake /dev/kmsg (a regular file and a FIFO of records), restart without
 * re-shipping (persisted boot id + seq, written atomically), a new boot,
 * corrupt state, SXid flushed when caught up, and a followed log file with
 * appends, rotation and truncation, and its persisted position: what is
 * written while the agent is down is read after a restart, through a
 * rotation or a copytruncate meanwhile; a truncate followed by a longer
 * write is read from its first line; the lines written before a
 * copytruncate are read from its copy, while down and while running. */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/kmsg_source.h"
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

static int count(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void reset(struct recorder *r)
{
    for (int i = 0; i < r->n; i++)
        gh_signal_clear(&r->sigs[i]);
    r->n = 0;
}

static char dir[64], dev[128], state[128], logpath[128], bootf[128];
static struct recorder rec;

static int setup(void **st)
{
    (void)st;
    snprintf(dir, sizeof dir, "/tmp/gh-kmsgsrc-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(dev, sizeof dev, "%s/kmsg", dir);
    snprintf(state, sizeof state, "%s/kmsg.state", dir);
    snprintf(logpath, sizeof logpath, "%s/kern.log", dir);
    snprintf(bootf, sizeof bootf, "%s/boot_id", dir);
    memset(&rec, 0, sizeof rec);
    pthread_mutex_init(&rec.mu, NULL);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[160];
    reset(&rec);
    pthread_mutex_destroy(&rec.mu);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void put(const char *path, const char *mode, const char *text)
{
    FILE *f = fopen(path, mode);
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#define XID(seq, code)                                                                    \
    "3," #seq ",6781741548779,-;NVRM: Xid (PCI:0000:91:00): " #code                      \
    ", pid=1234, name=python, GPU has fallen off the bus.\n SUBSYSTEM=pci\n"              \
    " DEVICE=+pci:0000:91:00.0\n"
#define NOISE(seq) "6," #seq ",6781741548800,-;nvidia-modeset: Loading NVIDIA driver\n"

static struct gh_kmsg_source *new_dev(const char *boot_id, int64_t persist_ns)
{
    struct gh_kmsg_source_opts o;
    struct gh_kmsg_source *src = NULL;
    struct gh_err err;
    gh_kmsg_source_opts_init(&o);
    o.path = dev;
    o.node = "gpu-17";
    o.state_path = state;
    o.boot_id_path = bootf;
    o.boot_id = boot_id;
    o.boot_time_ns = 1700000000LL * GH_NS_PER_S;
    o.persist_interval_ns = persist_ns;
    o.emit = record;
    o.emit_ctx = &rec;
    if (gh_kmsg_source_new(&o, &src, &err))
        fail_msg("gh_kmsg_source_new: %s", err.msg);
    return src;
}

static void poll_all(struct gh_kmsg_source *src)
{
    bool caught_up = false;
    for (int i = 0; i < 10 && !caught_up; i++)
        assert_int_equal(gh_kmsg_source_poll(src, &caught_up, NULL), GH_OK);
    assert_true(caught_up);
}

static void test_device_file_and_restart(void **st)
{
    (void)st;
    put(bootf, "w", "1b2c3d4e-0000-4000-8000-000000000001\n");
    put(dev, "w", NOISE(1) XID(2, 79) NOISE(3) XID(4, 48) NOISE(5));
    struct gh_kmsg_source *src = new_dev(NULL, 0);
    assert_string_equal(gh_kmsg_source_boot_id(src), "1b2c3d4e-0000-4000-8000-000000000001");
    poll_all(src);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.bad_json, 0);
    assert_int_equal(rec.sigs[0].kind, GH_KIND_XID);
    assert_int_equal(rec.sigs[0].code, 79);
    assert_string_equal(rec.sigs[0].node, "gpu-17");
    assert_string_equal(rec.sigs[0].id, "gpu-17/1b2c3d4e-0000-4000-8000-000000000001/2");
    /* boot time + the record's usec stamp */
    assert_int_equal(rec.sigs[0].ts_ns, 1700000000LL * GH_NS_PER_S + 6781741548779LL * 1000);
    /* the record seq travels as a number too (what the agent commits) */
    assert_true(rec.sigs[0].has_kmsg_seq);
    assert_int_equal(rec.sigs[0].kmsg_seq, 2);
    assert_true(rec.sigs[1].has_kmsg_seq);
    assert_int_equal(rec.sigs[1].kmsg_seq, 4);
    assert_string_equal(rec.sigs[1].id, "gpu-17/1b2c3d4e-0000-4000-8000-000000000001/4");

    struct gh_kmsg_source_stats ss;
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.records, 5); /* dictionary lines are not records */
    assert_int_equal(ss.signals, 2);

    /* Only the first xid is handed off durably before the "crash". */
    gh_kmsg_source_commit(src, 2);
    gh_kmsg_source_commit(src, 1); /* lower: ignored */
    assert_int_equal(gh_kmsg_source_persist(src, NULL), GH_OK);
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.committed, 2);
    assert_int_equal(ss.persisted, 2);
    struct stat sb;
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", state);
    assert_int_not_equal(stat(tmp, &sb), 0);
    gh_kmsg_source_free(src);

    /* Restart: the ring still holds everything plus a new record. */
    put(dev, "a", XID(6, 31));
    reset(&rec);
    src = new_dev(NULL, 0);
    poll_all(src);
    assert_int_equal(rec.n, 2); /* seq 4 (never committed) and 6 */
    assert_int_equal(rec.sigs[0].code, 48);
    assert_int_equal(rec.sigs[1].code, 31);
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.skipped, 1);

    /* Appends to the "device" are read by the next poll. */
    put(dev, "a", NOISE(7) XID(8, 94));
    poll_all(src);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.sigs[2].code, 94);
    gh_kmsg_source_commit(src, 8);
    gh_kmsg_source_free(src); /* persists on free */

    reset(&rec);
    src = new_dev(NULL, 0);
    poll_all(src);
    assert_int_equal(rec.n, 0);
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.skipped, 4);
    gh_kmsg_source_free(src);

    /* A new boot (different boot id) skips nothing. */
    put(bootf, "w", "1b2c3d4e-0000-4000-8000-000000000002\n");
    src = new_dev(NULL, 0);
    poll_all(src);
    assert_int_equal(rec.n, 4);
    gh_kmsg_source_free(src);
}

static void test_state_file(void **st)
{
    (void)st;
    put(dev, "w", XID(10, 79) XID(11, 79));
    put(state, "w", "garbage\n");
    struct gh_kmsg_source *src = new_dev("boot-a", -1);
    struct gh_kmsg_source_stats ss;
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.state_errors, 1);
    poll_all(src);
    assert_int_equal(rec.n, 2); /* corrupt state: nothing skipped */
    gh_kmsg_source_commit(src, 10);
    poll_all(src); /* persist interval < 0: written at once */
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.persisted, 10);
    char buf[256] = "";
    FILE *f = fopen(state, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_string_equal(buf, "gpuheal-kmsg-state v1\nboot_id boot-a\nseq 10\n");
    gh_kmsg_source_free(src);

    /* A long persist interval: a commit is not written by poll, only when
     * persisted on purpose (the agent's shutdown) or on free. */
    reset(&rec);
    src = new_dev("boot-a", 3600 * GH_NS_PER_S);
    poll_all(src);
    assert_int_equal(rec.n, 1); /* seq 11 */
    gh_kmsg_source_commit(src, 11);
    poll_all(src);
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.persisted, 10);
    assert_int_equal(gh_kmsg_source_persist(src, NULL), GH_OK);
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.persisted, 11);
    gh_kmsg_source_commit(src, 12);
    gh_kmsg_source_free(src); /* persists what was committed */
    memset(buf, 0, sizeof buf);
    f = fopen(state, "r");
    assert_non_null(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_string_equal(buf, "gpuheal-kmsg-state v1\nboot_id boot-a\nseq 12\n");
}

static void test_sxid_flushed_when_caught_up(void **st)
{
    (void)st;
    put(dev, "w",
        "4,5123,131453740743,-;nvidia-nvswitch5: SXid (PCI:0000:0a:00.0): 22013, "
        "Non-fatal, Link 12 Minion Link DLREQ interrupt\n");
    struct gh_kmsg_source *src = new_dev("boot-b", 0);
    poll_all(src);
    assert_int_equal(rec.n, 1);
    assert_int_equal(rec.sigs[0].kind, GH_KIND_SXID);
    assert_int_equal(rec.sigs[0].code, 22013);
    gh_kmsg_source_free(src);
}

static void test_partial_record(void **st)
{
    (void)st;
    /* A stand-in file may end mid-record: it is completed by the next read. */
    put(dev, "w", "3,20,6781741548779,-;NVRM: Xid (PCI:0000:91:00): 7");
    struct gh_kmsg_source *src = new_dev("boot-c", 0);
    poll_all(src);
    assert_int_equal(rec.n, 0);
    put(dev, "a", "9, pid=1, name=x, GPU has fallen off the bus.\n");
    poll_all(src);
    assert_int_equal(rec.n, 1);
    assert_int_equal(rec.sigs[0].code, 79);
    gh_kmsg_source_free(src);
}

static void write_fifo(const char *text)
{
    int fd = open(dev, O_WRONLY | O_NONBLOCK); /* the source holds the read end */
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* A FIFO stands in for the device: polled as the agent's loop polls it,
 * never blocking, also while no writer is there; writers come and go. */
static void test_fifo(void **st)
{
    (void)st;
    assert_int_equal(mkfifo(dev, 0600), 0);
    struct gh_kmsg_source_opts o;
    struct gh_kmsg_source *src = NULL;
    gh_kmsg_source_opts_init(&o);
    o.path = dev;
    o.node = "gpu-17";
    o.boot_id = "boot-f";
    o.emit = record;
    o.emit_ctx = &rec;
    assert_int_equal(gh_kmsg_source_new(&o, &src, NULL), GH_OK);
    poll_all(src); /* no writer yet: caught up at once */
    assert_int_equal(count(&rec), 0);
    write_fifo(NOISE(1) XID(2, 79));
    poll_all(src);
    assert_int_equal(count(&rec), 1);
    poll_all(src); /* the writer gone: nothing more, no error */
    write_fifo(XID(3, 48)); /* a writer coming back */
    poll_all(src);
    assert_int_equal(count(&rec), 2);
    assert_int_equal(rec.sigs[0].code, 79);
    assert_int_equal(rec.sigs[1].code, 48);
    assert_string_equal(rec.sigs[1].id, "gpu-17/boot-f/3");
    gh_kmsg_source_free(src);
}

static void test_missing_device(void **st)
{
    (void)st;
    struct gh_kmsg_source_opts o;
    struct gh_kmsg_source *src = NULL;
    struct gh_err err;
    gh_kmsg_source_opts_init(&o);
    o.path = dev;
    o.node = "n";
    o.emit = record;
    assert_int_equal(gh_kmsg_source_new(&o, &src, &err), GH_ENOTFOUND);
    assert_null(src);
    o.node = NULL;
    assert_int_equal(gh_kmsg_source_new(&o, &src, &err), GH_EINVAL);
    o.node = "n";
    o.mode = GH_KMSG_SRC_FILE;
    o.path = NULL;
    assert_int_equal(gh_kmsg_source_new(&o, &src, &err), GH_EINVAL);
}

/* ---- file mode ---- */

#define LOGXID(code)                                                                       \
    "2026-11-29T07:00:00.123456+00:00 gpu-17 kernel: NVRM: Xid (PCI:0000:3b:00): " #code   \
    ", pid=1234, name=python, Ch 00000018\n"

static struct gh_kmsg_source *new_file_state(bool from_start, const char *state_path)
{
    struct gh_kmsg_source_opts o;
    struct gh_kmsg_source *src = NULL;
    struct gh_err err;
    gh_kmsg_source_opts_init(&o);
    o.mode = GH_KMSG_SRC_FILE;
    o.path = logpath;
    o.node = "gpu-17";
    o.state_path = state_path;
    o.persist_interval_ns = -1;
    o.file_from_start = from_start;
    o.emit = record;
    o.emit_ctx = &rec;
    if (gh_kmsg_source_new(&o, &src, &err))
        fail_msg("gh_kmsg_source_new: %s", err.msg);
    return src;
}

static struct gh_kmsg_source *new_file(bool from_start)
{
    return new_file_state(from_start, NULL);
}

static void test_file_follow(void **st)
{
    (void)st;
    put(logpath, "w", LOGXID(13) "Nov 29 07:00:00 gpu-17 kernel: noise\n");
    struct gh_kmsg_source *src = new_file(false);
    poll_all(src);
    assert_int_equal(rec.n, 0); /* existing content: not read */
    put(logpath, "a", LOGXID(31));
    poll_all(src);
    assert_int_equal(rec.n, 1);
    assert_int_equal(rec.sigs[0].code, 31);
    assert_null(rec.sigs[0].id);

    /* a line written in two pieces */
    put(logpath, "a", "2026-11-29T07:00:01Z gpu-17 kernel: NVRM: Xid (PCI:0000:3b:00): 4");
    poll_all(src);
    put(logpath, "a", "3, pid=1, name=x, Ch 00000001\n");
    poll_all(src);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.sigs[1].code, 43);

    /* rotation: appends to the old file before the switch are still read */
    char rotated[160];
    snprintf(rotated, sizeof rotated, "%s.1", logpath);
    assert_int_equal(rename(logpath, rotated), 0);
    put(rotated, "a", LOGXID(48));
    put(logpath, "w", LOGXID(62));
    poll_all(src);
    assert_int_equal(rec.n, 4);
    assert_int_equal(rec.sigs[2].code, 48);
    assert_int_equal(rec.sigs[3].code, 62);
    put(logpath, "a", LOGXID(63));
    poll_all(src);
    assert_int_equal(rec.n, 5);

    /* truncation (copytruncate) */
    put(logpath, "w", LOGXID(64));
    poll_all(src);
    assert_int_equal(rec.n, 6);
    assert_int_equal(rec.sigs[5].code, 64);

    struct gh_kmsg_source_stats ss;
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.rotations, 1);
    assert_int_equal(ss.truncations, 1);
    assert_int_equal(rec.bad_json, 0);
    gh_kmsg_source_free(src);
}

static void test_file_appears_later(void **st)
{
    (void)st;
    struct gh_kmsg_source *src = new_file(false);
    poll_all(src);
    assert_int_equal(rec.n, 0);
    put(logpath, "w", LOGXID(79));
    poll_all(src);
    assert_int_equal(rec.n, 1); /* a new file is read from its start */
    gh_kmsg_source_free(src);

    reset(&rec);
    src = new_file(true);
    poll_all(src);
    assert_int_equal(rec.n, 1); /* from_start: existing content read */
    gh_kmsg_source_free(src);
}


/* Reads what is there, then commits and persists as the agent does after a
 * spool fsync; the source is then dropped as by kill -9 (no orderly stop:
 * free would persist again, but only what was committed). */
static void read_commit(struct gh_kmsg_source *src)
{
    struct gh_err err;
    poll_all(src);
    gh_kmsg_source_commit_read(src);
    assert_int_equal(gh_kmsg_source_persist(src, &err), GH_OK);
}

static int codes(int *out, int cap)
{
    int n = rec.n < cap ? rec.n : cap;
    for (int i = 0; i < n; i++)
        out[i] = rec.sigs[i].code;
    return n;
}

/* Issue 15 item 10: three XIDs written while the agent is down (kill -9)
 * are read after the restart; with nothing new, nothing is read twice. */
static void test_file_restart_reads_downtime(void **st)
{
    (void)st;
    put(logpath, "w", LOGXID(13) "Nov 29 07:00:00 gpu-17 kernel: noise\n");
    struct gh_kmsg_source *src = new_file_state(false, state);
    poll_all(src);
    put(logpath, "a", LOGXID(31));
    read_commit(src);
    assert_int_equal(rec.n, 1);
    gh_kmsg_source_free(src);
    reset(&rec);

    put(logpath, "a", LOGXID(43) LOGXID(48) "noise line\n" LOGXID(79));
    src = new_file_state(false, state);
    read_commit(src);
    int c[8];
    assert_int_equal(codes(c, 8), 3);
    assert_int_equal(c[0], 43);
    assert_int_equal(c[1], 48);
    assert_int_equal(c[2], 79);
    gh_kmsg_source_free(src);
    reset(&rec);

    /* Restarted again with nothing new: nothing re-read. */
    src = new_file_state(false, state);
    poll_all(src);
    assert_int_equal(rec.n, 0);
    /* A partial last line is not past the saved position: completed after
     * a restart, it is read whole. */
    put(logpath, "a", "2026-11-29T07:00:01Z gpu-17 kernel: NVRM: Xid (PCI:0000:3b:00): 6");
    read_commit(src);
    gh_kmsg_source_free(src);
    put(logpath, "a", "2, pid=1, name=x, Ch 00000001\n");
    src = new_file_state(false, state);
    poll_all(src);
    assert_int_equal(rec.n, 1);
    assert_int_equal(rec.sigs[0].code, 62);
    gh_kmsg_source_free(src);
}

/* Rotation while down: the rest of the old file (found by its inode next to
 * the path) is read, then the new file from its start. */
static void test_file_rotated_while_down(void **st)
{
    (void)st;
    put(logpath, "w", LOGXID(13));
    struct gh_kmsg_source *src = new_file_state(false, state);
    read_commit(src);
    gh_kmsg_source_free(src);
    char rotated[160];
    snprintf(rotated, sizeof rotated, "%s.1", logpath);
    put(logpath, "a", LOGXID(31));
    assert_int_equal(rename(logpath, rotated), 0);
    put(logpath, "w", LOGXID(43) LOGXID(48));
    src = new_file_state(false, state);
    read_commit(src);
    int c[8];
    assert_int_equal(codes(c, 8), 3);
    assert_int_equal(c[0], 31);
    assert_int_equal(c[1], 43);
    assert_int_equal(c[2], 48);
    struct gh_kmsg_source_stats ss;
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.rotations, 1);
    gh_kmsg_source_free(src);
}

/* copytruncate while down, the new content longer than the old position:
 * read from the start (the hash before the position differs). */
static void test_file_copytruncate_while_down(void **st)
{
    (void)st;
    put(logpath, "w", LOGXID(13));
    struct gh_kmsg_source *src = new_file_state(false, state);
    put(logpath, "a", LOGXID(31));
    read_commit(src);
    assert_int_equal(rec.n, 1);
    gh_kmsg_source_free(src);
    reset(&rec);
    put(logpath, "w", LOGXID(43) LOGXID(48) LOGXID(79));
    src = new_file_state(false, state);
    read_commit(src);
    int c[8];
    assert_int_equal(codes(c, 8), 3);
    assert_int_equal(c[0], 43);
    assert_int_equal(c[2], 79);
    gh_kmsg_source_free(src);
    reset(&rec);
    /* Shorter than the position: from the start too. */
    put(logpath, "w", LOGXID(64));
    src = new_file_state(false, state);
    poll_all(src);
    assert_int_equal(rec.n, 1);
    assert_int_equal(rec.sigs[0].code, 64);
    gh_kmsg_source_free(src);
}

/* Copies src to dst, as logrotate's copytruncate does before truncating. */
static void copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* Issue 24 item 6: lines written while the agent is down, then a real
 * copytruncate (kern.log copied to kern.log.1, kern.log truncated, new
 * lines written): the lines are read from the copy, then the new file from
 * its start. They used to be lost (the truncated file read from its start). */
static void test_file_copytruncate_copy_while_down(void **st)
{
    (void)st;
    put(logpath, "w", LOGXID(13));
    struct gh_kmsg_source *src = new_file_state(false, state);
    read_commit(src);
    gh_kmsg_source_free(src);
    put(logpath, "a", LOGXID(31) LOGXID(43));
    char copy[160];
    snprintf(copy, sizeof copy, "%s.1", logpath);
    copy_file(logpath, copy);
    put(logpath, "w", LOGXID(48));
    src = new_file_state(false, state);
    read_commit(src);
    int c[8];
    assert_int_equal(codes(c, 8), 3);
    assert_int_equal(c[0], 31);
    assert_int_equal(c[1], 43);
    assert_int_equal(c[2], 48);
    struct gh_kmsg_source_stats ss;
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.copies_read, 1);
    gh_kmsg_source_free(src);
    reset(&rec);
    /* Restarted again: nothing read twice. */
    src = new_file_state(false, state);
    poll_all(src);
    assert_int_equal(rec.n, 0);
    gh_kmsg_source_free(src);
    remove(copy);
}

/* The same between two polls of a running source: the lines appended after
 * the last poll and before the copy are read from the copy, a partial line
 * once and whole. */
static void test_file_copytruncate_copy_running(void **st)
{
    (void)st;
    put(logpath, "w", "");
    struct gh_kmsg_source *src = new_file(false);
    put(logpath, "a",
        LOGXID(13) "2026-11-29T07:00:01Z gpu-17 kernel: NVRM: Xid (PCI:0000:3b:00): 6");
    poll_all(src);
    assert_int_equal(rec.n, 1);
    put(logpath, "a", "2, pid=1, name=x, Ch 00000001\n" LOGXID(31));
    char copy[160];
    snprintf(copy, sizeof copy, "%s-20261207", logpath);
    copy_file(logpath, copy);
    put(logpath, "w", LOGXID(43));
    poll_all(src);
    int c[8];
    assert_int_equal(codes(c, 8), 4);
    assert_int_equal(c[1], 62);
    assert_int_equal(c[2], 31);
    assert_int_equal(c[3], 43);
    struct gh_kmsg_source_stats ss;
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.copies_read, 1);
    /* and on from there: appends to the file at the path */
    put(logpath, "a", LOGXID(48));
    poll_all(src);
    assert_int_equal(rec.n, 5);
    assert_int_equal(rec.sigs[4].code, 48);
    gh_kmsg_source_free(src);
    remove(copy);
}

/* Issue 15 item 10: a truncate followed by a longer write between two polls
 * of a running source: its first line is read (it used to be skipped, the
 * file being no shorter than the old position). */
static void test_file_truncate_then_longer_write(void **st)
{
    (void)st;
    put(logpath, "w", "");
    struct gh_kmsg_source *src = new_file(false);
    put(logpath, "a", LOGXID(13));
    poll_all(src);
    assert_int_equal(rec.n, 1);
    put(logpath, "w", LOGXID(31) LOGXID(43));
    poll_all(src);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.sigs[1].code, 31);
    assert_int_equal(rec.sigs[2].code, 43);
    struct gh_kmsg_source_stats ss;
    gh_kmsg_source_stats(src, &ss);
    assert_int_equal(ss.truncations, 1);
    gh_kmsg_source_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_device_file_and_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sxid_flushed_when_caught_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_follow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_appears_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_restart_reads_downtime, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_rotated_while_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_copytruncate_while_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_truncate_then_longer_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_copytruncate_copy_while_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_copytruncate_copy_running, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
