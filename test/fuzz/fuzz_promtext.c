/* fuzz_promtext.c - libFuzzer target for the Prometheus text parser and the
 * dcgm-exporter ingest behind it: arbitrary bytes through
 * gh_dcgm_promtext_parse (every sample's name and labels must lie inside
 * the input or the parser's scratch, checked by touching them under ASan),
 * and through two successive gh_dcgm_exporter_ingest calls on a fresh
 * exporter (the input split at the first "\n---\n", so the second scrape is
 * diffed against the first). Every signal emitted must encode with the spec
 * codec, except the documented link-less NVLink totals (aborts otherwise).
 * Seeds: test/fuzz/promtext/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/dcgm.h"
#include "signal/signal_json.h"

static volatile unsigned sink;

static int touch(void *ctx, const struct gh_dcgm_promtext_sample *s)
{
    (void)ctx;
    for (size_t i = 0; i < s->name_len; i++)
        sink += (unsigned char)s->name[i];
    for (size_t k = 0; k < s->nlabels; k++) {
        for (size_t i = 0; i < s->labels[k].name_len; i++)
            sink += (unsigned char)s->labels[k].name[i];
        for (size_t i = 0; i < s->labels[k].value_len; i++)
            sink += (unsigned char)s->labels[k].value[i];
    }
    if (s->nlabels > GH_DCGM_PROMTEXT_LABELS_MAX || s->line < 1)
        abort();
    return 0;
}

static void check_signal(void *ctx, const struct gh_signal *sig)
{
    struct gh_err err;
    char *json = NULL;
    (void)ctx;
    if (gh_signal_encode(sig, &json, &err) != GH_OK &&
        !(sig->kind == GH_KIND_NVLINK && !sig->has_link)) {
        fprintf(stderr, "fuzz_promtext: emitted a signal the codec refuses: %s\n", err.msg);
        abort();
    }
    free(json);
}

static int64_t fixed_now(void *ctx)
{
    (void)ctx;
    return 1800000000LL * 1000000000LL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gh_clock clock = {fixed_now, NULL};
    const char *text = (const char *)data;
    struct gh_dcgm_exporter_opts o = {
        .url = "http://127.0.0.1:9/metrics", /* never fetched */
        .node = "fuzz-node",
        .clock = &clock,
        .emit = check_signal,
        .state_holddown_ns = 1,
    };
    struct gh_dcgm_exporter *ex = NULL;
    struct gh_err err;
    size_t bad = 0, first = size;

    gh_dcgm_promtext_parse(text, size, touch, NULL, &bad, &err);

    for (size_t i = 0; i + 5 <= size; i++)
        if (memcmp(data + i, "\n---\n", 5) == 0) {
            first = i;
            break;
        }
    if (gh_dcgm_exporter_new(&o, &ex, &err) != GH_OK)
        return 0;
    gh_dcgm_exporter_ingest(ex, text, first, &err);
    if (first < size)
        gh_dcgm_exporter_ingest(ex, text + first + 5, size - first - 5, &err);
    gh_dcgm_exporter_free(ex);
    return 0;
}
