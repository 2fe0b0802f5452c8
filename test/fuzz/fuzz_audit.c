/* fuzz_audit.c - libFuzzer target for the audit store's input paths: the
 * first line is an explain subject ("job/ns/name", ...), the rest an
 * incident object. Each run records the incident in a fresh in-memory
 * SQLite store (when it is an object with an id and a class), reads it back
 * by its subject and renders the explanation and the timeline: nothing may
 * crash, leak or render unterminated text, whatever the fields hold. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/explain.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz_audit: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nl = memchr(data, '\n', size);
    size_t slen = nl ? (size_t)(nl - (const char *)data) : size;
    char subject[512];
    if (slen >= sizeof subject)
        return 0;
    memcpy(subject, data, slen);
    subject[slen] = '\0';
    struct gh_audit_subject subj;
    struct gh_err err;
    bool have_subject = gh_audit_subject_parse(subject, &subj, &err) == GH_OK;
    if (!have_subject && strnlen(err.msg, sizeof err.msg) == sizeof err.msg)
        die("unterminated error");
    if (!nl)
        return 0;
    json_t *inc = json_loadb(nl + 1, size - slen - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(inc)) {
        json_decref(inc);
        return 0;
    }
    struct gh_audit *a = NULL;
    if (gh_audit_open("sqlite::memory:", &a, &err) != GH_OK)
        die("open");
    bool inserted = false;
    int rc = gh_audit_record_incident(a, inc, "act", "Acting", "fuzz", 1, &inserted, &err);
    if (rc == GH_OK && inserted) {
        struct gh_audit_guard g = {json_string_value(json_object_get(inc, "id")), 2, "isolate_node",
                                   "node/x", "budget", "denied", "not acted: budget"};
        if (gh_audit_record_guard(a, &g, &err) != GH_OK)
            die("guard");
    }
    if (have_subject) {
        struct gh_audit_incident_rec *recs = NULL;
        size_t n = 0;
        if (gh_audit_query(a, &subj, 0, 0, &recs, &n, &err) == GH_OK) {
            char *buf = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&buf, &len);
            if (!f)
                die("memstream");
            gh_explain_write(f, &subj, 0, recs, n);
            gh_timeline_write(f, &subj, recs, n);
            fclose(f);
            if (len == 0 || strlen(buf) != len)
                die("rendered text");
            free(buf);
        }
        gh_audit_recs_free(recs, n);
    }
    gh_audit_close(a);
    json_decref(inc);
    return 0;
}
