/* test_agent_dcgm.c - unit tests of the DCGM source: the Prometheus text
 * parser on the kept corpus (test/fuzz/promtext/), the dcgm-exporter
 * scraper over real HTTP against a local libmicrohttpd server serving
 * fixture text (baselines, counter moves, XIDs, errors, limits, timeout),
 * and the DCGM library path against test/nvml-fake's libdcgm-fake.so
 * (response v5 and v4, incidents reported once while they last, missing
 * library, failed init, host engine connection). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <microhttpd.h>

#include "agent/dcgm.h"
#include "agent/dcgm_shipped.h"
#include "signal/signal_json.h"

#ifndef GH_BUILD_DIR
#error "GH_BUILD_DIR must be defined by the build"
#endif
#ifndef GH_SOURCE_DIR
#error "GH_SOURCE_DIR must be defined by the build"
#endif
#define FAKE_DCGM GH_BUILD_DIR "/lib/libdcgm-fake.so"
#define CORPUS    GH_SOURCE_DIR "/test/fuzz/promtext/"

#define MAX_SIGS 128

static int64_t fake_now = 1800000000LL * 1000000000LL;
static int64_t clock_now(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}
static const struct gh_clock fake_clock = {clock_now, NULL};

/* ---- recorder ---- */
struct recorder {
    pthread_mutex_t mu;
    struct gh_signal sigs[MAX_SIGS];
    int n;
    int bad_json;       /* codec refused (other than an nvlink total) */
    int linkless;       /* nvlink totals without a link (see dcgm.h), encoded */
};

static void record(void *ctx, const struct gh_signal *sig)
{
    struct recorder *r = ctx;
    struct gh_err err;
    char *json = NULL;
    pthread_mutex_lock(&r->mu);
    if (gh_signal_encode(sig, &json, &err) != GH_OK) {
        r->bad_json++;
        fprintf(stderr, "codec refused: %s\n", err.msg);
    } else if (sig->kind == GH_KIND_NVLINK && !sig->has_link) {
        r->linkless++; /* a per-GPU total: the wire omits "link" */
    }
    free(json);
    if (r->n < MAX_SIGS && gh_signal_copy(&r->sigs[r->n], sig, NULL) == GH_OK)
        r->n++;
    pthread_mutex_unlock(&r->mu);
}

static struct recorder *recorder_new(void)
{
    struct recorder *r = calloc(1, sizeof *r);
    assert_non_null(r);
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void recorder_free(struct recorder *r)
{
    assert_int_equal(r->bad_json, 0);
    for (int i = 0; i < r->n; i++)
        gh_signal_clear(&r->sigs[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static const struct gh_signal *find(struct recorder *r, enum gh_kind kind, int gpu)
{
    for (int i = 0; i < r->n; i++)
        if (r->sigs[i].kind == kind && r->sigs[i].gpu == gpu)
            return &r->sigs[i];
    return NULL;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;
    if (!f)
        fail_msg("cannot open %s", path);
    buf = malloc(1 << 20);
    assert_non_null(buf);
    n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Sets the value of the first sample line that starts with `prefix` (a
 * metric name and the start of its labels) in the NUL-terminated *text. */
static void set_value(char **text, size_t *len, const char *prefix, const char *value)
{
    char *at = strstr(*text, prefix), *brace, *eol, *out;
    size_t head, vl = strlen(value);
    if (!at)
        fail_msg("fixture lacks %s", prefix);
    brace = strstr(at, "} ");
    eol = strchr(at, '\n');
    assert_non_null(brace);
    assert_non_null(eol);
    head = (size_t)(brace + 2 - *text);
    out = malloc(head + vl + strlen(eol) + 1);
    assert_non_null(out);
    memcpy(out, *text, head);
    memcpy(out + head, value, vl);
    memcpy(out + head + vl, eol, strlen(eol) + 1);
    free(*text);
    *text = out;
    *len = strlen(out);
}

/* ---- parser ---- */

struct collect {
    int samples;
    char last_label_value[128];
    double values[32];
    bool has_ts[32];
    int64_t ts[32];
    int stop_at;
};

static int collect_fn(void *ctx, const struct gh_dcgm_promtext_sample *s)
{
    struct collect *c = ctx;
    if (c->samples < 32) {
        c->values[c->samples] = s->value;
        c->has_ts[c->samples] = s->has_timestamp;
        c->ts[c->samples] = s->timestamp_ms;
    }
    for (size_t i = 0; i < s->nlabels; i++)
        if (s->labels[i].name_len == 1 && s->labels[i].name[0] == 'a' &&
            s->labels[i].value_len < sizeof c->last_label_value) {
            memcpy(c->last_label_value, s->labels[i].value, s->labels[i].value_len);
            c->last_label_value[s->labels[i].value_len] = '\0';
        }
    c->samples++;
    if (c->stop_at && c->samples == c->stop_at)
        return 77;
    return 0;
}

static void test_promtext_fixture(void **state)
{
    size_t len, bad = 99;
    char *text = slurp(CORPUS "dcgm-exporter.txt", &len);
    struct collect c = {0};
    struct gh_err err = {{0}};
    (void)state;
    assert_int_equal(gh_dcgm_promtext_parse(text, len, collect_fn, &c, &bad, &err), GH_OK);
    assert_int_equal(bad, 0);
    assert_int_equal(c.samples, 50);
    free(text);
}

static void test_promtext_edge_cases(void **state)
{
    size_t len, bad = 99;
    char *text = slurp(CORPUS "edge-cases.txt", &len);
    struct collect c = {0};
    struct gh_err err = {{0}};
    (void)state;
    assert_int_equal(gh_dcgm_promtext_parse(text, len, collect_fn, &c, &bad, &err), GH_OK);
    assert_int_equal(bad, 0);
    assert_int_equal(c.samples, 13);
    assert_true(c.values[0] == 1 && c.values[1] == 2 && c.values[2] == 3);
    assert_true(c.values[3] > 1e308); /* +Inf */
    assert_true(c.has_ts[3]);
    assert_true(c.ts[3] == 1700000000000LL);
    assert_true(c.values[4] < -1e308);
    assert_true(c.values[5] != c.values[5]); /* NaN */
    assert_true(c.values[6] == 4.5e-3);
    assert_true(c.has_ts[6] && c.ts[6] == -12);
    free(text);

    /* Escapes are undone. */
    memset(&c, 0, sizeof c);
    {
        const char *line = "m{a=\"q \\\" b \\\\ n \\n\"} 1\n";
        assert_int_equal(gh_dcgm_promtext_parse(line, strlen(line), collect_fn, &c, NULL, &err),
                         GH_OK);
        assert_string_equal(c.last_label_value, "q \" b \\ n \n");
    }
}

static void test_promtext_malformed(void **state)
{
    size_t len, bad = 0;
    char *text = slurp(CORPUS "malformed.txt", &len);
    struct collect c = {0};
    struct gh_err err = {{0}};
    char *big;
    (void)state;
    assert_int_equal(gh_dcgm_promtext_parse(text, len, collect_fn, &c, &bad, &err), GH_EINVAL);
    assert_int_equal(bad, 10);
    assert_int_equal(c.samples, 0);
    assert_string_equal(err.msg, "line 1: bad metric name");
    free(text);

    /* An over-long line is skipped; the next line still parses. */
    big = malloc(GH_DCGM_PROMTEXT_LINE_MAX + 64);
    assert_non_null(big);
    memset(big, 'a', GH_DCGM_PROMTEXT_LINE_MAX + 10);
    memcpy(big + GH_DCGM_PROMTEXT_LINE_MAX + 10, " 1\nok 2\n", 8);
    memset(&c, 0, sizeof c);
    assert_int_equal(gh_dcgm_promtext_parse(big, GH_DCGM_PROMTEXT_LINE_MAX + 18, collect_fn, &c,
                                            &bad, &err),
                     GH_EINVAL);
    assert_int_equal(bad, 1);
    assert_int_equal(c.samples, 1);
    assert_string_equal(err.msg, "line 1: line too long");
    free(big);

    /* NUL bytes make a line bad, not the parse. */
    memset(&c, 0, sizeof c);
    assert_int_equal(gh_dcgm_promtext_parse("a 1\nb\0 2\nc 3", 12, collect_fn, &c, &bad, &err),
                     GH_EINVAL);
    assert_int_equal(bad, 1);
    assert_int_equal(c.samples, 2);

    /* The callback can stop the parse. */
    memset(&c, 0, sizeof c);
    c.stop_at = 2;
    assert_int_equal(gh_dcgm_promtext_parse("a 1\nb 2\nc 3\n", 12, collect_fn, &c, NULL, &err), 77);
    assert_int_equal(c.samples, 2);
}

/* ---- a local HTTP server ---- */

struct server {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    char *body;
    size_t len;
    unsigned status;
    unsigned delay_ms;
    atomic_int requests;
    char url[64];
};

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_len, void **con_cls)
{
    struct server *s = cls;
    struct MHD_Response *resp;
    enum MHD_Result ret;
    unsigned status, delay;
    (void)version;
    (void)upload;
    (void)upload_len;
    (void)con_cls;
    if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0)
        return MHD_NO;
    atomic_fetch_add(&s->requests, 1);
    pthread_mutex_lock(&s->mu);
    resp = MHD_create_response_from_buffer(s->len, s->body, MHD_RESPMEM_MUST_COPY);
    status = s->status;
    delay = s->delay_ms;
    pthread_mutex_unlock(&s->mu);
    if (delay)
        usleep(delay * 1000);
    MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static struct server *server_start(const char *body, size_t len)
{
    struct server *s = calloc(1, sizeof *s);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    const union MHD_DaemonInfo *info;
    assert_non_null(s);
    pthread_mutex_init(&s->mu, NULL);
    s->body = malloc(len + 1);
    memcpy(s->body, body, len);
    s->len = len;
    s->status = 200;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                            NULL, NULL, serve, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_END);
    assert_non_null(s->d);
    info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(info);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u/metrics", (unsigned)info->port);
    return s;
}

static void server_set(struct server *s, const char *body, size_t len, unsigned status)
{
    pthread_mutex_lock(&s->mu);
    free(s->body);
    s->body = malloc(len + 1);
    memcpy(s->body, body, len);
    s->len = len;
    s->status = status;
    pthread_mutex_unlock(&s->mu);
}

static void server_stop(struct server *s)
{
    MHD_stop_daemon(s->d);
    pthread_mutex_destroy(&s->mu);
    free(s->body);
    free(s);
}

static struct gh_dcgm_exporter *exporter(struct server *srv, struct recorder *r)
{
    struct gh_dcgm_exporter_opts o = {
        .url = srv->url,
        .node = "gpu-node-17",
        .interval_ns = 50 * GH_NS_PER_MS,
        .timeout_ns = 2 * GH_NS_PER_S,
        .clock = &fake_clock,
        .emit = record,
        .emit_ctx = r,
    };
    struct gh_dcgm_exporter *ex = NULL;
    struct gh_err err = {{0}};
    if (gh_dcgm_exporter_new(&o, &ex, &err) != GH_OK)
        fail_msg("gh_dcgm_exporter_new: %s", err.msg);
    return ex;
}

static void scrape_ok(struct gh_dcgm_exporter *ex)
{
    struct gh_err err = {{0}};
    int rc = gh_dcgm_exporter_scrape_once(ex, &err);
    if (rc != GH_OK)
        fail_msg("scrape: %s (%s)", gh_rc_str(rc), err.msg);
    fake_now += GH_NS_PER_S;
}

#define LAB0 "gpu=\"0\",UUID=\"GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52\",pci_bus_id=\"00000000:18:00.0\""
#define LAB1 "gpu=\"1\",UUID=\"GPU-8f0a1c2e-4b3d-11ee-9c1a-0242ac120002\",pci_bus_id=\"00000000:2A:00.0\""

static void test_exporter_scrape(void **state)
{
    size_t len;
    char *text = slurp(CORPUS "dcgm-exporter.txt", &len);
    struct server *srv = server_start(text, len);
    struct recorder *r = recorder_new();
    struct gh_dcgm_exporter *ex = exporter(srv, r);
    struct gh_dcgm_exporter_stats st;
    const struct gh_signal *s;
    (void)state;

    /* First scrape: baselines; GPU 0 stands at its power cap (reasons 0x4). */
    scrape_ok(ex);
    assert_int_equal(r->n, 1);
    s = &r->sigs[0];
    assert_int_equal(s->kind, GH_KIND_POWER);
    assert_int_equal(s->source, GH_SRC_DCGM);
    assert_int_equal(s->gpu, 0);
    assert_string_equal(s->node, "gpu-node-17");
    assert_string_equal(s->pci, "0000:18:00.0");
    assert_true(s->throttled);
    assert_true(s->watts > 412.3 && s->watts < 412.4);

    /* Nothing moved: nothing new. */
    scrape_ok(ex);
    scrape_ok(ex);
    assert_int_equal(r->n, 1);

    /* Faults appear. */
    set_value(&text, &len, "DCGM_FI_DEV_XID_ERRORS{" LAB0, "79");
    set_value(&text, &len, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{" LAB1, "2");
    set_value(&text, &len, "DCGM_FI_DEV_ROW_REMAP_FAILURE{" LAB1, "1");
    set_value(&text, &len, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{" LAB1, "5");
    server_set(srv, text, len, 200);
    scrape_ok(ex);
    s = find(r, GH_KIND_XID, 0);
    assert_non_null(s);
    assert_int_equal(s->code, 79);
    s = find(r, GH_KIND_ECC, 1);
    assert_non_null(s);
    assert_int_equal(s->bits, GH_ECC_DOUBLE);
    assert_true(s->is_volatile);
    assert_int_equal(s->count, 2);
    assert_string_equal(s->pci, "0000:2a:00.0");
    s = find(r, GH_KIND_ROW_REMAP, 1);
    assert_non_null(s);
    assert_true(s->failure);
    assert_int_equal(s->correctable, 1);
    s = find(r, GH_KIND_NVLINK, 1);
    assert_non_null(s);
    assert_false(s->has_link);
    assert_string_equal(s->counter, "crc_flit");
    assert_int_equal(s->count, 5);
    assert_int_equal(r->n, 5);
    assert_int_equal(r->linkless, 1);

    /* Again unchanged: nothing, and the XID gauge staying at 79 is not a new XID. */
    scrape_ok(ex);
    assert_int_equal(r->n, 5);

    gh_dcgm_exporter_stats(ex, &st);
    assert_int_equal(st.scrapes, 5);
    assert_int_equal(st.failures, 0);
    assert_int_equal(st.bad_lines, 0);
    assert_int_equal(st.signals, 5);
    gh_dcgm_exporter_free(ex);
    server_stop(srv);
    recorder_free(r);
    free(text);
}

static void test_exporter_xid_counter_preferred(void **state)
{
    static const char *const b1 =
        "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\"} 0\n"
        "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"1\",xid=\"79\",window_size_in_ms=\"300000\"} 0\n";
    static const char *const b2 =
        "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\"} 79\n"
        "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"1\",xid=\"79\",window_size_in_ms=\"300000\"} 1\n";
    static const char *const b3 =
        "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\"} 79\n"
        "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"1\",xid=\"79\",window_size_in_ms=\"300000\"} 2\n"
        "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"1\",xid=\"48\",window_size_in_ms=\"300000\"} 1\n";
    struct server *srv = server_start(b1, strlen(b1));
    struct recorder *r = recorder_new();
    struct gh_dcgm_exporter *ex = exporter(srv, r);
    (void)state;

    scrape_ok(ex);
    assert_int_equal(r->n, 0);
    server_set(srv, b2, strlen(b2), 200);
    scrape_ok(ex);
    assert_int_equal(r->n, 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_XID);
    assert_int_equal(r->sigs[0].code, 79);
    /* The same XID again: the gauge cannot tell, the counter can. */
    server_set(srv, b3, strlen(b3), 200);
    scrape_ok(ex);
    assert_int_equal(r->n, 3);
    assert_int_equal(r->sigs[1].code, 79);
    assert_int_equal(r->sigs[2].code, 48);
    gh_dcgm_exporter_free(ex);
    server_stop(srv);
    recorder_free(r);
}

/* An exporter that ingests text directly, with the shipped-XID state in
 * path for boot. */
static struct gh_dcgm_exporter *exporter_state(struct recorder *r, const char *path,
                                               const char *boot)
{
    struct gh_dcgm_exporter_opts o = {
        .url = "http://127.0.0.1:9/metrics",
        .node = "gpu-node-17",
        .clock = &fake_clock,
        .emit = record,
        .emit_ctx = r,
        .state_path = path,
        .boot_id = boot,
    };
    struct gh_dcgm_exporter *ex = NULL;
    struct gh_err err = {{0}};
    if (gh_dcgm_exporter_new(&o, &ex, &err) != GH_OK)
        fail_msg("gh_dcgm_exporter_new: %s", err.msg);
    return ex;
}

static int ingest_count(struct gh_dcgm_exporter *ex, struct recorder *r, const char *text)
{
    struct gh_err err = {{0}};
    int before = r->n;
    assert_int_equal(gh_dcgm_exporter_ingest(ex, text, strlen(text), &err), GH_OK);
    return r->n - before;
}

/* The exporter's last XID stands after the agent restarts: shipped once per
 * boot, not again with a new id on every start. */
static void test_exporter_xid_not_resent_after_restart(void **state)
{
    (void)state;
    char dir[] = "/tmp/gh-dcgm-state-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/dcgm.state", dir);
    static const char *const last79 = "DCGM_FI_DEV_XID_ERRORS{gpu=\"3\"} 79\n";
    static const char *const last48 = "DCGM_FI_DEV_XID_ERRORS{gpu=\"3\"} 48\n";
    static const char *const count2 =
        "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"1\",xid=\"79\",window_size_in_ms=\"300000\"} 2\n";
    static const char *const count3 =
        "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"1\",xid=\"79\",window_size_in_ms=\"300000\"} 3\n";
    struct recorder *r = recorder_new();

    /* first start: the standing XID is shipped */
    struct gh_dcgm_exporter *ex = exporter_state(r, path, "boot-a");
    assert_int_equal(ingest_count(ex, r, last79), 1);
    assert_int_equal(r->sigs[0].code, 79);
    assert_int_equal(ingest_count(ex, r, count2), 1);
    gh_dcgm_exporter_free(ex);
    /* a restart on the same boot: nothing again */
    ex = exporter_state(r, path, "boot-a");
    assert_int_equal(ingest_count(ex, r, last79), 0);
    assert_int_equal(ingest_count(ex, r, count2), 0);
    /* ... but what changed since is new */
    assert_int_equal(ingest_count(ex, r, count3), 1);
    gh_dcgm_exporter_free(ex);
    ex = exporter_state(r, path, "boot-a");
    assert_int_equal(ingest_count(ex, r, last48), 1);
    assert_int_equal(r->sigs[r->n - 1].code, 48);
    assert_int_equal(ingest_count(ex, r, count3), 0);
    struct gh_dcgm_exporter_stats st;
    gh_dcgm_exporter_stats(ex, &st);
    assert_int_equal(st.state_errors, 0);
    gh_dcgm_exporter_free(ex);
    /* after a reboot the exporter's values are new */
    ex = exporter_state(r, path, "boot-b");
    assert_int_equal(ingest_count(ex, r, last48), 1);
    gh_dcgm_exporter_free(ex);
    /* a damaged state file: counted, and nothing is lost (shipped again) */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("gpuheal-dcgm-state v1\nboot_id boot-b\ngpu 3 last seventy-nine\n", f);
    fclose(f);
    ex = exporter_state(r, path, "boot-b");
    gh_dcgm_exporter_stats(ex, &st);
    assert_int_equal(st.state_errors, 1);
    assert_int_equal(ingest_count(ex, r, last48), 1);
    gh_dcgm_exporter_free(ex);

    /* the parser: what it takes and what it refuses */
    struct gh_dcgm_xid_seen v[4];
    bool same;
    struct gh_err err;
    const char *good = "gpuheal-dcgm-state v1\nboot_id b\ngpu 2 last 79\ngpu 2 xid 48 3\n";
    assert_int_equal(gh_dcgm_shipped_parse(good, strlen(good), "b", v, 4, &same, &err), GH_OK);
    assert_true(same && v[2].known && v[2].has_last && v[2].last == 79 && v[2].n == 1);
    assert_true(v[2].xid[0].code == 48 && v[2].xid[0].count == 3 && !v[0].known);
    assert_int_equal(gh_dcgm_shipped_parse(good, strlen(good), "other", v, 4, &same, &err),
                     GH_OK);
    assert_true(!same && !v[2].known);
    static const char *const bad[] = {
        "", "gpuheal-dcgm-state v2\nboot_id b\n", "gpuheal-dcgm-state v1\n",
        "gpuheal-dcgm-state v1\nboot_id b\ngpu 4 last 79\n",
        "gpuheal-dcgm-state v1\nboot_id b\ngpu 1 last 79 x\n",
        "gpuheal-dcgm-state v1\nboot_id b\ngpu 1 xid 79\n",
        "gpuheal-dcgm-state v1\nboot_id b c\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        assert_int_equal(gh_dcgm_shipped_parse(bad[i], strlen(bad[i]), "b", v, 4, &same, &err),
                         GH_EINVAL);
        assert_true(err.msg[0] != '\0' && !v[1].known);
    }
    unlink(path);
    rmdir(dir);
    recorder_free(r);
}

static void test_exporter_link_and_thermal(void **state)
{
    static const char *const b1 =
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L3{gpu=\"0\"} 1\n"
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{nvlink=\"5\",gpu=\"0\",hostname=\"h\"} 0\n"
        "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 70\n"
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\"} 0\n";
    static const char *const b2 =
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L3{gpu=\"0\"} 4\n"
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{nvlink=\"5\",gpu=\"0\",hostname=\"h\"} 2\n"
        "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 91\n"
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\"} 64\n";
    struct server *srv = server_start(b1, strlen(b1));
    struct recorder *r = recorder_new();
    struct gh_dcgm_exporter *ex = exporter(srv, r);
    const struct gh_signal *s;
    (void)state;

    scrape_ok(ex);
    assert_int_equal(r->n, 0);
    server_set(srv, b2, strlen(b2), 200);
    scrape_ok(ex);
    assert_int_equal(r->n, 3);
    assert_int_equal(r->sigs[0].kind, GH_KIND_NVLINK);
    assert_true(r->sigs[0].has_link);
    assert_int_equal(r->sigs[0].link, 3);
    assert_string_equal(r->sigs[0].counter, "crc_flit");
    assert_int_equal(r->sigs[1].kind, GH_KIND_NVLINK);
    assert_int_equal(r->sigs[1].link, 5);
    assert_string_equal(r->sigs[1].counter, "replay");
    s = find(r, GH_KIND_THERMAL, 0);
    assert_non_null(s);
    assert_true(s->celsius == 91);
    assert_true(s->throttled);
    assert_int_equal(r->linkless, 0);
    gh_dcgm_exporter_free(ex);
    server_stop(srv);
    recorder_free(r);
}

static void test_exporter_errors(void **state)
{
    static const char *const body = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 50\nbroken{ 1\n";
    struct server *srv = server_start(body, strlen(body));
    struct recorder *r = recorder_new();
    struct gh_dcgm_exporter *ex = exporter(srv, r);
    struct gh_dcgm_exporter_opts o = {.node = "n", .emit = record, .emit_ctx = r};
    struct gh_dcgm_exporter *ex2 = NULL;
    struct gh_dcgm_exporter_stats st;
    struct gh_err err = {{0}};
    char url[80];
    (void)state;

    /* A bad line is counted; the good ones count. */
    assert_int_equal(gh_dcgm_exporter_scrape_once(ex, &err), GH_EINVAL);
    assert_string_equal(err.msg, "line 2: bad label name");

    server_set(srv, body, strlen(body), 503);
    assert_int_equal(gh_dcgm_exporter_scrape_once(ex, &err), GH_EIO);
    assert_non_null(strstr(err.msg, "HTTP status 503"));

    /* Body over the cap. */
    o.url = srv->url;
    o.max_body = 16;
    server_set(srv, body, strlen(body), 200);
    assert_int_equal(gh_dcgm_exporter_new(&o, &ex2, &err), GH_OK);
    assert_int_equal(gh_dcgm_exporter_scrape_once(ex2, &err), GH_ELIMIT);
    assert_non_null(strstr(err.msg, "larger than 16 bytes"));
    gh_dcgm_exporter_free(ex2);

    /* Timeout. */
    o.max_body = 0;
    o.timeout_ns = 300 * GH_NS_PER_MS;
    assert_int_equal(gh_dcgm_exporter_new(&o, &ex2, &err), GH_OK);
    pthread_mutex_lock(&srv->mu);
    srv->delay_ms = 1500;
    pthread_mutex_unlock(&srv->mu);
    assert_int_equal(gh_dcgm_exporter_scrape_once(ex2, &err), GH_ETIMEOUT);
    gh_dcgm_exporter_free(ex2);
    pthread_mutex_lock(&srv->mu);
    srv->delay_ms = 0;
    pthread_mutex_unlock(&srv->mu);

    gh_dcgm_exporter_stats(ex, &st);
    assert_int_equal(st.scrapes, 2);
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.bad_lines, 1);
    snprintf(url, sizeof url, "%s", srv->url);
    gh_dcgm_exporter_free(ex);
    server_stop(srv);

    /* Nobody listening. */
    o.url = url;
    o.timeout_ns = 0;
    assert_int_equal(gh_dcgm_exporter_new(&o, &ex2, &err), GH_OK);
    assert_int_equal(gh_dcgm_exporter_scrape_once(ex2, &err), GH_EIO);
    assert_non_null(strstr(err.msg, "dcgm-exporter: GET http://127.0.0.1:"));
    gh_dcgm_exporter_free(ex2);

    /* Bad options. */
    o.url = NULL;
    assert_int_equal(gh_dcgm_exporter_new(&o, &ex2, &err), GH_EINVAL);
    o.url = "ftp://example.com/metrics";
    assert_int_equal(gh_dcgm_exporter_new(&o, &ex2, &err), GH_OK);
    assert_int_equal(gh_dcgm_exporter_scrape_once(ex2, &err), GH_EIO);
    gh_dcgm_exporter_free(ex2);
    gh_dcgm_exporter_free(NULL);
    assert_int_equal(r->n, 0);
    recorder_free(r);
}

static void test_exporter_thread(void **state)
{
    static const char *const body = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 50\n";
    struct server *srv = server_start(body, strlen(body));
    struct recorder *r = recorder_new();
    struct gh_dcgm_exporter *ex = exporter(srv, r);
    struct gh_err err = {{0}};
    (void)state;

    assert_int_equal(gh_dcgm_exporter_start(ex, &err), GH_OK);
    assert_int_equal(gh_dcgm_exporter_start(ex, &err), GH_EINVAL);
    for (int i = 0; i < 200 && atomic_load(&srv->requests) < 3; i++)
        usleep(20 * 1000);
    assert_true(atomic_load(&srv->requests) >= 3);
    gh_dcgm_exporter_stop(ex);
    gh_dcgm_exporter_stop(ex);
    gh_dcgm_exporter_free(ex);
    server_stop(srv);
    recorder_free(r);
}

/* ---- DCGM library (fake) ---- */

static char dcgm_config[64];

static void dcgm_write_config(const char *text)
{
    FILE *f;
    if (!dcgm_config[0]) {
        int fd;
        snprintf(dcgm_config, sizeof dcgm_config, "/tmp/gh-dcgm-fake-XXXXXX");
        fd = mkstemp(dcgm_config);
        assert_true(fd >= 0);
        close(fd);
    }
    f = fopen(dcgm_config, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    setenv("GH_DCGM_FAKE_CONFIG", dcgm_config, 1);
}

static struct gh_dcgm_health_opts health_opts(struct recorder *r)
{
    struct gh_dcgm_health_opts o = {
        .lib_path = FAKE_DCGM,
        .node = "gpu-node-17",
        .interval_ns = 20 * GH_NS_PER_MS,
        .clock = &fake_clock,
        .emit = record,
        .emit_ctx = r,
    };
    return o;
}

static void test_dcgm_no_library(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_dcgm_health_opts o = health_opts(r);
    struct gh_dcgm_health *h = NULL;
    struct gh_err err = {{0}};
    (void)state;

    o.lib_path = "/nonexistent/libdcgm.so.4";
    assert_int_equal(gh_dcgm_health_new(&o, &h, &err), GH_ENOTFOUND);
    assert_null(h);
    assert_non_null(strstr(err.msg, "DCGM: /nonexistent/libdcgm.so.4 not found (dlopen: "));
    assert_non_null(strstr(err.msg, "DCGM health watches disabled"));
    o.lib_path = NULL;
    if (gh_dcgm_health_new(&o, &h, &err) == GH_OK)
        gh_dcgm_health_free(h); /* a machine with DCGM installed */
    else
        assert_non_null(strstr(err.msg, "libdcgm.so.4 / libdcgm.so.3 not found"));
    gh_dcgm_health_free(NULL);
    recorder_free(r);
}

static void check_ok(struct gh_dcgm_health *h)
{
    struct gh_err err = {{0}};
    int rc = gh_dcgm_health_check_once(h, &err);
    if (rc != GH_OK)
        fail_msg("check: %s (%s)", gh_rc_str(rc), err.msg);
}

static void run_incidents(const char *version_line)
{
    char config[1024];
    struct recorder *r = recorder_new();
    struct gh_dcgm_health_opts o = health_opts(r);
    struct gh_dcgm_health *h = NULL;
    struct gh_err err = {{0}};

    snprintf(config, sizeof config,
             "%s"
             "incident 1 9 0 32 10 999 an SM warning with no spec kind\n"
             "incident 2 3 1 16 20 4 Detected 2 volatile DBE errors in GPU 1\n"
             "incident 3 9 3 512 20 101 Detected XID 79 for GPU 3\n"
             "incident 4 9 2 16 20 80 Row remapping failure on GPU 2\n"
             "incident 5 9 5 512 20 120 GPU 5 has fallen off the bus\n"
             "incident 6 9 6 2 10 70 NVLink CRC error threshold on link 7 of GPU 6\n",
             version_line);
    dcgm_write_config(config);
    if (gh_dcgm_health_new(&o, &h, &err) != GH_OK)
        fail_msg("gh_dcgm_health_new: %s", err.msg);
    check_ok(h); /* 1: only the unmapped SM incident */
    assert_int_equal(r->n, 0);
    check_ok(h); /* 2: DBE */
    assert_int_equal(r->n, 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_ECC);
    assert_int_equal(r->sigs[0].source, GH_SRC_DCGM);
    assert_int_equal(r->sigs[0].gpu, 1);
    assert_int_equal(r->sigs[0].bits, GH_ECC_DOUBLE);
    assert_int_equal(r->sigs[0].count, 2);
    assert_non_null(strstr(r->sigs[0].msg, "Detected 2 volatile DBE errors"));
    check_ok(h); /* 3: XID 79; the DBE still active is not repeated */
    assert_int_equal(r->n, 2);
    assert_int_equal(r->sigs[1].kind, GH_KIND_XID);
    assert_int_equal(r->sigs[1].code, 79);
    assert_int_equal(r->sigs[1].gpu, 3);
    check_ok(h); /* 4: row remap failure */
    assert_int_equal(r->n, 3);
    assert_int_equal(r->sigs[2].kind, GH_KIND_ROW_REMAP);
    assert_true(r->sigs[2].failure);
    check_ok(h); /* 5: fallen off the bus */
    assert_int_equal(r->n, 4);
    assert_int_equal(r->sigs[3].kind, GH_KIND_GPU_LOST);
    assert_int_equal(r->sigs[3].gpu, 5);
    check_ok(h); /* 6: NVLink CRC on link 7 */
    assert_int_equal(r->n, 5);
    assert_int_equal(r->sigs[4].kind, GH_KIND_NVLINK);
    assert_true(r->sigs[4].has_link);
    assert_int_equal(r->sigs[4].link, 7);
    assert_string_equal(r->sigs[4].counter, "crc_flit");
    check_ok(h);
    check_ok(h);
    assert_int_equal(r->n, 5);
    gh_dcgm_health_free(h);
    recorder_free(r);
}

static void test_dcgm_incidents_v5(void **state)
{
    (void)state;
    run_incidents("version 5\n");
}

static void test_dcgm_incidents_v4(void **state)
{
    (void)state;
    run_incidents("version 4\n");
}

static void test_dcgm_unknown_version(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_dcgm_health_opts o = health_opts(r);
    struct gh_dcgm_health *h = NULL;
    struct gh_err err = {{0}};
    (void)state;
    dcgm_write_config("version 6\n");
    assert_int_equal(gh_dcgm_health_new(&o, &h, &err), GH_OK);
    assert_int_equal(gh_dcgm_health_check_once(h, &err), GH_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "neither response v5 nor v4"));
    assert_int_equal(gh_dcgm_health_check_once(h, &err), GH_EUNSUPPORTED);
    gh_dcgm_health_free(h);
    recorder_free(r);
}

static void test_dcgm_init_and_connect(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_dcgm_health_opts o = health_opts(r);
    struct gh_dcgm_health *h = NULL;
    struct gh_err err = {{0}};
    (void)state;

    dcgm_write_config("init_error -7\n");
    assert_int_equal(gh_dcgm_health_new(&o, &h, &err), GH_ENOTFOUND);
    assert_non_null(strstr(err.msg, "dcgmInit failed: DCGM initialization error (-7)"));

    dcgm_write_config("incident 1 9 0 16 20 80 Row remapping failure on GPU 0\n");
    o.hostengine = "10.0.0.1:5555";
    assert_int_equal(gh_dcgm_health_new(&o, &h, &err), GH_ENOTFOUND);
    assert_non_null(strstr(err.msg, "cannot connect to nv-hostengine at 10.0.0.1:5555"));
    o.hostengine = "127.0.0.1:5555";
    assert_int_equal(gh_dcgm_health_new(&o, &h, &err), GH_OK);
    assert_int_equal(gh_dcgm_health_start(h, &err), GH_OK);
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&r->mu);
        int n = r->n;
        pthread_mutex_unlock(&r->mu);
        if (n)
            break;
        usleep(10 * 1000);
    }
    gh_dcgm_health_stop(h);
    assert_int_equal(r->n, 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_ROW_REMAP);
    gh_dcgm_health_free(h);
    recorder_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promtext_fixture),
        cmocka_unit_test(test_promtext_edge_cases),
        cmocka_unit_test(test_promtext_malformed),
        cmocka_unit_test(test_exporter_scrape),
        cmocka_unit_test(test_exporter_xid_counter_preferred),
        cmocka_unit_test(test_exporter_xid_not_resent_after_restart),
        cmocka_unit_test(test_exporter_link_and_thermal),
        cmocka_unit_test(test_exporter_errors),
        cmocka_unit_test(test_exporter_thread),
        cmocka_unit_test(test_dcgm_no_library),
        cmocka_unit_test(test_dcgm_incidents_v5),
        cmocka_unit_test(test_dcgm_incidents_v4),
        cmocka_unit_test(test_dcgm_unknown_version),
        cmocka_unit_test(test_dcgm_init_and_connect),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (dcgm_config[0])
        unlink(dcgm_config);
    return rc;
}
