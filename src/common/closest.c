/* closest.c - the known word nearest a misspelt one, for "did you mean". */
#include "common/closest.h"

#include <string.h>

#define WORD_MAX 64

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= WORD_MAX || lb >= WORD_MAX)
        return WORD_MAX;
    size_t prev[WORD_MAX + 1], cur[WORD_MAX + 1];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

const char *gh_closest_word(const char *word, const char *const *candidates)
{
    const char *best = NULL;
    size_t best_d = WORD_MAX, limit = strlen(word) <= 4 ? 1 : 2;
    for (size_t i = 0; candidates[i]; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best_d <= limit ? best : NULL;
}
