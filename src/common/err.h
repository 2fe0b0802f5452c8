/* err.h - gpuheal's one result type: an error code returned by value, with the
 * human detail written into a caller-owned, bounded message buffer. */
#ifndef GH_COMMON_ERR_H
#define GH_COMMON_ERR_H

#include <stddef.h>

enum gh_rc {
    GH_OK = 0,
    GH_EINVAL,    /* bad input: the message names what was wrong */
    GH_ENOMEM,    /* allocation failed */
    GH_EIO,       /* read/write/system call failed */
    GH_ENOTFOUND, /* a named thing does not exist */
    GH_ELIMIT,    /* a size or count bound was hit */
    GH_EAGAIN,    /* not now: retry later */
    GH_ETIMEOUT,  /* a deadline passed */
    GH_EUNSUPPORTED,
};

#define GH_ERR_MAX 512

/* A caller-owned error detail. Pass NULL where no detail is wanted. */
struct gh_err {
    char msg[GH_ERR_MAX];
};

/* Formats a detail into err (when non-NULL) and returns rc, so that callers
 * can write `return gh_err_set(err, GH_EINVAL, "field %s", f);`. */
int gh_err_set(struct gh_err *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the existing detail: "<prefix>: <old detail>". Returns rc. */
int gh_err_prefix(struct gh_err *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A short constant name for rc ("invalid input", ...). */
const char *gh_rc_str(int rc);

#endif
