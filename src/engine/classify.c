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

enum gh_stated gh_classify_stated(const char *msg)
{
    if (!msg)
        return GH_STATED_NONE;
    if (contains_ci(msg, "non-fatal") || contains_ci(msg, "nonfatal") ||
        contains_ci(msg, "non fatal"))
        return GH_STATED_NONFATAL;
    return contains_ci(msg, "fatal") ? GH_STATED_FATAL : GH_STATED_NONE;
}

enum gh_severity gh_classify_stated_severity(enum gh_severity sev, enum gh_stated st)
{
    if (sev <= GH_SEV_INFO)
        return sev;
    if (st == GH_STATED_NONFATAL)
        return GH_SEV_LOW;
    if (st == GH_STATED_FATAL && sev < GH_SEV_HIGH)
        return GH_SEV_HIGH;
    return sev;
}

enum gh_severity gh_classify_sxid(int code, const char *msg)
{
    static const int ignore[] = {10001, 10002, 10005, 11012, 11021, 11022, 11023, 12021,
                                 12023, 15008, 15011, 19049, 20001, 22013, 26008};
    static const int minor[] = {10004, 11004, 20009, 20010, 20012, 25010, 28001, 28003, 28005};
    static const int fatal[] = {10003, 12020, 12028, 14017, 19084, 22003, 22011, 28006};
    enum gh_severity sev = GH_SEV_MEDIUM;
    bool known = false;
    for (size_t i = 0; i < sizeof ignore / sizeof ignore[0]; i++)
        if (code == ignore[i])
            return GH_SEV_INFO;
    for (size_t i = 0; !known && i < sizeof minor / sizeof minor[0]; i++)
        if (code == minor[i]) {
            sev = GH_SEV_LOW;
            known = true;
        }
    if (!known && code >= 27001 && code <= 27007) {
        sev = GH_SEV_LOW;
        known = true;
    }
    for (size_t i = 0; !known && i < sizeof fatal / sizeof fatal[0]; i++)
        if (code == fatal[i]) {
            sev = GH_SEV_CRITICAL;
            known = true;
        }
    if (!known && ((code >= 23001 && code <= 23017 && code != 23009 && code != 23017) ||
                   (code >= 26001 && code <= 26007))) {
        sev = GH_SEV_CRITICAL;
        known = true;
    }
    if (!known && (code == 20034 || (code >= 24007 && code <= 24010))) {
        sev = GH_SEV_HIGH;
        known = true;
    }
    /* the line's own word, where it says one, over the code's class */
    return gh_classify_stated_severity(sev, gh_classify_stated(msg));
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
    /* a runtime's or a driver call's "timed out" while the pod was being
     * created is no collective's: the pod never ran */
    if (gh_classify_pod_rejected(s))
        return GH_PF_APP;
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

bool gh_classify_pod_rejected(const struct gh_signal *s)
{
    /* the kubelet's admission (a device plugin's Allocate) and the
     * runtime's create and start: the pod never ran */
    static const char *const reasons[] = {
        "UnexpectedAdmissionError", "CreateContainerError", "RunContainerError", "StartError",
        "ContainerCannotRun",
    };
    static const char *const marks[] = {
        "failed to create containerd task",
        "failed to create shim",
        "OCI runtime create failed",
        "nvidia-container-cli",
        "Allocate failed",
        "CDI device injection failed",
    };
    /* what the pod's own image or spec got wrong (its entrypoint, its
     * command): the job's, wherever it runs */
    static const char *const own[] = {
        "executable file not found",
        "exec format error",
        "no command specified",
        "exec: \"",
    };
    if (s->kind != GH_KIND_POD_FAILED)
        return false;
    bool rejected = false;
    for (size_t i = 0; !rejected && s->reason && i < sizeof reasons / sizeof reasons[0]; i++)
        rejected = strcasecmp(s->reason, reasons[i]) == 0;
    for (size_t i = 0; !rejected && i < sizeof marks / sizeof marks[0]; i++)
        rejected = contains_ci(s->msg, marks[i]);
    if (!rejected)
        return false;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (contains_ci(s->msg, own[i]) && !contains_ci(s->msg, "nvidia"))
            return false;
    return true;
}

bool gh_classify_pod_admission(const struct gh_signal *s)
{
    return s->kind == GH_KIND_POD_FAILED && s->reason &&
           strcasecmp(s->reason, "UnexpectedAdmissionError") == 0;
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
