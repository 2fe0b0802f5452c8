/* classify.c - pod-failure verdicts and the wording of places, shared by detectors. */
#include "engine/classify.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool contains_ci(const char *hay, const char *needle)
{
    return hay && strcasestr(hay, needle) != NULL;
}

bool gh_classify_collective_text(const char *t)
{
    static const char *const marks[] = {
        "watchdog", "timed out", "timeout", "collective operation", "hang", "hung",
        "nccl communicator was aborted", "ncclRemoteError", "heartbeat",
    };
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (contains_ci(t, marks[i]))
            return true;
    return false;
}

enum gh_podfail gh_classify_pod_failure(const struct gh_signal *s)
{
    const char *r = s->reason;
    if (r && (strcasecmp(r, "OOMKilled") == 0 || contains_ci(r, "OutOfMemory")))
        return GH_PF_OOM;
    if (r && (strcasecmp(r, "Evicted") == 0 || strcasecmp(r, "Preempted") == 0 ||
              strcasecmp(r, "Preempting") == 0 || strcasecmp(r, "Completed") == 0 ||
              strcasecmp(r, "DeadlineExceeded") == 0 || strcasecmp(r, "Shutdown") == 0 ||
              strcasecmp(r, "Terminated") == 0 || strcasecmp(r, "NodeShutdown") == 0))
        return GH_PF_IGNORE;
    if (s->has_exit_code && s->exit_code == 137 && !s->msg && !r)
        return GH_PF_OOM;
    if (gh_classify_collective_text(s->msg) || gh_classify_collective_text(r))
        return GH_PF_COLLECTIVE;
    if (s->has_exit_code && s->exit_code == 0 && (!r || strcasecmp(r, "Error") != 0))
        return GH_PF_IGNORE;
    return GH_PF_APP;
}

bool gh_classify_host_failure(const struct gh_signal *s)
{
    static const char *const reasons[] = {
        "CreateContainerError",   "RunContainerError",        "StartError", "ContainerCannotRun",
        "ContainerStatusUnknown", "UnexpectedAdmissionError", "NodeLost",
    };
    static const char *const marks[] = {
        "read-only file system",
        "OCI runtime",
        "failed to create containerd task",
        "failed to create shim",
        "context deadline exceeded",
    };
    if (s->kind != GH_KIND_POD_FAILED)
        return false;
    for (size_t i = 0; s->reason && i < sizeof reasons / sizeof reasons[0]; i++)
        if (strcasecmp(s->reason, reasons[i]) == 0)
            return true;
    if (s->has_exit_code && s->exit_code == 128)
        return true; /* the runtime's own "could not start the process" */
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (contains_ci(s->msg, marks[i]) || contains_ci(s->reason, marks[i]))
            return true;
    return false;
}

const char *gh_where(const char *node, int gpu, char *buf, size_t cap)
{
    if (!node)
        gh_sfmt(buf, cap, "an unknown node");
    else if (gpu >= 0)
        gh_sfmt(buf, cap, "%s GPU %d", node, gpu);
    else
        gh_sfmt(buf, cap, "%s", node);
    return buf;
}

int gh_sfmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}
