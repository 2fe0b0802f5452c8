/* xid.c - `gpuheal xid [--json] [CODE...]`: the XID catalog as the engine sees it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"
#include "signal/xid_catalog.h"

static json_t *info_json(const struct gh_xid_info *x, long asked)
{
    json_t *actions = json_array();
    for (int i = 0; i < x->n_actions; i++)
        json_array_append_new(actions, json_string(gh_action_name(x->actions[i])));
    return json_pack("{s:I, s:b, s:s, s:s, s:s, s:s, s:b, s:b, s:o}", "code", (json_int_t)asked,
                     "known", x->code >= 0, "name", x->name, "summary", x->summary, "class",
                     gh_class_name(x->cls), "severity", gh_severity_name(x->severity),
                     "application", x->application, "secondary", x->secondary, "actions",
                     actions);
}

static void print_text(const struct gh_xid_info *x, long asked)
{
    char actions[256] = "";
    size_t used = 0;
    for (int i = 0; i < x->n_actions && used < sizeof actions; i++)
        used += (size_t)snprintf(actions + used, sizeof actions - used, "%s%s", i ? "," : "",
                                 gh_action_name(x->actions[i]));
    printf("%-5ld %-22s %-8s %-40s %s%s\n", asked, gh_class_name(x->cls),
           gh_severity_name(x->severity), actions, x->summary, x->code < 0 ? " (not in catalog)" : "");
}

static void emit(const struct gh_xid_info *x, long asked, int as_json)
{
    if (as_json) {
        json_t *j = info_json(x, asked);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s)
            puts(s);
        free(s);
        json_decref(j);
    } else {
        print_text(x, asked);
    }
}

int gh_cmd_xid(int argc, char **argv)
{
    int as_json = 0, first = 1;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (strcmp(argv[first], "--json") == 0) {
            as_json = 1;
        } else if (strcmp(argv[first], "-h") == 0 || strcmp(argv[first], "--help") == 0) {
            printf("usage: gpuheal xid [--json] [CODE...]\n"
                   "Prints the catalog (all codes, or the given ones): class, severity,\n"
                   "default actions. An unknown code maps to class unknown, run_diagnostics.\n");
            return 0;
        } else {
            fprintf(stderr, "gpuheal xid: unknown option \"%s\"\n", argv[first]);
            return 2;
        }
    }
    if (first == argc) {
        for (int i = 0; i < gh_xid_count(); i++)
            emit(gh_xid_at(i), gh_xid_at(i)->code, as_json);
        return 0;
    }
    for (int i = first; i < argc; i++) {
        char *end;
        long code = strtol(argv[i], &end, 10);
        if (end == argv[i] || *end || code < 0 || code > 1000000) {
            fprintf(stderr, "gpuheal xid: \"%s\" is not an XID code (a non-negative integer)\n",
                    argv[i]);
            return 2;
        }
        emit(gh_xid_lookup((int)code), code, as_json);
    }
    return 0;
}
