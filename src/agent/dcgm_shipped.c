/* dcgm_shipped.c - reads and writes the dcgm-exporter XIDs already shipped
 * (format in dcgm_shipped.h). */
#include "agent/dcgm_shipped.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER "gpuheal-dcgm-state v1"
#define BOOT_MAX 128

/* A non-negative integer of at most 9 digits at *p. */
static bool num(const char **p, const char *end, long *out)
{
    long v = 0;
    int n = 0;
    while (*p < end && **p >= '0' && **p <= '9' && n < 10) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    if (n == 0 || n > 9)
        return false;
    *out = v;
    return true;
}

static bool word(const char **p, const char *end, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(end - *p) < n || memcmp(*p, w, n) != 0)
        return false;
    *p += n;
    return true;
}

int gh_dcgm_shipped_parse(const char *text, size_t len, const char *boot_id,
                          struct gh_dcgm_xid_seen *v, size_t ngpus, bool *same_boot,
                          struct gh_err *err)
{
    memset(v, 0, ngpus * sizeof *v);
    *same_boot = false;
    if (len > GH_DCGM_SHIPPED_FILE_MAX)
        return gh_err_set(err, GH_EINVAL, "dcgm state: over %d bytes", GH_DCGM_SHIPPED_FILE_MAX);
    const char *p = text, *end = text + len;
    long line = 0;
    bool boot_seen = false;
    int rc = GH_OK;
    while (p < end && rc == GH_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        const char *q = p;
        if (line == 1) {
            if ((size_t)(le - q) != strlen(HEADER) || memcmp(q, HEADER, strlen(HEADER)) != 0)
                rc = gh_err_set(err, GH_EINVAL, "dcgm state line 1: not \"" HEADER "\"");
        } else if (line == 2) {
            size_t bl = (size_t)(le - q) > 8 ? (size_t)(le - q) - 8 : 0;
            if (!word(&q, le, "boot_id ") || bl == 0 || bl >= BOOT_MAX || memchr(q, ' ', bl))
                rc = gh_err_set(err, GH_EINVAL, "dcgm state line 2: not \"boot_id ID\"");
            else {
                boot_seen = true;
                *same_boot = boot_id && strlen(boot_id) == bl && memcmp(q, boot_id, bl) == 0;
            }
        } else if (q < le) {
            long g, code, count;
            bool ok = word(&q, le, "gpu ") && num(&q, le, &g) && g >= 0 && (size_t)g < ngpus;
            if (ok && word(&q, le, " last ")) {
                ok = num(&q, le, &code) && q == le;
                if (ok && *same_boot) {
                    v[g].known = true;
                    v[g].has_last = true;
                    v[g].last = (double)code;
                }
            } else if (ok && word(&q, le, " xid ")) {
                ok = num(&q, le, &code) && word(&q, le, " ") && num(&q, le, &count) && q == le;
                if (ok && *same_boot) {
                    struct gh_dcgm_xid_seen *s = &v[g];
                    unsigned k = 0;
                    while (k < s->n && s->xid[k].code != (int)code)
                        k++;
                    if (k == s->n) {
                        ok = s->n < GH_DCGM_SHIPPED_CODES;
                        if (ok)
                            s->n++;
                    }
                    if (ok) {
                        s->known = true;
                        s->xid[k].code = (int)code;
                        s->xid[k].count = (double)count;
                    }
                }
            } else {
                ok = false;
            }
            if (!ok)
                rc = gh_err_set(err, GH_EINVAL, "dcgm state line %ld: not \"gpu G last CODE\" or "
                                "\"gpu G xid CODE COUNT\" (G below %zu, at most %d codes)", line,
                                ngpus, GH_DCGM_SHIPPED_CODES);
        }
        p = nl ? nl + 1 : end;
    }
    if (rc == GH_OK && !boot_seen)
        rc = gh_err_set(err, GH_EINVAL, "dcgm state: no boot_id line");
    if (rc != GH_OK) {
        memset(v, 0, ngpus * sizeof *v);
        *same_boot = false;
    }
    return rc;
}

int gh_dcgm_shipped_load(const char *path, const char *boot_id, struct gh_dcgm_xid_seen *v,
                         size_t ngpus, bool *same_boot, struct gh_err *err)
{
    memset(v, 0, ngpus * sizeof *v);
    *same_boot = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? GH_OK
                               : gh_err_set(err, GH_EIO, "dcgm state: open %s: %s", path,
                                            strerror(errno));
    char *buf = malloc(GH_DCGM_SHIPPED_FILE_MAX + 1);
    if (!buf) {
        close(fd);
        return gh_err_set(err, GH_ENOMEM, "dcgm state: out of memory");
    }
    size_t len = 0;
    ssize_t r;
    while (len <= GH_DCGM_SHIPPED_FILE_MAX &&
           (r = read(fd, buf + len, GH_DCGM_SHIPPED_FILE_MAX + 1 - len)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return gh_err_set(err, GH_EIO, "dcgm state: read %s: %s", path, strerror(e));
        }
        len += (size_t)r;
    }
    close(fd);
    int rc = gh_dcgm_shipped_parse(buf, len, boot_id, v, ngpus, same_boot, err);
    free(buf);
    return rc;
}

int gh_dcgm_shipped_save(const char *path, const char *boot_id,
                         const struct gh_dcgm_xid_seen *v, size_t ngpus, struct gh_err *err)
{
    if (!boot_id || !boot_id[0] || strlen(boot_id) >= BOOT_MAX || strchr(boot_id, ' ') ||
        strchr(boot_id, '\n'))
        return gh_err_set(err, GH_EINVAL, "dcgm state: unusable boot id");
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return gh_err_set(err, GH_ELIMIT, "dcgm state: path too long");
    FILE *f = fopen(tmp, "we");
    if (!f)
        return gh_err_set(err, GH_EIO, "dcgm state: open %s: %s", tmp, strerror(errno));
    fprintf(f, HEADER "\nboot_id %s\n", boot_id);
    for (size_t g = 0; g < ngpus; g++) {
        const struct gh_dcgm_xid_seen *s = &v[g];
        if (!s->known)
            continue;
        if (s->has_last && s->last >= 0 && s->last < 1e9)
            fprintf(f, "gpu %zu last %.0f\n", g, floor(s->last));
        for (unsigned k = 0; k < s->n && k < GH_DCGM_SHIPPED_CODES; k++)
            if (s->xid[k].code >= 0 && s->xid[k].code < 1000000000 && s->xid[k].count >= 0 &&
                s->xid[k].count < 1e9)
                fprintf(f, "gpu %zu xid %d %.0f\n", g, s->xid[k].code, floor(s->xid[k].count));
    }
    int bad = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        return gh_err_set(err, GH_EIO, "dcgm state: write %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return gh_err_set(err, GH_EIO, "dcgm state: rename to %s: %s", path, strerror(e));
    }
    return GH_OK;
}
