/* token.c - bearer token files: parse, hash, and compare in constant time. */
#include "wire/token.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define FILE_MAX (64 * 1024)

/* Calls fn for each token of the file's text; stops when fn returns
 * non-zero and returns that. */
typedef int (*token_fn)(void *ctx, const char *tok, size_t n, struct gh_err *err);

static int for_each_token(const char *path, token_fn fn, void *ctx, struct gh_err *err)
{
    char *text = NULL;
    int rc = GH_OK;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gh_err_set(err, GH_EINVAL, "token file %s: %s", path, strerror(errno));
    text = OPENSSL_malloc(FILE_MAX + 1);
    if (!text) {
        fclose(f);
        return gh_err_set(err, GH_ENOMEM, "token file %s: out of memory", path);
    }
    size_t len = fread(text, 1, FILE_MAX + 1, f);
    bool rerr = ferror(f);
    fclose(f);
    if (rerr) {
        rc = gh_err_set(err, GH_EINVAL, "token file %s: read error", path);
        goto out;
    }
    if (len > FILE_MAX) {
        rc = gh_err_set(err, GH_EINVAL, "token file %s: larger than %d bytes", path, FILE_MAX);
        goto out;
    }
    size_t i = 0;
    long line = 0;
    while (i < len && rc == GH_OK) {
        size_t start = i;
        while (i < len && text[i] != '\n')
            i++;
        size_t end = i;
        i++;
        line++;
        while (start < end && (text[start] == ' ' || text[start] == '\t' || text[start] == '\r'))
            start++;
        while (end > start &&
               (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r'))
            end--;
        if (start == end || text[start] == '#')
            continue;
        if (end - start > GH_TOKEN_MAX) {
            rc = gh_err_set(err, GH_EINVAL, "token file %s line %ld: token longer than %d bytes",
                            path, line, GH_TOKEN_MAX);
            break;
        }
        for (size_t k = start; k < end; k++)
            if ((unsigned char)text[k] <= 0x20 || (unsigned char)text[k] >= 0x7f) {
                rc = gh_err_set(err, GH_EINVAL,
                                "token file %s line %ld: a token is printable ASCII without spaces",
                                path, line);
                goto out;
            }
        rc = fn(ctx, text + start, end - start, err);
    }
out:
    OPENSSL_clear_free(text, FILE_MAX + 1);
    return rc;
}

struct set_ctx {
    struct gh_token_set set;
};

static int add_to_set(void *ctx, const char *tok, size_t n, struct gh_err *err)
{
    (void)err;
    struct set_ctx *c = ctx;
    if (c->set.n < GH_TOKEN_SET_MAX)
        SHA256((const unsigned char *)tok, n, c->set.digest[c->set.n++]);
    return GH_OK;
}

int gh_token_set_load(const char *path, struct gh_token_set *set, struct gh_err *err)
{
    struct set_ctx c;
    memset(&c, 0, sizeof c);
    int rc = for_each_token(path, add_to_set, &c, err);
    if (rc)
        return rc;
    if (c.set.n == 0)
        return gh_err_set(err, GH_EINVAL, "token file %s: no token in it", path);
    *set = c.set;
    return GH_OK;
}

bool gh_token_set_check(const struct gh_token_set *set, const char *token, size_t n)
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    int match = 0;
    SHA256((const unsigned char *)token, n, d);
    for (size_t i = 0; i < set->n; i++)
        match |= CRYPTO_memcmp(d, set->digest[i], sizeof d) == 0;
    OPENSSL_cleanse(d, sizeof d);
    return match != 0;
}

bool gh_token_set_check_header(const struct gh_token_set *set, const char *header)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *tok = header + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
        n--;
    return n > 0 && gh_token_set_check(set, tok, n);
}

struct first_ctx {
    char *buf;
    size_t cap;
    bool found;
};

static int take_first(void *ctx, const char *tok, size_t n, struct gh_err *err)
{
    struct first_ctx *c = ctx;
    if (n + 1 > c->cap)
        return gh_err_set(err, GH_ELIMIT, "token longer than %zu bytes", c->cap - 1);
    memcpy(c->buf, tok, n);
    c->buf[n] = '\0';
    c->found = true;
    return 1; /* stop */
}

int gh_token_read(const char *path, char *buf, size_t cap, struct gh_err *err)
{
    struct first_ctx c = {buf, cap, false};
    int rc = for_each_token(path, take_first, &c, err);
    if (rc == 1)
        rc = GH_OK;
    if (rc)
        return rc;
    if (!c.found)
        return gh_err_set(err, GH_EINVAL, "token file %s: no token in it", path);
    return GH_OK;
}
