/* spool.c - the agent's disk spool: CRC'd records in append-only segment
 * files, a persisted read cursor, torn-tail recovery and a byte bound. */
#include "agent/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "signal/signal_json.h"

#define HDR           16u
#define WBUF_CAP      (128u * 1024)
#define RBUF_CAP      (256u * 1024)
#define CURSOR_FILE   "cursor"
#define CURSOR_MAGIC  0x43534847u /* "GHSC" */
#define CURSOR_SIZE   40
#define SEG_NAME_LEN  24          /* 20 digits + ".seg" */
#define MIN_MAX_BYTES (64u * 1024)
#define TELE_FLAG     0x80000000u /* in a record's length: a telemetry record */

_Static_assert(WBUF_CAP >= HDR + GH_SIGNAL_LINE_MAX, "a record must fit the write buffer");
_Static_assert(RBUF_CAP >= HDR + GH_SIGNAL_LINE_MAX, "a record must fit the read buffer");

struct seg {
    uint64_t first;  /* seq of its first record (and its name) */
    uint64_t n;      /* records */
    uint64_t bytes;  /* file size (the active one: plus what is buffered) */
    uint64_t tele;   /* bytes of its telemetry records (headers included) */
};

/* A buffered view of one segment file for reading records. */
struct reader {
    int fd;
    uint64_t seg;    /* first seq of the segment open in fd */
    uint64_t base;   /* file offset of buf[0] */
    size_t len;
    char *buf;
};

struct gh_spool {
    char *dir, *node, *boot_id;
    int dirfd, wfd, cfd;
    uint64_t max_bytes, seg_bytes;
    struct seg *segs;          /* oldest first; the last is the active one */
    size_t nseg, segcap;
    uint64_t wconfirmed;       /* active segment bytes known to be in the file */
    char *wbuf;
    size_t wlen, wn;           /* buffered bytes and records */
    bool write_failing;        /* the last flush failed (e.g. ENOSPC) */
    uint64_t tele_max, tele_bytes; /* telemetry's share and its bytes in segments */
    struct reader rd;
    uint64_t cur_seq, cur_seg, cur_off; /* the cursor: next unacked record */
    uint64_t next_seq, total_bytes;
    bool dir_dirty, cursor_dirty, data_dirty;
    uint32_t crc_table[256];
    struct gh_spool_stats st;
};

/* ---- CRC-32C ---- */

static void crc_init(uint32_t *t)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t[i] = c;
    }
}

static uint32_t crc_update(const uint32_t *t, uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    crc = ~crc;
    while (n--)
        crc = t[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static uint32_t record_crc(const struct gh_spool *sp, uint64_t seq, const char *payload,
                           size_t len)
{
    uint32_t c = crc_update(sp->crc_table, 0, &seq, sizeof seq);
    return crc_update(sp->crc_table, c, payload, len);
}

/* ---- segments ---- */

static void seg_name(uint64_t first, char *buf, size_t cap)
{
    snprintf(buf, cap, "%020llu.seg", (unsigned long long)first);
}

static long seg_index(const struct gh_spool *sp, uint64_t first)
{
    for (size_t i = 0; i < sp->nseg; i++)
        if (sp->segs[i].first == first)
            return (long)i;
    return -1;
}

static int seg_push(struct gh_spool *sp, uint64_t first, struct gh_err *err)
{
    if (sp->nseg == sp->segcap) {
        size_t ncap = sp->segcap ? sp->segcap * 2 : 16;
        struct seg *ns = realloc(sp->segs, ncap * sizeof *ns);
        if (!ns)
            return gh_err_set(err, GH_ENOMEM, "spool: out of memory");
        sp->segs = ns;
        sp->segcap = ncap;
    }
    sp->segs[sp->nseg++] = (struct seg){first, 0, 0, 0};
    return GH_OK;
}

static void reader_reset(struct gh_spool *sp)
{
    if (sp->rd.fd >= 0)
        close(sp->rd.fd);
    sp->rd.fd = -1;
    sp->rd.len = 0;
    sp->rd.base = 0;
}

/* Deletes segment 0 (never the active one). */
static void seg_drop_oldest(struct gh_spool *sp)
{
    char name[SEG_NAME_LEN + 8];
    struct seg s = sp->segs[0];
    seg_name(s.first, name, sizeof name);
    unlinkat(sp->dirfd, name, 0);
    if (sp->rd.fd >= 0 && sp->rd.seg == s.first)
        reader_reset(sp);
    sp->total_bytes -= s.bytes;
    sp->tele_bytes -= s.tele;
    memmove(sp->segs, sp->segs + 1, (sp->nseg - 1) * sizeof *sp->segs);
    sp->nseg--;
    sp->dir_dirty = true;
}

/* ---- reading records ---- */

enum rec { REC_OK, REC_END, REC_TORN, REC_CORRUPT, REC_IOERR };

/* Reads the record at offset off of segment seg whose size is size. */
static enum rec read_record(struct gh_spool *sp, uint64_t seg, uint64_t off, uint64_t size,
                            uint64_t *seq, const char **payload, uint32_t *plen, bool *tele)
{
    struct reader *r = &sp->rd;
    if (off >= size)
        return REC_END;
    if (size - off < HDR)
        return REC_TORN;
    if (r->fd < 0 || r->seg != seg) {
        char name[SEG_NAME_LEN + 8];
        reader_reset(sp);
        seg_name(seg, name, sizeof name);
        r->fd = openat(sp->dirfd, name, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0)
            return REC_IOERR;
        r->seg = seg;
    }
    for (int pass = 0; pass < 2; pass++) {
        bool have_hdr = off >= r->base && off + HDR <= r->base + r->len;
        if (have_hdr) {
            const char *h = r->buf + (off - r->base);
            uint32_t len, crc;
            memcpy(&len, h, 4);
            memcpy(&crc, h + 4, 4);
            memcpy(seq, h + 8, 8);
            if (tele)
                *tele = (len & TELE_FLAG) != 0;
            len &= ~TELE_FLAG;
            if (len == 0 || len > GH_SIGNAL_LINE_MAX)
                return REC_CORRUPT;
            if (size - off - HDR < len)
                return REC_TORN;
            if (off + HDR + len <= r->base + r->len) {
                *payload = h + HDR;
                *plen = len;
                return record_crc(sp, *seq, *payload, len) == crc ? REC_OK : REC_CORRUPT;
            }
        }
        if (pass == 1)
            break;
        /* Refill from off. */
        size_t want = RBUF_CAP;
        if (size - off < want)
            want = (size_t)(size - off);
        ssize_t got;
        do
            got = pread(r->fd, r->buf, want, (off_t)off);
        while (got < 0 && errno == EINTR);
        if (got < 0)
            return REC_IOERR;
        r->base = off;
        r->len = (size_t)got;
        if ((size_t)got < want)
            return REC_TORN; /* the file is shorter than we thought */
    }
    return REC_TORN;
}

/* ---- cursor ---- */

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static int cursor_write(struct gh_spool *sp, struct gh_err *err)
{
    unsigned char b[CURSOR_SIZE] = {0};
    uint32_t magic = CURSOR_MAGIC, version = 1;
    memcpy(b, &magic, 4);
    memcpy(b + 4, &version, 4);
    put64(b + 8, sp->cur_seq);
    put64(b + 16, sp->cur_seg);
    put64(b + 24, sp->cur_off);
    uint32_t crc = crc_update(sp->crc_table, 0, b, 32);
    memcpy(b + 32, &crc, 4);
    ssize_t w;
    do
        w = pwrite(sp->cfd, b, sizeof b, 0);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof b)
        return gh_err_set(err, GH_EIO, "spool %s: writing the cursor: %s", sp->dir,
                          w < 0 ? strerror(errno) : "short write");
    sp->cursor_dirty = true;
    return GH_OK;
}

/* A cursor at the end of a segment that is not the active one moves to the
 * start of the next; segments wholly behind the cursor are deleted. */
static void cursor_normalise(struct gh_spool *sp)
{
    for (;;) {
        long k = seg_index(sp, sp->cur_seg);
        if (k < 0) {
            /* Its segment is gone (dropped): the oldest remaining. */
            sp->cur_seg = sp->segs[0].first;
            sp->cur_off = 0;
            if (sp->cur_seq < sp->cur_seg)
                sp->cur_seq = sp->cur_seg;
            continue;
        }
        if ((size_t)k + 1 < sp->nseg && sp->cur_off >= sp->segs[k].bytes) {
            sp->cur_seg = sp->segs[k + 1].first;
            sp->cur_off = 0;
            if (sp->cur_seq < sp->cur_seg)
                sp->cur_seq = sp->cur_seg;
            continue;
        }
        while (k > 0) {
            seg_drop_oldest(sp);
            k--;
        }
        return;
    }
}

/* Finds the record with seq >= want in the segments, from the one that
 * holds it; sets the cursor there. */
static void cursor_seek(struct gh_spool *sp, uint64_t want)
{
    size_t k = 0;
    while (k + 1 < sp->nseg && sp->segs[k + 1].first <= want)
        k++;
    uint64_t off = 0, seq = sp->segs[k].first;
    for (;;) {
        uint64_t s;
        const char *p;
        uint32_t n;
        if (read_record(sp, sp->segs[k].first, off, sp->segs[k].bytes, &s, &p, &n, NULL) !=
            REC_OK)
            break;
        if (s >= want) {
            seq = s;
            break;
        }
        off += HDR + n;
        seq = s + 1;
    }
    sp->cur_seg = sp->segs[k].first;
    sp->cur_off = off;
    sp->cur_seq = seq;
}

/* ---- open ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int list_segments(struct gh_spool *sp, struct gh_err *err)
{
    int fd = dup(sp->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    uint64_t *firsts = NULL;
    size_t n = 0, cap = 0;
    int rc = GH_OK;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return gh_err_set(err, GH_EIO, "spool %s: %s", sp->dir, strerror(errno));
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (strlen(nm) != SEG_NAME_LEN || strcmp(nm + 20, ".seg") != 0)
            continue;
        uint64_t v = 0;
        bool ok = true;
        for (int i = 0; i < 20; i++) {
            if (nm[i] < '0' || nm[i] > '9') {
                ok = false;
                break;
            }
            v = v * 10 + (uint64_t)(nm[i] - '0');
        }
        if (!ok)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            uint64_t *nf = realloc(firsts, ncap * sizeof *nf);
            if (!nf) {
                rc = gh_err_set(err, GH_ENOMEM, "spool: out of memory");
                goto out;
            }
            firsts = nf;
            cap = ncap;
        }
        firsts[n++] = v;
    }
    if (n)
        qsort(firsts, n, sizeof *firsts, cmp_u64);
    for (size_t i = 0; i < n && rc == GH_OK; i++) {
        char name[SEG_NAME_LEN + 8];
        struct stat st;
        seg_name(firsts[i], name, sizeof name);
        if (fstatat(sp->dirfd, name, &st, 0) != 0) {
            rc = gh_err_set(err, GH_EIO, "spool %s/%s: %s", sp->dir, name, strerror(errno));
            break;
        }
        if ((rc = seg_push(sp, firsts[i], err)))
            break;
        sp->segs[sp->nseg - 1].bytes = (uint64_t)st.st_size;
        sp->total_bytes += (uint64_t)st.st_size;
        if (i + 1 < n)
            sp->segs[sp->nseg - 1].n = firsts[i + 1] - firsts[i];
    }
out:
    free(firsts);
    closedir(d);
    return rc;
}

/* Sums the telemetry bytes of an older segment (telemetry's share after a
 * restart). A record that does not read ends the sum: what follows it is
 * counted as hardware, which only makes telemetry's share look emptier. */
static void scan_tele(struct gh_spool *sp, struct seg *s)
{
    uint64_t off = 0;
    for (;;) {
        uint64_t seq;
        const char *p;
        uint32_t len;
        bool tele;
        if (read_record(sp, s->first, off, s->bytes, &seq, &p, &len, &tele) != REC_OK)
            break;
        if (tele)
            s->tele += HDR + len;
        off += HDR + len;
    }
    sp->tele_bytes += s->tele;
}

/* Scans the last segment: counts its records and truncates a torn or
 * corrupt tail. */
static int recover_last(struct gh_spool *sp, struct gh_err *err)
{
    struct seg *s = &sp->segs[sp->nseg - 1];
    uint64_t off = 0, n = 0;
    for (size_t i = 0; i + 1 < sp->nseg; i++)
        scan_tele(sp, &sp->segs[i]);
    for (;;) {
        uint64_t seq;
        const char *p;
        uint32_t len;
        bool tele;
        enum rec r = read_record(sp, s->first, off, s->bytes, &seq, &p, &len, &tele);
        if (r == REC_OK && seq != s->first + n)
            r = REC_CORRUPT;
        if (r == REC_OK) {
            off += HDR + len;
            n++;
            if (tele)
                s->tele += HDR + len;
            continue;
        }
        if (r == REC_IOERR)
            return gh_err_set(err, GH_EIO, "spool %s: reading segment %llu: %s", sp->dir,
                              (unsigned long long)s->first, strerror(errno));
        break; /* END, TORN or CORRUPT: the good records end at off */
    }
    if (off < s->bytes) {
        char name[SEG_NAME_LEN + 8];
        seg_name(s->first, name, sizeof name);
        int fd = openat(sp->dirfd, name, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)off) != 0 || fdatasync(fd) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return gh_err_set(err, GH_EIO, "spool %s: truncating a torn record: %s", sp->dir,
                              strerror(e));
        }
        close(fd);
        reader_reset(sp);
        sp->st.torn_bytes += s->bytes - off;
        sp->total_bytes -= s->bytes - off;
        s->bytes = off;
    }
    s->n = n;
    sp->tele_bytes += s->tele;
    sp->next_seq = s->first + n;
    return GH_OK;
}

static int open_active(struct gh_spool *sp, bool create, struct gh_err *err)
{
    char name[SEG_NAME_LEN + 8];
    struct seg *s = &sp->segs[sp->nseg - 1];
    seg_name(s->first, name, sizeof name);
    int flags = O_WRONLY | O_APPEND | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
    sp->wfd = openat(sp->dirfd, name, flags, 0600);
    if (sp->wfd < 0)
        return gh_err_set(err, GH_EIO, "spool %s/%s: %s", sp->dir, name, strerror(errno));
    sp->wconfirmed = s->bytes;
    if (create)
        sp->dir_dirty = true;
    return GH_OK;
}

static bool read_cursor(struct gh_spool *sp, uint64_t *seq, uint64_t *seg, uint64_t *off)
{
    unsigned char b[CURSOR_SIZE];
    ssize_t r = pread(sp->cfd, b, sizeof b, 0);
    uint32_t magic, version, crc;
    if (r != (ssize_t)sizeof b)
        return false;
    memcpy(&magic, b, 4);
    memcpy(&version, b + 4, 4);
    memcpy(&crc, b + 32, 4);
    if (magic != CURSOR_MAGIC || version != 1 || crc != crc_update(sp->crc_table, 0, b, 32))
        return false;
    *seq = get64(b + 8);
    *seg = get64(b + 16);
    *off = get64(b + 24);
    return true;
}

static char *dupstr(const char *s)
{
    return s ? strdup(s) : NULL;
}

int gh_spool_open(const struct gh_spool_opts *opts, struct gh_spool **out, struct gh_err *err)
{
    int rc = GH_OK;
    *out = NULL;
    if (!opts->dir || !opts->node || !opts->boot_id || !*opts->node || !*opts->boot_id)
        return gh_err_set(err, GH_EINVAL, "spool: dir, node and boot_id are required");
    uint64_t max = opts->max_bytes ? opts->max_bytes : GH_SPOOL_DEFAULT_MAX_BYTES;
    if (max < MIN_MAX_BYTES)
        return gh_err_set(err, GH_EINVAL, "spool: max bytes %llu below %u",
                          (unsigned long long)max, MIN_MAX_BYTES);
    uint64_t segb = opts->segment_bytes ? opts->segment_bytes : max / 8;
    if (segb < 16 * 1024)
        segb = 16 * 1024;
    if (segb > 64ull * 1024 * 1024)
        segb = 64ull * 1024 * 1024;
    if (segb > max / 4)
        segb = max / 4;
    uint64_t tmax = opts->telemetry_max_bytes ? opts->telemetry_max_bytes : max / 4;
    if (tmax > max / 2)
        return gh_err_set(err, GH_EINVAL,
                          "spool: telemetry share %llu bytes above half the spool (%llu)",
                          (unsigned long long)tmax, (unsigned long long)(max / 2));

    struct gh_spool *sp = calloc(1, sizeof *sp);
    if (!sp)
        return gh_err_set(err, GH_ENOMEM, "spool: out of memory");
    sp->dirfd = sp->wfd = sp->cfd = sp->rd.fd = -1;
    sp->max_bytes = max;
    sp->seg_bytes = segb;
    sp->tele_max = tmax;
    crc_init(sp->crc_table);
    sp->dir = dupstr(opts->dir);
    sp->node = dupstr(opts->node);
    sp->boot_id = dupstr(opts->boot_id);
    sp->wbuf = malloc(WBUF_CAP);
    /* the read buffer up front: scan_tele cannot tell a failed allocation
     * from a bad record, and would count telemetry's share short */
    sp->rd.buf = malloc(RBUF_CAP);
    if (!sp->dir || !sp->node || !sp->boot_id || !sp->wbuf || !sp->rd.buf) {
        rc = gh_err_set(err, GH_ENOMEM, "spool: out of memory");
        goto fail;
    }
    if (mkdir(sp->dir, 0700) != 0 && errno != EEXIST) {
        rc = gh_err_set(err, GH_EIO, "spool %s: mkdir: %s", sp->dir, strerror(errno));
        goto fail;
    }
    sp->dirfd = open(sp->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sp->dirfd < 0) {
        rc = gh_err_set(err, GH_EIO, "spool %s: %s", sp->dir, strerror(errno));
        goto fail;
    }
    sp->cfd = openat(sp->dirfd, CURSOR_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (sp->cfd < 0) {
        rc = gh_err_set(err, GH_EIO, "spool %s/%s: %s", sp->dir, CURSOR_FILE, strerror(errno));
        goto fail;
    }
    if ((rc = list_segments(sp, err)))
        goto fail;

    uint64_t cseq = 0, cseg = 0, coff = 0;
    bool have_cursor = read_cursor(sp, &cseq, &cseg, &coff);
    if (sp->nseg == 0) {
        const struct gh_clock *clk = opts->clock ? opts->clock : gh_clock_real();
        uint64_t start = (uint64_t)(gh_clock_now(clk) / GH_NS_PER_US);
        if (have_cursor && cseq > start)
            start = cseq;
        if ((rc = seg_push(sp, start, err)) || (rc = open_active(sp, true, err)))
            goto fail;
        sp->next_seq = start;
        sp->cur_seq = sp->cur_seg = start;
        sp->cur_off = 0;
    } else {
        if ((rc = recover_last(sp, err)) || (rc = open_active(sp, false, err)))
            goto fail;
        long k = have_cursor ? seg_index(sp, cseg) : -1;
        uint64_t s;
        const char *p;
        uint32_t n;
        if (!have_cursor || cseq < sp->segs[0].first) {
            sp->cur_seq = sp->cur_seg = sp->segs[0].first;
            sp->cur_off = 0;
        } else if (cseq >= sp->next_seq) {
            sp->cur_seq = sp->next_seq;
            sp->cur_seg = sp->segs[sp->nseg - 1].first;
            sp->cur_off = sp->segs[sp->nseg - 1].bytes;
        } else if (k >= 0 && coff < sp->segs[k].bytes &&
                   read_record(sp, cseg, coff, sp->segs[k].bytes, &s, &p, &n, NULL) == REC_OK &&
                   s == cseq) {
            sp->cur_seq = cseq;
            sp->cur_seg = cseg;
            sp->cur_off = coff;
        } else {
            cursor_seek(sp, cseq);
        }
        cursor_normalise(sp);
    }
    if ((rc = cursor_write(sp, err)))
        goto fail;
    *out = sp;
    return GH_OK;
fail:
    gh_spool_close(sp);
    return rc;
}

/* ---- writing ---- */

int gh_spool_flush(struct gh_spool *sp, struct gh_err *err)
{
    size_t done = 0;
    while (done < sp->wlen) {
        ssize_t w = write(sp->wfd, sp->wbuf + done, sp->wlen - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            /* Never leave half a record: back to the last good size. The
             * records stay buffered for the next flush. */
            if (ftruncate(sp->wfd, (off_t)sp->wconfirmed) != 0)
                e = errno;
            sp->write_failing = true;
            sp->st.write_errors++;
            return gh_err_set(err, GH_EIO, "spool %s: write: %s (%zu records held in memory)",
                              sp->dir, strerror(e), sp->wn);
        }
        done += (size_t)w;
    }
    sp->wconfirmed += sp->wlen;
    if (sp->wlen)
        sp->data_dirty = true;
    sp->wlen = 0;
    sp->wn = 0;
    sp->write_failing = false;
    return GH_OK;
}

static int rotate(struct gh_spool *sp, struct gh_err *err)
{
    int rc = gh_spool_flush(sp, err);
    if (rc)
        return rc;
    if (fdatasync(sp->wfd) != 0)
        return gh_err_set(err, GH_EIO, "spool %s: fdatasync: %s", sp->dir, strerror(errno));
    int old = sp->wfd;
    if ((rc = seg_push(sp, sp->next_seq, err)))
        return rc;
    if ((rc = open_active(sp, true, err))) {
        sp->nseg--;
        sp->wfd = old;
        return rc;
    }
    close(old);
    sp->data_dirty = false;
    return GH_OK;
}

int gh_spool_append_line(struct gh_spool *sp, const char *line, size_t len, uint64_t *seq,
                         struct gh_err *err)
{
    return gh_spool_append_line_as(sp, GH_SPOOL_HARDWARE, line, len, seq, err);
}

/* Telemetry is refused, never making room: when its share is used up,
 * when the spool is full, and while writes fail (the write buffer is then
 * kept for hardware signals). */
static int tele_refuse(struct gh_spool *sp, uint64_t r, struct gh_err *err)
{
    const char *why = NULL;
    if (sp->write_failing)
        why = "spool writes are failing";
    else if (sp->tele_bytes + r > sp->tele_max)
        why = "telemetry's share of the spool is full";
    else if (sp->total_bytes + r > sp->max_bytes)
        why = "the spool is full";
    if (!why)
        return GH_OK;
    sp->st.telemetry_dropped++;
    return gh_err_set(err, GH_ELIMIT, "spool: telemetry line dropped: %s (share %llu bytes)", why,
                      (unsigned long long)sp->tele_max);
}

int gh_spool_append_line_as(struct gh_spool *sp, enum gh_spool_class cls, const char *line,
                            size_t len, uint64_t *seq, struct gh_err *err)
{
    int rc;
    bool tele = cls == GH_SPOOL_TELEMETRY;
    if (len == 0 || len > GH_SIGNAL_LINE_MAX || memchr(line, '\n', len))
        return gh_err_set(err, GH_EINVAL, "spool: a record is one line of 1..%d bytes",
                          GH_SIGNAL_LINE_MAX);
    uint64_t r = HDR + len;
    if (tele && (rc = tele_refuse(sp, r, err)))
        return rc;
    struct seg *act = &sp->segs[sp->nseg - 1];
    if (act->bytes > 0 && act->bytes + r > sp->seg_bytes && !sp->write_failing) {
        /* A rotation that fails (the disk is full) is put off: the record
         * goes on in the active segment, buffered until a write succeeds. */
        struct gh_err rerr;
        rotate(sp, &rerr);
    }
    if (tele && (rc = tele_refuse(sp, r, err)))
        return rc; /* the rotation's flush failed */
    while (sp->total_bytes + r > sp->max_bytes && sp->nseg > 1) {
        /* Full: the oldest records go, counted. */
        struct seg *old = &sp->segs[0];
        if (sp->cur_seg == old->first) {
            uint64_t end = old->first + old->n;
            if (end > sp->cur_seq)
                sp->st.lost += end - sp->cur_seq;
        }
        seg_drop_oldest(sp);
        if (seg_index(sp, sp->cur_seg) < 0) {
            sp->cur_seg = sp->segs[0].first;
            sp->cur_off = 0;
            if (sp->cur_seq < sp->cur_seg)
                sp->cur_seq = sp->cur_seg;
            if ((rc = cursor_write(sp, err)))
                goto lost;
        }
    }
    if (sp->total_bytes + r > sp->max_bytes) {
        rc = gh_err_set(err, GH_ELIMIT, "spool: a %llu-byte record does not fit in %llu bytes",
                        (unsigned long long)r, (unsigned long long)sp->max_bytes);
        goto lost;
    }
    if (sp->wlen + r > WBUF_CAP && (rc = gh_spool_flush(sp, err))) {
        if (tele)
            return tele_refuse(sp, r, err);
        gh_err_set(err, GH_EIO, "spool %s: writes failing and the %u-byte memory hold is full: "
                   "signal lost", sp->dir, WBUF_CAP);
        goto lost;
    }
    act = &sp->segs[sp->nseg - 1];
    uint64_t s = sp->next_seq;
    uint32_t l32 = (uint32_t)len | (tele ? TELE_FLAG : 0), crc = record_crc(sp, s, line, len);
    char *h = sp->wbuf + sp->wlen;
    memcpy(h, &l32, 4);
    memcpy(h + 4, &crc, 4);
    memcpy(h + 8, &s, 8);
    memcpy(h + HDR, line, len);
    sp->wlen += r;
    sp->wn++;
    act->bytes += r;
    act->n++;
    sp->total_bytes += r;
    if (tele) {
        act->tele += r;
        sp->tele_bytes += r;
    }
    sp->next_seq++;
    sp->st.appended++;
    if (seq)
        *seq = s;
    return GH_OK;
lost:
    sp->st.lost++;
    return rc;
}

int gh_spool_append(struct gh_spool *sp, struct gh_signal *sig, uint64_t *seq,
                    struct gh_err *err)
{
    char *line = NULL;
    bool set_id = !sig->id;
    if (set_id) {
        char id[512];
        int n = snprintf(id, sizeof id, "%s/%s/%llu", sp->node, sp->boot_id,
                         (unsigned long long)sp->next_seq);
        if (n < 0 || (size_t)n >= sizeof id)
            return gh_err_set(err, GH_EINVAL, "spool: node name too long for an id");
        if (gh_signal_set_str(&sig->id, id, (size_t)n))
            return gh_err_set(err, GH_ENOMEM, "spool: out of memory");
    }
    int rc = gh_signal_encode(sig, &line, err);
    if (rc == GH_OK)
        rc = gh_spool_append_line_as(sp, sig->source == GH_SRC_TELEMETRY ? GH_SPOOL_TELEMETRY
                                                                         : GH_SPOOL_HARDWARE,
                                     line, strlen(line), seq, err);
    free(line);
    if (rc && set_id)
        gh_signal_set_str(&sig->id, NULL, 0);
    return rc;
}

int gh_spool_sync(struct gh_spool *sp, struct gh_err *err)
{
    int rc = gh_spool_flush(sp, err);
    if (rc)
        return rc;
    if (sp->data_dirty) {
        if (fdatasync(sp->wfd) != 0)
            return gh_err_set(err, GH_EIO, "spool %s: fdatasync: %s", sp->dir, strerror(errno));
        sp->data_dirty = false;
    }
    if (sp->cursor_dirty) {
        if (fdatasync(sp->cfd) != 0)
            return gh_err_set(err, GH_EIO, "spool %s: fdatasync cursor: %s", sp->dir,
                              strerror(errno));
        sp->cursor_dirty = false;
    }
    if (sp->dir_dirty) {
        if (fsync(sp->dirfd) != 0)
            return gh_err_set(err, GH_EIO, "spool %s: fsync dir: %s", sp->dir, strerror(errno));
        sp->dir_dirty = false;
    }
    sp->st.syncs++;
    return GH_OK;
}

/* ---- reading batches, acking ---- */

void gh_spool_batch_clear(struct gh_spool_batch *b)
{
    free(b->body);
    free(b->seqs);
    memset(b, 0, sizeof *b);
}

int gh_spool_read(struct gh_spool *sp, size_t max_records, size_t max_bytes,
                  struct gh_spool_batch *b, struct gh_err *err)
{
    memset(b, 0, sizeof *b);
    /* A flush that fails (the disk is full) keeps its records in memory;
     * what is already in the files is read and shipped all the same, and
     * its acks free the space the held records need. */
    struct gh_err ferr;
    gh_spool_flush(sp, &ferr);
    if (max_records == 0)
        max_records = 1;
    uint64_t seg = sp->cur_seg, off = sp->cur_off, next = sp->cur_seq;
    size_t cap = 0, seqcap = 0;
    long k = seg_index(sp, seg);
    bool moved = false; /* skipped corrupt data without reading a record */
    while (k >= 0 && b->n < max_records) {
        struct seg *s = &sp->segs[k];
        /* The active segment: only what is in the file. */
        uint64_t size = (size_t)k + 1 == sp->nseg ? sp->wconfirmed : s->bytes;
        if (off >= size) {
            if ((size_t)k + 1 >= sp->nseg)
                break;
            k++;
            seg = sp->segs[k].first;
            off = 0;
            if (next < seg)
                next = seg;
            continue;
        }
        uint64_t seq;
        const char *p;
        uint32_t len;
        enum rec r = read_record(sp, seg, off, size, &seq, &p, &len, NULL);
        if (r == REC_IOERR) {
            gh_spool_batch_clear(b);
            return gh_err_set(err, GH_EIO, "spool %s: reading segment %llu: %s", sp->dir,
                              (unsigned long long)seg, strerror(errno));
        }
        if (r != REC_OK) {
            /* Disk corruption (we truncated torn tails on open): skip the
             * rest of this segment, counting what was in it. */
            sp->st.corrupt++;
            off = size;
            moved = true;
            continue;
        }
        if (b->n > 0 && b->len + len + 1 > max_bytes)
            break;
        if (b->len + len + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 64 * 1024;
            while (ncap < b->len + len + 1)
                ncap *= 2;
            char *nb = realloc(b->body, ncap);
            if (!nb)
                goto oom;
            b->body = nb;
            cap = ncap;
        }
        if (b->n == seqcap) {
            size_t ncap = seqcap ? seqcap * 2 : 256;
            uint64_t *ns = realloc(b->seqs, ncap * sizeof *ns);
            if (!ns)
                goto oom;
            b->seqs = ns;
            seqcap = ncap;
        }
        memcpy(b->body + b->len, p, len);
        b->body[b->len + len] = '\n';
        b->len += len + 1;
        b->seqs[b->n++] = seq;
        off += HDR + len;
        next = seq + 1;
    }
    b->end_seq = next;
    b->end_seg = seg;
    b->end_off = off;
    if (b->n == 0 && moved) {
        sp->cur_seq = next;
        sp->cur_seg = seg;
        sp->cur_off = off;
        cursor_normalise(sp);
        return cursor_write(sp, err);
    }
    return GH_OK;
oom:
    gh_spool_batch_clear(b);
    return gh_err_set(err, GH_ENOMEM, "spool: out of memory reading a batch");
}

int gh_spool_ack(struct gh_spool *sp, const struct gh_spool_batch *b, struct gh_err *err)
{
    if (b->n == 0 || b->end_seq <= sp->cur_seq || seg_index(sp, b->end_seg) < 0)
        return GH_OK;
    /* Records of the batch the cursor had not passed yet. */
    uint64_t newly = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->seqs[i] >= sp->cur_seq)
            newly++;
    sp->cur_seq = b->end_seq;
    sp->cur_seg = b->end_seg;
    sp->cur_off = b->end_off;
    sp->st.acked += newly;
    cursor_normalise(sp);
    return cursor_write(sp, err);
}

void gh_spool_stats(const struct gh_spool *sp, struct gh_spool_stats *out)
{
    *out = sp->st;
    out->next_seq = sp->next_seq;
    out->cursor_seq = sp->cur_seq;
    out->pending = sp->next_seq > sp->cur_seq ? sp->next_seq - sp->cur_seq : 0;
    out->bytes = sp->total_bytes;
    out->segments = sp->nseg;
    out->held = sp->write_failing ? sp->wn : 0;
    out->telemetry_bytes = sp->tele_bytes;
    out->telemetry_max_bytes = sp->tele_max;
    out->write_failing = sp->write_failing;
}

void gh_spool_close(struct gh_spool *sp)
{
    if (!sp)
        return;
    if (sp->wfd >= 0)
        gh_spool_sync(sp, NULL);
    if (sp->wfd >= 0)
        close(sp->wfd);
    if (sp->cfd >= 0)
        close(sp->cfd);
    reader_reset(sp);
    if (sp->dirfd >= 0)
        close(sp->dirfd);
    free(sp->rd.buf);
    free(sp->wbuf);
    free(sp->segs);
    free(sp->dir);
    free(sp->node);
    free(sp->boot_id);
    free(sp);
}

/* ---- read-only peek (gpuheal-agent --check) ---- */

int gh_spool_peek(const char *dir, struct gh_spool_peek *out, struct gh_err *err)
{
    memset(out, 0, sizeof *out);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOENT)
            return GH_OK;
        return gh_err_set(err, GH_EIO, "spool %s: %s", dir, strerror(errno));
    }
    out->exists = true;
    int fd2 = dup(dfd);
    DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
    if (!d) {
        if (fd2 >= 0)
            close(fd2);
        close(dfd);
        return gh_err_set(err, GH_EIO, "spool %s: %s", dir, strerror(errno));
    }
    uint64_t oldest = UINT64_MAX, newest = 0;
    uint64_t newest_size = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (strlen(nm) != SEG_NAME_LEN || strcmp(nm + 20, ".seg") != 0)
            continue;
        uint64_t v = 0;
        bool ok = true;
        for (int i = 0; i < 20 && ok; i++) {
            ok = nm[i] >= '0' && nm[i] <= '9';
            v = v * 10 + (uint64_t)(nm[i] - '0');
        }
        struct stat st;
        if (!ok || fstatat(dfd, nm, &st, 0) != 0)
            continue;
        out->segments++;
        out->bytes += (uint64_t)st.st_size;
        if (v < oldest)
            oldest = v;
        if (v >= newest) {
            newest = v;
            newest_size = (uint64_t)st.st_size;
        }
    }
    closedir(d);
    int rc = GH_OK;
    int cfd = openat(dfd, CURSOR_FILE, O_RDONLY | O_CLOEXEC);
    if (cfd >= 0) {
        unsigned char b[CURSOR_SIZE];
        uint32_t magic, version;
        if (pread(cfd, b, sizeof b, 0) == (ssize_t)sizeof b) {
            memcpy(&magic, b, 4);
            memcpy(&version, b + 4, 4);
            if (magic == CURSOR_MAGIC && version == 1) {
                out->have_cursor = true;
                out->cursor_seq = get64(b + 8);
            }
        }
        close(cfd);
    }
    if (!out->segments)
        goto done;
    if (!out->have_cursor || out->cursor_seq < oldest)
        out->cursor_seq = oldest; /* as the spool reads it: from the oldest record */
    out->next_seq = newest;
    char name[SEG_NAME_LEN + 8];
    seg_name(newest, name, sizeof name);
    int sfd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    if (sfd < 0) {
        rc = gh_err_set(err, GH_EIO, "spool %s/%s: %s", dir, name, strerror(errno));
        goto done;
    }
    uint64_t off = 0;
    if (newest_size > 64ull << 20)
        newest_size = 64ull << 20;
    while (off + HDR <= newest_size) {
        unsigned char h[HDR];
        uint32_t len;
        uint64_t seq;
        if (pread(sfd, h, HDR, (off_t)off) != (ssize_t)HDR)
            break;
        memcpy(&len, h, 4);
        memcpy(&seq, h + 8, 8);
        len &= ~TELE_FLAG;
        if (len == 0 || len > GH_SIGNAL_LINE_MAX || off + HDR + len > newest_size)
            break; /* torn or corrupt: the spool truncates it when it opens */
        out->next_seq = seq + 1;
        off += HDR + len;
    }
    close(sfd);
done:
    out->pending = out->next_seq > out->cursor_seq ? out->next_seq - out->cursor_seq : 0;
    close(dfd);
    return rc;
}
