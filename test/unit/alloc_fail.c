/* alloc_fail.c - the wrapped allocation functions behind alloc_fail.h: a
 * counter and one armed failure, forwarding to the real functions. */
#include "alloc_fail.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

/* The injector's state. A test binary's own, single-threaded use only. */
static unsigned long af_calls;   /* wrapped calls since gh_af_fail_at */
static unsigned long af_fail_at; /* 0 = never */
static bool af_failed;
static unsigned af_paused;       /* gh_af_pause depth */

void gh_af_fail_at(unsigned long n)
{
    af_calls = 0;
    af_fail_at = n;
    af_failed = false;
}

bool gh_af_disarm(void)
{
    bool failed = af_failed;
    af_fail_at = 0;
    af_failed = false;
    return failed;
}

unsigned long gh_af_calls(void)
{
    return af_calls;
}

void gh_af_pause(void)
{
    af_paused++;
}

void gh_af_resume(void)
{
    af_paused--;
}

/* True when this call is the one to fail. */
static bool af_fail_now(void)
{
    if (af_paused)
        return false;
    af_calls++;
    if (af_fail_at && af_calls == af_fail_at) {
        af_failed = true;
        return true;
    }
    return false;
}

/* A failed call sets errno as glibc's does. */
static void *af_null(void)
{
    errno = ENOMEM;
    return NULL;
}

void *__wrap_malloc(size_t n)
{
    return af_fail_now() ? af_null() : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return af_fail_now() ? af_null() : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    /* realloc(p, 0) frees p: not an allocation that can fail */
    if (n == 0 && p)
        return __real_realloc(p, n);
    return af_fail_now() ? af_null() : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    return af_fail_now() ? af_null() : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return af_fail_now() ? af_null() : __real_strndup(s, n);
}

unsigned long gh_af_each(int (*op)(void *ctx), void *ctx, bool must_fail, unsigned long max_n)
{
    for (unsigned long n = 1; n <= max_n; n++) {
        gh_af_fail_at(n);
        int rc = op(ctx);
        bool failed = gh_af_disarm();
        if (!failed) {
            /* fewer than n allocations: this run had no failure */
            if (rc != 0)
                fail_msg("the run without an injected failure failed (rc %d, %lu allocations)",
                         rc, n - 1);
            return n - 1;
        }
        if (must_fail && rc == 0)
            fail_msg("allocation %lu failed but the operation reported success", n);
    }
    fail_msg("still allocating after %lu failure points", max_n);
    return max_n;
}

unsigned long gh_af_sample(int (*op)(void *ctx), void *ctx, bool must_fail,
                           unsigned long points)
{
    gh_af_fail_at(0);
    int rc = op(ctx);
    unsigned long total = gh_af_calls();
    gh_af_disarm();
    if (rc != 0)
        fail_msg("the run without an injected failure failed (rc %d)", rc);
    if (total <= points)
        return gh_af_each(op, ctx, must_fail, total + 1);
    for (unsigned long i = 0; i < points; i++) {
        unsigned long n = 1 + i * (total - 1) / (points - 1);
        gh_af_fail_at(n);
        rc = op(ctx);
        bool failed = gh_af_disarm();
        if (!failed)
            fail_msg("allocation %lu of %lu was not made: the operation is not repeatable", n,
                     total);
        if (must_fail && rc == 0)
            fail_msg("allocation %lu failed but the operation reported success", n);
    }
    return total;
}

int gh_af_setup(void **state)
{
    (void)state;
    gh_af_disarm();
    af_paused = 0;
    return 0;
}
