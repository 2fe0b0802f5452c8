/* signal_json.c - the JSON Lines codec for signals (spec/signals.md section 1):
 * decode with type/range checks, encode in a stable field order, and a
 * bounded line reader that survives bad and over-long lines.
 *
 * One table per kind describes its extra fields (wire name, type, where it
 * lives in struct gh_signal, required or not, range). Decoding, encoding and
 * the encoder's validation all walk the same table, so they cannot disagree
 * about which fields a kind has, in which order, or what is valid. */
#include "signal/signal_json.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/timeutil.h"

/* ---- errors -------------------------------------------------------------- */

/* "line N: <detail>" (or just "<detail>" when the line is unknown). */
__attribute__((format(printf, 4, 5))) static int line_err(struct gh_err *err, int rc,
                                                          long line, const char *fmt, ...)
{
    char detail[GH_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (line > 0)
        return gh_err_set(err, rc, "line %ld: %s", line, detail);
    return gh_err_set(err, rc, "%s", detail);
}

/* Copies untrusted text into an error message: at most 64 bytes, anything
 * but printable ASCII shown as '?', so that a message is always one line. */
static const char *printable(const char *s, size_t n, char *buf, size_t cap)
{
    size_t max = cap - 4, j = 0;
    for (size_t i = 0; i < n && j < max; i++, j++)
        buf[j] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    if (n > max) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = '\0';
    return buf;
}

/* ---- the field tables ------------------------------------------------------ */

enum ftype {
    F_STR,  /* char *; required means present and non-empty */
    F_HEX,  /* char *, non-empty hex digits */
    F_INT,  /* int, range [min, max] */
    F_I64,  /* int64_t, range [min, max] */
    F_NUM,  /* double, finite; min == 0: must be >= 0 */
    F_BOOL, /* bool */
    F_ENUM, /* an int-sized enum; names[value] is its wire name */
    F_LOSS, /* double: a number, or "nan"/"inf"/"-inf" */
};

#define NO_HAS SIZE_MAX
#define ANY_NUM (-1)

struct field {
    const char *name;
    enum ftype type;
    bool required;
    size_t off;     /* offsetof the value in struct gh_signal */
    size_t has_off; /* offsetof its has_* flag, or NO_HAS */
    int64_t min, max;
    const char *const *names; /* F_ENUM; names[0] == NULL: value 0 means absent */
    int nnames;
};

_Static_assert(sizeof(enum gh_ecc_bits) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum gh_link_state) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum gh_ckpt_state) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum gh_cond_status) == sizeof(int), "enum fields are int-sized");

#define OFF(m) offsetof(struct gh_signal, m)
#define REQ true
#define OPT false
#define STR(n, m, req) {.name = n, .type = F_STR, .required = req, .off = OFF(m), .has_off = NO_HAS}
#define HEX(n, m) {.name = n, .type = F_HEX, .required = REQ, .off = OFF(m), .has_off = NO_HAS}
#define INT(n, m, req, lo, hi)                                                                   \
    {.name = n, .type = F_INT, .required = req, .off = OFF(m), .has_off = NO_HAS, .min = lo,     \
     .max = hi}
#define INT_H(n, m, h, req, lo, hi)                                                              \
    {.name = n, .type = F_INT, .required = req, .off = OFF(m), .has_off = OFF(h), .min = lo,     \
     .max = hi}
#define I64(n, m, req)                                                                           \
    {.name = n, .type = F_I64, .required = req, .off = OFF(m), .has_off = NO_HAS, .min = 0,      \
     .max = INT64_MAX}
#define I64_H(n, m, h, req)                                                                      \
    {.name = n, .type = F_I64, .required = req, .off = OFF(m), .has_off = OFF(h), .min = 0,      \
     .max = INT64_MAX}
#define NUM(n, m, lo) {.name = n, .type = F_NUM, .required = REQ, .off = OFF(m), .has_off = NO_HAS, .min = lo}
#define NUM_H(n, m, h, lo)                                                                       \
    {.name = n, .type = F_NUM, .required = OPT, .off = OFF(m), .has_off = OFF(h), .min = lo}
#define BOOL(n, m) {.name = n, .type = F_BOOL, .required = REQ, .off = OFF(m), .has_off = NO_HAS}
#define ENUM(n, m, req, tab)                                                                     \
    {.name = n, .type = F_ENUM, .required = req, .off = OFF(m), .has_off = NO_HAS,               \
     .names = tab, .nnames = (int)(sizeof tab / sizeof tab[0])}

static const char *const bits_names[] = {[GH_ECC_SINGLE] = "single", [GH_ECC_DOUBLE] = "double"};
static const char *const link_state_names[] = {
    [GH_LINK_UNKNOWN] = NULL, [GH_LINK_UP] = "up", [GH_LINK_DOWN] = "down"};
static const char *const ckpt_names[] = {[GH_CKPT_SAVED] = "saved", [GH_CKPT_FAILED] = "failed"};
static const char *const job_state_names[] = {[GH_JOB_COMPLETE] = "complete",
                                              [GH_JOB_FAILED] = "failed"};
/* Kubernetes' spelling, capitalised: a node_condition line is a Node
 * condition as the API server holds it. */
static const char *const cond_status_names[] = {
    [GH_COND_TRUE] = "True", [GH_COND_FALSE] = "False", [GH_COND_UNKNOWN] = "Unknown"};

static const struct field xid_fields[] = {
    INT("code", code, REQ, 0, INT_MAX),
    I64_H("pid", pid, has_pid, OPT),
    STR("process", process, OPT),
};
static const struct field sxid_fields[] = {
    INT("code", code, REQ, 0, INT_MAX),
    STR("switch", switch_id, OPT),
};
static const struct field ecc_fields[] = {
    ENUM("bits", bits, REQ, bits_names),
    I64_H("count", count, has_count, REQ),
    BOOL("volatile", is_volatile),
};
static const struct field row_remap_fields[] = {
    BOOL("pending", pending),
    BOOL("failure", failure),
    I64("correctable", correctable, REQ),
    I64("uncorrectable", uncorrectable, REQ),
};
static const struct field nvlink_fields[] = {
    INT_H("link", link, has_link, OPT, 0, INT_MAX), /* absent: all links (a per-GPU total) */
    STR("counter", counter, REQ),
    I64_H("count", count, has_count, OPT), /* absent: one event seen in a log */
};
/* count is optional for pcie, nic and nvlink: a counter reading carries it; a
 * single event seen in a kernel log (an AER report, an mlx5 error) does not. */
static const struct field pcie_fields[] = {
    STR("counter", counter, REQ),
    I64_H("count", count, has_count, OPT),
};
/* A NIC named in the kernel log by its PCI address (mlx5_core 0000:5c:00.0)
 * has no device name or port yet: pci identifies it then. */
static const struct field nic_fields[] = {
    STR("device", device, OPT),
    INT_H("port", port, has_port, OPT, 0, INT_MAX),
    STR("counter", counter, REQ),
    I64_H("count", count, has_count, OPT),
    ENUM("state", state, OPT, link_state_names),
};
static const struct field thermal_fields[] = {
    NUM("celsius", celsius, ANY_NUM),
    BOOL("throttled", throttled),
};
static const struct field power_fields[] = {
    NUM("watts", watts, 0),
    BOOL("throttled", throttled),
};
static const struct field step_fields[] = {
    STR("job", job, REQ),
    INT_H("rank", rank, has_rank, REQ, 0, INT_MAX),
    I64_H("step", step, has_step, REQ),
    NUM("step_ms", step_ms, 0),
    NUM_H("comm_ms", comm_ms, has_comm_ms, 0),
    {.name = "loss", .type = F_LOSS, .required = OPT, .off = OFF(loss), .has_off = OFF(has_loss)},
    NUM_H("tokens_per_s", tokens_per_s, has_tokens_per_s, 0),
};
static const struct field checkpoint_fields[] = {
    STR("job", job, REQ),
    I64_H("step", step, has_step, REQ),
    STR("path", path, REQ),
    ENUM("state", ckpt_state, REQ, ckpt_names),
};
static const struct field replica_checksum_fields[] = {
    STR("job", job, REQ),
    I64_H("step", step, has_step, REQ),
    INT_H("rank", rank, has_rank, REQ, 0, INT_MAX),
    INT("replica", replica, REQ, 0, INT_MAX),
    HEX("value", value),
};
static const struct field pod_failed_fields[] = {
    STR("namespace", namespace_, REQ),
    STR("pod", pod, REQ),
    STR("job", job, OPT),
    STR("reason", reason, REQ),
    INT_H("exit_code", exit_code, has_exit_code, OPT, INT_MIN, INT_MAX),
};
static const struct field pod_started_fields[] = {
    STR("namespace", namespace_, REQ),
    STR("pod", pod, REQ),
    STR("job", job, OPT),
};
static const struct field pod_succeeded_fields[] = {
    STR("namespace", namespace_, REQ),
    STR("pod", pod, REQ),
    STR("job", job, OPT),
};
static const struct field job_finished_fields[] = {
    STR("job", job, REQ),
    ENUM("state", job_state, REQ, job_state_names),
};
static const struct field probe_result_fields[] = {
    STR("check", check, REQ),
    BOOL("passed", passed),
    STR("detail", detail, OPT),
};
static const struct field node_condition_fields[] = {
    STR("condition", condition, REQ),
    ENUM("status", cond_status, REQ, cond_status_names),
    STR("reason", reason, OPT),
};

struct kind_desc {
    const struct field *fields;
    size_t n;
};

#define KIND(k, tab) [k] = {tab, sizeof tab / sizeof tab[0]}
static const struct kind_desc kinds[GH_KIND__COUNT] = {
    KIND(GH_KIND_XID, xid_fields),
    KIND(GH_KIND_SXID, sxid_fields),
    KIND(GH_KIND_ECC, ecc_fields),
    KIND(GH_KIND_ROW_REMAP, row_remap_fields),
    [GH_KIND_GPU_LOST] = {NULL, 0},
    KIND(GH_KIND_NVLINK, nvlink_fields),
    KIND(GH_KIND_PCIE, pcie_fields),
    KIND(GH_KIND_NIC, nic_fields),
    KIND(GH_KIND_THERMAL, thermal_fields),
    KIND(GH_KIND_POWER, power_fields),
    KIND(GH_KIND_STEP, step_fields),
    KIND(GH_KIND_CHECKPOINT, checkpoint_fields),
    KIND(GH_KIND_REPLICA_CHECKSUM, replica_checksum_fields),
    KIND(GH_KIND_POD_FAILED, pod_failed_fields),
    KIND(GH_KIND_POD_STARTED, pod_started_fields),
    [GH_KIND_NODE_NOT_READY] = {NULL, 0},
    [GH_KIND_NODE_READY] = {NULL, 0},
    KIND(GH_KIND_PROBE_RESULT, probe_result_fields),
    KIND(GH_KIND_POD_SUCCEEDED, pod_succeeded_fields),
    KIND(GH_KIND_JOB_FINISHED, job_finished_fields),
    KIND(GH_KIND_NODE_CONDITION, node_condition_fields),
};

/* Field accessors by offset. */
#define AT(s, off, T) ((T *)(void *)((char *)(s) + (off)))
#define CAT(s, off, T) ((const T *)(const void *)((const char *)(s) + (off)))

static bool field_present(const struct field *f, const struct gh_signal *s)
{
    if (f->has_off != NO_HAS)
        return *CAT(s, f->has_off, bool);
    switch (f->type) {
    case F_STR:
    case F_HEX:
        return *CAT(s, f->off, char *) != NULL;
    case F_ENUM:
        return f->names[0] != NULL || *CAT(s, f->off, int) != 0;
    default:
        return true; /* required scalars without a has_* flag */
    }
}

/* ---- shared checks -------------------------------------------------------- */

/* Timestamps are kept to years 1678..2261, where int64 nanoseconds cannot
 * overflow (the int64 range is 1677-09-21 .. 2262-04-11). */
static int64_t ts_min(void) { return gh_days_from_civil(1678, 1, 1) * 86400 * GH_NS_PER_S; }
static int64_t ts_max(void)
{
    return gh_days_from_civil(2262, 1, 1) * 86400 * GH_NS_PER_S - 1;
}

/* Node-scoped signals must say which node. */
static bool node_required(enum gh_source src, enum gh_kind kind)
{
    switch (src) {
    case GH_SRC_KMSG:
    case GH_SRC_NVML:
    case GH_SRC_DCGM:
    case GH_SRC_HOST:
    case GH_SRC_PROBE:
        return true;
    default:
        return kind == GH_KIND_NODE_NOT_READY || kind == GH_KIND_NODE_READY ||
               kind == GH_KIND_NODE_CONDITION;
    }
}

bool gh_hex_valid(const char *s, size_t n)
{
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) { /* "0x1f" as well as "1f" */
        s += 2;
        n -= 2;
    }
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

static const char *enum_choices(const struct field *f, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < f->nnames; i++) {
        if (!f->names[i])
            continue;
        int w = snprintf(buf + used, cap - used, "%s\"%s\"", used ? " or " : "", f->names[i]);
        if (w < 0 || (size_t)w >= cap - used)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* ---- decode ---------------------------------------------------------------- */

struct dec {
    const json_t *obj;
    long line;
    struct gh_err *err;
};

#define FIELD_ERR(d, name, ...) field_err((d), GH_EINVAL, (name), __VA_ARGS__)

__attribute__((format(printf, 4, 5))) static int field_err(const struct dec *d, int rc,
                                                           const char *name, const char *fmt,
                                                           ...)
{
    char detail[GH_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return line_err(d->err, rc, d->line, "field \"%s\": %s", name, detail);
}

static int nomem(const struct dec *d)
{
    return line_err(d->err, GH_ENOMEM, d->line, "out of memory");
}

/* The field's value, or NULL when absent; JSON null counts as absent. */
static const json_t *get(const struct dec *d, const char *name)
{
    const json_t *v = json_object_get(d->obj, name);
    return v && !json_is_null(v) ? v : NULL;
}

/* Integers are JSON integers; a JSON real is accepted when it is integral and
 * exactly representable (|x| <= 2^53), for emitters whose numbers are all
 * doubles. It is re-encoded as an integer. */
static int get_integer(const struct dec *d, const char *name, const json_t *v, int64_t lo,
                       int64_t hi, int64_t *out)
{
    int64_t x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v)) {
        double r = json_real_value(v);
        if (!(fabs(r) <= 9007199254740992.0) || r != trunc(r))
            return FIELD_ERR(d, name, "not an integer");
        x = (int64_t)r;
    } else {
        return FIELD_ERR(d, name, "not an integer");
    }
    if (x < lo || x > hi)
        return FIELD_ERR(d, name, "out of range");
    *out = x;
    return GH_OK;
}

static int get_string(const struct dec *d, const char *name, const json_t *v, bool nonempty,
                      char **dst)
{
    if (!json_is_string(v))
        return FIELD_ERR(d, name, "not a string");
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (memchr(s, '\0', n)) /* only possible for an object built with JSON_ALLOW_NUL */
        return FIELD_ERR(d, name, "contains a NUL byte");
    if (nonempty && n == 0)
        return FIELD_ERR(d, name, "empty");
    if (gh_signal_set_str(dst, s, n))
        return nomem(d);
    return GH_OK;
}

static int decode_loss(const struct dec *d, const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return GH_OK;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (n == 3 && strncasecmp(s, "nan", 3) == 0) {
            *out = NAN;
            return GH_OK;
        }
        if (n == 3 && strncasecmp(s, "inf", 3) == 0) {
            *out = INFINITY;
            return GH_OK;
        }
        if (n == 4 && strncasecmp(s, "-inf", 4) == 0) {
            *out = -INFINITY;
            return GH_OK;
        }
    }
    return FIELD_ERR(d, "loss", "not a number, null, \"nan\", \"inf\" or \"-inf\"");
}

static int decode_field(const struct dec *d, const struct field *f, struct gh_signal *s)
{
    const json_t *v = get(d, f->name);
    int rc = GH_OK;
    if (!v)
        return f->required ? FIELD_ERR(d, f->name, "missing") : GH_OK;
    switch (f->type) {
    case F_STR:
    case F_HEX:
        rc = get_string(d, f->name, v, f->required, AT(s, f->off, char *));
        if (!rc && f->type == F_HEX) {
            const char *h = *AT(s, f->off, char *);
            if (!gh_hex_valid(h, strlen(h)))
                rc = FIELD_ERR(d, f->name, "not a hex string");
        }
        break;
    case F_INT:
    case F_I64: {
        int64_t x;
        rc = get_integer(d, f->name, v, f->min, f->max, &x);
        if (!rc && f->type == F_INT)
            *AT(s, f->off, int) = (int)x;
        else if (!rc)
            *AT(s, f->off, int64_t) = x;
        break;
    }
    case F_NUM: {
        if (!json_is_number(v))
            return FIELD_ERR(d, f->name, "not a number");
        double x = json_number_value(v); /* jansson only yields finite numbers */
        if (f->min == 0 && x < 0)
            return FIELD_ERR(d, f->name, "out of range");
        *AT(s, f->off, double) = x;
        break;
    }
    case F_BOOL:
        if (!json_is_boolean(v))
            return FIELD_ERR(d, f->name, "not a boolean");
        *AT(s, f->off, bool) = json_is_true(v);
        break;
    case F_ENUM: {
        char choices[128];
        const char *str = json_is_string(v) ? json_string_value(v) : NULL;
        int found = -1;
        for (int i = 0; str && i < f->nnames; i++)
            if (f->names[i] && strcmp(str, f->names[i]) == 0)
                found = i;
        if (found < 0)
            return FIELD_ERR(d, f->name, "must be %s", enum_choices(f, choices, sizeof choices));
        *AT(s, f->off, int) = found;
        break;
    }
    case F_LOSS:
        rc = decode_loss(d, v, AT(s, f->off, double));
        break;
    }
    if (!rc && f->has_off != NO_HAS)
        *AT(s, f->has_off, bool) = true;
    return rc;
}

/* An object with "scenario" and no "kind" (null counts as absent). */
static bool is_header(const json_t *root)
{
    const json_t *kind = json_object_get(root, "kind");
    return json_is_object(root) && json_object_get(root, "scenario") &&
           (!kind || json_is_null(kind));
}

static bool leap_year(unsigned y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* "ts": RFC 3339 (any offset, normalised to UTC) within years 1678..2261. */
static int decode_ts(const struct dec *d, const json_t *v, int64_t *ns)
{
    if (!json_is_string(v))
        return FIELD_ERR(d, "ts", "not a string");
    const char *ts = json_string_value(v);
    size_t n = json_string_length(v);
    unsigned year = 0;
    size_t digits = 0;
    while (digits < 4 && digits < n && ts[digits] >= '0' && ts[digits] <= '9')
        year = year * 10 + (unsigned)(ts[digits++] - '0');
    if (digits == 4 && (year < 1678 || year > 2261)) {
        /* gh_time_parse_rfc3339 would overflow int64 nanoseconds on such a
         * year: check the form with a stand-in year of the same leapness. */
        char probe[128];
        int64_t ignored;
        if (n < sizeof probe) {
            memcpy(probe, ts, n);
            memcpy(probe, leap_year(year) ? "2000" : "2001", 4);
            if (gh_time_parse_rfc3339(probe, n, &ignored))
                return FIELD_ERR(d, "ts", "out of range");
        }
        return FIELD_ERR(d, "ts", "not RFC 3339");
    }
    if (!gh_time_parse_rfc3339(ts, n, ns))
        return FIELD_ERR(d, "ts", "not RFC 3339");
    if (*ns < ts_min() || *ns > ts_max())
        return FIELD_ERR(d, "ts", "out of range");
    return GH_OK;
}

static int decode_common(const struct dec *d, struct gh_signal *s)
{
    char shown[80];
    const json_t *v;
    int rc;

    if (is_header(d->obj))
        return line_err(d->err, GH_EINVAL, d->line, "a scenario header, not a signal");

    if (!(v = get(d, "ts")))
        return FIELD_ERR(d, "ts", "missing");
    if ((rc = decode_ts(d, v, &s->ts_ns)))
        return rc;

    if (!(v = get(d, "source")))
        return FIELD_ERR(d, "source", "missing");
    if (!json_is_string(v))
        return FIELD_ERR(d, "source", "not a string");
    int src = gh_source_from_name(json_string_value(v));
    if (src < 0)
        return FIELD_ERR(d, "source", "unknown source \"%s\"",
                         printable(json_string_value(v), json_string_length(v), shown,
                                   sizeof shown));
    s->source = (enum gh_source)src;

    if (!(v = get(d, "kind")))
        return FIELD_ERR(d, "kind", "missing");
    if (!json_is_string(v))
        return FIELD_ERR(d, "kind", "not a string");
    int kind = gh_kind_from_name(json_string_value(v));
    if (kind < 0)
        return FIELD_ERR(d, "kind", "unknown kind \"%s\"",
                         printable(json_string_value(v), json_string_length(v), shown,
                                   sizeof shown));
    s->kind = (enum gh_kind)kind;

    bool need_node = node_required(s->source, s->kind);
    if ((v = get(d, "node")) != NULL) {
        if ((rc = get_string(d, "node", v, need_node, &s->node)))
            return rc;
    } else if (need_node) {
        return FIELD_ERR(d, "node", "missing");
    }
    if ((v = get(d, "gpu")) != NULL) {
        int64_t gpu;
        if ((rc = get_integer(d, "gpu", v, 0, INT_MAX, &gpu)))
            return rc;
        s->gpu = (int)gpu;
    }
    if ((v = get(d, "pci")) && (rc = get_string(d, "pci", v, false, &s->pci)))
        return rc;
    if ((v = get(d, "uuid")) && (rc = get_string(d, "uuid", v, false, &s->uuid)))
        return rc;
    if ((v = get(d, "msg")) && (rc = get_string(d, "msg", v, false, &s->msg)))
        return rc;
    if ((v = get(d, "id")) && (rc = get_string(d, "id", v, false, &s->id)))
        return rc;
    if ((v = get(d, "pod_uid")) && (rc = get_string(d, "pod_uid", v, false, &s->pod_uid)))
        return rc;
    if ((v = get(d, "injected")) != NULL) {
        if (!json_is_boolean(v))
            return FIELD_ERR(d, "injected", "not a boolean");
        s->injected = json_is_true(v);
    }
    return GH_OK;
}

int gh_signal_decode_json(const json_t *obj, long line_no, struct gh_signal *out,
                          struct gh_err *err)
{
    struct dec d = {obj, line_no, err};
    struct gh_signal s;
    int rc;

    gh_signal_init(&s);
    gh_signal_init(out);
    if (!json_is_object(obj))
        return line_err(err, GH_EINVAL, line_no, "not a JSON object");
    if ((rc = decode_common(&d, &s)))
        goto out;
    const struct kind_desc *k = &kinds[s.kind];
    for (size_t i = 0; i < k->n; i++)
        if ((rc = decode_field(&d, &k->fields[i], &s)))
            goto out;
    *out = s;
    return GH_OK;
out:
    gh_signal_clear(&s);
    return rc;
}

/* Parses one line of text into a JSON value (any type). */
static int parse_line(const char *text, size_t len, long line_no, json_t **root,
                      struct gh_err *err)
{
    json_error_t je;
    char shown[200];
    *root = json_loadb(text ? text : "", text ? len : 0,
                       JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (*root)
        return GH_OK;
    /* jansson 2.14 reports most allocation failures while parsing with an
     * empty text (code unknown or invalid syntax), some as a syntax error
     * that cannot be told apart from a real one. */
    if (json_error_code(&je) == json_error_out_of_memory || je.text[0] == '\0')
        return line_err(err, GH_ENOMEM, line_no, "out of memory parsing JSON");
    printable(je.text, strlen(je.text), shown, sizeof shown);
    if (je.column > 0)
        return line_err(err, GH_EINVAL, line_no, "invalid JSON at column %d: %s", je.column,
                        shown);
    return line_err(err, GH_EINVAL, line_no, "invalid JSON: %s", shown);
}

int gh_signal_decode_for_node(const char *text, size_t len, long line_no, const char *node,
                              struct gh_signal *out, struct gh_err *err)
{
    json_t *root = NULL;
    int rc;

    gh_signal_init(out);
    if (len > GH_SIGNAL_LINE_MAX)
        return line_err(err, GH_EINVAL, line_no, "longer than %d bytes", GH_SIGNAL_LINE_MAX);
    if ((rc = parse_line(text, len, line_no, &root, err)))
        return rc;
    if (node && json_is_object(root) && !json_object_get(root, "node") &&
        json_object_set_new(root, "node", json_string(node))) {
        json_decref(root);
        return line_err(err, GH_ENOMEM, line_no, "out of memory");
    }
    rc = gh_signal_decode_json(root, line_no, out, err);
    json_decref(root);
    return rc;
}

int gh_signal_decode(const char *text, size_t len, long line_no, struct gh_signal *out,
                     struct gh_err *err)
{
    return gh_signal_decode_for_node(text, len, line_no, NULL, out, err);
}

/* ---- encode ---------------------------------------------------------------- */

static int put(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v); /* -1 (and v not leaked) when v is NULL */
}

static int encode_field(json_t *o, const struct field *f, const struct gh_signal *s)
{
    if (!field_present(f, s))
        return 0;
    switch (f->type) {
    case F_STR:
    case F_HEX:
        return put(o, f->name, json_string(*CAT(s, f->off, char *)));
    case F_INT:
        return put(o, f->name, json_integer(*CAT(s, f->off, int)));
    case F_I64:
        return put(o, f->name, json_integer(*CAT(s, f->off, int64_t)));
    case F_NUM:
        return put(o, f->name, json_real(*CAT(s, f->off, double))); /* NULL if not finite */
    case F_BOOL:
        return put(o, f->name, json_boolean(*CAT(s, f->off, bool)));
    case F_ENUM: {
        int v = *CAT(s, f->off, int);
        if (v < 0 || v >= f->nnames || !f->names[v])
            return -1;
        return put(o, f->name, json_string(f->names[v]));
    }
    case F_LOSS: {
        double x = *CAT(s, f->off, double);
        if (isnan(x))
            return put(o, f->name, json_string("nan"));
        if (isinf(x))
            return put(o, f->name, json_string(x > 0 ? "inf" : "-inf"));
        return put(o, f->name, json_real(x));
    }
    }
    return -1;
}

json_t *gh_signal_encode_json(const struct gh_signal *s)
{
    char ts[GH_RFC3339_MAX];
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (put(o, "ts", json_string(gh_time_format_rfc3339(s->ts_ns, ts, sizeof ts))) ||
        (s->node && put(o, "node", json_string(s->node))) ||
        (s->gpu >= 0 && put(o, "gpu", json_integer(s->gpu))) ||
        (s->pci && put(o, "pci", json_string(s->pci))) ||
        (s->uuid && put(o, "uuid", json_string(s->uuid))) ||
        (s->pod_uid && put(o, "pod_uid", json_string(s->pod_uid))) ||
        put(o, "source", json_string(gh_source_name(s->source))) ||
        put(o, "kind", json_string(gh_kind_name(s->kind))))
        goto fail;
    if ((unsigned)s->kind < GH_KIND__COUNT) {
        const struct kind_desc *k = &kinds[s->kind];
        for (size_t i = 0; i < k->n; i++)
            if (encode_field(o, &k->fields[i], s))
                goto fail;
    }
    if ((s->msg && put(o, "msg", json_string(s->msg))) ||
        (s->id && put(o, "id", json_string(s->id))) ||
        (s->injected && put(o, "injected", json_true())))
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* Everything the decoder would refuse is refused here too, so that a written
 * signal always reads back. */
static int check_string(const char *name, const char *v, bool nonempty, struct gh_err *err)
{
    if (!gh_utf8_valid(v, strlen(v)))
        return gh_err_set(err, GH_EINVAL, "field \"%s\": not valid UTF-8", name);
    if (nonempty && !*v)
        return gh_err_set(err, GH_EINVAL, "field \"%s\": empty", name);
    return GH_OK;
}

static int check_field(const struct field *f, const struct gh_signal *s, struct gh_err *err)
{
    if (!field_present(f, s))
        return f->required ? gh_err_set(err, GH_EINVAL, "field \"%s\": missing", f->name)
                           : GH_OK;
    switch (f->type) {
    case F_STR:
    case F_HEX: {
        const char *v = *CAT(s, f->off, char *);
        int rc = check_string(f->name, v, f->required, err);
        if (!rc && f->type == F_HEX && !gh_hex_valid(v, strlen(v)))
            rc = gh_err_set(err, GH_EINVAL, "field \"%s\": not a hex string", f->name);
        return rc;
    }
    case F_INT:
    case F_I64: {
        int64_t v = f->type == F_INT ? *CAT(s, f->off, int) : *CAT(s, f->off, int64_t);
        if (v < f->min || v > f->max)
            return gh_err_set(err, GH_EINVAL, "field \"%s\": out of range", f->name);
        return GH_OK;
    }
    case F_NUM: {
        double v = *CAT(s, f->off, double);
        if (!isfinite(v))
            return gh_err_set(err, GH_EINVAL, "field \"%s\": not finite", f->name);
        if (f->min == 0 && v < 0)
            return gh_err_set(err, GH_EINVAL, "field \"%s\": out of range", f->name);
        return GH_OK;
    }
    case F_ENUM: {
        int v = *CAT(s, f->off, int);
        if (v < 0 || v >= f->nnames || !f->names[v])
            return gh_err_set(err, GH_EINVAL, "field \"%s\": bad value %d", f->name, v);
        return GH_OK;
    }
    case F_BOOL:
    case F_LOSS:
        return GH_OK;
    }
    return GH_OK;
}

static int check_encodable(const struct gh_signal *s, struct gh_err *err)
{
    int rc;
    if (s->ts_ns < ts_min() || s->ts_ns > ts_max())
        return gh_err_set(err, GH_EINVAL, "field \"ts\": out of range");
    if ((unsigned)s->source >= GH_SRC__COUNT)
        return gh_err_set(err, GH_EINVAL, "field \"source\": bad value %d", (int)s->source);
    if ((unsigned)s->kind >= GH_KIND__COUNT)
        return gh_err_set(err, GH_EINVAL, "field \"kind\": bad value %d", (int)s->kind);
    bool need_node = node_required(s->source, s->kind);
    if (s->node) {
        if ((rc = check_string("node", s->node, need_node, err)))
            return rc;
    } else if (need_node) {
        return gh_err_set(err, GH_EINVAL, "field \"node\": missing");
    }
    if (s->gpu < -1)
        return gh_err_set(err, GH_EINVAL, "field \"gpu\": out of range");
    if ((s->pci && (rc = check_string("pci", s->pci, false, err))) ||
        (s->uuid && (rc = check_string("uuid", s->uuid, false, err))) ||
        (s->msg && (rc = check_string("msg", s->msg, false, err))) ||
        (s->id && (rc = check_string("id", s->id, false, err))) ||
        (s->pod_uid && (rc = check_string("pod_uid", s->pod_uid, false, err))))
        return rc;
    const struct kind_desc *k = &kinds[s->kind];
    for (size_t i = 0; i < k->n; i++)
        if ((rc = check_field(&k->fields[i], s, err)))
            return rc;
    return GH_OK;
}

/* The %.Ng precision (jansson's real format) for o's reals: the smallest at
 * which every one reads back exactly, but at least the digits of the integer
 * part below 1e15, so that 700 is "700.0" and not "7e2". 1432.5 and 2.31 stay
 * short; any double stays exact (at worst 17 digits, for every real of the
 * signal). */
static int real_precision(json_t *o)
{
    const char *key;
    json_t *v;
    char buf[40];
    int p = 1;
    json_object_foreach(o, key, v)
    {
        double a = json_is_real(v) ? fabs(json_real_value(v)) : 0;
        int digits = 1;
        if (a >= 1e15)
            continue;
        for (; a >= 10; a /= 10)
            digits++;
        if (digits > p)
            p = digits;
    }
    for (; p < 17; p++) {
        bool ok = true;
        json_object_foreach(o, key, v)
        {
            if (!json_is_real(v))
                continue;
            double x = json_real_value(v);
            snprintf(buf, sizeof buf, "%.*g", p, x);
            if (strtod(buf, NULL) != x) {
                ok = false;
                break;
            }
        }
        if (ok)
            return p;
    }
    return 17;
}

int gh_signal_encode(const struct gh_signal *s, char **out, struct gh_err *err)
{
    int rc;
    *out = NULL;
    if ((rc = check_encodable(s, err)))
        return rc;
    json_t *o = gh_signal_encode_json(s);
    if (!o)
        return gh_err_set(err, GH_ENOMEM, "out of memory encoding a signal");
    size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(real_precision(o));
    size_t n = json_dumpb(o, NULL, 0, flags);
    char *buf = n ? malloc(n + 1) : NULL;
    if (!buf || json_dumpb(o, buf, n, flags) != n) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory encoding a signal");
        free(buf);
        json_decref(o);
        return rc;
    }
    json_decref(o);
    buf[n] = '\0';
    if (n > GH_SIGNAL_LINE_MAX) {
        free(buf);
        return gh_err_set(err, GH_ELIMIT, "encoded signal longer than %d bytes",
                          GH_SIGNAL_LINE_MAX);
    }
    *out = buf;
    return GH_OK;
}

int gh_signal_write(FILE *f, const struct gh_signal *s, struct gh_err *err)
{
    char *line = NULL;
    int rc = gh_signal_encode(s, &line, err);
    if (rc)
        return rc;
    size_t n = strlen(line);
    if (fwrite(line, 1, n, f) != n || putc('\n', f) == EOF)
        rc = gh_err_set(err, GH_EIO, "writing a signal failed");
    free(line);
    return rc;
}

/* ---- reader ---------------------------------------------------------------- */

struct gh_signal_reader {
    FILE *f;
    long line;   /* number of the line last read */
    size_t len;  /* bytes of it in buf (at most GH_SIGNAL_LINE_MAX) */
    bool toolong;
    char buf[GH_SIGNAL_LINE_MAX];
};

struct gh_signal_reader *gh_signal_reader_new(FILE *f)
{
    struct gh_signal_reader *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    r->f = f;
    r->line = 0;
    r->len = 0;
    r->toolong = false;
    return r;
}

void gh_signal_reader_free(struct gh_signal_reader *r)
{
    free(r);
}

/* Reads one line (without its '\n') into r->buf, keeping at most
 * GH_SIGNAL_LINE_MAX bytes and discarding the rest up to the newline.
 * getc_unlocked rather than fread: on a pipe, a complete line is returned as
 * soon as it arrives. */
static int read_line(struct gh_signal_reader *r)
{
    int c = EOF;
    bool any = false;
    r->len = 0;
    r->toolong = false;
    flockfile(r->f);
    while ((c = getc_unlocked(r->f)) != EOF) {
        any = true;
        if (c == '\n')
            break;
        if (r->len < GH_SIGNAL_LINE_MAX)
            r->buf[r->len++] = (char)c;
        else
            r->toolong = true;
    }
    bool failed = c == EOF && ferror(r->f);
    funlockfile(r->f);
    if (failed)
        return GH_EIO;
    if (!any)
        return GH_ENOTFOUND;
    r->line++;
    return GH_OK;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

int gh_signal_reader_next(struct gh_signal_reader *r, struct gh_signal *out, json_t **header,
                          struct gh_err *err)
{
    json_t *root = NULL;
    const char *text;
    size_t len;
    int rc;

    if (header)
        *header = NULL;
    for (;;) {
        rc = read_line(r);
        if (rc == GH_ENOTFOUND) {
            rc = gh_err_set(err, rc, "end of input");
            goto fail;
        }
        if (rc) {
            rc = line_err(err, rc, r->line + 1, "read error");
            goto fail;
        }
        if (r->toolong) {
            rc = line_err(err, GH_EINVAL, r->line, "longer than %d bytes", GH_SIGNAL_LINE_MAX);
            goto fail;
        }
        text = r->buf;
        len = r->len;
        if (r->line == 1 && len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
            text += 3, len -= 3; /* a UTF-8 byte order mark */
        if (!blank(text, len))
            break;
    }
    if ((rc = parse_line(text, len, r->line, &root, err)))
        goto fail;
    if (header && is_header(root)) {
        *header = root;
        return GH_OK;
    }
    rc = gh_signal_decode_json(root, r->line, out, err); /* clears out on error */
    json_decref(root);
    return rc;
fail:
    gh_signal_init(out);
    return rc;
}

long gh_signal_reader_line(const struct gh_signal_reader *r)
{
    return r->line;
}
