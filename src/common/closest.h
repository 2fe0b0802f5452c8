/* closest.h - "did you mean": the known word nearest a misspelt one. */
#ifndef GH_COMMON_CLOSEST_H
#define GH_COMMON_CLOSEST_H

/* The name among candidates (NULL-terminated) closest to word by edit
 * distance (Levenshtein), when within 2 edits (1 for words of 4 letters or
 * fewer), else NULL. Words of 64 bytes or more match nothing. */
const char *gh_closest_word(const char *word, const char *const *candidates);

#endif
