/* file.h - the one whole-file reader: a file (or an open descriptor) into a
 * new NUL-terminated buffer of at most cap bytes, with an error value that
 * says whether it was absent, unreadable or too large. Kubeconfigs, service
 * account files and the policy loaders read through it. */
#ifndef GH_COMMON_FILE_H
#define GH_COMMON_FILE_H

#include <stddef.h>

#include "common/err.h"

/* Reads fd (borrowed, not closed; read until end of file) into *out (new,
 * NUL-terminated, not counted in *len; caller frees; NULL on error). name
 * goes into messages ("NAME: <reason>"). GH_EIO when a read fails,
 * GH_ELIMIT when more than cap bytes follow, GH_ENOMEM. */
int gh_file_read_fd(int fd, const char *name, size_t cap, char **out, size_t *len,
                    struct gh_err *err);

/* Opens path and reads it as gh_file_read_fd does; GH_ENOTFOUND when it does
 * not exist, GH_EIO when it cannot be opened. */
int gh_file_read(const char *path, size_t cap, char **out, size_t *len, struct gh_err *err);

#endif
