/* file.c - reads a whole file into a bounded, NUL-terminated buffer (see
 * file.h): the buffer doubles from 4 KiB up to cap + 2 bytes, so that one
 * byte past cap is seen and refused without reading the rest. */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gh_file_read_fd(int fd, const char *name, size_t cap, char **out, size_t *len_out,
                    struct gh_err *err)
{
    *out = NULL;
    *len_out = 0;
    int rc = GH_OK;
    size_t len = 0, size = 4096;
    char *buf = malloc(size);
    if (!buf)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    for (;;) {
        if (len + 1 >= size) {
            if (size > cap) {
                rc = gh_err_set(err, GH_ELIMIT, "%s: larger than %zu bytes", name, cap);
                goto out;
            }
            size_t nsize = size * 2 > cap + 2 ? cap + 2 : size * 2;
            char *nb = realloc(buf, nsize);
            if (!nb) {
                rc = gh_err_set(err, GH_ENOMEM, "out of memory");
                goto out;
            }
            buf = nb;
            size = nsize;
        }
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = gh_err_set(err, GH_EIO, "%s: %s", name, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > cap) {
            rc = gh_err_set(err, GH_ELIMIT, "%s: larger than %zu bytes", name, cap);
            goto out;
        }
    }
    buf[len] = '\0';
    *out = buf;
    *len_out = len;
    buf = NULL;
out:
    free(buf);
    return rc;
}

int gh_file_read(const char *path, size_t cap, char **out, size_t *len, struct gh_err *err)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gh_err_set(err, errno == ENOENT ? GH_ENOTFOUND : GH_EIO, "%s: %s", path,
                          strerror(errno));
    int rc = gh_file_read_fd(fd, path, cap, out, len, err);
    close(fd);
    return rc;
}
