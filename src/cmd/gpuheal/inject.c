/* inject.c - `gpuheal inject`: posts signal lines from a file or standard
 * input to a controller's ingest endpoint, marked injected, and prints the
 * controller's summary. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cmd/gpuheal/commands.h"
#include "common/curlbuf.h"
#include "wire/token.h"
#include "wire/wire.h"
#include "signal/signal_json.h"

#define URL_MAX      2048
#define RESP_MAX     (256 * 1024)
#define ERRORS_SHOWN 1000

static void usage(FILE *f)
{
    fprintf(f,
        "usage: gpuheal inject --controller URL --token-file FILE [options] [FILE|-]\n"
        "\n"
        "Posts signal lines (JSON lines, spec/signals.md section 1) from FILE, or\n"
        "standard input when FILE is '-' or absent, to the controller's ingest\n"
        "endpoint (POST URL/v1/signals), each marked \"injected\": true, in batches.\n"
        "Prints the controller's summary as one JSON object:\n"
        "  {\"accepted\":N,\"duplicates\":N,\"rejected\":N,\"errors\":[{\"line\":L,\"error\":\"...\"}]}\n"
        "with L the line number in the input. Exit status: 0 when every line was\n"
        "accepted (or was a duplicate), 1 when the controller refused lines or a\n"
        "request failed, 2 on bad usage.\n"
        "\n"
        "options:\n"
        "  --controller URL     controller base URL (http:// or https://); env GPUHEAL_CONTROLLER\n"
        "  --token-file FILE    bearer token file (first token is used); env GPUHEAL_TOKEN_FILE\n"
        "  --cacert FILE        PEM CA bundle to verify an https controller\n"
        "  --batch N            lines per request (default 500; also capped at 1 MiB)\n"
        "  --timeout SECONDS    per request (default 30)\n"
        "  --retries N          retries of a request that failed to connect, timed out\n"
        "                       or got 429/5xx (default 5, exponential backoff)\n");
}

struct batch {
    char *body;
    size_t len, cap;
    long *lines;     /* input line of each body line */
    size_t n, lcap;
};

struct run {
    char url[URL_MAX];
    const char *token_file, *cacert;
    long timeout_s;
    int retries;
    CURL *h;
    uint64_t accepted, duplicates, rejected;
    json_t *errors;  /* [{line, error}] with input line numbers */
    bool truncated;
    bool failed;     /* a request failed for good */
};

static bool add_error(struct run *r, long line, const char *msg)
{
    if (json_array_size(r->errors) >= ERRORS_SHOWN) {
        r->truncated = true;
        return true;
    }
    json_t *e = json_pack("{s:I,s:s}", "line", (json_int_t)line, "error", msg);
    return e && json_array_append_new(r->errors, e) == 0;
}

static int batch_add(struct batch *b, const char *text, size_t len, long line)
{
    if (b->len + len + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 64 * 1024;
        while (ncap < b->len + len + 1)
            ncap *= 2;
        char *nb = realloc(b->body, ncap);
        if (!nb)
            return -1;
        b->body = nb;
        b->cap = ncap;
    }
    if (b->n == b->lcap) {
        size_t ncap = b->lcap ? b->lcap * 2 : 512;
        long *nl = realloc(b->lines, ncap * sizeof *nl);
        if (!nl)
            return -1;
        b->lines = nl;
        b->lcap = ncap;
    }
    memcpy(b->body + b->len, text, len);
    b->body[b->len + len] = '\n';
    b->len += len + 1;
    b->lines[b->n++] = line;
    return 0;
}

struct resp {
    struct gh_curlbuf body; /* capped at RESP_MAX, the excess dropped */
    long retry_after;
};

static size_t on_header(char *d, size_t s, size_t n, void *ud)
{
    struct resp *r = ud;
    size_t k = s * n;
    if (k > 12 && strncasecmp(d, "Retry-After:", 12) == 0) {
        char tmp[32];
        size_t m = k - 12 < sizeof tmp - 1 ? k - 12 : sizeof tmp - 1;
        memcpy(tmp, d + 12, m);
        tmp[m] = '\0';
        long v = strtol(tmp, NULL, 10);
        if (v > 0 && v < 600)
            r->retry_after = v;
    }
    return k;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Posts one batch, retrying what can succeed later. */
static void post(struct run *r, struct batch *b)
{
    char tok[GH_TOKEN_MAX + 1], auth[GH_TOKEN_MAX + 32];
    struct gh_err err;
    if (gh_token_read(r->token_file, tok, sizeof tok, &err)) {
        fprintf(stderr, "gpuheal inject: %s\n", err.msg);
        r->failed = true;
        return;
    }
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
    memset(tok, 0, sizeof tok);
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    memset(auth, 0, sizeof auth);
    struct curl_slist *h2 = hd ? curl_slist_append(hd, "Content-Type: application/x-ndjson") : NULL;
    h2 = h2 ? curl_slist_append(h2, "Expect:") : NULL;
    if (!h2) {
        fprintf(stderr, "gpuheal inject: out of memory\n");
        curl_slist_free_all(hd);
        r->failed = true;
        return;
    }
    double backoff = 0.5;
    for (int attempt = 0;; attempt++) {
        struct resp rs = {.body = {.max = RESP_MAX, .drop_excess = true}};
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(r->h, CURLOPT_URL, r->url);
        curl_easy_setopt(r->h, CURLOPT_POSTFIELDS, b->body);
        curl_easy_setopt(r->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b->len);
        curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(r->h, CURLOPT_TIMEOUT, r->timeout_s);
        curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, gh_curlbuf_write);
        curl_easy_setopt(r->h, CURLOPT_WRITEDATA, &rs.body);
        curl_easy_setopt(r->h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(r->h, CURLOPT_HEADERDATA, &rs);
        curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(r->h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (r->cacert)
            curl_easy_setopt(r->h, CURLOPT_CAINFO, r->cacert);
        CURLcode cc = curl_easy_perform(r->h);
        long status = 0;
        if (cc == CURLE_OK)
            curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &status);
        bool retryable = cc != CURLE_OK || status == 429 || status >= 500;
        if (cc == CURLE_OK && (status == 200 || status == 422)) {
            struct gh_ingest_result *res = malloc(sizeof *res);
            if (!res ||
                gh_ingest_reply_decode(rs.body.p ? rs.body.p : "", rs.body.len, res, &err)) {
                fprintf(stderr, "gpuheal inject: HTTP %ld with a bad summary: %s\n", status,
                        res ? err.msg : "out of memory");
                r->failed = true;
            } else {
                r->accepted += res->accepted;
                r->duplicates += res->duplicates;
                r->rejected += res->rejected;
                for (size_t i = 0; i < res->n_errors; i++) {
                    long l = res->errors[i].line;
                    long in = l >= 1 && (size_t)l <= b->n ? b->lines[l - 1] : -1;
                    add_error(r, in, res->errors[i].error);
                }
                if (res->errors_truncated)
                    r->truncated = true;
            }
            free(res);
            free(rs.body.p);
            break;
        }
        if (!retryable || attempt >= r->retries) {
            if (cc != CURLE_OK)
                fprintf(stderr, "gpuheal inject: POST %s: %s\n", r->url,
                        errbuf[0] ? errbuf : curl_easy_strerror(cc));
            else
                fprintf(stderr, "gpuheal inject: POST %s: HTTP %ld: %.*s\n", r->url, status,
                        (int)(rs.body.len > 300 ? 300 : rs.body.len), rs.body.p ? rs.body.p : "");
            fprintf(stderr, "gpuheal inject: %zu lines (input lines %ld..%ld) not delivered\n",
                    b->n, b->lines[0], b->lines[b->n - 1]);
            r->failed = true;
            free(rs.body.p);
            break;
        }
        double wait = rs.retry_after > backoff ? (double)rs.retry_after : backoff;
        free(rs.body.p);
        sleep_s(wait);
        backoff *= 2;
        if (backoff > 30)
            backoff = 30;
    }
    for (struct curl_slist *s = hd; s; s = s->next)
        memset(s->data, 0, strlen(s->data));
    curl_slist_free_all(hd);
}

/* Marks one line injected. Returns a malloc'd line to send (the line as is
 * when it is not a JSON object: the controller then reports it), or NULL
 * with *skip when it is a scenario header. */
static char *mark(const char *text, size_t len, bool *skip)
{
    json_error_t je;
    *skip = false;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    char *out = NULL;
    if (json_is_object(o)) {
        if (json_object_get(o, "scenario") && !json_object_get(o, "kind")) {
            *skip = true;
            json_decref(o);
            return NULL;
        }
        if (json_object_set_new(o, "injected", json_true()) == 0)
            out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(o);
    if (!out) {
        out = malloc(len + 1);
        if (out) {
            memcpy(out, text, len);
            out[len] = '\0';
        }
    }
    return out;
}

static int parse_long_arg(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end || end == s || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

int gh_cmd_inject(int argc, char **argv)
{
    const char *controller = getenv("GPUHEAL_CONTROLLER");
    const char *input = "-";
    struct run r = {0};
    long batch_lines = 500, retries = 5;
    r.token_file = getenv("GPUHEAL_TOKEN_FILE");
    r.timeout_s = 30;
    int rc = 2;
    bool have_input = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--controller") == 0 && has_val) {
            controller = argv[++i];
        } else if (strcmp(a, "--token-file") == 0 && has_val) {
            r.token_file = argv[++i];
        } else if (strcmp(a, "--cacert") == 0 && has_val) {
            r.cacert = argv[++i];
        } else if (strcmp(a, "--batch") == 0 && has_val) {
            if (parse_long_arg(argv[++i], 1, 100000, &batch_lines)) {
                fprintf(stderr, "gpuheal inject: --batch: expected 1..100000\n");
                return 2;
            }
        } else if (strcmp(a, "--timeout") == 0 && has_val) {
            if (parse_long_arg(argv[++i], 1, 3600, &r.timeout_s)) {
                fprintf(stderr, "gpuheal inject: --timeout: expected 1..3600 seconds\n");
                return 2;
            }
        } else if (strcmp(a, "--retries") == 0 && has_val) {
            if (parse_long_arg(argv[++i], 0, 100, &retries)) {
                fprintf(stderr, "gpuheal inject: --retries: expected 0..100\n");
                return 2;
            }
        } else if ((a[0] != '-' || strcmp(a, "-") == 0) && !have_input) {
            input = a;
            have_input = true;
        } else {
            fprintf(stderr, "gpuheal inject: unexpected argument \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    r.retries = (int)retries;
    if (!controller || !r.token_file) {
        fprintf(stderr, "gpuheal inject: --controller and --token-file are required\n");
        usage(stderr);
        return 2;
    }
    struct gh_err err;
    if (gh_ingest_url(controller, r.url, sizeof r.url, &err)) {
        fprintf(stderr, "gpuheal inject: %s\n", err.msg);
        return 2;
    }
    FILE *in = strcmp(input, "-") == 0 ? stdin : fopen(input, "rb");
    if (!in) {
        fprintf(stderr, "gpuheal inject: %s: %s\n", input, strerror(errno));
        return 1;
    }
    char *line = malloc(GH_SIGNAL_LINE_MAX + 2);
    struct batch b = {0};
    r.errors = json_array();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    r.h = curl_easy_init();
    if (!line || !r.errors || !r.h) {
        fprintf(stderr, "gpuheal inject: out of memory\n");
        rc = 1;
        goto out;
    }

    long lineno = 0;
    for (;;) {
        /* Bounded line reading: an overlong line is reported and skipped. */
        if (!fgets(line, GH_SIGNAL_LINE_MAX + 2, in))
            break;
        lineno++;
        size_t len = strlen(line);
        bool complete = len > 0 && line[len - 1] == '\n';
        if (!complete && !feof(in)) {
            int ch;
            while ((ch = fgetc(in)) != EOF && ch != '\n')
                ;
            char msg[96];
            snprintf(msg, sizeof msg, "line longer than %d bytes (not sent)", GH_SIGNAL_LINE_MAX);
            r.rejected++;
            add_error(&r, lineno, msg);
            continue;
        }
        if (complete)
            line[--len] = '\0';
        size_t s = 0;
        while (s < len && (line[s] == ' ' || line[s] == '\t' || line[s] == '\r'))
            s++;
        if (s == len)
            continue;
        bool skip;
        char *marked = mark(line, len, &skip);
        if (skip)
            continue;
        if (!marked || batch_add(&b, marked, strlen(marked), lineno)) {
            free(marked);
            fprintf(stderr, "gpuheal inject: out of memory\n");
            rc = 1;
            goto out;
        }
        free(marked);
        if (b.n >= (size_t)batch_lines || b.len >= 1024 * 1024) {
            post(&r, &b);
            b.len = b.n = 0;
        }
    }
    if (ferror(in)) {
        fprintf(stderr, "gpuheal inject: %s: read error\n", input);
        r.failed = true;
    }
    if (b.n > 0)
        post(&r, &b);

    json_t *sum = json_pack("{s:I,s:I,s:I,s:O,s:b}", "accepted", (json_int_t)r.accepted,
                            "duplicates", (json_int_t)r.duplicates, "rejected",
                            (json_int_t)r.rejected, "errors", r.errors, "errors_truncated",
                            r.truncated);
    char *text = sum ? json_dumps(sum, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(sum);
    rc = (r.failed || r.rejected) ? 1 : 0;
out:
    if (in && in != stdin)
        fclose(in);
    free(line);
    free(b.body);
    free(b.lines);
    json_decref(r.errors);
    if (r.h)
        curl_easy_cleanup(r.h);
    curl_global_cleanup();
    return rc;
}
