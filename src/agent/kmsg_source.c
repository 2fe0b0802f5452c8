/* kmsg_source.c - the agent's kernel-log source: reads /dev/kmsg records (or
 * a followed log file) without blocking, runs them through the kernel-log
 * parser, skips what was shipped before a restart (a persisted boot id and
 * sequence number), and emits the rest. */
#include "agent/kmsg_source.h"
#include "common/mono.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RBUF_SIZE (64 * 1024)        /* > the largest /dev/kmsg record */
#define POLL_BUDGET (4 * 1024 * 1024)
#define PART_MAX (2 * GH_KMSG_LINE_MAX) /* longest line kept whole (buffer: +1 for the newline) */
#define BOOT_ID_MAX 64
#define HASH_MAX 4096                /* file mode: bytes of the last line hashed */

/* File mode: a position in the followed file - the file (dev, inode), the
 * offset just after a complete line, and a hash of the last hlen bytes
 * before it (the end of that line), which tells copytruncate or an
 * overwrite from appends. */
struct fpos {
    bool valid;
    uint64_t dev, ino, off;
    uint32_t hlen;
    uint64_t hash;
};

struct gh_kmsg_source {
    enum gh_kmsg_src_mode mode;
    char *path, *state_path, *state_tmp;
    char boot_id[BOOT_ID_MAX];
    int64_t persist_interval_ns;
    bool file_from_start;
    gh_kmsg_source_emit_fn emit;
    void *emit_ctx;

    pthread_mutex_t pmu;            /* the parser (feed/flush vs stats readers) */
    struct gh_kmsg_parser *parser;
    bool dirty;                     /* fed since the last flush */

    int fd;
    char *rbuf;
    /* the partial last line (see take_bytes) */
    char *part;
    size_t part_len;
    bool part_discard;
    /* file mode */
    dev_t dev;
    ino_t ino;
    off_t off;
    uint64_t line_off;              /* just after the last complete line read */
    uint32_t line_hlen;             /* min(line_off, HASH_MAX) */
    uint64_t line_hash;             /* of the bytes [line_off - line_hlen, line_off) */
    struct fpos safe;               /* every signal of the lines before it emitted (under mu) */
    struct fpos fcommitted, fpersisted; /* (under mu) */

    bool have_skip;                 /* restart: skip signals with seq <= skip_seq */
    uint64_t skip_seq;

    pthread_mutex_t mu;             /* stats and commit state */
    struct gh_kmsg_source_stats st;
    bool has_committed, has_persisted;
    int64_t last_persist_mono;
    pthread_mutex_t persist_mu; /* one state-file writer at a time */
};

void gh_kmsg_source_opts_init(struct gh_kmsg_source_opts *o)
{
    memset(o, 0, sizeof *o);
}

static void count(struct gh_kmsg_source *src, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&src->mu);
    *field += n;
    pthread_mutex_unlock(&src->mu);
}

/* ---- state file ------------------------------------------------------------ */

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The hash of [off - hlen, off) of fd; false when it cannot be read whole. */
static bool hash_at(int fd, uint64_t off, uint32_t hlen, uint64_t *out)
{
    char buf[HASH_MAX];
    if (hlen > HASH_MAX || hlen > off)
        return false;
    size_t got = 0;
    while (got < hlen) {
        ssize_t r = pread(fd, buf + got, hlen - got, (off_t)(off - hlen + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    *out = fnv1a(buf, hlen);
    return true;
}

#define FSTATE_HDR "gpuheal-kmsg-file v1\n"

/* Reads the file mode's state: FSTATE_HDR, then "dev D\nino I\noffset O\n
 * hlen L\nhash H\npath P\n". GH_ENOTFOUND when absent, GH_EINVAL when corrupt
 * or for another path. */
static int read_fstate(const char *state, const char *path, struct fpos *out)
{
    char buf[PATH_MAX + 256];
    FILE *f = fopen(state, "re");
    if (!f)
        return errno == ENOENT ? GH_ENOTFOUND : GH_EIO;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (strncmp(buf, FSTATE_HDR, strlen(FSTATE_HDR)) != 0)
        return GH_EINVAL;
    unsigned long long dev, ino, off, hash;
    unsigned hlen;
    int pos = 0;
    if (sscanf(buf + strlen(FSTATE_HDR), "dev %llu\nino %llu\noffset %llu\nhlen %u\nhash %llx\npath %n",
               &dev, &ino, &off, &hlen, &hash, &pos) != 5 || pos == 0)
        return GH_EINVAL;
    const char *p = buf + strlen(FSTATE_HDR) + pos;
    size_t plen = strlen(path);
    if (strncmp(p, path, plen) != 0 || p[plen] != '\n' || hlen > HASH_MAX || hlen > off)
        return GH_EINVAL;
    *out = (struct fpos){true, dev, ino, off, hlen, hash};
    return GH_OK;
}

/* Reads "gpuheal-kmsg-state v1\nboot_id X\nseq N\n". GH_ENOTFOUND when
 * absent, GH_EINVAL when corrupt. */
static int read_state(const char *path, char *boot_id, size_t cap, uint64_t *seq)
{
    char buf[512];
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? GH_ENOTFOUND : GH_EIO;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *hdr = "gpuheal-kmsg-state v1\nboot_id ";
    if (strncmp(buf, hdr, strlen(hdr)) != 0)
        return GH_EINVAL;
    const char *b = buf + strlen(hdr);
    const char *nl = strchr(b, '\n');
    if (!nl || nl == b || (size_t)(nl - b) >= cap)
        return GH_EINVAL;
    memcpy(boot_id, b, (size_t)(nl - b));
    boot_id[nl - b] = '\0';
    if (strncmp(nl + 1, "seq ", 4) != 0)
        return GH_EINVAL;
    const char *d = nl + 5;
    if (*d < '0' || *d > '9')
        return GH_EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, 10);
    if (errno || *end != '\n')
        return GH_EINVAL;
    *seq = v;
    return GH_OK;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* tmp + fsync + rename + fsync of the directory: buf[0..n) becomes path. */
static int write_state(const char *path, const char *tmp, const char *buf, int n,
                       struct gh_err *err)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return gh_err_set(err, GH_EIO, "kmsg state: open %s: %s", tmp, strerror(errno));
    if (write_all(fd, buf, (size_t)n) || fsync(fd)) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return gh_err_set(err, GH_EIO, "kmsg state: write %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return gh_err_set(err, GH_EIO, "kmsg state: rename to %s: %s", path, strerror(e));
    }
    /* Make the rename itself durable. */
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return GH_OK;
}

static bool fpos_eq(const struct fpos *a, const struct fpos *b)
{
    return a->valid == b->valid && a->dev == b->dev && a->ino == b->ino && a->off == b->off &&
           a->hlen == b->hlen && a->hash == b->hash;
}

/* File mode: writes the committed position when it changed. */
static int persist_file(struct gh_kmsg_source *src, struct gh_err *err)
{
    int rc = GH_OK;
    pthread_mutex_lock(&src->persist_mu);
    pthread_mutex_lock(&src->mu);
    struct fpos c = src->fcommitted;
    bool due = c.valid && !fpos_eq(&c, &src->fpersisted);
    pthread_mutex_unlock(&src->mu);
    if (due) {
        char buf[PATH_MAX + 256];
        int n = snprintf(buf, sizeof buf,
                         FSTATE_HDR "dev %llu\nino %llu\noffset %llu\nhlen %u\nhash %016llx\n"
                         "path %s\n", (unsigned long long)c.dev, (unsigned long long)c.ino,
                         (unsigned long long)c.off, c.hlen, (unsigned long long)c.hash, src->path);
        if (n < 0 || (size_t)n >= sizeof buf)
            rc = gh_err_set(err, GH_EINVAL, "kmsg state: path too long");
        else
            rc = write_state(src->state_path, src->state_tmp, buf, n, err);
        pthread_mutex_lock(&src->mu);
        if (rc == GH_OK) {
            src->fpersisted = c;
            src->st.persisted = c.off;
        } else {
            src->st.state_errors++;
        }
        src->last_persist_mono = gh_mono_ns();
        pthread_mutex_unlock(&src->mu);
    }
    pthread_mutex_unlock(&src->persist_mu);
    return rc;
}

int gh_kmsg_source_persist(struct gh_kmsg_source *src, struct gh_err *err)
{
    int rc = GH_OK;
    if (src->mode == GH_KMSG_SRC_FILE)
        return src->state_path ? persist_file(src, err) : GH_OK;
    if (!src->state_path || !src->boot_id[0])
        return GH_OK;
    pthread_mutex_lock(&src->persist_mu);
    pthread_mutex_lock(&src->mu);
    bool due = src->has_committed && (!src->has_persisted || src->st.committed != src->st.persisted);
    uint64_t seq = src->st.committed;
    pthread_mutex_unlock(&src->mu);
    if (due) {
        char buf[256];
        int n = snprintf(buf, sizeof buf, "gpuheal-kmsg-state v1\nboot_id %s\nseq %llu\n",
                         src->boot_id, (unsigned long long)seq);
        rc = write_state(src->state_path, src->state_tmp, buf, n, err);
        pthread_mutex_lock(&src->mu);
        if (rc == GH_OK) {
            src->st.persisted = seq;
            src->has_persisted = true;
        } else {
            src->st.state_errors++;
        }
        src->last_persist_mono = gh_mono_ns();
        pthread_mutex_unlock(&src->mu);
    }
    pthread_mutex_unlock(&src->persist_mu);
    return rc;
}

void gh_kmsg_source_commit(struct gh_kmsg_source *src, uint64_t seq)
{
    pthread_mutex_lock(&src->mu);
    if (!src->has_committed || seq > src->st.committed) {
        src->st.committed = seq;
        src->has_committed = true;
    }
    pthread_mutex_unlock(&src->mu);
}

void gh_kmsg_source_commit_read(struct gh_kmsg_source *src)
{
    pthread_mutex_lock(&src->mu);
    if (src->safe.valid) {
        src->fcommitted = src->safe;
        src->st.committed = src->safe.off;
    }
    pthread_mutex_unlock(&src->mu);
}

static void maybe_persist(struct gh_kmsg_source *src)
{
    pthread_mutex_lock(&src->mu);
    bool changed = src->mode == GH_KMSG_SRC_FILE
                       ? src->fcommitted.valid && !fpos_eq(&src->fcommitted, &src->fpersisted)
                       : src->has_committed &&
                             (!src->has_persisted || src->st.committed != src->st.persisted);
    bool due = changed &&
               (src->persist_interval_ns < 0 ||
                gh_mono_ns() - src->last_persist_mono >= src->persist_interval_ns);
    pthread_mutex_unlock(&src->mu);
    if (due)
        gh_kmsg_source_persist(src, NULL);
}

/* ---- parsing ------------------------------------------------------------------ */

static int on_signal(void *ctx, const struct gh_signal *s)
{
    struct gh_kmsg_source *src = ctx;
    if (src->have_skip) {
        const struct gh_kmsg_meta *m = gh_kmsg_parser_meta(src->parser);
        if (m && m->has_seq && m->seq <= src->skip_seq) {
            count(src, &src->st.skipped, 1);
            return 0;
        }
    }
    count(src, &src->st.signals, 1);
    src->emit(src->emit_ctx, s);
    return 0;
}

static void feed(struct gh_kmsg_source *src, const char *s, size_t n)
{
    pthread_mutex_lock(&src->pmu);
    gh_kmsg_parser_feed(src->parser, s, n, NULL); /* our emit never fails */
    src->dirty = true;
    pthread_mutex_unlock(&src->pmu);
}

static void flush(struct gh_kmsg_source *src)
{
    pthread_mutex_lock(&src->pmu);
    if (src->dirty)
        gh_kmsg_parser_flush(src->parser, NULL);
    src->dirty = false;
    pthread_mutex_unlock(&src->pmu);
}

/* One complete line (with its '\n'). In device mode a line starting with a
 * space is a record's dictionary ("SUBSYSTEM=pci"), not a record. */
static void record_line(struct gh_kmsg_source *src, const char *s, size_t n)
{
    if (src->mode == GH_KMSG_SRC_DEVICE && n && (s[0] == ' ' || s[0] == '\n'))
        return;
    count(src, &src->st.records, 1);
    feed(src, s, n);
}

/* Splits bytes into complete lines for the parser and keeps a partial last
 * line here (not in the parser, whose flush would complete it): a real
 * /dev/kmsg read is exactly one record, but a stand-in file or FIFO, and a
 * followed log file, may end mid-line. A line longer than PART_MAX is
 * passed on cut (the parser reads only its start anyway). */
static void take_bytes(struct gh_kmsg_source *src, const char *buf, size_t n)
{
    const char *p = buf, *end = buf + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t seg = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (!src->part_discard) {
            size_t room = PART_MAX - src->part_len;
            size_t k = seg < room ? seg : room;
            if (nl && !src->part_len && k == seg) {
                record_line(src, p, seg + 1); /* whole line in the buffer */
            } else {
                memcpy(src->part + src->part_len, p, k);
                src->part_len += k;
                if (nl || k < seg) {
                    src->part[src->part_len++] = '\n';
                    record_line(src, src->part, src->part_len);
                    src->part_len = 0;
                    src->part_discard = !nl;
                }
            }
        } else if (nl) {
            src->part_discard = false;
        }
        if (!nl)
            return;
        p = nl + 1;
    }
}

/* A partial last line is complete after all (rotation, truncation). */
static void end_partial(struct gh_kmsg_source *src)
{
    if (src->part_len) {
        src->part[src->part_len++] = '\n';
        record_line(src, src->part, src->part_len);
    }
    src->part_len = 0;
    src->part_discard = false;
}

/* ---- opening -------------------------------------------------------------- */

/* File mode: the position is now line_off (just after a complete line):
 * fingerprint the bytes before it. */
static void set_line_off(struct gh_kmsg_source *src, uint64_t off)
{
    src->line_off = off;
    src->line_hlen = off < HASH_MAX ? (uint32_t)off : HASH_MAX;
    if (!hash_at(src->fd, off, src->line_hlen, &src->line_hash)) {
        src->line_hlen = 0;
        src->line_hash = 0;
    }
}

/* File mode: the bytes before line_off are no longer what was read there
 * (the file was truncated and rewritten, or overwritten, in place). */
static bool overwritten(struct gh_kmsg_source *src)
{
    uint64_t h;
    if (!src->line_hlen)
        return false;
    return !hash_at(src->fd, src->line_off, src->line_hlen, &h) || h != src->line_hash;
}

static int open_file(struct gh_kmsg_source *src, const char *path, bool from_start,
                     struct gh_err *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return gh_err_set(err, GH_ENOTFOUND, "kmsg: %s: %s", path, strerror(e));
        return gh_err_set(err, GH_EIO, "kmsg: open %s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return gh_err_set(err, GH_EIO, "kmsg: fstat %s: %s", path, strerror(e));
    }
    src->fd = fd;
    src->dev = st.st_dev;
    src->ino = st.st_ino;
    src->off = 0;
    if (src->mode == GH_KMSG_SRC_FILE && !from_start && S_ISREG(st.st_mode)) {
        off_t o = lseek(fd, 0, SEEK_END);
        src->off = o > 0 ? o : 0;
    }
    if (src->mode == GH_KMSG_SRC_FILE)
        set_line_off(src, (uint64_t)src->off);
    return GH_OK;
}

static int open_path(struct gh_kmsg_source *src, bool from_start, struct gh_err *err)
{
    return open_file(src, src->path, from_start, err);
}

/* File mode, at start: the open file is the one of the saved position; go
 * there when the bytes before it are still the same, else read the file
 * from its start (it was truncated or rewritten while the agent was down). */
static bool seek_saved(struct gh_kmsg_source *src, const struct fpos *saved)
{
    struct stat st;
    uint64_t h;
    if (fstat(src->fd, &st) == 0 && (uint64_t)st.st_size >= saved->off &&
        hash_at(src->fd, saved->off, saved->hlen, &h) && h == saved->hash &&
        lseek(src->fd, (off_t)saved->off, SEEK_SET) == (off_t)saved->off) {
        src->off = (off_t)saved->off;
        src->line_off = saved->off;
        src->line_hlen = saved->hlen;
        src->line_hash = saved->hash;
        return true;
    }
    return false;
}

static void resume_at(struct gh_kmsg_source *src, const struct fpos *saved)
{
    if (seek_saved(src, saved))
        return;
    lseek(src->fd, 0, SEEK_SET);
    src->off = 0;
    set_line_off(src, 0);
    count(src, &src->st.truncations, 1);
}

/* The directory of src->path into dir (cap bytes): "." for a bare name. */
static void path_dir(const struct gh_kmsg_source *src, char *dir, size_t cap)
{
    const char *slash = strrchr(src->path, '/');
    if (slash == src->path)
        snprintf(dir, cap, "/");
    else if (slash)
        snprintf(dir, cap, "%.*s", (int)(slash - src->path), src->path);
    else
        snprintf(dir, cap, ".");
}

/* Which file next to the path a search wants: fn says of one regular file
 * (its name, its stat, the directory's fd) whether it is the one. */
typedef bool (*file_match_fn)(const void *want, int dirfd, const char *name,
                              const struct stat *st);

/* The first regular file in the directory of src->path that match accepts,
 * its path into out (cap bytes); false when none. */
static bool find_next_to(const struct gh_kmsg_source *src, file_match_fn match, const void *want,
                         char *out, size_t cap)
{
    char dir[PATH_MAX];
    path_dir(src, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode) && match(want, dirfd(d), e->d_name, &st)) {
            int n = snprintf(out, cap, "%s/%s", dir, e->d_name);
            found = n > 0 && (size_t)n < cap;
        }
    }
    closedir(d);
    return found;
}

static bool is_inode(const void *want, int dirfd, const char *name, const struct stat *st)
{
    (void)dirfd, (void)name;
    const struct fpos *saved = want;
    return (uint64_t)st->st_dev == saved->dev && (uint64_t)st->st_ino == saved->ino;
}

/* Finds, in the directory of src->path, the file that was saved->ino (a log
 * rotated while the agent was down: kern.log -> kern.log.1) into out. */
static bool find_rotated(const struct gh_kmsg_source *src, const struct fpos *saved, char *out,
                         size_t cap)
{
    return find_next_to(src, is_inode, saved, out, cap);
}

struct copy_want {
    const struct fpos *at;
    const char *base; /* the followed file's name */
    uint64_t not_dev, not_ino;
};

static bool is_copy(const void *want, int dirfd, const char *name, const struct stat *st)
{
    const struct copy_want *w = want;
    size_t blen = strlen(w->base);
    if (strncmp(name, w->base, blen) != 0 || (name[blen] != '.' && name[blen] != '-') ||
        (uint64_t)st->st_size <= w->at->off ||
        ((uint64_t)st->st_dev == w->not_dev && (uint64_t)st->st_ino == w->not_ino))
        return false;
    int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    uint64_t h;
    bool same = hash_at(fd, w->at->off, w->at->hlen, &h) && h == w->at->hash;
    close(fd);
    return same;
}

/* Finds the copy a copytruncate made of the followed file (logrotate's
 * copytruncate: kern.log copied to kern.log.1 or kern.log-DATE, then
 * kern.log truncated in place) into out: a regular file next to the path,
 * named after it, not the inode (not_dev, not_ino) now at the path, longer
 * than at->off and with the bytes before at->off we read there. The lines
 * written after our position and before the copy are only in it. */
static bool find_copy(const struct gh_kmsg_source *src, const struct fpos *at, uint64_t not_dev,
                      uint64_t not_ino, char *out, size_t cap)
{
    if (!at->hlen)
        return false; /* nothing read yet: the file at the path has it all */
    const char *slash = strrchr(src->path, '/');
    struct copy_want w = {at, slash ? slash + 1 : src->path, not_dev, not_ino};
    return find_next_to(src, is_copy, &w, out, cap);
}

/* The file open now was truncated (or rewritten) under position at: when a
 * copytruncate left a copy of it next to the path, switch to the copy at
 * that position (the file at the path is read from its start once the
 * copy's end is reached: check_rotation). False when there is none. */
static bool switch_to_copy(struct gh_kmsg_source *src, const struct fpos *at)
{
    char copy[PATH_MAX];
    if (!find_copy(src, at, (uint64_t)src->dev, (uint64_t)src->ino, copy, sizeof copy))
        return false;
    int keep = src->fd;
    dev_t kdev = src->dev;
    ino_t kino = src->ino;
    src->fd = -1;
    if (open_file(src, copy, true, NULL) != GH_OK || !seek_saved(src, at)) {
        if (src->fd >= 0)
            close(src->fd);
        src->fd = keep, src->dev = kdev, src->ino = kino;
        return false;
    }
    close(keep);
    count(src, &src->st.truncations, 1);
    count(src, &src->st.copies_read, 1);
    return true;
}

/* File mode with a saved position: the file it names, at the path or
 * rotated next to it, from that position; then (check_rotation) the file
 * now at the path from its start. */
static int open_saved(struct gh_kmsg_source *src, const struct fpos *saved, struct gh_err *err)
{
    struct stat st;
    char rotated[PATH_MAX];
    if (stat(src->path, &st) == 0 && (uint64_t)st.st_dev == saved->dev &&
        (uint64_t)st.st_ino == saved->ino) {
        int rc = open_path(src, true, err);
        if (rc == GH_OK && !seek_saved(src, saved) && !switch_to_copy(src, saved))
            resume_at(src, saved);
        return rc;
    }
    if (find_rotated(src, saved, rotated, sizeof rotated) &&
        open_file(src, rotated, true, NULL) == GH_OK) {
        resume_at(src, saved);
        return GH_OK; /* the new file at the path comes after it */
    }
    return open_path(src, true, err); /* a new file: all of it is new */
}

static void read_boot_id(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char buf[128];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r'))
        n--;
    for (size_t i = 0; i < n; i++)
        if (buf[i] <= ' ' || buf[i] == '/' || (unsigned char)buf[i] >= 0x7f)
            return; /* not an id we can put in a state file or a signal id */
    if (n && n < cap) {
        memcpy(out, buf, n);
        out[n] = '\0';
    }
}

int gh_kmsg_source_new(const struct gh_kmsg_source_opts *opts, struct gh_kmsg_source **out,
                       struct gh_err *err)
{
    struct gh_kmsg_source *src = NULL;
    int rc;

    *out = NULL;
    if (!opts->node || !opts->node[0] || !opts->emit)
        return gh_err_set(err, GH_EINVAL, "kmsg: node and emit are required");
    if (opts->mode == GH_KMSG_SRC_FILE && !opts->path)
        return gh_err_set(err, GH_EINVAL, "kmsg: file mode needs a path");
    if (opts->mode != GH_KMSG_SRC_DEVICE && opts->mode != GH_KMSG_SRC_FILE)
        return gh_err_set(err, GH_EINVAL, "kmsg: unknown mode %d", (int)opts->mode);
    src = calloc(1, sizeof *src);
    if (!src)
        return gh_err_set(err, GH_ENOMEM, "kmsg: out of memory");
    src->fd = -1;
    pthread_mutex_init(&src->pmu, NULL);
    pthread_mutex_init(&src->mu, NULL);
    pthread_mutex_init(&src->persist_mu, NULL);
    src->mode = opts->mode;
    src->persist_interval_ns = opts->persist_interval_ns ? opts->persist_interval_ns
                                                         : GH_NS_PER_S;
    src->file_from_start = opts->file_from_start;
    src->emit = opts->emit;
    src->emit_ctx = opts->emit_ctx;
    src->path = strdup(opts->path ? opts->path : GH_KMSG_SRC_DEFAULT_DEVICE);
    src->rbuf = malloc(RBUF_SIZE);
    src->part = malloc(PART_MAX + 1);
    if (!src->path || !src->rbuf || !src->part) {
        rc = gh_err_set(err, GH_ENOMEM, "kmsg: out of memory");
        goto out;
    }

    const struct gh_clock *clock = opts->clock ? opts->clock : gh_clock_real();
    struct gh_kmsg_opts po;
    gh_kmsg_opts_init(&po);
    po.node = opts->node;
    po.clock = clock;
    po.emit = on_signal;
    po.emit_ctx = src;
    if (opts->mode == GH_KMSG_SRC_DEVICE) {
        if (opts->boot_id)
            snprintf(src->boot_id, sizeof src->boot_id, "%s", opts->boot_id);
        else
            read_boot_id(opts->boot_id_path ? opts->boot_id_path : GH_KMSG_SRC_DEFAULT_BOOT_ID,
                         src->boot_id, sizeof src->boot_id);
        po.boot_id = src->boot_id[0] ? src->boot_id : NULL;
        if (opts->boot_time_ns) {
            po.boot_time_ns = opts->boot_time_ns;
        } else {
            struct timespec bt;
            clock_gettime(CLOCK_BOOTTIME, &bt);
            po.boot_time_ns = gh_clock_now(clock) - ((int64_t)bt.tv_sec * GH_NS_PER_S + bt.tv_nsec);
        }
        if (opts->state_path) {
            size_t n = strlen(opts->state_path) + 5;
            src->state_path = strdup(opts->state_path);
            src->state_tmp = malloc(n);
            if (!src->state_path || !src->state_tmp) {
                rc = gh_err_set(err, GH_ENOMEM, "kmsg: out of memory");
                goto out;
            }
            snprintf(src->state_tmp, n, "%s.tmp", opts->state_path);
            char old_boot[BOOT_ID_MAX];
            uint64_t seq;
            int s = read_state(src->state_path, old_boot, sizeof old_boot, &seq);
            if (s == GH_OK && src->boot_id[0] && strcmp(old_boot, src->boot_id) == 0) {
                src->have_skip = true;
                src->skip_seq = seq;
                /* What was persisted stays committed: nothing to rewrite. */
                src->has_committed = src->has_persisted = true;
                src->st.committed = src->st.persisted = seq;
            } else if (s != GH_OK && s != GH_ENOTFOUND) {
                src->st.state_errors++;
            }
        }
        if (!src->boot_id[0] && src->state_path)
            src->st.state_errors++; /* no boot id: cannot persist safely */
    } else {
        po.boot_time_ns = opts->boot_time_ns ? opts->boot_time_ns : GH_KMSG_BOOT_UNKNOWN;
    }
    struct fpos saved = {0};
    if (src->mode == GH_KMSG_SRC_FILE && opts->state_path) {
        size_t n = strlen(opts->state_path) + 5;
        src->state_path = strdup(opts->state_path);
        src->state_tmp = malloc(n);
        if (!src->state_path || !src->state_tmp) {
            rc = gh_err_set(err, GH_ENOMEM, "kmsg: out of memory");
            goto out;
        }
        snprintf(src->state_tmp, n, "%s.tmp", opts->state_path);
        int s = read_fstate(src->state_path, src->path, &saved);
        if (s == GH_OK) {
            src->fcommitted = src->fpersisted = saved;
            src->st.committed = src->st.persisted = saved.off;
        } else if (s != GH_ENOTFOUND) {
            src->st.state_errors++; /* another format, path or corrupt: as if none */
        }
    }
    if ((rc = gh_kmsg_parser_new(&src->parser, &po, err)))
        goto out;

    if (saved.valid)
        rc = open_saved(src, &saved, err);
    else
        rc = open_path(src, src->mode == GH_KMSG_SRC_DEVICE || src->file_from_start, err);
    if (rc == GH_ENOTFOUND && src->mode == GH_KMSG_SRC_FILE)
        rc = GH_OK; /* waited for: each poll tries again */
    if (rc)
        goto out;
    src->last_persist_mono = gh_mono_ns();
    *out = src;
    return GH_OK;
out:
    gh_kmsg_source_free(src);
    return rc;
}

/* ---- reading ------------------------------------------------------------------ */

static int poll_device(struct gh_kmsg_source *src, bool *caught_up, struct gh_err *err)
{
    size_t total = 0;
    while (total < POLL_BUDGET) {
        ssize_t n = read(src->fd, src->rbuf, RBUF_SIZE);
        if (n > 0) {
            count(src, &src->st.bytes, (uint64_t)n);
            take_bytes(src, src->rbuf, (size_t)n);
            total += (size_t)n;
            continue;
        }
        if (n == 0) { /* stand-in file at its end, or a FIFO without writer */
            *caught_up = true;
            return GH_OK;
        }
        if (errno == EINTR)
            continue;
        if (errno == EPIPE) { /* records overwritten before we read them */
            count(src, &src->st.overruns, 1);
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *caught_up = true;
            return GH_OK;
        }
        int e = errno;
        count(src, &src->st.read_errors, 1);
        return gh_err_set(err, GH_EIO, "kmsg: read %s: %s", src->path, strerror(e));
    }
    return GH_OK;
}

/* Shorter, or the bytes before our position are not what we read there
 * (truncated and rewritten longer between two polls): from the start.
 * Returns true when the position changed. */
static bool check_truncation(struct gh_kmsg_source *src)
{
    struct stat st;
    if (src->fd < 0 || fstat(src->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    if (st.st_size >= src->off && !overwritten(src))
        return false;
    struct fpos at = {true,          (uint64_t)src->dev, (uint64_t)src->ino,
                      src->line_off, src->line_hlen,     src->line_hash};
    /* The copy has the partial line again, from line_off; inside a line
     * too long to keep whole, its start was fed already: no copy. */
    size_t part = src->part_len;
    src->part_len = 0;
    if (!src->part_discard && switch_to_copy(src, &at)) {
        flush(src);
        return true;
    }
    src->part_len = part;
    end_partial(src);
    flush(src);
    if (lseek(src->fd, 0, SEEK_SET) == 0) {
        src->off = 0;
        set_line_off(src, 0);
    }
    count(src, &src->st.truncations, 1);
    return true;
}

/* After EOF: a new inode at the path (rotation) or a shorter file
 * (truncation). Returns true when the position changed. */
static bool check_rotation(struct gh_kmsg_source *src, struct gh_err *err)
{
    struct stat st;
    if (stat(src->path, &st) != 0)
        return false; /* gone (mid-rotation): keep the old fd */
    if (src->fd < 0 || st.st_dev != src->dev || st.st_ino != src->ino) {
        bool had = src->fd >= 0;
        if (had) {
            end_partial(src); /* the old file's last line, without its newline */
            flush(src);
            close(src->fd);
            src->fd = -1;
        }
        /* A file that appears after start is read from its start (it is
         * new), as is one that replaced a rotated file. */
        if (open_path(src, true, err) != GH_OK)
            return false;
        if (had)
            count(src, &src->st.rotations, 1);
        return true;
    }
    return check_truncation(src);
}

static int poll_file(struct gh_kmsg_source *src, bool *caught_up, struct gh_err *err)
{
    size_t total = 0;
    if (src->fd < 0 && !check_rotation(src, NULL)) {
        *caught_up = true;
        return GH_OK;
    }
    check_truncation(src); /* before reading on from a position that is no more */
    while (total < POLL_BUDGET) {
        ssize_t n = read(src->fd, src->rbuf, RBUF_SIZE);
        if (n > 0) {
            uint64_t base = (uint64_t)src->off;
            src->off += n;
            count(src, &src->st.bytes, (uint64_t)n);
            take_bytes(src, src->rbuf, (size_t)n);
            const char *nl = memrchr(src->rbuf, '\n', (size_t)n);
            if (nl)
                set_line_off(src, base + (uint64_t)(nl - src->rbuf) + 1);
            total += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN) {
            int e = errno;
            count(src, &src->st.read_errors, 1);
            close(src->fd); /* reopened by the next poll */
            src->fd = -1;
            return gh_err_set(err, GH_EIO, "kmsg: read %s: %s", src->path, strerror(e));
        }
        /* End of the file: rotated or truncated meanwhile? */
        if (check_rotation(src, NULL))
            continue;
        *caught_up = true;
        return GH_OK;
    }
    return GH_OK;
}

int gh_kmsg_source_poll(struct gh_kmsg_source *src, bool *caught_up, struct gh_err *err)
{
    bool done = false;
    int rc;
    if (src->mode == GH_KMSG_SRC_DEVICE)
        rc = src->fd >= 0 ? poll_device(src, &done, err) : GH_EIO;
    else
        rc = poll_file(src, &done, err);
    if (done)
        flush(src);
    if (done && src->mode == GH_KMSG_SRC_FILE && src->fd >= 0) {
        /* Every line before line_off has been fed and the parser flushed:
         * their signals are out. */
        pthread_mutex_lock(&src->mu);
        src->safe = (struct fpos){true, (uint64_t)src->dev, (uint64_t)src->ino, src->line_off,
                                  src->line_hlen, src->line_hash};
        pthread_mutex_unlock(&src->mu);
    }
    maybe_persist(src);
    if (caught_up)
        *caught_up = done;
    return rc;
}

/* ---- readers ------------------------------------------------------------------- */

void gh_kmsg_source_stats(struct gh_kmsg_source *src, struct gh_kmsg_source_stats *out)
{
    pthread_mutex_lock(&src->mu);
    *out = src->st;
    pthread_mutex_unlock(&src->mu);
}

void gh_kmsg_source_parser_stats(struct gh_kmsg_source *src, struct gh_kmsg_stats *out)
{
    pthread_mutex_lock(&src->pmu);
    gh_kmsg_parser_stats(src->parser, out);
    pthread_mutex_unlock(&src->pmu);
}

size_t gh_kmsg_source_rejects(struct gh_kmsg_source *src, struct gh_kmsg_reject *out,
                              size_t cap)
{
    pthread_mutex_lock(&src->pmu);
    size_t n = gh_kmsg_parser_rejects(src->parser, out, cap);
    pthread_mutex_unlock(&src->pmu);
    return n;
}

const char *gh_kmsg_source_boot_id(const struct gh_kmsg_source *src)
{
    return src->boot_id;
}

void gh_kmsg_source_free(struct gh_kmsg_source *src)
{
    if (!src)
        return;
    if (src->parser)
        gh_kmsg_source_persist(src, NULL);
    if (src->fd >= 0)
        close(src->fd);
    gh_kmsg_parser_free(src->parser);
    pthread_mutex_destroy(&src->pmu);
    pthread_mutex_destroy(&src->mu);
    pthread_mutex_destroy(&src->persist_mu);
    free(src->path);
    free(src->state_path);
    free(src->state_tmp);
    free(src->rbuf);
    free(src->part);
    free(src);
}
