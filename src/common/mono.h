/* mono.h - the monotonic clock for intervals and deadlines inside a process
 * (timeouts, poll periods, worker deadlines), and condition variables that
 * wait on it so that a wall-clock step never stretches or cuts a wait.
 * Wall-clock time for signals comes from struct gh_clock (timeutil.h). */
#ifndef GH_COMMON_MONO_H
#define GH_COMMON_MONO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t gh_mono_ns(void);

/* Initialises cond to time its waits on CLOCK_MONOTONIC. Returns 0 or an
 * errno value, like pthread_cond_init. */
int gh_cond_init_monotonic(pthread_cond_t *cond);

/* Waits on cond (initialised by gh_cond_init_monotonic, mu held) until it is
 * signalled or the monotonic time at_ns passes. Returns false once at_ns has
 * passed, true when woken earlier (callers re-check their predicate). */
bool gh_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t at_ns);

#endif
