/* policy_cmd.c - `gpuheal policy lint FILE...` (problems with line numbers)
 * and `gpuheal policy default` (the built-in policy as YAML). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"

static int lint_one(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    char *buf = malloc(GH_POLICY_MAX_BYTES + 1);
    size_t len = buf ? fread(buf, 1, GH_POLICY_MAX_BYTES + 1, f) : 0;
    if (f != stdin)
        fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    struct gh_policy *p = NULL;
    struct gh_policy_diags d;
    gh_policy_parse(buf, len, &p, &d);
    free(buf);
    for (int i = 0; i < d.n; i++)
        printf("%s:%d: %s: %s\n", path, d.d[i].line, d.d[i].error ? "error" : "warning", d.d[i].msg);
    if (d.errors + d.warnings > d.n)
        printf("%s: %d more problems not shown\n", path, d.errors + d.warnings - d.n);
    if (p)
        printf("%s: %s (%d rules, %d warning%s)\n", path, d.warnings ? "usable" : "ok", p->n_rules,
               d.warnings, d.warnings == 1 ? "" : "s");
    else
        printf("%s: %d error%s\n", path, d.errors, d.errors == 1 ? "" : "s");
    gh_policy_free(p);
    return p || !d.errors ? 0 : 1;
}

int gh_cmd_policy(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "lint") == 0) {
        if (argc < 3) {
            fprintf(stderr, "usage: gpuheal policy lint FILE...\n");
            return 2;
        }
        int rc = 0;
        for (int i = 2; i < argc; i++)
            rc |= lint_one(argv[i]);
        return rc;
    }
    if (argc >= 2 && strcmp(argv[1], "default") == 0) {
        fputs(gh_policy_default_yaml(), stdout);
        return 0;
    }
    FILE *out = argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) ? stdout
                                                                                           : stderr;
    fprintf(out, "usage: gpuheal policy lint FILE...   check policies; problems as FILE:LINE: ...\n"
                 "       gpuheal policy default        print the built-in policy (YAML)\n"
                 "Exit status of lint: 0 when every file is usable, 1 when one has errors.\n");
    return out == stdout ? 0 : 2;
}
