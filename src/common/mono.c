/* mono.c - monotonic time and condition-variable waits on it. */
#include "common/mono.h"

#include <errno.h>
#include <time.h>

#include "common/timeutil.h"

int64_t gh_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

int gh_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

bool gh_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t at_ns)
{
    struct timespec ts = {.tv_sec = at_ns / GH_NS_PER_S, .tv_nsec = at_ns % GH_NS_PER_S};
    return pthread_cond_timedwait(cond, mu, &ts) != ETIMEDOUT || gh_mono_ns() < at_ns;
}
