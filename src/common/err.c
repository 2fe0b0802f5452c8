/* err.c - formatting of error details into bounded buffers. */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gh_err_set(struct gh_err *err, int rc, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int gh_err_prefix(struct gh_err *err, int rc, const char *fmt, ...)
{
    if (err) {
        char prefix[GH_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
        va_end(ap);
        size_t plen = n < 0 ? 0 : (size_t)n;
        if (plen > sizeof prefix - 3)
            plen = sizeof prefix - 3;
        memcpy(prefix + plen, ": ", 2);
        plen += 2;
        /* Shift the old detail right and put the prefix in front; the
         * detail's tail is what gets cut when the whole does not fit. */
        size_t old = strnlen(err->msg, sizeof err->msg - 1);
        if (plen + old > sizeof err->msg - 1)
            old = sizeof err->msg - 1 - plen;
        memmove(err->msg + plen, err->msg, old);
        memcpy(err->msg, prefix, plen);
        err->msg[plen + old] = '\0';
    }
    return rc;
}

const char *gh_rc_str(int rc)
{
    switch (rc) {
    case GH_OK: return "ok";
    case GH_EINVAL: return "invalid input";
    case GH_ENOMEM: return "out of memory";
    case GH_EIO: return "i/o error";
    case GH_ENOTFOUND: return "not found";
    case GH_ELIMIT: return "limit exceeded";
    case GH_EAGAIN: return "try again";
    case GH_ETIMEOUT: return "timed out";
    case GH_EUNSUPPORTED: return "unsupported";
    default: return "unknown error";
    }
}
