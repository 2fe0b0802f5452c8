/* token.h - bearer tokens for the ingest endpoint: the token file format,
 * the server's set of allowed tokens with a constant-time check, and the
 * client's read of its token.
 *
 * File format: one token per line; leading/trailing whitespace trimmed;
 * blank lines and lines starting with '#' skipped; a token is printable
 * ASCII without spaces, 1..GH_TOKEN_MAX bytes. The file itself is at most
 * 64 KiB. A client uses the first token; a server accepts any of the first
 * GH_TOKEN_SET_MAX (so a token can be rotated without downtime). */
#ifndef GH_WIRE_TOKEN_H
#define GH_WIRE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define GH_TOKEN_MAX 4096
#define GH_TOKEN_SET_MAX 16

/* A small value type: SHA-256 digests of the allowed tokens (never the
 * tokens themselves). */
struct gh_token_set {
    size_t n;
    unsigned char digest[GH_TOKEN_SET_MAX][32];
};

/* Loads path into *set (overwritten only on success). GH_EINVAL when the
 * file is unreadable, too big, has a bad token or none; err never
 * includes token bytes. */
int gh_token_set_load(const char *path, struct gh_token_set *set, struct gh_err *err);

/* True when the n bytes at token (borrowed) are one of the set's tokens.
 * Constant time in the set's contents: every digest is compared with
 * CRYPTO_memcmp. */
bool gh_token_set_check(const struct gh_token_set *set, const char *token, size_t n);

/* Checks an HTTP Authorization header value ("Bearer TOKEN", scheme
 * case-insensitive). NULL header = false. */
bool gh_token_set_check_header(const struct gh_token_set *set, const char *header);

/* Reads the first token of path into buf (cap >= 2; NUL-terminated).
 * Errors as gh_token_set_load, GH_ELIMIT when it does not fit. */
int gh_token_read(const char *path, char *buf, size_t cap, struct gh_err *err);

#endif
