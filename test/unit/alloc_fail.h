/* alloc_fail.h - allocation-failure injection for gpuheal's own allocations,
 * for the unit tests named test_oom_*.c.
 *
 * Those tests are linked with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc,--wrap=strdup,--wrap=strndup (CMakeLists.txt): every call
 * that the static library ghcore and the test itself make goes through
 * alloc_fail.c, which forwards to the real function (under ASan: ASan's)
 * and, when armed, fails one chosen call. Shared libraries (libc inside,
 * jansson, libyaml, cmocka) keep the real functions, so only gpuheal's own
 * allocations are failed; jansson's are failed through json_set_alloc_funcs
 * (test_signal_json.c, test_kube_store.c). free is not wrapped.
 *
 * Nothing here is thread-safe: the oom tests run the code under test on
 * their own thread only. */
#ifndef GH_TEST_ALLOC_FAIL_H
#define GH_TEST_ALLOC_FAIL_H

#include <stdbool.h>

/* Arms the injector: the n-th wrapped allocation from now (1-based) returns
 * NULL, and every other succeeds. n = 0 disarms it (no failure, still
 * counting). */
void gh_af_fail_at(unsigned long n);
/* Disarms; returns true when the armed failure happened since
 * gh_af_fail_at. */
bool gh_af_disarm(void);
/* Wrapped allocations since the last gh_af_fail_at. */
unsigned long gh_af_calls(void);
/* Between pause and resume (nestable) allocations are neither counted nor
 * failed: for a test's own bookkeeping inside a callback of the code under
 * test. */
void gh_af_pause(void);
void gh_af_resume(void);

/* Runs op(ctx) with the n-th allocation failing, for n = 1, 2, 3, ...
 * until a run makes fewer than n allocations (the run that succeeds with
 * no failure injected), at most max_n runs. op returns 0 for success and
 * anything else for an error, and must itself check that what it got is
 * right: on success the result equals the one without injection (op
 * compares), on error nothing was half-done. op must free what it made
 * either way (ASan's leak check at exit finds what it did not). Returns
 * the number of failure points exercised; fails the cmocka test when the
 * last run did not succeed, when a failed allocation was followed by
 * success where the caller requires an error (must_fail), or when max_n
 * is reached. */
unsigned long gh_af_each(int (*op)(void *ctx), void *ctx, bool must_fail,
                         unsigned long max_n);

/* The same for a long operation: runs op once without injection to count
 * its allocations T, then with the n-th failing for `points` values of n
 * spread evenly over 1..T (all of them when T <= points). Returns T. */
unsigned long gh_af_sample(int (*op)(void *ctx), void *ctx, bool must_fail,
                           unsigned long points);

/* A cmocka setup function: disarms and resumes, so that a test that failed
 * inside an armed run does not leave the next one armed. */
int gh_af_setup(void **state);

#endif
