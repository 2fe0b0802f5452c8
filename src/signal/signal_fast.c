/* signal_fast.c - decodes step, checkpoint and replica_checksum lines with
 * yajl's event parser into a struct gh_signal, accepting exactly what
 * gh_signal_decode accepts and handing everything else back to it.
 *
 * Why each rule is here (jansson, which gh_signal_decode uses, is the
 * reference; yajl is laxer in a few places, and those lines are punted):
 * - yajl takes \v and \f as whitespace and raw control bytes are never
 *   valid JSON: a line with a byte < 0x20 other than \t \n \r is punted.
 * - yajl decodes a lone \uD800 to '?', \uDC00 to a UTF-8 surrogate and
 *   \uD800\u0041 to U+10041, where jansson refuses all three: a line with
 *   a \uD800..\uDFFF escape (or anything that looks like one) is punted.
 * - yajl's own UTF-8 check is not promised to be RFC 3629's (no overlongs,
 *   no surrogates): every string and key of a line with a byte >= 0x80 is
 *   checked by that rule here.
 * - jansson refuses \u0000 in any string or key, integers outside int64
 *   and reals that overflow a double, anywhere in the line, and duplicate
 *   keys in any object (JSON_REJECT_DUPLICATES): all checked at any depth.
 * The field rules themselves are those of signal_json.c's tables for the
 * three kinds (its header lists them); any failure punts, so the error
 * message is always gh_signal_decode's own. */
#include "signal/signal_fast.h"

#include <limits.h>
#include <math.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_parse.h>

#include "common/timeutil.h"
#include "signal/signal_json.h"

_Static_assert(GH_SIGNAL_FAST_LINE_MAX <= GH_SIGNAL_LINE_MAX, "the fast cap is within the codec's");

#define MAX_DEPTH 16    /* deeper nesting is punted (jansson allows 2048) */
#define MAX_KEYS 64     /* keys kept for duplicate checks, all open objects */
#define KEY_BYTES 1024  /* bytes of escaped keys copied for those checks */
#define SCRATCH 4096    /* bytes of escaped string values kept for the fields */
#define NUM_MAX 64      /* longer number tokens are punted */
#define ARENA (64 * 1024)

/* ---- an arena for yajl's allocations ------------------------------------- */

/* yajl allocates its handle, lexer and two growable buffers per parse and
 * cannot report a failed allocation (it asserts). With lines capped at
 * GH_SIGNAL_FAST_LINE_MAX those buffers stay under 16 KB each, so the arena
 * always suffices; a block that does not fit is taken from malloc and kept
 * on a list that arena_release frees. */
struct big {
    struct big *next;
    alignas(max_align_t) char data[];
};

struct arena {
    size_t used, last; /* bytes handed out; offset of the last block */
    struct big *bigs;
    alignas(max_align_t) unsigned char mem[ARENA];
};

#define HDR ((size_t)16) /* each arena block is preceded by its size */
#define ALIGN_UP(n) (((n) + 15) & ~(size_t)15)

static bool in_arena(const struct arena *a, const void *p)
{
    uintptr_t u = (uintptr_t)p, lo = (uintptr_t)a->mem;
    return u >= lo && u < lo + ARENA;
}

static void *arena_malloc(void *ctx, size_t sz)
{
    struct arena *a = ctx;
    size_t need = HDR + ALIGN_UP(sz ? sz : 1);
    if (need <= ARENA - a->used) {
        unsigned char *blk = a->mem + a->used;
        memcpy(blk, &sz, sizeof sz);
        a->last = a->used;
        a->used += need;
        return blk + HDR;
    }
    struct big *b = malloc(sizeof *b + sz);
    if (!b)
        return NULL;
    b->next = a->bigs;
    a->bigs = b;
    return b->data;
}

static void arena_free(void *ctx, void *p)
{
    struct arena *a = ctx;
    if (!p || in_arena(a, p))
        return; /* reclaimed with the arena */
    for (struct big **pp = &a->bigs; *pp; pp = &(*pp)->next)
        if ((*pp)->data == (char *)p) {
            struct big *b = *pp;
            *pp = b->next;
            free(b);
            return;
        }
}

static void *arena_realloc(void *ctx, void *p, size_t sz)
{
    struct arena *a = ctx;
    if (!p)
        return arena_malloc(ctx, sz);
    if (!in_arena(a, p)) {
        for (struct big **pp = &a->bigs; *pp; pp = &(*pp)->next)
            if ((*pp)->data == (char *)p) {
                struct big *old = *pp;
                struct big *nb = realloc(old, sizeof *nb + sz);
                if (!nb)
                    return NULL;
                *pp = nb;
                return nb->data;
            }
        return NULL; /* not ours: cannot happen */
    }
    unsigned char *blk = (unsigned char *)p - HDR;
    size_t old;
    memcpy(&old, blk, sizeof old);
    size_t off = (size_t)(blk - a->mem);
    if (off == a->last && HDR + ALIGN_UP(sz ? sz : 1) <= ARENA - off) {
        a->used = off + HDR + ALIGN_UP(sz ? sz : 1); /* the last block grows in place */
        memcpy(blk, &sz, sizeof sz);
        return p;
    }
    void *np = arena_malloc(ctx, sz);
    if (np)
        memcpy(np, p, old < sz ? old : sz);
    return np;
}

static void arena_release(struct arena *a)
{
    while (a->bigs) {
        struct big *b = a->bigs;
        a->bigs = b->next;
        free(b);
    }
}

/* ---- the fields the three kinds use ---------------------------------------- */

enum key {
    K_TS,
    K_SOURCE,
    K_KIND,
    K_NODE,
    K_GPU,
    K_PCI,
    K_UUID,
    K_MSG,
    K_ID,
    K_INJECTED,
    K_JOB,
    K_RANK,
    K_STEP,
    K_STEP_MS,
    K_COMM_MS,
    K_LOSS,
    K_TOKENS,
    K_PATH,
    K_STATE,
    K_REPLICA,
    K_VALUE,
    K_POD_UID,
    K__COUNT,
    K_OTHER = K__COUNT
};

static const char *const key_names[K__COUNT] = {
    "ts",           "source",   "kind",  "node",    "gpu",   "pci",     "uuid",    "msg",
    "id",           "injected", "job",   "rank",    "step",  "step_ms", "comm_ms", "loss",
    "tokens_per_s", "path",     "state", "replica", "value", "pod_uid",
};

/* V_ABSENT and V_NULL both read as absent (signal_json.h: null = absent). */
enum vtype { V_ABSENT, V_NULL, V_BOOL, V_INT, V_REAL, V_STR };

struct val {
    enum vtype type;
    bool b;
    int64_t i;
    double d;
    const char *s; /* into the line or ctx.scratch; not NUL-terminated */
    size_t n;
};

struct key_ref {
    const char *p;
    size_t n;
};

struct ctx {
    const char *text; /* the line, to tell its bytes from yajl's decode buffer */
    size_t len;
    bool high;        /* the line has a byte >= 0x80: check UTF-8 */
    bool punt;        /* a callback gave up */
    int depth;        /* 0 outside the top object, 1 inside it */
    bool top_seen;
    enum key cur;     /* the top-level key whose value comes next */
    struct val v[K__COUNT];
    /* keys of the open objects (unknown ones only at depth 1), for duplicates */
    struct key_ref keys[MAX_KEYS];
    size_t nkeys;
    size_t level_start[MAX_DEPTH + 2];
    char kbuf[KEY_BYTES];
    size_t kused;
    char scratch[SCRATCH];
    size_t sused;
};

static bool from_line(const struct ctx *c, const void *p)
{
    uintptr_t u = (uintptr_t)p, lo = (uintptr_t)c->text;
    return u >= lo && u < lo + c->len;
}

/* What jansson checks on every string and key: no NUL (only reachable
 * through \u0000, so only in yajl's decode buffer) and strict UTF-8. */
static bool text_ok(const struct ctx *c, const unsigned char *s, size_t n)
{
    if (!from_line(c, s) && memchr(s, '\0', n))
        return false;
    return !c->high || gh_utf8_valid((const char *)s, n);
}

static int give_up(struct ctx *c)
{
    c->punt = true;
    return 0; /* cancels the parse */
}

static enum key key_lookup(const unsigned char *k, size_t n)
{
    for (int i = 0; i < K__COUNT; i++)
        if (key_names[i][0] == (char)k[0] && strlen(key_names[i]) == n &&
            memcmp(key_names[i], k, n) == 0)
            return (enum key)i;
    return K_OTHER;
}

/* The value of the current top-level key (depth 1), or NULL when the value
 * is inside an unknown field or belongs to no known key. */
static struct val *slot(struct ctx *c)
{
    return c->depth == 1 && c->cur != K_OTHER ? &c->v[c->cur] : NULL;
}

/* A scalar where the top object should start: not ours. */
static bool outside(const struct ctx *c)
{
    return c->depth == 0;
}

static int on_null(void *vc)
{
    struct ctx *c = vc;
    if (outside(c))
        return give_up(c);
    struct val *v = slot(c);
    if (v)
        v->type = V_NULL;
    return 1;
}

static int on_boolean(void *vc, int b)
{
    struct ctx *c = vc;
    if (outside(c))
        return give_up(c);
    struct val *v = slot(c);
    if (v) {
        v->type = V_BOOL;
        v->b = b != 0;
    }
    return 1;
}

/* jansson's number rules: a token without '.', 'e' or 'E' is an integer and
 * must fit int64; anything else is a real that must not overflow. yajl has
 * already checked the JSON number syntax. */
static int on_number(void *vc, const char *s, size_t n)
{
    struct ctx *c = vc;
    struct val tmp, *v;
    if (outside(c) || n == 0 || n >= NUM_MAX)
        return give_up(c);
    v = slot(c);
    if (!v)
        v = &tmp;
    if (!memchr(s, '.', n) && !memchr(s, 'e', n) && !memchr(s, 'E', n)) {
        bool neg = s[0] == '-';
        uint64_t acc = 0;
        for (size_t i = neg; i < n; i++) {
            unsigned dgt = (unsigned)(s[i] - '0');
            if (dgt > 9)
                return give_up(c);
            if (acc > (UINT64_MAX - dgt) / 10)
                return give_up(c);
            acc = acc * 10 + dgt;
        }
        if (neg ? acc > (uint64_t)INT64_MAX + 1 : acc > (uint64_t)INT64_MAX)
            return give_up(c);
        v->type = V_INT;
        v->i = neg ? (acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc)
                   : (int64_t)acc;
        return 1;
    }
    char buf[NUM_MAX];
    char *end;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double d = strtod(buf, &end);
    if (end != buf + n || isinf(d)) /* a locale with another decimal point; overflow */
        return give_up(c);
    v->type = V_REAL;
    v->d = d;
    return 1;
}

static int on_string(void *vc, const unsigned char *s, size_t n)
{
    struct ctx *c = vc;
    if (outside(c) || !text_ok(c, s, n))
        return give_up(c);
    struct val *v = slot(c);
    if (!v)
        return 1;
    v->type = V_STR;
    v->n = n;
    if (from_line(c, s)) {
        v->s = (const char *)s;
        return 1;
    }
    /* decoded escapes live in yajl's buffer until the next string: keep them */
    if (n > SCRATCH - c->sused)
        return give_up(c);
    memcpy(c->scratch + c->sused, s, n);
    v->s = c->scratch + c->sused;
    c->sused += n;
    return 1;
}

static int open_level(struct ctx *c)
{
    if (c->depth == 0) {
        if (c->top_seen)
            return give_up(c);
        c->top_seen = true;
    } else if (slot(c) || c->depth >= MAX_DEPTH) {
        return give_up(c); /* an object or array for a known field: a type error */
    }
    c->depth++;
    c->level_start[c->depth] = c->nkeys;
    c->cur = K_OTHER;
    return 1;
}

static int close_level(struct ctx *c)
{
    c->nkeys = c->level_start[c->depth];
    c->depth--;
    c->cur = K_OTHER;
    return 1;
}

static int on_start_map(void *vc) { return open_level(vc); }
static int on_end_map(void *vc) { return close_level(vc); }

static int on_start_array(void *vc)
{
    struct ctx *c = vc;
    if (c->depth == 0)
        return give_up(c);
    return open_level(c);
}

static int on_end_array(void *vc) { return close_level(vc); }

static int on_map_key(void *vc, const unsigned char *k, size_t n)
{
    struct ctx *c = vc;
    if (!text_ok(c, k, n))
        return give_up(c);
    if (c->depth == 1) {
        enum key id = n ? key_lookup(k, n) : K_OTHER;
        if (id != K_OTHER) {
            if (c->v[id].type != V_ABSENT)
                return give_up(c); /* a duplicate key */
            c->cur = id;
            c->v[id].type = V_NULL; /* seen; the value overwrites this */
            return 1;
        }
        c->cur = K_OTHER;
    }
    for (size_t i = c->level_start[c->depth]; i < c->nkeys; i++)
        if (c->keys[i].n == n && memcmp(c->keys[i].p, k, n) == 0)
            return give_up(c); /* a duplicate key */
    if (c->nkeys == MAX_KEYS)
        return give_up(c);
    const char *p = (const char *)k;
    if (!from_line(c, k)) {
        if (n > KEY_BYTES - c->kused)
            return give_up(c);
        memcpy(c->kbuf + c->kused, k, n);
        p = c->kbuf + c->kused;
        c->kused += n;
    }
    c->keys[c->nkeys++] = (struct key_ref){p, n};
    return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

/* ---- the line as a whole ----------------------------------------------------- */

/* Raw control bytes, \v and \f, \u escapes of surrogates, and anything but
 * whitespace after the top-level value: punted. */
static bool prescan(struct ctx *c)
{
    const unsigned char *s = (const unsigned char *)c->text;
    unsigned hi = 0;
    /* Where the first top-level value closes: only JSON whitespace may
     * follow. yajl 2.1 takes an unterminated string after a complete value
     * for a token still to come and then completes without it, where
     * jansson rejects the line ("premature end of input"). */
    bool in_str = false, esc = false, closed = false;
    long depth = 0;
    for (size_t i = 0; i < c->len; i++) {
        unsigned ch = s[i];
        hi |= ch;
        if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
            return false;
        if (ch == '\\' && i + 3 < c->len && s[i + 1] == 'u' && (s[i + 2] | 0x20) == 'd' &&
            strchr("89abcdefABCDEF", s[i + 3]))
            return false;
        if (in_str) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
        } else if (closed) {
            if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
                return false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if ((ch == '}' || ch == ']') && --depth == 0) {
            closed = true;
        }
    }
    if (!closed)
        return false;
    c->high = (hi & 0x80) != 0;
    return true;
}

static bool present(const struct val *v)
{
    return v->type != V_ABSENT && v->type != V_NULL;
}

static bool is_str(const struct val *v, const char *lit)
{
    size_t n = strlen(lit);
    return v->type == V_STR && v->n == n && memcmp(v->s, lit, n) == 0;
}

/* get_integer of signal_json.c: an integer, or an integral real <= 2^53. */
static bool integer(const struct val *v, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t x;
    if (v->type == V_INT) {
        x = v->i;
    } else if (v->type == V_REAL) {
        if (!(fabs(v->d) <= 9007199254740992.0) || v->d != trunc(v->d))
            return false;
        x = (int64_t)v->d;
    } else {
        return false;
    }
    if (x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

/* F_NUM: a finite number, >= 0 when nonneg. */
static bool number(const struct val *v, bool nonneg, double *out)
{
    double x;
    if (v->type == V_INT)
        x = (double)v->i;
    else if (v->type == V_REAL)
        x = v->d;
    else
        return false;
    if (nonneg && x < 0)
        return false;
    *out = x;
    return true;
}

static bool string(const struct val *v, bool nonempty, char **dst, bool *oom)
{
    if (v->type != V_STR || (nonempty && v->n == 0))
        return false;
    if (gh_signal_set_str(dst, v->s, v->n)) {
        *oom = true;
        return false;
    }
    return true;
}

static bool opt_string(const struct val *v, char **dst, bool *oom)
{
    return !present(v) || string(v, false, dst, oom);
}

static bool loss(const struct val *v, double *out)
{
    if (number(v, false, out))
        return true;
    if (v->type != V_STR)
        return false;
    if (v->n == 3 && strncasecmp(v->s, "nan", 3) == 0)
        *out = NAN;
    else if (v->n == 3 && strncasecmp(v->s, "inf", 3) == 0)
        *out = INFINITY;
    else if (v->n == 4 && strncasecmp(v->s, "-inf", 4) == 0)
        *out = -INFINITY;
    else
        return false;
    return true;
}

/* decode_ts of signal_json.c, which accepts exactly what parses as RFC 3339
 * within years 1678..2261. */
static bool timestamp(const struct val *v, int64_t *ns)
{
    int64_t lo = gh_days_from_civil(1678, 1, 1) * 86400 * GH_NS_PER_S;
    int64_t hi = gh_days_from_civil(2262, 1, 1) * 86400 * GH_NS_PER_S - 1;
    return v->type == V_STR && gh_time_parse_rfc3339(v->s, v->n, ns) && *ns >= lo &&
           *ns <= hi;
}

/* The checks of gh_signal_decode_json for source "telemetry" and the three
 * kinds (node is optional for them). false: not accepted here. */
static bool build(const struct ctx *c, struct gh_signal *s, bool *oom)
{
    const struct val *v = c->v;
    int64_t x;

    if (!present(&v[K_TS]) || !timestamp(&v[K_TS], &s->ts_ns))
        return false;
    if (!is_str(&v[K_SOURCE], "telemetry"))
        return false;
    s->source = GH_SRC_TELEMETRY;
    if (is_str(&v[K_KIND], "step"))
        s->kind = GH_KIND_STEP;
    else if (is_str(&v[K_KIND], "checkpoint"))
        s->kind = GH_KIND_CHECKPOINT;
    else if (is_str(&v[K_KIND], "replica_checksum"))
        s->kind = GH_KIND_REPLICA_CHECKSUM;
    else
        return false;
    if (!opt_string(&v[K_NODE], &s->node, oom))
        return false;
    if (present(&v[K_GPU])) {
        if (!integer(&v[K_GPU], 0, INT_MAX, &x))
            return false;
        s->gpu = (int)x;
    }
    if (!opt_string(&v[K_PCI], &s->pci, oom) || !opt_string(&v[K_UUID], &s->uuid, oom) ||
        !opt_string(&v[K_MSG], &s->msg, oom) || !opt_string(&v[K_ID], &s->id, oom) ||
        !opt_string(&v[K_POD_UID], &s->pod_uid, oom))
        return false;
    if (present(&v[K_INJECTED])) {
        if (v[K_INJECTED].type != V_BOOL)
            return false;
        s->injected = v[K_INJECTED].b;
    }

    /* job and step: all three kinds */
    if (!string(&v[K_JOB], true, &s->job, oom) || !integer(&v[K_STEP], 0, INT64_MAX, &s->step))
        return false;
    s->has_step = true;
    switch (s->kind) {
    case GH_KIND_STEP:
        if (!integer(&v[K_RANK], 0, INT_MAX, &x))
            return false;
        s->rank = (int)x;
        s->has_rank = true;
        if (!number(&v[K_STEP_MS], true, &s->step_ms))
            return false;
        if (present(&v[K_COMM_MS])) {
            if (!number(&v[K_COMM_MS], true, &s->comm_ms))
                return false;
            s->has_comm_ms = true;
        }
        if (present(&v[K_LOSS])) {
            if (!loss(&v[K_LOSS], &s->loss))
                return false;
            s->has_loss = true;
        }
        if (present(&v[K_TOKENS])) {
            if (!number(&v[K_TOKENS], true, &s->tokens_per_s))
                return false;
            s->has_tokens_per_s = true;
        }
        return true;
    case GH_KIND_CHECKPOINT:
        if (!string(&v[K_PATH], true, &s->path, oom))
            return false;
        if (is_str(&v[K_STATE], "saved"))
            s->ckpt_state = GH_CKPT_SAVED;
        else if (is_str(&v[K_STATE], "failed"))
            s->ckpt_state = GH_CKPT_FAILED;
        else
            return false;
        return true;
    default: /* GH_KIND_REPLICA_CHECKSUM */
        if (!integer(&v[K_RANK], 0, INT_MAX, &x))
            return false;
        s->rank = (int)x;
        s->has_rank = true;
        if (!integer(&v[K_REPLICA], 0, INT_MAX, &x))
            return false;
        s->replica = (int)x;
        if (!string(&v[K_VALUE], true, &s->value, oom) || !gh_hex_valid(v[K_VALUE].s, v[K_VALUE].n))
            return false;
        return true;
    }
}

int gh_signal_fast_try(const char *text, size_t len, struct gh_signal *out)
{
    struct ctx c;
    struct arena a;
    struct gh_signal s;
    bool oom = false;

    gh_signal_init(out);
    if (!text || len > GH_SIGNAL_FAST_LINE_MAX)
        return GH_EAGAIN;
    c.text = text;
    c.len = len;
    c.high = c.punt = c.top_seen = false;
    c.depth = 0;
    c.cur = K_OTHER;
    memset(c.v, 0, sizeof c.v);
    c.nkeys = c.kused = c.sused = 0;
    c.level_start[0] = 0;
    if (!prescan(&c))
        return GH_EAGAIN;

    a.used = a.last = 0;
    a.bigs = NULL;
    yajl_alloc_funcs af = {arena_malloc, arena_realloc, arena_free, &a};
    yajl_handle h = yajl_alloc(&callbacks, &af, &c);
    if (!h) {
        arena_release(&a);
        return GH_EAGAIN;
    }
    bool parsed = yajl_parse(h, (const unsigned char *)text, len) == yajl_status_ok &&
                  yajl_complete_parse(h) == yajl_status_ok;
    yajl_free(h);
    arena_release(&a);
    if (!parsed || c.punt || !c.top_seen || c.depth != 0)
        return GH_EAGAIN;

    gh_signal_init(&s);
    if (!build(&c, &s, &oom)) {
        gh_signal_clear(&s);
        return GH_EAGAIN; /* gh_signal_decode says why (or runs out of memory too) */
    }
    *out = s;
    return GH_OK;
}

int gh_signal_fast_decode(const char *text, size_t len, long line_no, struct gh_signal *out,
                          struct gh_err *err)
{
    if (gh_signal_fast_try(text, len, out) == GH_OK)
        return GH_OK;
    return gh_signal_decode(text, len, line_no, out, err);
}
