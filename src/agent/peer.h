/* peer.h - who is writing to the telemetry socket: the connecting
 * process's credentials, from the kernel (SO_PEERCRED), and the pod it
 * runs in, from its cgroup (/proc/<pid>/cgroup).
 *
 * The kubelet puts every container of a pod under a cgroup whose path
 * names the pod's UID, in either driver's layout:
 *   cgroupfs: .../kubepods/burstable/pod<uid>/<container>
 *             .../kubepods/pod<uid>/<container>            (Guaranteed)
 *   systemd:  .../kubepods.slice/kubepods-burstable.slice/
 *             kubepods-burstable-pod<uid, '-' as '_'>.slice/cri-...scope
 * under cgroup v1 (one line per hierarchy) and v2 (one "0::" line), and
 * relative ("/../..") when read from another cgroup namespace (the agent's
 * own, with cgroup v2): then the common kubepods ancestor is hidden, and a
 * pod<uid> segment after ".." counts. A process
 * cannot leave its pod's cgroup without privileges the pod does not have,
 * so the path is the pod's identity as far as the node's kernel knows it.
 *
 * Threads: no shared state; every function is reentrant. */
#ifndef GH_AGENT_PEER_H
#define GH_AGENT_PEER_H

#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

#define GH_PEER_UID_MAX 40      /* a pod UID (36 bytes) and its NUL */
#define GH_PEER_CGROUP_MAX 8192 /* bytes of /proc/<pid>/cgroup read */

/* A connected peer (a small value type). pod_uid "" = in no pod. */
struct gh_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    char pod_uid[GH_PEER_UID_MAX];
};

/* Parses the text of a /proc/<pid>/cgroup file (text[0..n), borrowed, need
 * not be NUL-terminated): the UID of the pod its paths name, written to
 * uid[0..cap) in the API's form (lowercase, '-' separated; cap at least
 * GH_PEER_UID_MAX). A pod segment counts only under a "kubepods" segment
 * or a ".." one (or, systemd, in a "kubepods-..." slice), and the UID must
 * be 32 hex digits, in the 8-4-4-4-12 form or plain (a static pod's). GH_OK;
 * GH_ENOTFOUND when no line names a pod (a host process); GH_EINVAL when
 * two lines name different pods, or a pod segment is malformed (err says
 * which line). */
int gh_peer_pod_uid_parse(const char *text, size_t n, char *uid, size_t cap, struct gh_err *err);

/* Identifies the peer of the connected Unix socket fd: SO_PEERCRED, then
 * <proc_root>/<pid>/cgroup (proc_root borrowed; NULL = "/proc"; tests
 * point it at a directory of their own). GH_OK with *out filled (pod_uid
 * "" for a process in no pod); GH_EIO when the credentials or the cgroup
 * file cannot be read (a peer in a PID namespace the agent cannot see has
 * pid 0); GH_EINVAL as gh_peer_pod_uid_parse. */
int gh_peer_identify(int fd, const char *proc_root, struct gh_peer *out, struct gh_err *err);

#endif
