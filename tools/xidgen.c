/* xidgen.c - build-time generator: compiles data/xid-catalog.tsv into the C
 * table behind src/signal/xid_catalog.h, rejecting any malformed row.
 *
 * Usage: gh-xidgen CATALOG.tsv OUT.c
 *
 * Strict by design: every row is validated (column count, code range and
 * order, names of class/severity/flags/actions, string contents) and the first
 * error is reported as "FILE:LINE:COL: error: column N (name): detail" on
 * stderr with exit status 1, which fails the build. The output is written to
 * OUT.c.tmp and renamed into place only when the whole file was valid, so a
 * bad catalog never leaves a half-written table behind.
 *
 * Stand-alone on purpose (no core library): the wire names below mirror
 * src/signal/taxonomy.c, and the generated file asserts the enum sizes so a
 * taxonomy change that is not made here too fails to compile. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES 4096 /* one TSV line, newline excluded */
#define N_COLUMNS 8
#define MAX_ACTIONS 4 /* GH_XID_MAX_ACTIONS */
#define MAX_NAME 128
#define MAX_SUMMARY 200
#define CODE_MIN 1
#define CODE_MAX 65535

/* Wire names and the enum constants they compile to; order irrelevant here. */
struct vocab {
    const char *wire;
    const char *cname;
};

static const struct vocab classes[] = {
    {"gpu_hardware", "GH_CLASS_GPU_HARDWARE"},
    {"gpu_memory", "GH_CLASS_GPU_MEMORY"},
    {"interconnect", "GH_CLASS_INTERCONNECT"},
    {"thermal_power", "GH_CLASS_THERMAL_POWER"},
    {"straggler", "GH_CLASS_STRAGGLER"},
    {"silent_data_corruption", "GH_CLASS_SILENT_DATA_CORRUPTION"},
    {"flapping_node", "GH_CLASS_FLAPPING_NODE"},
    {"application", "GH_CLASS_APPLICATION"},
    {"network", "GH_CLASS_NETWORK"},
    {"unknown", "GH_CLASS_UNKNOWN"},
};
static const struct vocab severities[] = {
    {"info", "GH_SEV_INFO"},     {"low", "GH_SEV_LOW"},           {"medium", "GH_SEV_MEDIUM"},
    {"high", "GH_SEV_HIGH"},     {"critical", "GH_SEV_CRITICAL"},
};
static const struct vocab actions[] = {
    {"none", "GH_ACT_NONE"},
    {"retry_in_place", "GH_ACT_RETRY_IN_PLACE"},
    {"restart_from_checkpoint", "GH_ACT_RESTART_FROM_CHECKPOINT"},
    {"isolate_node", "GH_ACT_ISOLATE_NODE"},
    {"drain_node", "GH_ACT_DRAIN_NODE"},
    {"reset_gpu", "GH_ACT_RESET_GPU"},
    {"reboot_node", "GH_ACT_REBOOT_NODE"},
    {"replace_node", "GH_ACT_REPLACE_NODE"},
    {"run_diagnostics", "GH_ACT_RUN_DIAGNOSTICS"},
};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const column_names[N_COLUMNS] = {
    "code", "name", "summary", "class", "severity", "flags", "actions", "source_note",
};

/* Where the current error is: the file, line, and the field being checked. */
struct pos {
    const char *path;
    long line;
    int column;   /* 1-based field index, 0 when the error is about the line */
    long byte;    /* 1-based byte offset of that field in the line */
};

static void report(const struct pos *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(const struct pos *p, const char *fmt, ...)
{
    va_list ap;
    if (p->column > 0)
        fprintf(stderr, "%s:%ld:%ld: error: column %d (%s): ", p->path, p->line, p->byte,
                p->column, column_names[p->column - 1]);
    else
        fprintf(stderr, "%s:%ld: error: ", p->path, p->line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static const struct vocab *vocab_find(const struct vocab *v, int n, const char *wire)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].wire, wire) == 0)
            return &v[i];
    return NULL;
}

/* Writes "a b c" (the valid wire names) into buf for error messages. */
static const char *vocab_list(const struct vocab *v, int n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? " " : "", v[i].wire);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    return buf;
}

/* Reads one line (without its '\n') into buf. Returns 1 on a line, 0 at end
 * of file, -1 on an error already reported (too long, NUL byte, read error). */
static int read_line(FILE *in, char *buf, size_t cap, struct pos *p)
{
    size_t len = 0;
    int c;
    while ((c = fgetc(in)) != EOF && c != '\n') {
        if (c == '\0') {
            p->column = 0;
            report(p, "NUL byte in line");
            return -1;
        }
        if (len + 1 >= cap) {
            p->column = 0;
            report(p, "line longer than %zu bytes", cap - 1);
            return -1;
        }
        buf[len++] = (char)c;
    }
    if (ferror(in)) {
        p->column = 0;
        report(p, "read error: %s", strerror(errno));
        return -1;
    }
    buf[len] = '\0';
    return (c == EOF && len == 0) ? 0 : 1;
}

/* Common checks for every field: non-empty, no control characters, no
 * surrounding spaces. */
static bool check_text(const struct pos *p, const char *f)
{
    size_t n = strlen(f);
    if (n == 0) {
        report(p, "empty field");
        return false;
    }
    if (f[0] == ' ' || f[n - 1] == ' ') {
        report(p, "leading or trailing space in \"%s\"", f);
        return false;
    }
    for (const unsigned char *s = (const unsigned char *)f; *s; s++) {
        if (*s < 0x20 || *s == 0x7f) {
            report(p, "control character 0x%02x", *s);
            return false;
        }
    }
    return true;
}

static bool parse_code(const struct pos *p, const char *f, long *out)
{
    long v = 0;
    if (f[0] == '0' && f[1] != '\0') {
        report(p, "\"%s\": leading zero", f);
        return false;
    }
    for (const char *s = f; *s; s++) {
        if (*s < '0' || *s > '9') {
            report(p, "\"%s\" is not a decimal code", f);
            return false;
        }
        v = v * 10 + (*s - '0');
        if (v > CODE_MAX)
            break;
    }
    if (v < CODE_MIN || v > CODE_MAX) {
        report(p, "code %s out of range %d..%d", f, CODE_MIN, CODE_MAX);
        return false;
    }
    *out = v;
    return true;
}

static bool check_name(const struct pos *p, const char *f)
{
    if (strlen(f) > MAX_NAME) {
        report(p, "longer than %d bytes", MAX_NAME);
        return false;
    }
    if (!((f[0] >= 'A' && f[0] <= 'Z') || (f[0] >= 'a' && f[0] <= 'z'))) {
        report(p, "\"%s\" must start with a letter", f);
        return false;
    }
    for (const char *s = f; *s; s++) {
        char c = *s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_')) {
            report(p, "\"%s\": only letters, digits and '_' allowed", f);
            return false;
        }
    }
    return true;
}

/* Splits a comma list in place into items[]; returns the count, or -1 after
 * reporting an empty item or more than max items. */
static int split_list(const struct pos *p, char *f, char **items, int max)
{
    int n = 0;
    char *s = f;
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        if (*s == '\0') {
            report(p, "empty item in comma list");
            return -1;
        }
        if (n == max) {
            report(p, "more than %d items", max);
            return -1;
        }
        items[n++] = s;
        if (!comma)
            return n;
        s = comma + 1;
    }
}

/* Writes s as the body of a C string literal: backslash, quote and '?'
 * (trigraphs) escaped, anything outside printable ASCII as octal. */
static void put_c_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '\\' || *c == '"' || *c == '?')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20 || *c >= 0x7f)
            fprintf(out, "\\%03o", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

static void put_prologue(FILE *out, const char *in_path)
{
    fputs("/* xid_table.c - the XID catalog table; GENERATED by tools/xidgen.c from\n"
          " * ",
          out);
    /* The path is only in a comment: keep it from closing the comment. */
    for (const char *s = in_path; *s; s++) {
        if (s[0] == '*' && s[1] == '/') {
            fputs("* /", out);
            s++;
        } else if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f)
            fputc(*s, out);
    }
    fputs(". Do not edit: change the TSV. */\n"
          "#include \"signal/xid_catalog.h\"\n"
          "\n"
          "#include <stddef.h>\n"
          "\n",
          out);
    fprintf(out,
            "_Static_assert(GH_CLASS__COUNT == %d, \"taxonomy classes changed: update tools/xidgen.c\");\n"
            "_Static_assert(GH_SEV__COUNT == %d, \"taxonomy severities changed: update tools/xidgen.c\");\n"
            "_Static_assert(GH_ACT__COUNT == %d, \"taxonomy actions changed: update tools/xidgen.c\");\n"
            "_Static_assert(GH_XID_MAX_ACTIONS == %d, \"GH_XID_MAX_ACTIONS changed: update tools/xidgen.c\");\n"
            "\n"
            "/* Sorted by code (the generator rejects unsorted input): binary search. */\n"
            "static const struct gh_xid_info xid_table[] = {\n",
            COUNT(classes), COUNT(severities), COUNT(actions), MAX_ACTIONS);
}

static void put_epilogue(FILE *out, long rows)
{
    fprintf(out,
            "};\n"
            "\n"
            "_Static_assert(sizeof xid_table / sizeof xid_table[0] == %ld, \"row count\");\n"
            "\n"
            "static const struct gh_xid_info xid_unknown = {\n"
            "    .code = -1,\n"
            "    .name = \"UNKNOWN_XID\",\n"
            "    .summary = \"XID code not in the catalog\",\n"
            "    .cls = GH_CLASS_UNKNOWN,\n"
            "    .severity = GH_SEV_MEDIUM,\n"
            "    .application = false,\n"
            "    .secondary = false,\n"
            "    .n_actions = 1,\n"
            "    .actions = {GH_ACT_RUN_DIAGNOSTICS},\n"
            "};\n"
            "\n"
            "static const struct gh_xid_info *find(int code)\n"
            "{\n"
            "    size_t lo = 0, hi = sizeof xid_table / sizeof xid_table[0];\n"
            "    while (lo < hi) {\n"
            "        size_t mid = lo + (hi - lo) / 2;\n"
            "        if (xid_table[mid].code == code)\n"
            "            return &xid_table[mid];\n"
            "        if (xid_table[mid].code < code)\n"
            "            lo = mid + 1;\n"
            "        else\n"
            "            hi = mid;\n"
            "    }\n"
            "    return NULL;\n"
            "}\n"
            "\n"
            "const struct gh_xid_info *gh_xid_lookup(int code)\n"
            "{\n"
            "    const struct gh_xid_info *e = find(code);\n"
            "    return e ? e : &xid_unknown;\n"
            "}\n"
            "\n"
            "bool gh_xid_known(int code) { return find(code) != NULL; }\n"
            "\n"
            "int gh_xid_count(void) { return (int)(sizeof xid_table / sizeof xid_table[0]); }\n"
            "\n"
            "/* NULL when index is outside 0..gh_xid_count()-1. */\n"
            "const struct gh_xid_info *gh_xid_at(int index)\n"
            "{\n"
            "    if (index < 0 || index >= gh_xid_count())\n"
            "        return NULL;\n"
            "    return &xid_table[index];\n"
            "}\n",
            rows);
}

/* Validates one data row (fields[] point into the line) and writes its table
 * entry. Returns false after reporting the first problem. */
static bool emit_row(FILE *out, struct pos *p, char **fields, const long *field_byte,
                     long *prev_code, long *prev_line)
{
    char listbuf[512];
    long code;
    const struct vocab *cls, *sev, *acts[MAX_ACTIONS];
    bool application = false, secondary = false;
    char *items[MAX_ACTIONS + 1];
    int n_acts;

    for (int i = 0; i < N_COLUMNS; i++) {
        p->column = i + 1;
        p->byte = field_byte[i];
        if (!check_text(p, fields[i]))
            return false;
    }

    p->column = 1, p->byte = field_byte[0];
    if (!parse_code(p, fields[0], &code))
        return false;
    if (*prev_code >= 0 && code == *prev_code) {
        report(p, "duplicate code %ld (first at line %ld)", code, *prev_line);
        return false;
    }
    if (*prev_code >= 0 && code < *prev_code) {
        report(p, "code %ld out of order: rows must be sorted by code (line %ld has %ld)", code,
               *prev_line, *prev_code);
        return false;
    }

    p->column = 2, p->byte = field_byte[1];
    if (!check_name(p, fields[1]))
        return false;

    p->column = 3, p->byte = field_byte[2];
    if (strlen(fields[2]) > MAX_SUMMARY) {
        report(p, "longer than %d bytes", MAX_SUMMARY);
        return false;
    }

    p->column = 4, p->byte = field_byte[3];
    cls = vocab_find(classes, COUNT(classes), fields[3]);
    if (!cls) {
        report(p, "unknown class \"%s\" (expected one of: %s)", fields[3],
               vocab_list(classes, COUNT(classes), listbuf, sizeof listbuf));
        return false;
    }

    p->column = 5, p->byte = field_byte[4];
    sev = vocab_find(severities, COUNT(severities), fields[4]);
    if (!sev) {
        report(p, "unknown severity \"%s\" (expected one of: %s)", fields[4],
               vocab_list(severities, COUNT(severities), listbuf, sizeof listbuf));
        return false;
    }

    p->column = 6, p->byte = field_byte[5];
    if (strcmp(fields[5], "-") != 0) {
        int n = split_list(p, fields[5], items, 2);
        if (n < 0)
            return false;
        for (int i = 0; i < n; i++) {
            bool *flag = strcmp(items[i], "application") == 0 ? &application
                         : strcmp(items[i], "secondary") == 0  ? &secondary
                                                               : NULL;
            if (!flag) {
                report(p, "unknown flag \"%s\" (expected application, secondary or -)", items[i]);
                return false;
            }
            if (*flag) {
                report(p, "flag \"%s\" given twice", items[i]);
                return false;
            }
            *flag = true;
        }
    }

    p->column = 7, p->byte = field_byte[6];
    n_acts = split_list(p, fields[6], items, MAX_ACTIONS);
    if (n_acts < 0)
        return false;
    for (int i = 0; i < n_acts; i++) {
        acts[i] = vocab_find(actions, COUNT(actions), items[i]);
        if (!acts[i]) {
            report(p, "unknown action \"%s\" (expected one of: %s)", items[i],
                   vocab_list(actions, COUNT(actions), listbuf, sizeof listbuf));
            return false;
        }
        if (n_acts > 1 && strcmp(items[i], "none") == 0) {
            report(p, "\"none\" must stand alone");
            return false;
        }
        for (int j = 0; j < i; j++) {
            if (acts[j] == acts[i]) {
                report(p, "action \"%s\" listed twice", items[i]);
                return false;
            }
        }
    }

    /* source_note (column 8) is for reviewers only: checked, not emitted. */

    fprintf(out, "    {.code = %ld, .name = ", code);
    put_c_string(out, fields[1]);
    fputs(",\n     .summary = ", out);
    put_c_string(out, fields[2]);
    fprintf(out, ",\n     .cls = %s, .severity = %s, .application = %s, .secondary = %s,\n",
            cls->cname, sev->cname, application ? "true" : "false", secondary ? "true" : "false");
    fprintf(out, "     .n_actions = %d, .actions = {", n_acts);
    for (int i = 0; i < n_acts; i++)
        fprintf(out, "%s%s", i ? ", " : "", acts[i]->cname);
    fputs("}},\n", out);

    *prev_code = code;
    *prev_line = p->line;
    return true;
}

/* Reads the whole catalog from in, writing the table to out. Returns the
 * number of rows, or -1 after reporting an error. */
static long generate(FILE *in, FILE *out, const char *in_path)
{
    static char line[LINE_MAX_BYTES + 1];
    struct pos p = {.path = in_path, .line = 0, .column = 0, .byte = 0};
    long rows = 0, prev_code = -1, prev_line = 0;
    int rc;

    put_prologue(out, in_path);
    for (;;) {
        char *fields[N_COLUMNS];
        long field_byte[N_COLUMNS];
        int n = 0;
        char *s = line;

        p.line++;
        p.column = 0;
        rc = read_line(in, line, sizeof line, &p);
        if (rc <= 0)
            break;
        if (strchr(line, '\r')) {
            p.column = 0;
            report(&p, "carriage return: CRLF line endings are not accepted, save with LF");
            return -1;
        }
        if (line[0] == '#' || line[0] == '\0')
            continue;
        for (;;) {
            char *tab = strchr(s, '\t');
            if (n == N_COLUMNS) {
                p.column = 0;
                report(&p, "more than %d TAB-separated columns", N_COLUMNS);
                return -1;
            }
            field_byte[n] = (long)(s - line) + 1;
            fields[n++] = s;
            if (!tab)
                break;
            *tab = '\0';
            s = tab + 1;
        }
        if (n != N_COLUMNS) {
            p.column = 0;
            report(&p, "%d TAB-separated columns, expected %d (column %d, %s, is missing)", n,
                   N_COLUMNS, n + 1, column_names[n]);
            return -1;
        }
        if (!emit_row(out, &p, fields, field_byte, &prev_code, &prev_line))
            return -1;
        rows++;
    }
    if (rc < 0)
        return -1;
    if (rows == 0) {
        fprintf(stderr, "%s: error: no data rows\n", in_path);
        return -1;
    }
    put_epilogue(out, rows);
    return rows;
}

int main(int argc, char **argv)
{
    char tmp_path[4096];
    FILE *in = NULL, *out = NULL;
    long rows;
    int status = 1;

    if (argc != 3) {
        fprintf(stderr, "usage: %s CATALOG.tsv OUT.c\n", argc > 0 ? argv[0] : "gh-xidgen");
        return 2;
    }
    if (snprintf(tmp_path, sizeof tmp_path, "%s.tmp", argv[2]) >= (int)sizeof tmp_path) {
        fprintf(stderr, "%s: output path too long\n", argv[2]);
        return 2;
    }
    in = fopen(argv[1], "r");
    if (!in) {
        fprintf(stderr, "%s: error: cannot open: %s\n", argv[1], strerror(errno));
        goto out;
    }
    out = fopen(tmp_path, "w");
    if (!out) {
        fprintf(stderr, "%s: error: cannot create: %s\n", tmp_path, strerror(errno));
        goto out;
    }
    rows = generate(in, out, argv[1]);
    if (rows < 0)
        goto out;
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "%s: error: write failed: %s\n", tmp_path, strerror(errno));
        goto out;
    }
    if (fclose(out) != 0) {
        out = NULL;
        fprintf(stderr, "%s: error: write failed: %s\n", tmp_path, strerror(errno));
        goto out;
    }
    out = NULL;
    if (rename(tmp_path, argv[2]) != 0) {
        fprintf(stderr, "%s: error: cannot rename from %s: %s\n", argv[2], tmp_path,
                strerror(errno));
        goto out;
    }
    status = 0;
out:
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    if (status != 0)
        remove(tmp_path);
    return status;
}
