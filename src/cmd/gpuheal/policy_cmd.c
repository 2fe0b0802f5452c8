/* policy_cmd.c - `gpuheal policy lint FILE...` (problems with line numbers)
 * and `gpuheal policy default` (the built-in policy as YAML). A file is
 * either gpuheal's policy file (version, settings, rules: --policy) or
 * RecoveryPolicy objects (apiVersion gpuheal.io/v1alpha1, what users
 * kubectl apply), linted as the controller reads them. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd/gpuheal/commands.h"
#include "common/file.h"
#include "common/json.h"
#include "control/policy_cr.h"
#include "kube/schema.h"
#include "kube/yaml_json.h"
#include "kube/yaml_lines.h"

#define CR_API_VERSION "gpuheal.io/v1alpha1"

/* The first YAML document of text names apiVersion or kind: the object form. */
static bool object_form(const char *text, size_t len)
{
    json_t *doc = NULL;
    struct gh_err err = {{0}};
    bool yes = false;
    if (gh_yaml_to_json(text, len, &doc, &err) == GH_OK && json_is_object(doc))
        yes = json_object_get(doc, "apiVersion") || json_object_get(doc, "kind");
    json_decref(doc);
    return yes;
}

#define LINT_MAX_OBJECTS 64

struct lint_names {
    char name[LINT_MAX_OBJECTS][254];
    int n;
};

/* The RecoveryPolicy CRD's openAPIV3Schema (new reference), NULL when the
 * embedded CRD does not parse (a build defect: said on stderr). */
static json_t *policy_schema(void)
{
    const char *crd = gh_crd_recoverypolicy_yaml();
    json_t *doc = NULL;
    struct gh_err err = {{0}};
    if (gh_yaml_to_json(crd, strlen(crd), &doc, &err) != GH_OK) {
        fprintf(stderr, "gpuheal policy lint: the embedded RecoveryPolicy CRD: %s\n", err.msg);
        return NULL;
    }
    json_t *s = json_object_get(
        json_object_get(
            json_array_get(json_object_get(json_object_get(doc, "spec"), "versions"), 0), "schema"),
        "openAPIV3Schema");
    json_incref(s);
    json_decref(doc);
    return s;
}

/* Where a document's problem is reported: its field's line when the path
 * is found in the document's text, else the document's first line. */
struct lint_doc {
    const char *path; /* the file */
    int line;         /* the document's first line in it */
    const char *text;
    size_t len;
    const char *name; /* the object's metadata.name */
};

static int doc_line(const struct lint_doc *d, const char *field)
{
    char f[200];
    snprintf(f, sizeof f, "%s", field ? field : "");
    /* a field that is missing: the line of the nearest enclosing one */
    for (;;) {
        int at = *f ? gh_yaml_line_of(d->text, d->len, f) : 0;
        if (at)
            return d->line + at - 1;
        char *cut = strrchr(f, '.'), *br = strrchr(f, '[');
        if (br && (!cut || br > cut))
            cut = br;
        if (!cut)
            return d->line;
        *cut = '\0';
    }
}

struct schema_count {
    const struct lint_doc *doc;
    int n;
};

static int schema_problem(void *ctx, const struct gh_schema_problem *p)
{
    const struct lint_doc *d = ((struct schema_count *)ctx)->doc;
    ((struct schema_count *)ctx)->n++;
    printf("%s:%d: error: RecoveryPolicy \"%s\": %s: %s\n", d->path, doc_line(d, p->path), d->name,
           p->path, p->msg);
    return 0;
}

/* The field path a controller message starts with ("spec.rules[0].name: ..."),
 * into buf; NULL when it names none. */
static const char *message_field(const char *msg, char *buf, size_t cap)
{
    size_t n = strcspn(msg, ": ");
    if (strncmp(msg, "spec.", 5) != 0 || msg[n] != ':' || n >= cap)
        return NULL;
    memcpy(buf, msg, n);
    buf[n] = '\0';
    return buf;
}

/* One document of the object form, starting at line `line`: how many
 * errors it has (0: ok), -1 for an empty document (a trailing ---, only
 * comments). */
static int lint_object(const char *path, int line, const char *text, size_t len,
                       const json_t *schema, struct gh_policy_crset *set, struct lint_names *seen,
                       int *n_rules)
{
    json_t *doc = NULL;
    struct gh_err err = {{0}};
    if (gh_yaml_to_json(text, len, &doc, &err) != GH_OK) {
        printf("%s:%d: error: %s\n", path, line, err.msg);
        return 1;
    }
    int rc = 1;
    const char *api = gh_json_str(doc, "apiVersion");
    const char *kind = gh_json_str(doc, "kind");
    const char *name = gh_json_str(doc, "metadata", "name");
    struct lint_doc ld = {path, line, text, len, name};
    struct schema_count sc = {&ld, 0};
    bool dup = false;
    for (int i = 0; name && i < seen->n; i++)
        dup = dup || !strcmp(seen->name[i], name);
    if (json_is_null(doc)) {
        rc = -1;
    } else if (!json_is_object(doc)) {
        printf("%s:%d: error: a RecoveryPolicy object is a mapping\n", path, line);
    } else if (!api || strcmp(api, CR_API_VERSION) != 0) {
        printf("%s:%d: error: apiVersion \"%s\": expected " CR_API_VERSION "\n", path, line,
               api ? api : "");
    } else if (!kind || strcmp(kind, "RecoveryPolicy") != 0) {
        printf("%s:%d: error: kind \"%s\": expected RecoveryPolicy\n", path, line, kind ? kind : "");
    } else if (!name || !*name) {
        printf("%s:%d: error: metadata.name missing\n", path, line);
    } else if (dup) {
        printf("%s:%d: error: RecoveryPolicy \"%s\" appears twice in the file (applied, the "
               "second replaces the first)\n", path, line, name);
    } else if (seen->n == LINT_MAX_OBJECTS) {
        printf("%s:%d: error: more than %d RecoveryPolicy objects in one file\n", path, line,
               LINT_MAX_OBJECTS);
    } else if (!json_is_object(json_object_get(doc, "spec"))) {
        printf("%s:%d: error: RecoveryPolicy \"%s\": spec missing\n", path, line, name);
    } else if (schema && gh_schema_check(schema, doc, "", schema_problem, &sc)) {
        /* refused by the API server as it stands: what the controller would
         * say of the rest would only follow from these */
        snprintf(seen->name[seen->n++], sizeof seen->name[0], "%s", name);
        rc = sc.n;
    } else {
        snprintf(seen->name[seen->n++], sizeof seen->name[0], "%s", name);
        struct gh_policy_cr_verdict v;
        gh_policy_crset_offer(set, doc, &v);
        if (v.accepted) {
            *n_rules += v.rules;
            rc = 0;
        } else {
            /* the controller's own words, less its note on what stays in force */
            char *cut = strstr(v.message, "; this policy's rules are not used");
            if (cut)
                *cut = '\0';
            char field[200];
            printf("%s:%d: error: RecoveryPolicy \"%s\": %s\n", path,
                   doc_line(&ld, message_field(v.message, field, sizeof field)), name, v.message);
        }
    }
    json_decref(doc);
    return rc;
}

/* Every document of buf (split at lines "---"), each linted as an object. */
static int lint_objects(const char *path, const char *buf, size_t len)
{
    struct gh_policy *base = gh_policy_new_default();
    struct gh_policy_crset *set = base ? gh_policy_crset_new(base) : NULL;
    if (!set) {
        fprintf(stderr, "%s: out of memory\n", path);
        gh_policy_free(base);
        return 1;
    }
    gh_policy_crset_begin(set);
    struct lint_names *seen = calloc(1, sizeof *seen);
    if (!seen) {
        fprintf(stderr, "%s: out of memory\n", path);
        gh_policy_crset_free(set);
        gh_policy_free(base);
        return 1;
    }
    json_t *schema = policy_schema();
    int errors = 0, objects = 0, rules = 0, line = 1, start_line = 1;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        bool eol = i == len || buf[i] == '\n';
        if (!eol)
            continue;
        size_t ls = i; /* the line's start */
        while (ls > 0 && buf[ls - 1] != '\n')
            ls--;
        bool marker = i - ls >= 3 && strncmp(buf + ls, "---", 3) == 0 &&
                      strspn(buf + ls + 3, " \t\r") >= i - ls - 3;
        if (marker || i == len) {
            size_t end = marker ? ls : len;
            if (end > start && strspn(buf + start, " \t\r\n") < end - start) {
                int e = lint_object(path, start_line, buf + start, end - start, schema, set, seen,
                                    &rules);
                errors += e > 0 ? e : 0;
                objects += e >= 0;
            }
            start = i + 1 < len ? i + 1 : len;
            start_line = line + 1;
        }
        line++;
    }
    free(seen);
    json_decref(schema);
    gh_policy_free(gh_policy_crset_end(set, NULL));
    gh_policy_crset_free(set);
    gh_policy_free(base);
    if (errors)
        printf("%s: %d error%s\n", path, errors, errors == 1 ? "" : "s");
    else
        printf("%s: ok (%d RecoveryPolic%s, %d rules, 0 warnings)\n", path, objects,
               objects == 1 ? "y" : "ies", rules);
    return errors || !objects ? 1 : 0;
}

static int lint_one(const char *path)
{
    bool is_stdin = strcmp(path, "-") == 0;
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    char *buf;
    size_t len;
    struct gh_err err = {{0}};
    int rc = gh_file_read_fd(fd, path, GH_POLICY_MAX_BYTES, &buf, &len, &err);
    if (!is_stdin)
        close(fd);
    if (rc == GH_EIO) { /* a directory, an I/O error: not a short policy */
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (rc == GH_ENOMEM) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    if (rc == GH_ELIMIT) { /* the policy parser's own words for a file over its bound */
        printf("%s:0: error: policy larger than %d bytes\n", path, GH_POLICY_MAX_BYTES);
        printf("%s: 1 error\n", path);
        return 1;
    }
    if (object_form(buf, len)) {
        int orc = lint_objects(path, buf, len);
        free(buf);
        return orc;
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
                 "                                     (a policy file, or RecoveryPolicy objects)\n"
                 "       gpuheal policy default        print the built-in policy (YAML)\n"
                 "Exit status of lint: 0 when every file is usable, 1 when one has errors.\n");
    return out == stdout ? 0 : 2;
}
