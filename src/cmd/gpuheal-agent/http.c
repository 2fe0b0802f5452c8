/* http.c - the agent's /healthz and /metrics on libmicrohttpd, run by the
 * agent's own event loop (MHD's epoll fd in the loop's epoll set; no MHD
 * thread), so /metrics reads the agent's state without locks. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/gpuheal-agent/agent.h"
#include "common/listen.h"

#define METRICS_CAP (512 * 1024)

struct agent_http {
    struct agent *a;
    struct MHD_Daemon *d;
    int fd;
};

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *ctype,
                                 char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static char *copy(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    (void)upload_data;
    struct agent_http *h = cls;
    if (!*con_cls) {
        *con_cls = h; /* any non-NULL: "headers seen" */
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* a body to a GET endpoint: ignored */
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        char *b = copy("method not allowed\n");
        return b ? send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", b, strlen(b)) : MHD_NO;
    }
    if (strcmp(url, "/healthz") == 0) {
        char *b = copy("ok\n");
        return b ? send_text(c, MHD_HTTP_OK, "text/plain", b, 3) : MHD_NO;
    }
    if (strcmp(url, "/metrics") == 0) {
        char *b = malloc(METRICS_CAP);
        if (!b)
            return MHD_NO;
        size_t n = agent_metrics_render(h->a, b, METRICS_CAP);
        return send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", b, n);
    }
    char *b = copy("not found\n");
    return b ? send_text(c, MHD_HTTP_NOT_FOUND, "text/plain", b, strlen(b)) : MHD_NO;
}

struct agent_http *agent_http_start(struct agent *a, const char *hostport, int *port,
                                    char *err, size_t cap)
{
    struct gh_err e;
    int fd = -1;
    if (gh_listen_tcp(hostport, &fd, port, &e)) {
        snprintf(err, cap, "%s", e.msg);
        return NULL;
    }
    struct agent_http *h = calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    h->a = a;
    h->d = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, 16u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (!info) {
        snprintf(err, cap, "libmicrohttpd did not start on %s (epoll)", hostport);
        if (h->d)
            MHD_stop_daemon(h->d);
        else
            close(fd);
        free(h);
        return NULL;
    }
    h->fd = info->epoll_fd;
    return h;
}

int agent_http_fd(const struct agent_http *h)
{
    return h->fd;
}

void agent_http_run(struct agent_http *h)
{
    MHD_run(h->d);
}

int64_t agent_http_timeout_ms(struct agent_http *h)
{
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->d, &ms) != MHD_YES)
        return -1;
    return (int64_t)ms;
}

void agent_http_stop(struct agent_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}
