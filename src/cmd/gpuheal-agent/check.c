/* check.c - `gpuheal-agent --check`: what each of the agent's sources sees
 * on this node now, what is missing and why, as a table a person reads or
 * as one JSON object (--json). One shot, no event loop, no spool writes:
 * it runs beside a running agent.
 *
 * Statuses: ok; warn (a configured part that does not work, or a fault that
 * is not fatal yet); fail (a fault on the node, or something the node needs
 * that is missing); absent (not configured, not present and not needed, or
 * not checkable from here - the detail says which). Exit 0 when nothing
 * failed, 1 when something did, 2 on a usage error.
 *
 * Bounds: NVML calls run on the NVML source's worker with a 2 s deadline
 * per job; the controller's /healthz, the dcgm-exporter scrape and the
 * Node GET each have a 2 s timeout (connect included); file reads are
 * local. The whole check takes a few seconds at worst. */
#include "cmd/gpuheal-agent/check.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cmd/gpuheal-agent/agent.h"
#include "common/log.h"
#include "common/mono.h"

#define CHECK_MAX_ROWS 160
#define CHECK_NAME_MAX 40
#define CHECK_DETAIL_MAX 600
#define NET_TIMEOUT_MS 2000L
#define NVML_DEADLINE_NS (2 * GH_NS_PER_S)
#define FM_COMM "nv-fabricmanage" /* comm is cut to 15 bytes */

enum st { ST_OK, ST_WARN, ST_FAIL, ST_ABSENT };
static const char *const st_name[] = {"ok", "warn", "fail", "absent"};

struct row {
    char name[CHECK_NAME_MAX];
    enum st st;
    char detail[CHECK_DETAIL_MAX];
};

struct check {
    struct agent_config cfg;
    const char *root; /* prefix of /proc and /sys paths; "" = / */
    bool json;
    struct row rows[CHECK_MAX_ROWS];
    size_t n;
    /* facts later checks use */
    int pci_gpus, pci_nvswitches; /* -1 = PCI bus not readable */
    bool driver_loaded;
    int nvml_gpus; /* -1 = NVML unavailable */
    int rdma_ports;
    long node_gpus;      /* -1 = unknown, -2 = Node has none */
    const char *no_node; /* why node_gpus is unknown */
    json_t *gpus;        /* per-GPU facts for --json */
};

static void add(struct check *c, const char *name, enum st st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(struct check *c, const char *name, enum st st, const char *fmt, ...)
{
    if (c->n == CHECK_MAX_ROWS)
        return;
    struct row *r = &c->rows[c->n++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

/* root + path into buf. */
static const char *rooted(const struct check *c, const char *path, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", c->root, path);
    return buf;
}

/* The first line of path into buf (no newline, runs of blanks folded).
 * 0, or an errno. */
static int first_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno;
    char line[1024];
    int rc = 0;
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    size_t o = 0;
    bool blank = true;
    for (const char *p = line; *p && *p != '\n' && o + 1 < cap; p++) {
        bool sp = *p == ' ' || *p == '\t';
        if (sp && blank)
            continue;
        buf[o++] = sp ? ' ' : *p;
        blank = sp;
    }
    while (o && buf[o - 1] == ' ')
        o--;
    buf[o] = '\0';
    return rc;
}

/* ---- the PCI bus: NVIDIA GPUs and NVSwitches ---- */

static void check_pci(struct check *c)
{
    char dir[4096];
    rooted(c, "/sys/bus/pci/devices", dir, sizeof dir);
    c->pci_gpus = c->pci_nvswitches = 0;
    DIR *d = opendir(dir);
    if (!d) {
        c->pci_gpus = c->pci_nvswitches = -1;
        add(c, "pci", ST_ABSENT, "%s not readable (%s): NVIDIA devices not counted", dir,
            strerror(errno));
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[4400], vendor[32], cls[32];
        snprintf(p, sizeof p, "%s/%s/vendor", dir, e->d_name);
        if (first_line(p, vendor, sizeof vendor) || strcmp(vendor, "0x10de") != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s/class", dir, e->d_name);
        if (first_line(p, cls, sizeof cls))
            continue;
        if (strncmp(cls, "0x0300", 6) == 0 || strncmp(cls, "0x0302", 6) == 0)
            c->pci_gpus++;
        else if (strncmp(cls, "0x0680", 6) == 0)
            c->pci_nvswitches++;
    }
    closedir(d);
    if (!c->pci_gpus && !c->pci_nvswitches)
        add(c, "pci", ST_ABSENT, "no NVIDIA GPU or NVSwitch on the PCI bus (%s)", dir);
    else
        add(c, "pci", ST_OK, "NVIDIA on the PCI bus: %d GPU(s), %d NVSwitch(es)", c->pci_gpus,
            c->pci_nvswitches);
}

/* ---- the NVIDIA driver ---- */

static void check_driver(struct check *c)
{
    char path[4096], line[512];
    rooted(c, "/proc/driver/nvidia/version", path, sizeof path);
    int e = first_line(path, line, sizeof line);
    if (!e) {
        c->driver_loaded = true;
        add(c, "driver", ST_OK, "loaded: %s", line[0] ? line : "(empty version file)");
        return;
    }
    if (c->pci_gpus > 0)
        add(c, "driver", ST_FAIL, "not loaded (%s: %s), but %d NVIDIA GPU(s) are on the PCI bus",
            path, strerror(e), c->pci_gpus);
    else
        add(c, "driver", ST_ABSENT, "not loaded (%s: %s)", path, strerror(e));
}

/* ---- NVML: the GPUs and their counters ---- */

static void count_signal(void *ctx, const struct gh_signal *s)
{
    (void)s;
    (*(unsigned *)ctx)++;
}

static void gpu_row(struct check *c, const struct gh_nvml_gpu_health *h)
{
    char name[CHECK_NAME_MAX], d[CHECK_DETAIL_MAX], part[200];
    snprintf(name, sizeof name, "nvml/gpu%d", h->index);
    enum st st = ST_OK;
    size_t o = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        snprintf(part, sizeof part, __VA_ARGS__);                                                  \
        size_t l = strlen(part);                                                                   \
        if (o + l < sizeof d) {                                                                    \
            memcpy(d + o, part, l + 1);                                                            \
            o += l;                                                                                \
        }                                                                                          \
    } while (0)
    d[0] = '\0';
    if (h->pci[0] || h->uuid[0])
        PUT("%s %s", h->pci[0] ? h->pci : "(no PCI address)", h->uuid[0] ? h->uuid : "(no UUID)");
    else
        PUT("PCI address and UUID not read");
    if (h->lost) {
        st = ST_FAIL;
        PUT("; LOST: not answering NVML (fell off the bus or needs a reset)");
    }
    if (h->has_temp)
        PUT("; %.0f C", h->celsius);
    if (h->has_power)
        PUT(" %.0f W", h->watts);
    if (h->has_ecc) {
        PUT("; ECC DBE %lld (volatile) %lld (aggregate), SBE %lld/%lld",
            (long long)h->ecc_dbe_volatile, (long long)h->ecc_dbe_aggregate,
            (long long)h->ecc_sbe_volatile, (long long)h->ecc_sbe_aggregate);
        if (h->ecc_dbe_volatile > 0)
            st = ST_FAIL;
        else if (h->ecc_dbe_aggregate > 0 && st == ST_OK)
            st = ST_WARN;
    }
    if (h->has_remap) {
        PUT("; row remap: %lld correctable, %lld uncorrectable%s%s",
            (long long)h->remap_correctable, (long long)h->remap_uncorrectable,
            h->remap_pending ? ", PENDING (reset the GPU to apply)" : "",
            h->remap_failure ? ", FAILED (replace the GPU)" : "");
        if (h->remap_failure)
            st = ST_FAIL;
        else if (h->remap_pending && st == ST_OK)
            st = ST_WARN;
    }
    if (h->has_retired) {
        PUT("; retired pages: %lld SBE, %lld DBE%s", (long long)h->retired_sbe,
            (long long)h->retired_dbe, h->retired_pending ? ", retirement PENDING" : "");
        if (h->retired_pending && st == ST_OK)
            st = ST_WARN;
    }
    if (h->has_pcie_replay)
        PUT("; PCIe replays %lld", (long long)h->pcie_replay);
    if (!h->lost && !h->has_temp && !h->has_power && !h->has_ecc && !h->has_remap &&
        !h->has_retired && !h->has_pcie_replay) {
        PUT("; no counters read (the poll did not complete)");
        st = ST_WARN;
    }
    PUT("; NVLinks %d", h->nvlinks);
#undef PUT
    add(c, name, st, "%s", d);

    json_t *g = json_pack("{s:i, s:s, s:s, s:b, s:s}", "index", h->index, "pci", h->pci, "uuid",
                          h->uuid, "lost", h->lost, "status", st_name[st]);
    if (!g)
        return;
    if (h->has_temp)
        json_object_set_new(g, "celsius", json_real(h->celsius));
    if (h->has_power)
        json_object_set_new(g, "watts", json_real(h->watts));
    if (h->has_ecc)
        json_object_set_new(g, "ecc",
                            json_pack("{s:I, s:I, s:I, s:I}", "dbe_volatile",
                                      (json_int_t)h->ecc_dbe_volatile, "dbe_aggregate",
                                      (json_int_t)h->ecc_dbe_aggregate, "sbe_volatile",
                                      (json_int_t)h->ecc_sbe_volatile, "sbe_aggregate",
                                      (json_int_t)h->ecc_sbe_aggregate));
    if (h->has_remap)
        json_object_set_new(g, "remap",
                            json_pack("{s:I, s:I, s:b, s:b}", "correctable",
                                      (json_int_t)h->remap_correctable, "uncorrectable",
                                      (json_int_t)h->remap_uncorrectable, "pending",
                                      h->remap_pending, "failure", h->remap_failure));
    if (h->has_retired)
        json_object_set_new(g, "retired_pages",
                            json_pack("{s:I, s:I, s:b}", "sbe", (json_int_t)h->retired_sbe, "dbe",
                                      (json_int_t)h->retired_dbe, "pending", h->retired_pending));
    if (h->has_pcie_replay)
        json_object_set_new(g, "pcie_replay", json_integer(h->pcie_replay));
    json_object_set_new(g, "nvlinks", json_integer(h->nvlinks));
    json_array_append_new(c->gpus, g);
}

static void check_nvml(struct check *c)
{
    c->nvml_gpus = -1;
    bool gpu_node = c->pci_gpus > 0 || c->driver_loaded;
    if (!c->cfg.nvml_lib) {
        add(c, "nvml", gpu_node ? ST_WARN : ST_ABSENT, "--nvml-lib off: GPU polling disabled");
        return;
    }
    unsigned signals = 0;
    struct gh_nvml_opts o = {0};
    o.lib_path = c->cfg.nvml_lib;
    o.node = c->cfg.node;
    o.deadline_ns = NVML_DEADLINE_NS;
    o.emit = count_signal;
    o.emit_ctx = &signals;
    struct gh_nvml_source *src = NULL;
    struct gh_err err = {{0}};
    int64_t t0 = gh_mono_ns();
    int rc = gh_nvml_source_new(&o, &src, &err);
    if (rc != GH_OK) {
        add(c, "nvml", rc == GH_ENOTFOUND && !gpu_node ? ST_ABSENT : ST_FAIL, "%s", err.msg);
        return;
    }
    rc = gh_nvml_source_poll_once(src, &err);
    int n = gh_nvml_source_gpu_count(src);
    c->nvml_gpus = n;
    if (rc != GH_OK)
        add(c, "nvml", ST_FAIL, "%s: %d GPU(s); the first poll did not complete: %s",
            c->cfg.nvml_lib, n, err.msg);
    else
        add(c, "nvml", ST_OK, "%s: %d GPU(s), polled in %lld ms (%u standing fault signal(s))",
            c->cfg.nvml_lib, n, (long long)((gh_mono_ns() - t0) / GH_NS_PER_MS), signals);
    for (int i = 0; i < n; i++) {
        struct gh_nvml_gpu_health h;
        if (gh_nvml_source_health(src, i, &h) == GH_OK)
            gpu_row(c, &h);
    }
    gh_nvml_source_free(src);
}

/* ---- Fabric Manager ---- */

/* The pid of a running nv-fabricmanager under root/proc, or 0. */
static long find_fabricmanager(const struct check *c)
{
    char dir[4096];
    rooted(c, "/proc", dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    long pid = 0;
    struct dirent *e;
    while (!pid && (e = readdir(d))) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || v <= 0)
            continue;
        char p[4400], comm[64];
        snprintf(p, sizeof p, "%s/%s/comm", dir, e->d_name);
        if (!first_line(p, comm, sizeof comm) && strcmp(comm, FM_COMM) == 0)
            pid = v;
    }
    closedir(d);
    return pid;
}

static void check_fabricmanager(struct check *c)
{
    long pid = find_fabricmanager(c);
    if (c->pci_nvswitches < 0 && pid)
        add(c, "fabricmanager", ST_OK,
            "running (pid %ld); NVSwitches not counted (PCI bus not "
            "readable)",
            pid);
    else if (c->pci_nvswitches < 0)
        add(c, "fabricmanager", ST_ABSENT,
            "not running; whether it is needed is unknown: "
            "NVSwitches not counted (PCI bus not readable)");
    else if (!c->pci_nvswitches)
        add(c, "fabricmanager", ST_OK, "not needed: no NVSwitch on the PCI bus%s",
            pid ? " (nv-fabricmanager runs anyway)" : "");
    else if (pid)
        add(c, "fabricmanager", ST_OK, "running (pid %ld) for %d NVSwitch(es)", pid,
            c->pci_nvswitches);
    else
        add(c, "fabricmanager", ST_FAIL,
            "not running: no nv-fabricmanager process in %s/proc, and %d NVSwitch(es) are on "
            "the PCI bus (without it the NVLink fabric is down and CUDA jobs fail)",
            c->root[0] ? c->root : "", c->pci_nvswitches);
}

/* ---- NICs and nvidia-peermem ---- */

static void ignore_signal(void *ctx, const struct gh_signal *s)
{
    (void)ctx;
    (void)s;
}

static void check_nic(struct check *c)
{
    if (!c->cfg.nic_root) {
        add(c, "nic", ST_ABSENT, "--ib-sysfs-root off: InfiniBand/RoCE ports not watched");
        return;
    }
    struct stat sb;
    if (stat(c->cfg.nic_root, &sb) != 0) {
        add(c, "nic", ST_ABSENT, "no InfiniBand/RoCE adapter: %s: %s", c->cfg.nic_root,
            strerror(errno));
        return;
    }
    struct gh_nic_opts o;
    gh_nic_opts_init(&o);
    o.root = c->cfg.nic_root;
    o.node = c->cfg.node;
    o.emit = ignore_signal;
    struct gh_nic_source *src = NULL;
    struct gh_err err = {{0}};
    if (gh_nic_source_new(&o, &src, &err) != GH_OK) {
        add(c, "nic", ST_WARN, "%s", err.msg);
        return;
    }
    int rc = gh_nic_source_poll_once(src, &err);
    struct gh_nic_port_info ports[GH_NIC_MAX_PORTS];
    size_t n = gh_nic_source_ports(src, ports, GH_NIC_MAX_PORTS);
    gh_nic_source_free(src);
    size_t up = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ports[i].present)
            continue;
        c->rdma_ports++;
        up += ports[i].up;
        char name[CHECK_NAME_MAX];
        snprintf(name, sizeof name, "nic/%.24s:%d", ports[i].device, ports[i].port);
        add(c, name, ports[i].up ? ST_OK : ST_WARN, "%s%s; watched error counters total %llu",
            ports[i].state, ports[i].up ? "" : " (down)", (unsigned long long)ports[i].errors);
    }
    if (!c->rdma_ports)
        add(c, "nic", ST_ABSENT, "no InfiniBand/RoCE port under %s", c->cfg.nic_root);
    else
        add(c, "nic", rc == GH_OK ? ST_OK : ST_WARN, "%d port(s) under %s, %zu up%s%s",
            c->rdma_ports, c->cfg.nic_root, up, rc == GH_OK ? "" : "; ",
            rc == GH_OK ? "" : err.msg);
}

static void check_peermem(struct check *c)
{
    char path[4096];
    rooted(c, "/sys/module/nvidia_peermem", path, sizeof path);
    struct stat sb;
    if (stat(path, &sb) == 0)
        add(c, "peermem", ST_OK, "nvidia_peermem loaded");
    else if (c->rdma_ports > 0 && (c->pci_gpus > 0 || c->driver_loaded || c->nvml_gpus > 0))
        add(c, "peermem", ST_WARN,
            "nvidia_peermem not loaded (%s: %s) while %d InfiniBand/RoCE port(s) are present: "
            "GPUDirect RDMA needs it (or DMA-BUF with a recent kernel and driver)",
            path, strerror(errno), c->rdma_ports);
    else
        add(c, "peermem", ST_OK, "not needed: nvidia_peermem not loaded, %s",
            c->rdma_ports ? "no NVIDIA GPU" : "no InfiniBand/RoCE port");
}

/* ---- the kernel log ---- */

static void check_kmsg(struct check *c)
{
    if (!c->cfg.kmsg) {
        add(c, "kmsg", ST_ABSENT, "--kmsg off: the kernel log (XIDs, SXids, mlx5) is not read");
        return;
    }
    const char *mode = c->cfg.kmsg_file_mode ? "file" : "device";
    char pos[300] = "no persisted position yet";
    char state[4400], buf[512] = "";
    snprintf(state, sizeof state, "%s/kmsg.state", c->cfg.spool_dir);
    FILE *f = fopen(state, "re");
    if (f) {
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = '\0';
        fclose(f);
        char boot[80], now[80] = "";
        unsigned long long v;
        const char *b = strstr(buf, "boot_id "), *s = strstr(buf, "\nseq "),
                   *o = strstr(buf, "\noffset ");
        if (b && s && sscanf(b, "boot_id %79s", boot) == 1 && sscanf(s, "\nseq %llu", &v) == 1) {
            first_line(c->cfg.boot_id_path, now, sizeof now);
            snprintf(pos, sizeof pos, "position: record %llu of %s", v,
                     strcmp(boot, now) == 0 ? "this boot"
                                            : "an earlier boot (the whole ring will be read)");
        } else if (o && sscanf(o, "\noffset %llu", &v) == 1) {
            snprintf(pos, sizeof pos, "position: byte %llu of the file", v);
        } else {
            snprintf(pos, sizeof pos, "%.240s unreadable (ignored by the agent)", state);
        }
    }
    int fd = open(c->cfg.kmsg, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        bool missing_file = e == ENOENT && c->cfg.kmsg_file_mode;
        add(c, "kmsg", ST_WARN, "%s (%s mode) %s: %s%s; %s", c->cfg.kmsg, mode,
            missing_file ? "not there yet" : "not readable", strerror(e),
            e == EACCES || e == EPERM ? " (needs CAP_SYSLOG or root)" : "", pos);
        return;
    }
    close(fd);
    add(c, "kmsg", ST_OK, "%s (%s mode) readable; %s", c->cfg.kmsg, mode, pos);
}

/* ---- DCGM ---- */

static void check_dcgm(struct check *c)
{
    if (!c->cfg.dcgm) {
        add(c, "dcgm", ST_ABSENT, "--dcgm off");
    } else {
        struct gh_dcgm_health_opts o = {0};
        o.node = c->cfg.node;
        o.emit = ignore_signal;
        struct gh_dcgm_health *h = NULL;
        struct gh_err err = {{0}};
        int rc = gh_dcgm_health_new(&o, &h, &err);
        if (rc == GH_OK)
            add(c, "dcgm", ST_OK, "DCGM host engine answers; health watches set");
        else
            add(c, "dcgm", rc == GH_ENOTFOUND ? ST_ABSENT : ST_WARN, "%s", err.msg);
        gh_dcgm_health_free(h);
    }
    if (!c->cfg.dcgm_exporter) {
        add(c, "dcgm-exporter", ST_ABSENT, "no --dcgm-exporter: not scraped");
        return;
    }
    struct gh_dcgm_exporter_opts o = {0};
    o.url = c->cfg.dcgm_exporter;
    o.node = c->cfg.node;
    o.timeout_ns = NET_TIMEOUT_MS * GH_NS_PER_MS;
    o.emit = ignore_signal;
    struct gh_dcgm_exporter *ex = NULL;
    struct gh_err err = {{0}};
    int rc = gh_dcgm_exporter_new(&o, &ex, &err);
    if (rc == GH_OK)
        rc = gh_dcgm_exporter_scrape_once(ex, &err);
    struct gh_dcgm_exporter_stats st = {0};
    if (ex)
        gh_dcgm_exporter_stats(ex, &st);
    gh_dcgm_exporter_free(ex);
    if (rc == GH_OK)
        add(c, "dcgm-exporter", ST_OK, "%s answers: %llu samples", c->cfg.dcgm_exporter,
            (unsigned long long)st.samples);
    else
        add(c, "dcgm-exporter", ST_WARN, "%s: %s", c->cfg.dcgm_exporter, err.msg);
}

/* ---- the telemetry socket ---- */

static void check_telemetry(struct check *c)
{
    const char *p = c->cfg.telemetry_socket;
    if (!p) {
        add(c, "telemetry", ST_ABSENT, "--telemetry-socket off: no step/checkpoint lines");
        return;
    }
    struct stat sb;
    if (stat(p, &sb) != 0) {
        add(c, "telemetry", ST_WARN,
            "no socket at %s (%s): the agent makes it when it starts; "
            "is it running on this node?",
            p, strerror(errno));
        return;
    }
    if (!S_ISSOCK(sb.st_mode)) {
        add(c, "telemetry", ST_WARN, "%s is not a socket", p);
        return;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(p) >= sizeof sa.sun_path) {
        add(c, "telemetry", ST_WARN, "%s: path longer than a Unix socket path", p);
        return;
    }
    memcpy(sa.sun_path, p, strlen(p) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int e = 0;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        e = errno;
    if (fd >= 0)
        close(fd);
    if (!e)
        add(c, "telemetry", ST_OK, "%s: an agent is listening", p);
    else
        add(c, "telemetry", ST_WARN,
            "%s: nothing listening (%s): a stale socket, the agent "
            "is not running",
            p, strerror(e));
}

/* ---- the spool ---- */

static void check_spool(struct check *c)
{
    const char *d = c->cfg.spool_dir;
    struct gh_spool_peek pk;
    struct gh_err err = {{0}};
    if (gh_spool_peek(d, &pk, &err) != GH_OK) {
        add(c, "spool", ST_FAIL, "%s", err.msg);
        return;
    }
    if (!pk.exists) {
        add(c, "spool", ST_WARN, "%s does not exist (the agent creates it when it starts)", d);
        return;
    }
    bool writable = access(d, W_OK | X_OK) == 0;
    add(c, "spool", writable ? ST_OK : ST_FAIL,
        "%s: %llu pending record(s) in %llu segment(s), %llu bytes%s", d,
        (unsigned long long)pk.pending, (unsigned long long)pk.segments,
        (unsigned long long)pk.bytes,
        writable ? "" : "; NOT WRITABLE by this user: the agent cannot start");
}

/* ---- the controller ---- */

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

static void check_controller(struct check *c)
{
    if (!c->cfg.controller) {
        add(c, "controller", ST_ABSENT, "no --controller: signals are spooled, not shipped");
        return;
    }
    char tok[8];
    int te = c->cfg.token_file ? first_line(c->cfg.token_file, tok, sizeof tok) : ENOENT;
    char url[4200];
    size_t l = strlen(c->cfg.controller);
    snprintf(url, sizeof url, "%.*s/healthz",
             (int)(l && c->cfg.controller[l - 1] == '/' ? l - 1 : l), c->cfg.controller);
    CURL *h = curl_easy_init();
    if (!h) {
        add(c, "controller", ST_WARN, "%s: cannot create a curl handle", url);
        return;
    }
    char cerr[CURL_ERROR_SIZE] = "";
    long code = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, NET_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, NET_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->cfg.ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->cfg.ca_file);
    int64_t t0 = gh_mono_ns();
    CURLcode rc = curl_easy_perform(h);
    long ms = (long)((gh_mono_ns() - t0) / GH_NS_PER_MS);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    char tokmsg[300] = "";
    if (te)
        snprintf(tokmsg, sizeof tokmsg, "; token file %s not readable: %s",
                 c->cfg.token_file ? c->cfg.token_file : "(none)", strerror(te));
    if (rc != CURLE_OK)
        add(c, "controller", ST_WARN, "GET %s (%ld ms): %s (signals wait in the spool)%s", url, ms,
            cerr[0] ? cerr : curl_easy_strerror(rc), tokmsg);
    else
        add(c, "controller", code == 200 && !te ? ST_OK : ST_WARN, "GET %s: HTTP %ld in %ld ms%s",
            url, code, ms, tokmsg);
}

/* ---- Kubernetes: the Node's advertised GPU count ---- */

static void check_kube(struct check *c)
{
    c->node_gpus = -1;
    c->no_node = "no API access";
    struct gh_kube_config kc;
    memset(&kc, 0, sizeof kc);
    struct gh_err err = {{0}};
    const char *from = NULL;
    if (c->cfg.kube_mode == AGENT_KUBE_OFF) {
        add(c, "kubernetes", ST_ABSENT, "--kubeconfig off: no API access");
        return;
    }
    if (c->cfg.kube_mode == AGENT_KUBE_AUTO) {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        if (!host || !host[0]) {
            add(c, "kubernetes", ST_ABSENT,
                "no API access: no --kubeconfig and "
                "KUBERNETES_SERVICE_HOST is not set (not in a pod)");
            return;
        }
        if (gh_kube_incluster_load(NULL, &kc, &err) != GH_OK) {
            add(c, "kubernetes", ST_WARN, "in-cluster configuration failed: %s", err.msg);
            return;
        }
        from = "in-cluster";
    } else {
        if (gh_kubeconfig_load(c->cfg.kubeconfig, c->cfg.kube_context, &kc, &err) != GH_OK) {
            add(c, "kubernetes", ST_FAIL, "cannot use --kubeconfig %s: %s", c->cfg.kubeconfig,
                err.msg);
            return;
        }
        from = c->cfg.kubeconfig;
    }
    struct gh_kube_client_opts co = {.qps = -1,
                                     .connect_timeout_ms = NET_TIMEOUT_MS,
                                     .request_timeout_ms = NET_TIMEOUT_MS,
                                     .user_agent = "gpuheal-agent-check/0.1"};
    struct gh_kube_client *kube = NULL;
    struct gh_kube_req req = {.method = GH_KUBE_GET, .timeout_ms = NET_TIMEOUT_MS};
    struct gh_kube_resp resp;
    memset(&resp, 0, sizeof resp);
    bool safe = c->cfg.node[0] != '\0';
    for (const char *p = c->cfg.node; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            safe = false;
    if (!safe) {
        add(c, "kubernetes", ST_FAIL, "--node \"%s\" is not a Kubernetes node name", c->cfg.node);
        goto out;
    }
    snprintf(req.path, sizeof req.path, "/api/v1/nodes/%s", c->cfg.node);
    if (gh_kube_client_new(&kc, &co, &kube, &err) != GH_OK ||
        gh_kube_call(kube, &req, &resp, &err) != GH_OK) {
        c->no_node = "the Node could not be read";
        add(c, "kubernetes", ST_WARN, "cannot read Node %s from %s (%s): %s", c->cfg.node,
            kc.server ? kc.server : "?", from, err.msg);
        goto out;
    }
    json_t *cap = json_object_get(json_object_get(resp.body, "status"), "capacity");
    const char *v = json_string_value(json_object_get(cap, "nvidia.com/gpu"));
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : -1;
    if (v && (end == v || *end || n < 0))
        n = -1;
    c->node_gpus = v ? n : -2;
    add(c, "kubernetes", ST_OK, "Node %s read from %s (%s)", c->cfg.node, kc.server, from);
out:
    gh_kube_resp_clear(&resp);
    gh_kube_req_clear(&req);
    gh_kube_client_free(kube);
    gh_kube_config_clear(&kc);
}

static void check_gpu_count(struct check *c)
{
    char pci[80] = "";
    if (c->pci_gpus >= 0)
        snprintf(pci, sizeof pci, "; PCI bus: %d", c->pci_gpus);
    if (c->nvml_gpus < 0) {
        add(c, "gpu-count", ST_ABSENT, "NVML unavailable: GPUs not counted%s", pci);
        return;
    }
    if (c->pci_gpus > 0 && c->pci_gpus != c->nvml_gpus) {
        add(c, "gpu-count", ST_FAIL, "NVML sees %d GPU(s) but %d are on the PCI bus", c->nvml_gpus,
            c->pci_gpus);
        return;
    }
    if (c->node_gpus == -1) {
        add(c, "gpu-count", ST_ABSENT,
            "NVML sees %d GPU(s)%s; the Node's advertised count "
            "not compared: %s (see kubernetes)",
            c->nvml_gpus, pci, c->no_node);
    } else if (c->node_gpus == -2) {
        add(c, "gpu-count", ST_WARN,
            "NVML sees %d GPU(s), the Node advertises no nvidia.com/gpu "
            "(is the NVIDIA device plugin running?)",
            c->nvml_gpus);
    } else if (c->node_gpus != c->nvml_gpus) {
        add(c, "gpu-count", ST_FAIL,
            "NVML sees %d GPU(s), the Node advertises %ld "
            "(status.capacity[\"nvidia.com/gpu\"])",
            c->nvml_gpus, c->node_gpus);
    } else {
        add(c, "gpu-count", ST_OK, "NVML sees %d GPU(s), the Node advertises %ld%s", c->nvml_gpus,
            c->node_gpus, pci);
    }
}

/* ---- output ---- */

static void print_table(const struct check *c, const size_t *count, long ms)
{
    printf("%-22s %-7s %s\n", "CHECK", "STATUS", "DETAIL");
    for (size_t i = 0; i < c->n; i++)
        printf("%-22s %-7s %s\n", c->rows[i].name, st_name[c->rows[i].st], c->rows[i].detail);
    printf("\nnode %s: %zu checks, %zu ok, %zu warn, %zu fail, %zu absent (%ld ms)\n", c->cfg.node,
           c->n, count[ST_OK], count[ST_WARN], count[ST_FAIL], count[ST_ABSENT], ms);
}

static int print_json(const struct check *c, const size_t *count, long ms)
{
    json_t *checks = json_array();
    for (size_t i = 0; checks && i < c->n; i++)
        json_array_append_new(checks,
                              json_pack("{s:s, s:s, s:s}", "check", c->rows[i].name, "status",
                                        st_name[c->rows[i].st], "detail", c->rows[i].detail));
    json_t *counts = json_pack(
        "{s:o, s:o, s:o, s:o}", "nvml",
        c->nvml_gpus >= 0 ? json_integer(c->nvml_gpus) : json_null(), "pci",
        c->pci_gpus >= 0 ? json_integer(c->pci_gpus) : json_null(), "nvswitch",
        c->pci_nvswitches >= 0 ? json_integer(c->pci_nvswitches) : json_null(), "node_advertised",
        c->node_gpus >= 0 ? json_integer(c->node_gpus) : json_null());
    json_t *root = json_pack(
        "{s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:I, s:o, s:O, s:o}", "node", c->cfg.node, "status",
        count[ST_FAIL]   ? "fail"
        : count[ST_WARN] ? "warn"
                         : "ok",
        "counts", "ok", (json_int_t)count[ST_OK], "warn", (json_int_t)count[ST_WARN], "fail",
        (json_int_t)count[ST_FAIL], "absent", (json_int_t)count[ST_ABSENT], "elapsed_ms",
        (json_int_t)ms, "checks", checks, "gpus", c->gpus, "gpu_counts", counts);
    if (!root) {
        fprintf(stderr, "gpuheal-agent: --check --json: out of memory\n");
        return -1;
    }
    char *s = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!s) {
        fprintf(stderr, "gpuheal-agent: --check --json: out of memory\n");
        return -1;
    }
    puts(s);
    free(s);
    return 0;
}

/* ---- arguments ---- */

bool agent_check_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--check") == 0)
            return true;
    return false;
}

/* Takes --check, --json and --check-root out of argv into c; the rest go
 * to *rest (caller frees the array, not the strings). 0, or 2 with a
 * message on stderr. */
static int split_args(int argc, char **argv, struct check *c, char ***rest, int *nrest)
{
    char **r = calloc((size_t)argc + 1, sizeof *r);
    if (!r) {
        fprintf(stderr, "gpuheal-agent: out of memory\n");
        return 2;
    }
    int n = 0;
    r[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--check") == 0) {
            continue;
        } else if (strcmp(a, "--json") == 0) {
            c->json = true;
        } else if (strcmp(a, "--check-root") == 0 || strncmp(a, "--check-root=", 13) == 0) {
            const char *v = a[12] == '=' ? a + 13 : i + 1 < argc ? argv[++i] : NULL;
            if (!v || v[0] != '/') {
                fprintf(stderr, "gpuheal-agent: --check-root needs an absolute PATH%s%s%s\n",
                        v ? " (not \"" : "", v ? v : "", v ? "\")" : "");
                free(r);
                return 2;
            }
            c->root = v;
        } else {
            r[n++] = argv[i];
        }
    }
    *rest = r;
    *nrest = n;
    return 0;
}

int agent_check_main(int argc, char **argv)
{
    struct check *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "gpuheal-agent: out of memory\n");
        return 2;
    }
    c->root = "";
    char **rest = NULL;
    int nrest = 0, rc = split_args(argc, argv, c, &rest, &nrest);
    if (rc) {
        free(c);
        return rc;
    }
    char msg[GH_ERR_MAX];
    rc = agent_config_parse(nrest, rest, &c->cfg, msg, sizeof msg);
    free(rest);
    if (rc == 1) {
        free(c);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "gpuheal-agent: %s\n", msg);
        free(c);
        return 2;
    }
    /* The sources below do not log; the libraries they use may: only errors. */
    gh_log_set_level(c->cfg.log_level > GH_LOG_ERROR ? (enum gh_log_level)c->cfg.log_level
                                                     : GH_LOG_ERROR);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    c->gpus = json_array();
    int64_t t0 = gh_mono_ns();

    add(c, "node", ST_OK, "%s", c->cfg.node);
    check_pci(c);
    check_driver(c);
    check_nvml(c);
    check_fabricmanager(c);
    check_nic(c);
    check_peermem(c);
    check_kmsg(c);
    check_dcgm(c);
    check_telemetry(c);
    check_spool(c);
    check_controller(c);
    check_kube(c);
    check_gpu_count(c);

    long ms = (long)((gh_mono_ns() - t0) / GH_NS_PER_MS);
    size_t count[4] = {0};
    for (size_t i = 0; i < c->n; i++)
        count[c->rows[i].st]++;
    rc = count[ST_FAIL] ? 1 : 0;
    if (c->json) {
        if (print_json(c, count, ms))
            rc = 1;
    } else {
        print_table(c, count, ms);
    }
    fflush(stdout);
    json_decref(c->gpus);
    agent_config_free(&c->cfg);
    free(c);
    curl_global_cleanup();
    return rc;
}
