/* test_xid_catalog.c - unit tests of the generated XID catalog: key codes map
 * as the policy says, unknown codes are never ignored, and the table agrees
 * row by row with data/xid-catalog.tsv and shared/data/xid-catalog.csv. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "signal/taxonomy.h"
#include "signal/xid_catalog.h"

#ifndef GH_SOURCE_DIR
#error "GH_SOURCE_DIR must be defined by the build"
#endif
#ifndef GH_SHARED_DIR
#error "GH_SHARED_DIR must be defined by the build"
#endif

#define FILE_CAP (1024 * 1024) /* the CSV and TSV are tens of KiB */
#define FIELD_CAP 512

static bool has_action(const struct gh_xid_info *e, enum gh_action a)
{
    for (int i = 0; i < e->n_actions; i++)
        if (e->actions[i] == a)
            return true;
    return false;
}

static bool blames_node(const struct gh_xid_info *e)
{
    return has_action(e, GH_ACT_ISOLATE_NODE) || has_action(e, GH_ACT_DRAIN_NODE) ||
           has_action(e, GH_ACT_RESET_GPU) || has_action(e, GH_ACT_REBOOT_NODE) ||
           has_action(e, GH_ACT_REPLACE_NODE);
}

/* Reads a whole file into a NUL-terminated heap buffer (caller frees). */
static char *slurp(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;

    if (!f)
        fail_msg("cannot open %s", path);
    buf = malloc(FILE_CAP + 1);
    assert_non_null(buf);
    n = fread(buf, 1, FILE_CAP + 1, f);
    assert_false(ferror(f));
    fclose(f);
    if (n > FILE_CAP)
        fail_msg("%s is larger than %d bytes", path, FILE_CAP);
    buf[n] = '\0';
    *len_out = n;
    return buf;
}

static int parse_int(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < INT_MIN || v > INT_MAX)
        fail_msg("not an integer: \"%s\"", s);
    return (int)v;
}

/* ---- key codes ---------------------------------------------------------- */

static void test_fell_off_the_bus(void **state)
{
    (void)state;
    const struct gh_xid_info *e = gh_xid_lookup(79);
    assert_true(gh_xid_known(79));
    assert_int_equal(e->code, 79);
    assert_string_equal(e->name, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS");
    assert_int_equal(e->cls, GH_CLASS_GPU_HARDWARE);
    assert_int_equal(e->severity, GH_SEV_CRITICAL);
    assert_false(e->application);
    assert_false(e->secondary);
    assert_int_equal(e->actions[0], GH_ACT_ISOLATE_NODE);
    assert_true(has_action(e, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_true(has_action(e, GH_ACT_REBOOT_NODE));
}

static void test_uncorrectable_memory(void **state)
{
    (void)state;
    static const int codes[] = {48, 95, 64};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const struct gh_xid_info *e = gh_xid_lookup(codes[i]);
        assert_int_equal(e->code, codes[i]);
        assert_int_equal(e->cls, GH_CLASS_GPU_MEMORY);
        assert_int_equal(e->severity, GH_SEV_CRITICAL);
        assert_false(e->application);
        assert_int_equal(e->actions[0], GH_ACT_ISOLATE_NODE);
        assert_true(has_action(e, GH_ACT_RESTART_FROM_CHECKPOINT));
    }
    assert_string_equal(gh_xid_lookup(48)->name, "ROBUST_CHANNEL_GPU_ECC_DBE");
    assert_true(has_action(gh_xid_lookup(48), GH_ACT_RESET_GPU));
    /* A row-remap failure is an RMA criterion. */
    assert_true(has_action(gh_xid_lookup(64), GH_ACT_REPLACE_NODE));
}

static void test_application_xids_blame_no_node(void **state)
{
    (void)state;
    static const int codes[] = {13, 31, 43};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const struct gh_xid_info *e = gh_xid_lookup(codes[i]);
        assert_int_equal(e->code, codes[i]);
        assert_int_equal(e->cls, GH_CLASS_APPLICATION);
        assert_true(e->application);
        assert_false(has_action(e, GH_ACT_ISOLATE_NODE));
        assert_false(blames_node(e));
        assert_int_equal(e->n_actions, 1);
        assert_int_equal(e->actions[0], GH_ACT_RETRY_IN_PLACE);
    }
}

static void test_secondary_and_remap_pending(void **state)
{
    (void)state;
    const struct gh_xid_info *e45 = gh_xid_lookup(45);
    const struct gh_xid_info *e63 = gh_xid_lookup(63);

    assert_int_equal(e45->code, 45);
    assert_true(e45->secondary);
    assert_false(blames_node(e45));

    assert_int_equal(e63->code, 63);
    assert_int_equal(e63->cls, GH_CLASS_GPU_MEMORY);
    assert_true(e63->severity == GH_SEV_LOW || e63->severity == GH_SEV_MEDIUM);
    assert_true(has_action(e63, GH_ACT_RESET_GPU));
    assert_false(has_action(e63, GH_ACT_ISOLATE_NODE));
}

static void test_nvlink_and_recovery_action(void **state)
{
    (void)state;
    const struct gh_xid_info *e74 = gh_xid_lookup(74);
    const struct gh_xid_info *e154 = gh_xid_lookup(154);

    assert_int_equal(e74->code, 74);
    assert_string_equal(e74->name, "NVLINK_ERROR");
    assert_int_equal(e74->cls, GH_CLASS_INTERCONNECT);
    assert_true(e74->severity >= GH_SEV_HIGH);

    assert_int_equal(e154->code, 154);
    assert_int_equal(e154->cls, GH_CLASS_GPU_HARDWARE);
    assert_true(has_action(e154, GH_ACT_RUN_DIAGNOSTICS));
}

/* ---- unknown codes ------------------------------------------------------ */

static void test_unknown_codes_are_never_ignored(void **state)
{
    (void)state;
    /* 174 is a gap in NVIDIA's numbering (173 and 175 exist). */
    static const int codes[] = {9999, 0, -1, -79, 174, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const struct gh_xid_info *e = gh_xid_lookup(codes[i]);
        assert_false(gh_xid_known(codes[i]));
        assert_non_null(e);
        assert_int_equal(e->code, -1);
        assert_string_equal(e->name, "UNKNOWN_XID");
        assert_int_equal(e->cls, GH_CLASS_UNKNOWN);
        assert_int_equal(e->severity, GH_SEV_MEDIUM);
        assert_int_equal(e->n_actions, 1);
        assert_int_equal(e->actions[0], GH_ACT_RUN_DIAGNOSTICS);
        assert_false(e->application);
        assert_false(e->secondary);
    }
}

/* ---- iteration and table-wide rules ------------------------------------ */

static void test_iteration_is_ordered(void **state)
{
    (void)state;
    int n = gh_xid_count();
    int prev = 0;

    assert_true(n > 0);
    assert_null(gh_xid_at(-1));
    assert_null(gh_xid_at(n));
    assert_null(gh_xid_at(INT_MAX));
    for (int i = 0; i < n; i++) {
        const struct gh_xid_info *e = gh_xid_at(i);
        assert_non_null(e);
        assert_true(e->code > prev);
        prev = e->code;
        assert_true(gh_xid_known(e->code));
        assert_ptr_equal(gh_xid_lookup(e->code), e);
    }
}

static void test_every_entry_is_well_formed(void **state)
{
    (void)state;
    for (int i = 0; i < gh_xid_count(); i++) {
        const struct gh_xid_info *e = gh_xid_at(i);
        assert_non_null(e->name);
        assert_true(e->name[0] != '\0');
        assert_non_null(e->summary);
        assert_true(e->summary[0] != '\0');
        assert_true((unsigned)e->cls < GH_CLASS__COUNT);
        assert_true((unsigned)e->severity < GH_SEV__COUNT);
        assert_in_range(e->n_actions, 1, GH_XID_MAX_ACTIONS);
        for (int a = 0; a < e->n_actions; a++) {
            assert_true((unsigned)e->actions[a] < GH_ACT__COUNT);
            if (e->actions[a] == GH_ACT_NONE)
                assert_int_equal(e->n_actions, 1);
        }
        /* An application XID blames no node. */
        if (e->application) {
            assert_int_equal(e->cls, GH_CLASS_APPLICATION);
            if (blames_node(e))
                fail_msg("xid %d is flagged application but blames the node", e->code);
        }
        /* Nothing unexplained is silently dropped. */
        if (e->cls == GH_CLASS_UNKNOWN && !e->secondary && !has_action(e, GH_ACT_RUN_DIAGNOSTICS))
            fail_msg("xid %d has class unknown without run_diagnostics", e->code);
        if (e->severity == GH_SEV_CRITICAL && e->actions[0] == GH_ACT_NONE)
            fail_msg("xid %d is critical with no action", e->code);
    }
}

/* ---- agreement with data/xid-catalog.tsv ------------------------------- */

/* Splits a comma list and checks it names exactly e's flags or actions. */
static void check_actions(const struct gh_xid_info *e, char *list, long line)
{
    int n = 0;
    for (char *s = list, *next; s; s = next) {
        next = strchr(s, ',');
        if (next)
            *next++ = '\0';
        if (n >= e->n_actions)
            fail_msg("tsv line %ld: more actions than the table's %d", line, e->n_actions);
        assert_string_equal(gh_action_name(e->actions[n]), s);
        n++;
    }
    assert_int_equal(n, e->n_actions);
}

static void check_flags(const struct gh_xid_info *e, const char *flags)
{
    bool app = strstr(flags, "application") != NULL;
    bool sec = strstr(flags, "secondary") != NULL;
    assert_int_equal(app, e->application);
    assert_int_equal(sec, e->secondary);
}

static void test_table_matches_tsv(void **state)
{
    (void)state;
    size_t len;
    char *buf = slurp(GH_SOURCE_DIR "/data/xid-catalog.tsv", &len);
    int rows = 0;
    long line = 0;

    for (char *s = buf, *next; s && *s; s = next) {
        char *f[8];
        int nf = 0;
        const struct gh_xid_info *e;

        next = strchr(s, '\n');
        if (next)
            *next++ = '\0';
        line++;
        if (s[0] == '#' || s[0] == '\0')
            continue;
        for (char *t = s, *tab; t && nf < 8; t = tab) {
            tab = strchr(t, '\t');
            if (tab)
                *tab++ = '\0';
            f[nf++] = t;
        }
        if (nf != 8)
            fail_msg("tsv line %ld: %d columns", line, nf);
        e = gh_xid_at(rows);
        if (!e)
            fail_msg("tsv line %ld: table has only %d rows", line, rows);
        assert_int_equal(e->code, parse_int(f[0]));
        assert_string_equal(e->name, f[1]);
        assert_string_equal(e->summary, f[2]);
        assert_string_equal(gh_class_name(e->cls), f[3]);
        assert_string_equal(gh_severity_name(e->severity), f[4]);
        check_flags(e, f[5]);
        check_actions(e, f[6], line);
        rows++;
    }
    assert_int_equal(rows, gh_xid_count());
    free(buf);
}

/* ---- agreement with shared/data/xid-catalog.csv ------------------------ */

/* One CSV record's first fields (RFC 4180: quoted fields may hold commas,
 * doubled quotes and newlines). */
struct csv_rec {
    char field[2][FIELD_CAP]; /* code, name */
    int nfields;
};

static void csv_put(struct csv_rec *r, size_t *flen, char c)
{
    if (r->nfields >= 2)
        return; /* only the first two fields are kept */
    if (*flen + 1 >= FIELD_CAP)
        fail_msg("csv: field longer than %d bytes", FIELD_CAP);
    r->field[r->nfields][(*flen)++] = c;
}

/* Parses the record at *p and advances *p past it; false at end of input. */
static bool csv_next(const char **p, struct csv_rec *r)
{
    const char *s = *p;
    size_t flen = 0;
    bool quoted = false, at_start = true;

    if (*s == '\0')
        return false;
    memset(r, 0, sizeof *r);
    for (;;) {
        char c = *s;
        if (quoted) {
            if (c == '\0')
                fail_msg("csv: unterminated quoted field");
            if (c == '"' && s[1] == '"') {
                csv_put(r, &flen, '"'); /* "" inside quotes is one quote */
                s += 2;
            } else if (c == '"') {
                quoted = false;
                s++;
            } else {
                csv_put(r, &flen, c); /* commas and newlines included */
                s++;
            }
            continue;
        }
        if (c == '"' && at_start) {
            quoted = true;
            at_start = false;
            s++;
            continue;
        }
        if (c == ',' || c == '\n' || c == '\0' || (c == '\r' && s[1] == '\n')) {
            r->nfields++;
            flen = 0;
            at_start = true;
            s += (c == '\r') ? 2 : (c == '\0') ? 0 : 1;
            if (c == ',')
                continue;
            *p = s;
            return true;
        }
        at_start = false;
        csv_put(r, &flen, c);
        s++;
    }
}

/* The CSV's name column is "SYMBOL: description" (or "A / B: ..."); the
 * catalog keeps the first symbol. */
static void csv_symbol(const char *name, char *out, size_t cap)
{
    size_t n = strcspn(name, ": /");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, name, n);
    out[n] = '\0';
}

static void test_every_csv_code_is_in_catalog(void **state)
{
    (void)state;
    size_t len;
    char *buf = slurp(GH_SHARED_DIR "/data/xid-catalog.csv", &len);
    const char *p = buf;
    struct csv_rec r;
    bool seen[65536] = {false};
    int rows = 0;

    assert_true(csv_next(&p, &r)); /* header */
    assert_int_equal(r.nfields, 7);
    assert_string_equal(r.field[0], "code");
    assert_string_equal(r.field[1], "name");

    while (csv_next(&p, &r)) {
        char sym[FIELD_CAP];
        int code;
        const struct gh_xid_info *e;

        if (r.nfields == 1 && r.field[0][0] == '\0')
            continue; /* trailing empty line */
        if (r.nfields != 7)
            fail_msg("csv record %d: %d fields, expected 7", rows + 1, r.nfields);
        code = parse_int(r.field[0]);
        assert_in_range(code, 1, 65535);
        if (!gh_xid_known(code))
            fail_msg("csv code %d (%s) has no catalog entry", code, r.field[1]);
        e = gh_xid_lookup(code);
        assert_int_equal(e->code, code);
        csv_symbol(r.field[1], sym, sizeof sym);
        if (sym[0] == '\0' || sym[0] == '(') {
            /* No NVIDIA symbol in the snapshot: the catalog says XID_<code>. */
            char want[32];
            snprintf(want, sizeof want, "XID_%d", code);
            assert_string_equal(e->name, want);
        } else {
            assert_string_equal(e->name, sym);
        }
        assert_false(seen[code]);
        seen[code] = true;
        rows++;
    }
    assert_true(rows > 100); /* the parse read the whole catalog */
    /* And nothing in the catalog that the facts do not have. */
    for (int i = 0; i < gh_xid_count(); i++)
        if (!seen[gh_xid_at(i)->code])
            fail_msg("catalog code %d is not in the CSV", gh_xid_at(i)->code);
    assert_int_equal(gh_xid_count(), rows);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fell_off_the_bus),
        cmocka_unit_test(test_uncorrectable_memory),
        cmocka_unit_test(test_application_xids_blame_no_node),
        cmocka_unit_test(test_secondary_and_remap_pending),
        cmocka_unit_test(test_nvlink_and_recovery_action),
        cmocka_unit_test(test_unknown_codes_are_never_ignored),
        cmocka_unit_test(test_iteration_is_ordered),
        cmocka_unit_test(test_every_entry_is_well_formed),
        cmocka_unit_test(test_table_matches_tsv),
        cmocka_unit_test(test_every_csv_code_is_in_catalog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
