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
        char prefix[GH_ERR_MAX], old[GH_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof old);
        old[sizeof old - 1] = '\0';
        snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
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
