/* pci.h - the one PCI address form. NVML and dcgm-exporter write
 * "00000000:3B:00.0", the kernel log "0000:3b:00" or "3b:00.0"; everything
 * gpuheal writes (signals, metrics, GPUNodeHealth) uses the canonical
 * "0000:3b:00.0" of the signal spec: the domain in at least four lower-case
 * hex digits (leading zeros beyond four dropped), bus and device in two,
 * the function in one (".0" when absent). */
#ifndef GH_COMMON_PCI_H
#define GH_COMMON_PCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GH_PCI_MAX 24 /* the longest canonical form ("ffffffff:ff:1f.7") and its NUL */

/* A parsed address (a small value type; every field in range). */
struct gh_pci {
    uint32_t domain;
    uint8_t bus;
    uint8_t dev; /* 0..0x1f */
    uint8_t fn;  /* 0..7 */
};

/* Parses an address at the start of s (n bytes): "domain:bus:dev[.fn]"
 * with a 4..8-digit domain, or, when allow_short, "bus:dev.fn" without a
 * domain (domain 0). The byte after it must not be a letter or digit.
 * Fills *out and *used (bytes taken; used may be NULL). */
bool gh_pci_scan(const char *s, size_t n, bool allow_short, struct gh_pci *out, size_t *used);

/* Writes the canonical form of a into buf (cap >= GH_PCI_MAX always fits);
 * returns buf. */
const char *gh_pci_format(const struct gh_pci *a, char *buf, size_t cap);

/* A whole string (n bytes) naming one address, as NVML, dcgm-exporter, sysfs
 * or a signal write it: optional spaces and "PCI:" prefix, then a form
 * gh_pci_scan takes with allow_short ("3b:00" alone, with neither domain
 * nor function, could be a time of day: refused). Fills *out (may be
 * NULL) and the canonical form into buf (cap bytes; may be NULL); false,
 * buf untouched, when it is not an address or buf is too small. */
bool gh_pci_canon(const char *s, size_t n, struct gh_pci *out, char *buf, size_t cap);

/* domain, bus and device as one number (the function dropped): the GPU an
 * address names, whatever function a tool printed. */
static inline uint64_t gh_pci_device_key(const struct gh_pci *a)
{
    return (uint64_t)a->domain << 16 | (uint64_t)a->bus << 8 | a->dev;
}

#endif
