/* scenario_io.c - replays a scenario file (spec section 2) through the engine
 * on the scenario's own clock: signals sorted by ts (stable), arrival = ts,
 * no reorder window (the file is sorted as a whole). Shared by `diagnose`
 * and `scenario score`. Regular files are read twice (an index of ts and
 * offsets, then the signals in order), so memory does not grow with the
 * file; pipes are held in memory. Bad lines are reported and skipped; a
 * line longer than GH_SIGNAL_LINE_MAX (the first, which may be the header:
 * 64 MiB) is found so while it is read (at most that much of it is held),
 * not after. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd/gpuheal/commands.h"
#include "signal/signal_json.h"

#define MAX_SIGNALS (200L * 1000 * 1000)

struct idx {
    int64_t ts;
    long line;
    union {
        off_t off;             /* regular files: where the line starts */
        struct gh_signal *sig; /* pipes: the signal itself */
    };
};

static int cmp_idx(const void *a, const void *b)
{
    const struct idx *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

static void bad_line(struct gh_replay *r, const struct gh_err *err)
{
    r->bad_lines++;
    if (r->diag && r->bad_lines <= 100)
        fprintf(r->diag, "gpuheal: %s: %s\n", r->path, err->msg);
    else if (r->diag && r->bad_lines == 101)
        fprintf(r->diag, "gpuheal: %s: more bad lines; not reporting them\n", r->path);
}

static struct idx *grow_index(struct idx **v, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4096;
        if (ncap > (size_t)MAX_SIGNALS)
            return NULL;
        struct idx *nv = realloc(*v, ncap * sizeof *nv);
        if (!nv)
            return NULL;
        *v = nv;
        *cap = ncap;
    }
    struct idx *x = &(*v)[(*n)++];
    memset(x, 0, sizeof *x);
    return x;
}

static void take_header(struct gh_replay *r, json_t **header, json_t *h, long line)
{
    if (*header) {
        struct gh_err e;
        gh_err_set(&e, GH_EINVAL, "line %ld: a second scenario header: ignored", line);
        bad_line(r, &e);
        json_decref(h);
    } else {
        *header = h;
    }
}

/* The ts of a line that starts {"ts":"<RFC 3339>", (spaces allowed), or
 * false: the line needs a full decode. */
static bool quick_ts(const char *p, size_t len, int64_t *ts)
{
    const char *end = p + len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    static const char head[] = "{\"ts\"";
    if ((size_t)(end - p) < sizeof head || memcmp(p, head, sizeof head - 1) != 0)
        return false;
    p += sizeof head - 1;
    while (p < end && *p == ' ')
        p++;
    if (p >= end || *p++ != ':')
        return false;
    while (p < end && *p == ' ')
        p++;
    if (p >= end || *p++ != '"')
        return false;
    const char *q = memchr(p, '"', (size_t)(end - p));
    if (!q || q - p > 64)
        return false;
    return gh_time_parse_rfc3339(p, (size_t)(q - p), ts);
}

static bool is_header(const json_t *o)
{
    const json_t *kind = json_object_get(o, "kind");
    return json_is_object(o) && json_object_get(o, "scenario") && (!kind || json_is_null(kind));
}

/* Lines of a file, each held up to keep bytes: the rest of a longer one is
 * read past, not kept. A signal line is held up to GH_SIGNAL_LINE_MAX + 1;
 * the first line, which may be the header, up to HEADER_LINE_MAX + 1: a
 * header lists every node and, with node_labels, each one's labels (512
 * nodes with a dozen labels each are about 150 KB). */
#define SCAN_CHUNK (64u * 1024)
#define HEADER_LINE_MAX (64 * 1024 * 1024)
struct linescan {
    FILE *f;
    char *chunk;
    size_t clen, cpos;
    char *line;        /* the line so far (without its newline) */
    size_t llen;
    size_t keep, cap;  /* bytes of a line kept; line's size (grown up to keep) */
    off_t off;         /* file offset of chunk[cpos] */
    bool eof;
};

/* The next line: *text and *len (borrowed until the next call; len >= keep
 * when it was too long, text then holds its start), *start its offset. 1, 0
 * at the end, -1 on a read error, -2 out of memory. */
static int scan_line(struct linescan *ls, const char **text, size_t *len, off_t *start)
{
    const size_t keep = ls->keep;
    size_t total = 0;
    ls->llen = 0;
    *start = ls->off;
    for (;;) {
        if (ls->cpos == ls->clen) {
            if (ls->eof)
                break;
            ls->clen = fread(ls->chunk, 1, SCAN_CHUNK, ls->f);
            ls->cpos = 0;
            if (ls->clen < SCAN_CHUNK) {
                if (ferror(ls->f))
                    return -1;
                ls->eof = true;
            }
            if (ls->clen == 0)
                break;
        }
        const char *p = ls->chunk + ls->cpos;
        size_t avail = ls->clen - ls->cpos;
        const char *nl = memchr(p, '\n', avail);
        size_t k = nl ? (size_t)(nl - p) : avail;
        if (ls->llen < keep) {
            size_t c = k < keep - ls->llen ? k : keep - ls->llen;
            if (ls->llen + c > ls->cap) {
                size_t ncap = ls->cap * 2 > ls->llen + c ? ls->cap * 2 : ls->llen + c;
                char *nl2 = realloc(ls->line, ncap < keep ? ncap : keep);
                if (!nl2)
                    return -2;
                ls->line = nl2;
                ls->cap = ncap < keep ? ncap : keep;
            }
            memcpy(ls->line + ls->llen, p, c);
            ls->llen += c;
        }
        total += k;
        ls->cpos += k + (nl ? 1 : 0);
        ls->off += (off_t)(k + (nl ? 1 : 0));
        if (nl) {
            *text = ls->line;
            *len = total;
            return 1;
        }
    }
    if (total == 0)
        return 0;
    *text = ls->line;
    *len = total;
    return 1;
}

/* Pass 1 over a regular file: offsets and ts of its signals, its header. */
static int index_file(struct gh_replay *r, FILE *f, struct idx **v, size_t *n, size_t *cap,
                      json_t **header, struct gh_err *err)
{
    struct linescan ls = {.f = f,
                          .chunk = malloc(SCAN_CHUNK),
                          .line = malloc(GH_SIGNAL_LINE_MAX + 1),
                          .keep = HEADER_LINE_MAX + 1,
                          .cap = GH_SIGNAL_LINE_MAX + 1};
    long lineno = 0;
    int rc = GH_OK;
    if (!ls.chunk || !ls.line) {
        free(ls.chunk);
        free(ls.line);
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    for (;;) {
        const char *line;
        size_t len;
        off_t start;
        int got = scan_line(&ls, &line, &len, &start);
        if (got == -2) {
            rc = gh_err_set(err, GH_ENOMEM, "%s: out of memory", r->path);
            break;
        }
        if (got < 0) {
            rc = gh_err_set(err, GH_EIO, "%s: read error: %s", r->path, strerror(errno));
            break;
        }
        if (got == 0)
            break;
        lineno++;
        /* past the first line, a line is held up to a signal's limit */
        size_t max = lineno == 1 ? HEADER_LINE_MAX : GH_SIGNAL_LINE_MAX;
        ls.keep = GH_SIGNAL_LINE_MAX + 1;
        struct gh_err lerr;
        if (len > max) { /* only its start was kept */
            gh_err_set(&lerr, GH_EINVAL, "line %ld: longer than %zu bytes: skipped", lineno, max);
            bad_line(r, &lerr);
            continue;
        }
        size_t l = len;
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r'))
            l--;
        const char *text = line;
        if (lineno == 1 && l >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
            text += 3, l -= 3;
        size_t k = 0;
        while (k < l && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r'))
            k++;
        if (k == l)
            continue; /* blank */
        int64_t ts;
        if (l <= GH_SIGNAL_LINE_MAX && quick_ts(text, l, &ts)) {
            struct idx *x = grow_index(v, n, cap);
            if (!x) {
                rc = gh_err_set(err, GH_ENOMEM, "%s: out of memory or more than %ld signals",
                                r->path, MAX_SIGNALS);
                break;
            }
            x->ts = ts;
            x->line = lineno;
            x->off = start;
            continue;
        }
        json_error_t je;
        json_t *o = json_loadb(text, l, 0, &je);
        if (o && is_header(o)) {
            take_header(r, header, o, lineno);
            continue;
        }
        json_decref(o);
        if (l > GH_SIGNAL_LINE_MAX) { /* a first line that is no header */
            gh_err_set(&lerr, GH_EINVAL, "line %ld: longer than %d bytes: skipped", lineno,
                       GH_SIGNAL_LINE_MAX);
            bad_line(r, &lerr);
            continue;
        }
        struct gh_signal s;
        int drc = gh_signal_decode(text, l, lineno, &s, &lerr);
        if (drc == GH_ENOMEM) { /* not a bad line: the line may be good */
            rc = gh_err_set(err, GH_ENOMEM, "%s: %s", r->path, lerr.msg);
            break;
        }
        if (drc != GH_OK) {
            bad_line(r, &lerr);
            continue;
        }
        struct idx *x = grow_index(v, n, cap);
        if (!x) {
            gh_signal_clear(&s);
            rc = gh_err_set(err, GH_ENOMEM, "%s: out of memory or more than %ld signals", r->path,
                            MAX_SIGNALS);
            break;
        }
        x->ts = s.ts_ns;
        x->line = lineno;
        x->off = start;
        gh_signal_clear(&s);
    }
    free(ls.chunk);
    free(ls.line);
    return rc;
}

int gh_replay_file(struct gh_replay *r, struct gh_err *err)
{
    int rc = GH_OK;
    FILE *f = NULL;
    bool own = false;
    struct gh_signal_reader *rd = NULL;
    struct idx *v = NULL;
    size_t n = 0, cap = 0;
    json_t *header = NULL;
    struct gh_topology *topo = NULL;
    struct gh_engine *e = NULL;
    struct gh_err lerr;

    r->bad_lines = 0;
    r->signals = 0;
    r->scenario[0] = '\0';
    if (strcmp(r->path, "-") == 0) {
        f = stdin;
    } else {
        f = fopen(r->path, "rb");
        if (!f)
            return gh_err_set(err, GH_EIO, "%s: %s", r->path, strerror(errno));
        own = true;
    }
    struct stat stt;
    bool seekable = own && fstat(fileno(f), &stt) == 0 && S_ISREG(stt.st_mode);
    rd = gh_signal_reader_new(f);
    if (!rd) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto out;
    }
    /* Pass 1: the header, and every signal's ts and place. Regular files:
     * a line that starts {"ts":"...", as emitters write them, is indexed by
     * its ts alone and checked in full in pass 2; anything else is decoded
     * here. Pipes: every line is decoded and kept. */
    if (seekable) {
        rc = index_file(r, f, &v, &n, &cap, &header, err);
        if (rc)
            goto out;
    }
    for (; !seekable;) {
        struct gh_signal s;
        json_t *h = NULL;
        int lrc = gh_signal_reader_next(rd, &s, &h, &lerr);
        if (lrc == GH_ENOTFOUND)
            break;
        if (lrc == GH_EIO || lrc == GH_ENOMEM) {
            rc = gh_err_set(err, lrc, "%s: %s", r->path, lerr.msg);
            goto out;
        }
        if (lrc != GH_OK) {
            bad_line(r, &lerr);
            continue;
        }
        if (h) {
            take_header(r, &header, h, gh_signal_reader_line(rd));
            continue;
        }
        struct idx *x = grow_index(&v, &n, &cap);
        if (!x) {
            gh_signal_clear(&s);
            rc = gh_err_set(err, GH_ENOMEM, "%s: out of memory or more than %ld signals", r->path,
                            MAX_SIGNALS);
            goto out;
        }
        x->ts = s.ts_ns;
        x->line = gh_signal_reader_line(rd);
        x->sig = malloc(sizeof *x->sig);
        if (!x->sig) {
            gh_signal_clear(&s);
            n--;
            rc = gh_err_set(err, GH_ENOMEM, "out of memory reading %s", r->path);
            goto out;
        }
        *x->sig = s;
    }
    if (header) {
        int hrc = gh_topology_from_header(header, &topo, &lerr);
        if (hrc == GH_ENOMEM) {
            rc = gh_err_set(err, GH_ENOMEM, "%s: %s", r->path, lerr.msg);
            goto out;
        }
        if (hrc != GH_OK) {
            bad_line(r, &lerr);
            topo = NULL;
        }
        const json_t *name = json_object_get(header, "scenario");
        if (json_is_string(name))
            snprintf(r->scenario, sizeof r->scenario, "%s", json_string_value(name));
    }
    if (n > 1) /* v is NULL when the file holds no signal (header only, or empty) */
        qsort(v, n, sizeof *v, cmp_idx);

    /* Pass 2: through the engine in time order. */
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    e = gh_engine_new(r->policy, topo, NULL, &cfg, r->cb, r->cb_ctx, err);
    if (!e) {
        rc = GH_ENOMEM;
        goto out;
    }
    off_t pos = -1; /* where the stream is: seek only when out of order (a seek drops stdio's buffer) */
    unsigned long refused = 0; /* signals the engine could not take (GH_ENOMEM) */
    for (size_t i = 0; i < n; i++) {
        struct gh_signal s;
        if (seekable) {
            if (v[i].off != pos && fseeko(f, v[i].off, SEEK_SET) != 0) {
                rc = gh_err_set(err, GH_EIO, "%s: seek: %s", r->path, strerror(errno));
                goto out;
            }
            json_t *h = NULL;
            int lrc = gh_signal_reader_next(rd, &s, &h, &lerr);
            pos = ftello(f);
            if (lrc != GH_OK || h) {
                json_decref(h);
                if (lrc == GH_ENOMEM) {
                    rc = gh_err_set(err, GH_ENOMEM, "%s: line %ld: out of memory", r->path,
                                    v[i].line);
                    goto out;
                }
                if (lrc == GH_EIO || lrc == GH_ENOTFOUND) {
                    rc = gh_err_set(err, GH_EIO, "%s: line %ld changed while reading", r->path,
                                    v[i].line);
                    goto out;
                }
                /* The reader numbers lines from where it was put: use ours. */
                char *colon = strchr(lerr.msg, ':');
                struct gh_err e2;
                gh_err_set(&e2, GH_EINVAL, "line %ld:%s", v[i].line,
                           colon && strncmp(lerr.msg, "line ", 5) == 0 ? colon + 1 : lerr.msg);
                bad_line(r, &e2);
                continue;
            }
        } else {
            s = *v[i].sig;
            free(v[i].sig);
            v[i].sig = NULL;
        }
        if (gh_engine_ingest_steal(e, &s, s.ts_ns, NULL) == GH_ENOMEM)
            refused++;
        gh_signal_clear(&s);
        gh_engine_tick(e, v[i].ts);
        r->signals++;
    }
    gh_engine_finish(e, INT64_MAX);
    gh_engine_stats(e, &r->stats);
    /* a diagnosis that may miss an incident must not look complete */
    if (refused || r->stats.nomem)
        rc = gh_err_set(err, GH_ENOMEM,
                        "%s: out of memory: %lu signals not taken, %llu allocations failed while "
                        "deciding; incidents may be missing",
                        r->path, refused, (unsigned long long)r->stats.nomem);
out:
    gh_engine_free(e);
    gh_topology_free(topo);
    json_decref(header);
    for (size_t i = 0; !seekable && i < n; i++)
        if (v[i].sig) {
            gh_signal_clear(v[i].sig);
            free(v[i].sig);
        }
    free(v);
    gh_signal_reader_free(rd);
    if (own)
        fclose(f);
    return rc;
}
