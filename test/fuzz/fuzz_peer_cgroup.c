/* fuzz_peer_cgroup.c - libFuzzer target for the telemetry socket's
 * /proc/<pid>/cgroup parser (gh_peer_pod_uid_parse): arbitrary text, not
 * NUL-terminated. A found UID must be 32 lowercase hex digits, plain or in
 * the 8-4-4-4-12 form, NUL-terminated within GH_PEER_UID_MAX, and the
 * parse of the same bytes must give the same answer (aborts otherwise).
 * Seeds: test/fuzz/peer_cgroup/. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/peer.h"

static void check_uid(const char *uid)
{
    size_t n = strnlen(uid, GH_PEER_UID_MAX);
    if (n != 32 && n != 36)
        abort();
    for (size_t i = 0; i < n; i++) {
        char c = uid[i];
        bool dash = n == 36 && (i == 8 || i == 13 || i == 18 || i == 23);
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes: reads past it are caught */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    char a[GH_PEER_UID_MAX], b[GH_PEER_UID_MAX];
    struct gh_err err;
    int ra = gh_peer_pod_uid_parse(text, size, a, sizeof a, &err);
    int rb = gh_peer_pod_uid_parse(text, size, b, sizeof b, NULL);
    if (ra != rb || (ra != GH_OK && ra != GH_ENOTFOUND && ra != GH_EINVAL))
        abort();
    if (ra == GH_OK) {
        check_uid(a);
        if (strcmp(a, b) != 0)
            abort();
    }
    free(text);
    return 0;
}
