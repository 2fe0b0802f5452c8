/* ingest_serve.c - `gpuheal ingest-serve` (a development and test tool):
 * runs the controller's ingest endpoint alone and appends every accepted
 * signal to a file, so the agent's shipping can be tested end to end
 * before (and without) gpuheal-controller. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/gpuheal/commands.h"
#include "common/log.h"
#include "ingest/server.h"
#include "signal/signal_json.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: gpuheal ingest-serve --listen HOST:PORT --token-file FILE --out FILE [options]\n"
        "\n"
        "(development) Serves POST /v1/signals, /healthz and /metrics like the\n"
        "controller and appends each accepted signal, as one JSON line, to --out\n"
        "(written and flushed before the request is answered, so an accepted signal\n"
        "is in the file even if this process is killed). Signal ids already in the\n"
        "file are loaded at start, so duplicates are dropped across restarts.\n"
        "Runs until SIGINT or SIGTERM.\n"
        "\n"
        "options:\n"
        "  --listen HOST:PORT     address (port 0: any free port, see --port-file)\n"
        "  --token-file FILE      bearer tokens, one per line (required unless --anonymous)\n"
        "  --anonymous            accept requests without a token\n"
        "  --out FILE             where accepted signals are appended\n"
        "  --port-file FILE       write the bound port here once listening\n"
        "  --tls-cert FILE --tls-key FILE   serve HTTPS\n"
        "  --body-max BYTES       request body limit (default 8388608)\n"
        "  --max-lines N          lines per request (default 10000)\n"
        "  --dedup N              ids remembered for duplicate drop (default 1048576)\n");
}

struct out_sink {
    FILE *f;
    uint64_t written;
};

/* Runs on the server's thread: the signals are in the file (flushed to the
 * kernel) before the request is answered. */
static int write_sink(void *ctx, struct gh_signal *sigs, size_t n)
{
    struct out_sink *o = ctx;
    for (size_t i = 0; i < n; i++)
        if (gh_signal_write(o->f, &sigs[i], NULL) != GH_OK)
            return GH_EAGAIN;
    if (fflush(o->f) != 0)
        return GH_EAGAIN;
    for (size_t i = 0; i < n; i++)
        gh_signal_clear(&sigs[i]);
    o->written += n;
    return GH_OK;
}

struct preload_ctx {
    const char *path;
    long known;
};

/* Remembers the ids already in the output file; runs before the server
 * listens, so that no retry is taken as new while the ids load. */
static void preload(void *ctx, struct gh_ingest_server *srv)
{
    struct preload_ctx *pc = ctx;
    FILE *f = fopen(pc->path, "rb");
    if (!f)
        return;
    struct gh_signal_reader *rd = gh_signal_reader_new(f);
    long n = 0;
    if (rd) {
        for (;;) {
            struct gh_signal s;
            int rc = gh_signal_reader_next(rd, &s, NULL, NULL);
            if (rc == GH_ENOTFOUND || rc == GH_EIO || rc == GH_ENOMEM)
                break;
            if (rc == GH_OK) {
                if (s.id) {
                    gh_ingest_server_remember(srv, &s);
                    n++;
                }
                gh_signal_clear(&s);
            }
        }
        gh_signal_reader_free(rd);
    }
    fclose(f);
    pc->known = n;
}

static int parse_size(const char *s, size_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || end == s || x == 0)
        return -1;
    *v = (size_t)x;
    return 0;
}

int gh_cmd_ingest_serve(int argc, char **argv)
{
    struct gh_ingest_server_opts o = {0};
    const char *out = NULL, *port_file = NULL;
    size_t v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--listen") == 0 && has) {
            o.listen = argv[++i];
        } else if (strcmp(a, "--token-file") == 0 && has) {
            o.token_file = argv[++i];
        } else if (strcmp(a, "--anonymous") == 0) {
            o.allow_anonymous = true;
        } else if (strcmp(a, "--out") == 0 && has) {
            out = argv[++i];
        } else if (strcmp(a, "--port-file") == 0 && has) {
            port_file = argv[++i];
        } else if (strcmp(a, "--tls-cert") == 0 && has) {
            o.tls_cert = argv[++i];
        } else if (strcmp(a, "--tls-key") == 0 && has) {
            o.tls_key = argv[++i];
        } else if (strcmp(a, "--body-max") == 0 && has && parse_size(argv[i + 1], &v) == 0) {
            o.body_max = v;
            i++;
        } else if (strcmp(a, "--max-lines") == 0 && has && parse_size(argv[i + 1], &v) == 0) {
            o.limits.max_lines = v;
            i++;
        } else if (strcmp(a, "--dedup") == 0 && has && parse_size(argv[i + 1], &v) == 0) {
            o.dedup_capacity = v;
            i++;
        } else {
            fprintf(stderr, "gpuheal ingest-serve: bad argument \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o.listen || !out || (!o.token_file && !o.allow_anonymous)) {
        fprintf(stderr, "gpuheal ingest-serve: --listen, --out and --token-file are required\n");
        usage(stderr);
        return 2;
    }

    /* Signals are taken by sigwait below, on this thread only. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct out_sink sink = {0};
    sink.f = fopen(out, "ab");
    if (!sink.f) {
        fprintf(stderr, "gpuheal ingest-serve: %s: %s\n", out, strerror(errno));
        return 1;
    }
    o.sink = write_sink;
    o.sink_ctx = &sink;
    struct preload_ctx known = {.path = out};
    o.preload = preload;
    o.preload_ctx = &known;
    struct gh_ingest_server *srv = NULL;
    struct gh_err err;
    if (gh_ingest_server_new(&o, &srv, &err)) {
        fprintf(stderr, "gpuheal ingest-serve: %s\n", err.msg);
        fclose(sink.f);
        return 1;
    }
    int port = gh_ingest_server_port(srv);
    GH_LOG(GH_LOG_INFO, "msg=\"ingest-serve listening\" port=%d out=%s known_ids=%ld", port,
           out, known.known);
    if (port_file) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
        FILE *pf = fopen(tmp, "w");
        if (!pf || fprintf(pf, "%d\n", port) < 0 || fclose(pf) != 0 || rename(tmp, port_file)) {
            fprintf(stderr, "gpuheal ingest-serve: %s: %s\n", port_file, strerror(errno));
            gh_ingest_server_free(srv);
            fclose(sink.f);
            return 1;
        }
    }
    int sig = 0;
    sigwait(&set, &sig);
    struct gh_ingest_server_stats st;
    gh_ingest_server_stats(srv, &st);
    gh_ingest_server_free(srv);
    fclose(sink.f);
    GH_LOG(GH_LOG_INFO,
           "msg=\"ingest-serve stopped\" signal=%d accepted=%llu duplicates=%llu rejected=%llu "
           "unauthorized=%llu", sig, (unsigned long long)st.accepted,
           (unsigned long long)st.duplicates, (unsigned long long)st.rejected,
           (unsigned long long)st.unauthorized);
    return 0;
}
