/* peer.c - the telemetry socket's peer: SO_PEERCRED and the pod UID its
 * cgroup path names (peer.h). */
#include "agent/peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/* s[0..n) is a pod UID as a cgroup path writes it (sep '-' for cgroupfs,
 * '_' for systemd): 8-4-4-4-12 hex digits, or 32 plain (a static pod's
 * config hash). Writes the API form to uid. */
static bool uid_form(const char *s, size_t n, char sep, char *uid)
{
    if (n == 32) {
        for (size_t i = 0; i < n; i++)
            if (!is_hex(s[i]))
                return false;
        memcpy(uid, s, n);
        uid[n] = '\0';
        return true;
    }
    if (n != 36)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != sep : !is_hex(s[i]))
            return false;
        uid[i] = dash ? '-' : s[i];
    }
    uid[n] = '\0';
    return true;
}

static bool has_prefix(const char *s, size_t n, const char *p)
{
    size_t pl = strlen(p);
    return n >= pl && memcmp(s, p, pl) == 0;
}

/* The pod UID of one path segment seg[0..n), after a "kubepods" segment
 * (under_kubepods) or in a systemd kubepods slice. 1 found (uid set), 0
 * none, -1 a pod segment that is malformed. */
static int segment_uid(const char *seg, size_t n, bool under_kubepods, char *uid)
{
    static const char slice[] = ".slice";
    const size_t sl = sizeof slice - 1;
    if (n > sl && memcmp(seg + n - sl, slice, sl) == 0 &&
        (has_prefix(seg, n, "kubepods-") || memmem(seg, n, "-kubepods-", 10))) {
        /* systemd: [kubelet-]kubepods[-<qos>]-pod<uid>.slice */
        const char *p = NULL;
        for (size_t i = 0; i + 4 <= n - sl; i++)
            if (memcmp(seg + i, "-pod", 4) == 0)
                p = seg + i + 4;
        if (!p)
            return 0; /* kubepods-burstable.slice: a QoS class, no pod */
        return uid_form(p, (size_t)(seg + n - sl - p), '_', uid) ? 1 : -1;
    }
    if (under_kubepods && n > 3 && memcmp(seg, "pod", 3) == 0)
        return uid_form(seg + 3, n - 3, '-', uid) ? 1 : -1; /* cgroupfs */
    return 0;
}

int gh_peer_pod_uid_parse(const char *text, size_t n, char *uid, size_t cap, struct gh_err *err)
{
    char found[GH_PEER_UID_MAX] = "", cur[GH_PEER_UID_MAX];
    long line = 0;
    if (cap < GH_PEER_UID_MAX)
        return gh_err_set(err, GH_EINVAL, "cgroup: uid buffer of %zu bytes", cap);
    for (size_t pos = 0; pos < n;) {
        const char *ln = text + pos;
        const char *nl = memchr(ln, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - ln) : n - pos;
        pos += len + 1;
        line++;
        /* hierarchy-ID:controllers:path; the path may hold ':' itself */
        const char *c1 = memchr(ln, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - ln)) : NULL;
        if (!c2)
            continue;
        const char *path = c2 + 1, *end = ln + len;
        bool under = false;
        while (path < end) {
            while (path < end && *path == '/')
                path++;
            const char *sl = memchr(path, '/', (size_t)(end - path));
            size_t sn = sl ? (size_t)(sl - path) : (size_t)(end - path);
            if (sn == 0)
                break;
            int r = segment_uid(path, sn, under, cur);
            if (r < 0)
                return gh_err_set(err, GH_EINVAL,
                                  "cgroup line %ld: a pod segment \"%.*s\" "
                                  "without a valid pod UID",
                                  line, (int)(sn < 80 ? sn : 80), path);
            if (r > 0) {
                if (found[0] && strcmp(found, cur) != 0)
                    return gh_err_set(err, GH_EINVAL,
                                      "cgroup line %ld: pod %s, but an earlier "
                                      "line names pod %s",
                                      line, cur, found);
                memcpy(found, cur, sizeof found);
                break;
            }
            /* under kubepods; or above the reader's own cgroup namespace
             * (".."), where the kubepods ancestor the reader shares is
             * hidden: cgroupfs paths read from a pod's namespace are
             * "/../../burstable/pod<uid>/..." */
            if ((sn == 8 && memcmp(path, "kubepods", 8) == 0) ||
                has_prefix(path, sn, "kubepods.") || (sn == 2 && memcmp(path, "..", 2) == 0))
                under = true;
            path += sn;
        }
    }
    if (!found[0])
        return gh_err_set(err, GH_ENOTFOUND, "cgroup: no line names a pod");
    memcpy(uid, found, sizeof found);
    return GH_OK;
}

int gh_peer_identify(int fd, const char *proc_root, struct gh_peer *out, struct gh_err *err)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    memset(out, 0, sizeof *out);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
        return gh_err_set(err, GH_EIO, "SO_PEERCRED: %s", strerror(errno));
    out->pid = cr.pid;
    out->uid = cr.uid;
    out->gid = cr.gid;
    if (cr.pid <= 0)
        return gh_err_set(err, GH_EIO,
                          "the peer's process is not visible here (pid %d: "
                          "another PID namespace; the agent needs hostPID)",
                          (int)cr.pid);
    char path[512], buf[GH_PEER_CGROUP_MAX];
    snprintf(path, sizeof path, "%s/%d/cgroup", proc_root ? proc_root : "/proc", (int)cr.pid);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return gh_err_set(err, GH_EIO, "%s: %s", path, strerror(errno));
    size_t n = 0;
    while (n < sizeof buf) {
        ssize_t r = read(f, buf + n, sizeof buf - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(f);
    int rc = gh_peer_pod_uid_parse(buf, n, out->pod_uid, sizeof out->pod_uid, err);
    if (rc == GH_ENOTFOUND) {
        out->pod_uid[0] = '\0';
        return GH_OK;
    }
    if (rc)
        return gh_err_prefix(err, rc, "%s", path);
    return GH_OK;
}
