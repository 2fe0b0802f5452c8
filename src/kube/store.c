/* store.c - the informer cache: objects as compact JSON text of their kept
 * fields in an intrusive hash table, plus per-index buckets (value -> list
 * of objects) so that "pods on node X" costs one lookup. */
#include "kube/store.h"

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bucket {
    struct bucket *hnext;
    uint32_t hash;
    size_t count;
    struct gh_kube_obj *head;
    char value[]; /* NUL-terminated */
};

struct ilink {
    struct gh_kube_obj *prev, *next;
    struct bucket *bk; /* NULL: not in this index */
};

struct gh_kube_obj {
    struct gh_kube_obj *hnext;
    uint32_t hash;
    uint32_t gen;
    char *rv;   /* owned */
    char *text; /* owned, compact JSON of the kept fields */
    size_t text_len;
    char *key;  /* points into this allocation, after il[] */
    struct ilink il[];
};

struct itab {
    char *name;
    char *pointers[GH_KUBE_INDEX_MAX_PATHS];
    size_t npointers;
    struct bucket **b;
    size_t nb, n;
};

struct gh_kube_store {
    char *keep[GH_KUBE_MAX_KEEP];
    size_t nkeep;
    struct itab idx[GH_KUBE_MAX_INDEXES];
    size_t nidx;
    struct gh_kube_obj **b;
    size_t nb, n;
    uint32_t gen;
    size_t text_bytes;
};

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* ------------------------------------------------------------------ pointers */

/* Copies the next reference token of *p (after its '/') unescaped into tok;
 * advances *p. Returns false at the end or when the token does not fit. */
static bool next_token(const char **p, char *tok, size_t cap)
{
    const char *s = *p;
    if (*s != '/')
        return false;
    s++;
    size_t n = 0;
    while (*s && *s != '/') {
        char ch = *s++;
        if (ch == '~') {
            if (*s == '0')
                ch = '~';
            else if (*s == '1')
                ch = '/';
            else
                return false;
            s++;
        }
        if (n + 1 >= cap)
            return false;
        tok[n++] = ch;
    }
    tok[n] = '\0';
    *p = s;
    return true;
}

const json_t *gh_kube_pointer_get(const json_t *root, const char *pointer)
{
    char tok[256];
    const char *p = pointer;
    const json_t *cur = root;
    if (!p || !*p)
        return root;
    while (*p) {
        if (!json_is_object(cur) || !next_token(&p, tok, sizeof tok))
            return NULL;
        cur = json_object_get(cur, tok);
        if (!cur)
            return NULL;
    }
    return cur;
}

/* Sets v (new reference taken) at pointer in dst, creating objects. */
static int pointer_set(json_t *dst, const char *pointer, json_t *v)
{
    char tok[256];
    const char *p = pointer;
    json_t *cur = dst;
    while (next_token(&p, tok, sizeof tok)) {
        if (!*p)
            return json_object_set(cur, tok, v);
        json_t *child = json_object_get(cur, tok);
        if (!json_is_object(child)) {
            child = json_object();
            if (!child || json_object_set_new(cur, tok, child))
                return -1;
        }
        cur = child;
    }
    return -1;
}

json_t *gh_kube_project(const json_t *full, const char *const *keep, size_t nkeep)
{
    if (nkeep == 0)
        return json_incref((json_t *)(uintptr_t)full);
    static const char *const ident[] = {"/metadata/name", "/metadata/namespace", "/metadata/uid",
                                        "/metadata/resourceVersion"};
    json_t *out = json_object();
    if (!out)
        return NULL;
    for (size_t i = 0; i < sizeof ident / sizeof ident[0] + nkeep; i++) {
        const char *ptr = i < 4 ? ident[i] : keep[i - 4];
        const json_t *v = gh_kube_pointer_get(full, ptr);
        if (v && pointer_set(out, ptr, (json_t *)(uintptr_t)v)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* ------------------------------------------------------------------ lifecycle */

static void obj_free(struct gh_kube_obj *o)
{
    if (!o)
        return;
    free(o->rv);
    free(o->text);
    free(o);
}

void gh_kube_store_free(struct gh_kube_store *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nb; i++)
        for (struct gh_kube_obj *o = s->b[i], *n; o; o = n) {
            n = o->hnext;
            obj_free(o);
        }
    free(s->b);
    for (size_t x = 0; x < s->nidx; x++) {
        struct itab *t = &s->idx[x];
        for (size_t i = 0; i < t->nb; i++)
            for (struct bucket *bk = t->b[i], *n; bk; bk = n) {
                n = bk->hnext;
                free(bk);
            }
        free(t->b);
        free(t->name);
        for (size_t j = 0; j < t->npointers; j++)
            free(t->pointers[j]);
    }
    for (size_t i = 0; i < s->nkeep; i++)
        free(s->keep[i]);
    free(s);
}

int gh_kube_store_new(const struct gh_kube_store_opts *o, struct gh_kube_store **out,
                      struct gh_err *err)
{
    *out = NULL;
    static const struct gh_kube_store_opts none;
    if (!o)
        o = &none;
    if (o->nkeep > GH_KUBE_MAX_KEEP || o->nindexes > GH_KUBE_MAX_INDEXES)
        return gh_err_set(err, GH_ELIMIT, "store: at most %d kept fields and %d indexes",
                          GH_KUBE_MAX_KEEP, GH_KUBE_MAX_INDEXES);
    struct gh_kube_store *s = calloc(1, sizeof *s);
    if (!s)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    for (size_t i = 0; i < o->nkeep; i++) {
        if (!o->keep[i] || o->keep[i][0] != '/') {
            gh_kube_store_free(s);
            return gh_err_set(err, GH_EINVAL, "store: kept field \"%.80s\" is not a JSON Pointer",
                              o->keep[i] ? o->keep[i] : "(null)");
        }
        if (!(s->keep[s->nkeep++] = strdup(o->keep[i])))
            goto nomem;
    }
    for (size_t x = 0; x < o->nindexes; x++) {
        const struct gh_kube_index_spec *sp = &o->indexes[x];
        struct itab *t = &s->idx[s->nidx++];
        if (!sp->name || !sp->name[0]) {
            gh_kube_store_free(s);
            return gh_err_set(err, GH_EINVAL, "store: index without a name");
        }
        if (!(t->name = strdup(sp->name)))
            goto nomem;
        for (size_t j = 0; j < GH_KUBE_INDEX_MAX_PATHS && sp->pointers[j]; j++)
            if (!(t->pointers[t->npointers++] = strdup(sp->pointers[j])))
                goto nomem;
        t->nb = 64;
        if (!(t->b = calloc(t->nb, sizeof *t->b)))
            goto nomem;
    }
    s->nb = 256;
    if (!(s->b = calloc(s->nb, sizeof *s->b)))
        goto nomem;
    *out = s;
    return GH_OK;
nomem:
    gh_kube_store_free(s);
    return gh_err_set(err, GH_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------------ tables */

static int make_key(const char *ns, const char *name, char *buf, size_t cap)
{
    int n = ns && ns[0] ? snprintf(buf, cap, "%s/%s", ns, name) : snprintf(buf, cap, "%s", name);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static struct gh_kube_obj *find(const struct gh_kube_store *s, const char *key, uint32_t h)
{
    for (struct gh_kube_obj *o = s->b[h & (s->nb - 1)]; o; o = o->hnext)
        if (o->hash == h && strcmp(o->key, key) == 0)
            return o;
    return NULL;
}

static void grow(struct gh_kube_store *s)
{
    size_t nnb = s->nb * 2;
    struct gh_kube_obj **nb = calloc(nnb, sizeof *nb);
    if (!nb)
        return; /* stay at the current size: slower, still correct */
    for (size_t i = 0; i < s->nb; i++)
        for (struct gh_kube_obj *o = s->b[i], *n; o; o = n) {
            n = o->hnext;
            o->hnext = nb[o->hash & (nnb - 1)];
            nb[o->hash & (nnb - 1)] = o;
        }
    free(s->b);
    s->b = nb;
    s->nb = nnb;
}

static void unhash(struct gh_kube_store *s, struct gh_kube_obj *o)
{
    for (struct gh_kube_obj **pp = &s->b[o->hash & (s->nb - 1)]; *pp; pp = &(*pp)->hnext)
        if (*pp == o) {
            *pp = o->hnext;
            s->n--;
            return;
        }
}

static struct bucket *bucket_find(struct itab *t, const char *v, uint32_t h)
{
    for (struct bucket *bk = t->b[h & (t->nb - 1)]; bk; bk = bk->hnext)
        if (bk->hash == h && strcmp(bk->value, v) == 0)
            return bk;
    return NULL;
}

static void bucket_grow(struct itab *t)
{
    size_t nnb = t->nb * 2;
    struct bucket **nb = calloc(nnb, sizeof *nb);
    if (!nb)
        return;
    for (size_t i = 0; i < t->nb; i++)
        for (struct bucket *bk = t->b[i], *n; bk; bk = n) {
            n = bk->hnext;
            bk->hnext = nb[bk->hash & (nnb - 1)];
            nb[bk->hash & (nnb - 1)] = bk;
        }
    free(t->b);
    t->b = nb;
    t->nb = nnb;
}

static void index_unlink(struct itab *t, struct gh_kube_obj *o, size_t x)
{
    struct ilink *l = &o->il[x];
    struct bucket *bk = l->bk;
    if (!bk)
        return;
    if (l->prev)
        l->prev->il[x].next = l->next;
    else
        bk->head = l->next;
    if (l->next)
        l->next->il[x].prev = l->prev;
    l->prev = l->next = NULL;
    l->bk = NULL;
    if (--bk->count == 0) {
        for (struct bucket **pp = &t->b[bk->hash & (t->nb - 1)]; *pp; pp = &(*pp)->hnext)
            if (*pp == bk) {
                *pp = bk->hnext;
                break;
            }
        t->n--;
        free(bk);
    }
}

static int index_link(struct itab *t, struct gh_kube_obj *o, size_t x, const char *v)
{
    uint32_t h = fnv1a(v);
    struct bucket *bk = bucket_find(t, v, h);
    if (!bk) {
        size_t vl = strlen(v);
        bk = calloc(1, sizeof *bk + vl + 1);
        if (!bk)
            return -1;
        memcpy(bk->value, v, vl + 1);
        bk->hash = h;
        if (t->n >= t->nb)
            bucket_grow(t);
        bk->hnext = t->b[h & (t->nb - 1)];
        t->b[h & (t->nb - 1)] = bk;
        t->n++;
    }
    struct ilink *l = &o->il[x];
    l->bk = bk;
    l->prev = NULL;
    l->next = bk->head;
    if (bk->head)
        bk->head->il[x].prev = o;
    bk->head = o;
    bk->count++;
    return 0;
}

static const char *index_value(const struct itab *t, const json_t *full)
{
    for (size_t j = 0; j < t->npointers; j++) {
        const json_t *v = gh_kube_pointer_get(full, t->pointers[j]);
        if (json_is_string(v) && json_string_length(v) > 0 &&
            strlen(json_string_value(v)) == json_string_length(v))
            return json_string_value(v);
    }
    return NULL;
}

/* Re-links o's index memberships from full. */
static int reindex(struct gh_kube_store *s, struct gh_kube_obj *o, const json_t *full)
{
    for (size_t x = 0; x < s->nidx; x++) {
        const char *v = index_value(&s->idx[x], full);
        struct bucket *cur = o->il[x].bk;
        if (cur && v && strcmp(cur->value, v) == 0)
            continue;
        index_unlink(&s->idx[x], o, x);
        if (v && index_link(&s->idx[x], o, x, v))
            return -1;
    }
    return 0;
}

static char *dump(const json_t *j, size_t *len)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT);
    if (n == 0)
        return NULL;
    char *buf = malloc(n + 1);
    if (!buf)
        return NULL;
    if (json_dumpb(j, buf, n, JSON_COMPACT) != n) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* ------------------------------------------------------------------ changes */

int gh_kube_store_upsert(struct gh_kube_store *s, const json_t *full, enum gh_kube_change *chg,
                         json_t **kept, json_t **old, struct gh_err *err)
{
    if (kept)
        *kept = NULL;
    if (old)
        *old = NULL;
    *chg = GH_KUBE_UNCHANGED;
    const json_t *meta = json_is_object(full) ? json_object_get(full, "metadata") : NULL;
    const json_t *jn = json_object_get(meta, "name"), *jns = json_object_get(meta, "namespace");
    const json_t *jrv = json_object_get(meta, "resourceVersion");
    if (!json_is_string(jn) || !json_string_length(jn))
        return gh_err_set(err, GH_EINVAL, "store: object without metadata.name");
    const char *ns = json_is_string(jns) ? json_string_value(jns) : NULL;
    const char *rv = json_is_string(jrv) ? json_string_value(jrv) : "";
    char key[600];
    if (make_key(ns, json_string_value(jn), key, sizeof key))
        return gh_err_set(err, GH_ELIMIT, "store: name too long");
    uint32_t h = fnv1a(key);
    struct gh_kube_obj *o = find(s, key, h);
    if (o && rv[0] && strcmp(o->rv, rv) == 0) {
        o->gen = s->gen;
        if (kept)
            *kept = gh_kube_obj_json(o);
        return GH_OK;
    }
    json_t *k = gh_kube_project(full, (const char *const *)s->keep, s->nkeep);
    size_t tlen = 0;
    char *text = k ? dump(k, &tlen) : NULL;
    char *nrv = strdup(rv);
    if (!k || !text || !nrv) {
        json_decref(k);
        free(text);
        free(nrv);
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    if (o) {
        if (old)
            *old = gh_kube_obj_json(o);
        s->text_bytes -= o->text_len;
        free(o->text);
        free(o->rv);
        *chg = GH_KUBE_UPDATED;
    } else {
        size_t kl = strlen(key);
        o = calloc(1, sizeof *o + s->nidx * sizeof(struct ilink) + kl + 1);
        if (!o) {
            json_decref(k);
            free(text);
            free(nrv);
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        }
        o->key = (char *)&o->il[s->nidx];
        memcpy(o->key, key, kl + 1);
        o->hash = h;
        if (s->n >= s->nb)
            grow(s);
        o->hnext = s->b[h & (s->nb - 1)];
        s->b[h & (s->nb - 1)] = o;
        s->n++;
        *chg = GH_KUBE_ADDED;
    }
    o->text = text;
    o->text_len = tlen;
    o->rv = nrv;
    o->gen = s->gen;
    s->text_bytes += tlen;
    int rc = GH_OK;
    if (reindex(s, o, full))
        rc = gh_err_set(err, GH_ENOMEM, "out of memory (index)");
    if (kept)
        *kept = k;
    else
        json_decref(k);
    return rc;
}

static void drop(struct gh_kube_store *s, struct gh_kube_obj *o)
{
    for (size_t x = 0; x < s->nidx; x++)
        index_unlink(&s->idx[x], o, x);
    unhash(s, o);
    s->text_bytes -= o->text_len;
    obj_free(o);
}

int gh_kube_store_remove(struct gh_kube_store *s, const json_t *obj, json_t **old,
                         struct gh_err *err)
{
    if (old)
        *old = NULL;
    const json_t *meta = json_is_object(obj) ? json_object_get(obj, "metadata") : NULL;
    const json_t *jn = json_object_get(meta, "name"), *jns = json_object_get(meta, "namespace");
    if (!json_is_string(jn))
        return gh_err_set(err, GH_EINVAL, "store: object without metadata.name");
    char key[600];
    if (make_key(json_is_string(jns) ? json_string_value(jns) : NULL, json_string_value(jn), key,
                 sizeof key))
        return gh_err_set(err, GH_ELIMIT, "store: name too long");
    struct gh_kube_obj *o = find(s, key, fnv1a(key));
    if (!o)
        return GH_OK;
    if (old)
        *old = gh_kube_obj_json(o);
    drop(s, o);
    return GH_OK;
}

void gh_kube_store_mark_begin(struct gh_kube_store *s) { s->gen++; }

int gh_kube_store_sweep(struct gh_kube_store *s, gh_kube_gone_fn gone, void *ud,
                        struct gh_err *err)
{
    (void)err;
    for (size_t i = 0; i < s->nb; i++) {
        struct gh_kube_obj *o = s->b[i];
        while (o) {
            struct gh_kube_obj *n = o->hnext;
            if (o->gen != s->gen) {
                json_t *j = gone ? gh_kube_obj_json(o) : NULL;
                drop(s, o);
                if (gone && j)
                    gone(ud, j);
                json_decref(j);
            }
            o = n;
        }
    }
    return GH_OK;
}

/* ------------------------------------------------------------------ reads */

const struct gh_kube_obj *gh_kube_store_get(const struct gh_kube_store *s, const char *ns,
                                            const char *name)
{
    char key[600];
    if (!name || make_key(ns, name, key, sizeof key))
        return NULL;
    return find(s, key, fnv1a(key));
}

size_t gh_kube_store_count(const struct gh_kube_store *s) { return s->n; }

int gh_kube_store_foreach(const struct gh_kube_store *s, gh_kube_obj_fn fn, void *ud)
{
    for (size_t i = 0; i < s->nb; i++)
        for (const struct gh_kube_obj *o = s->b[i]; o; o = o->hnext) {
            int rc = fn(ud, o);
            if (rc)
                return rc;
        }
    return GH_OK;
}

static const struct itab *itab_named(const struct gh_kube_store *s, const char *index, size_t *x)
{
    for (size_t i = 0; i < s->nidx; i++)
        if (strcmp(s->idx[i].name, index) == 0) {
            *x = i;
            return &s->idx[i];
        }
    return NULL;
}

int gh_kube_store_index_foreach(const struct gh_kube_store *s, const char *index,
                                const char *value, gh_kube_obj_fn fn, void *ud)
{
    size_t x;
    const struct itab *t = itab_named(s, index, &x);
    if (!t)
        return GH_ENOTFOUND;
    struct bucket *bk = bucket_find((struct itab *)(uintptr_t)t, value, fnv1a(value));
    for (const struct gh_kube_obj *o = bk ? bk->head : NULL; o; o = o->il[x].next) {
        int rc = fn(ud, o);
        if (rc)
            return rc;
    }
    return GH_OK;
}

size_t gh_kube_store_index_count(const struct gh_kube_store *s, const char *index,
                                 const char *value)
{
    size_t x;
    const struct itab *t = itab_named(s, index, &x);
    if (!t)
        return 0;
    struct bucket *bk = bucket_find((struct itab *)(uintptr_t)t, value, fnv1a(value));
    return bk ? bk->count : 0;
}

const char *gh_kube_obj_key(const struct gh_kube_obj *o) { return o->key; }
const char *gh_kube_obj_rv(const struct gh_kube_obj *o) { return o->rv; }

const char *gh_kube_obj_text(const struct gh_kube_obj *o, size_t *len)
{
    if (len)
        *len = o->text_len;
    return o->text;
}

json_t *gh_kube_obj_json(const struct gh_kube_obj *o)
{
    return json_loadb(o->text, o->text_len, 0, NULL);
}

const char *gh_kube_obj_index_value(const struct gh_kube_obj *o, size_t i)
{
    return i < GH_KUBE_MAX_INDEXES && o->il[i].bk ? o->il[i].bk->value : NULL;
}

void gh_kube_store_stats(const struct gh_kube_store *s, struct gh_kube_store_stats *st)
{
    memset(st, 0, sizeof *st);
    st->objects = s->n;
    st->text_bytes = s->text_bytes;
    size_t heap = malloc_usable_size((void *)s) + malloc_usable_size(s->b);
    for (size_t i = 0; i < s->nb; i++)
        for (const struct gh_kube_obj *o = s->b[i]; o; o = o->hnext)
            heap += malloc_usable_size((void *)o) + malloc_usable_size(o->rv) +
                    malloc_usable_size(o->text);
    for (size_t x = 0; x < s->nidx; x++) {
        const struct itab *t = &s->idx[x];
        heap += malloc_usable_size(t->b);
        st->index_buckets += t->n;
        for (size_t i = 0; i < t->nb; i++)
            for (const struct bucket *bk = t->b[i]; bk; bk = bk->hnext)
                heap += malloc_usable_size((void *)bk);
    }
    st->heap_bytes = heap;
}
