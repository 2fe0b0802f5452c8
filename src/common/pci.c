/* pci.c - parses PCI addresses in any form the sources write and formats the
 * one canonical form (see pci.h). */
#include "common/pci.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t hexrun(const char *s, size_t n, size_t i)
{
    size_t j = i;
    while (j < n && hexval(s[j]) >= 0)
        j++;
    return j - i;
}

static uint32_t hexnum(const char *s, size_t len)
{
    uint32_t v = 0;
    for (size_t i = 0; i < len; i++)
        v = v * 16 + (uint32_t)hexval(s[i]);
    return v;
}

bool gh_pci_scan(const char *s, size_t n, bool allow_short, struct gh_pci *out, size_t *used)
{
    size_t l1 = hexrun(s, n, 0);
    if (l1 == 0 || l1 >= n || s[l1] != ':')
        return false;
    size_t i = l1 + 1;
    size_t l2 = hexrun(s, n, i);
    struct gh_pci a = {0, 0, 0, 0};
    if (l2 == 2 && i + 2 < n && s[i + 2] == ':') {
        if (l1 < 4 || l1 > 8)
            return false;
        a.domain = hexnum(s, l1);
        a.bus = (uint8_t)hexnum(s + i, 2);
        i += 3;
        if (hexrun(s, n, i) < 2)
            return false;
        if (hexval(s[i]) > 1) /* the device number has 5 bits */
            return false;
        a.dev = (uint8_t)hexnum(s + i, 2);
        i += 2;
        if (i + 1 < n && s[i] == '.' && hexval(s[i + 1]) >= 0 && hexval(s[i + 1]) < 8) {
            a.fn = (uint8_t)hexval(s[i + 1]);
            i += 2;
        }
    } else if (allow_short && l1 == 2 && l2 == 2 && i + 3 < n && s[i + 2] == '.' &&
               hexval(s[i + 3]) >= 0 && hexval(s[i + 3]) < 8) {
        if (hexval(s[i]) > 1)
            return false;
        a.bus = (uint8_t)hexnum(s, 2);
        a.dev = (uint8_t)hexnum(s + i, 2);
        a.fn = (uint8_t)hexval(s[i + 3]);
        i += 4;
    } else {
        return false;
    }
    if (i < n && isalnum((unsigned char)s[i]))
        return false;
    *out = a;
    if (used)
        *used = i;
    return true;
}

const char *gh_pci_format(const struct gh_pci *a, char *buf, size_t cap)
{
    snprintf(buf, cap, "%04x:%02x:%02x.%x", (unsigned)a->domain, (unsigned)a->bus,
             (unsigned)a->dev, (unsigned)a->fn);
    return buf;
}

static size_t skip_sp(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i;
}

bool gh_pci_canon(const char *s, size_t n, struct gh_pci *out, char *buf, size_t cap)
{
    if (!s)
        return false;
    size_t i = skip_sp(s, n, 0), used = 0;
    if (n - i >= 4 && strncasecmp(s + i, "PCI:", 4) == 0)
        i += 4;
    struct gh_pci a;
    if (!gh_pci_scan(s + i, n - i, true, &a, &used))
        return false;
    if (skip_sp(s, n, i + used) != n)
        return false;
    if (buf) {
        char tmp[GH_PCI_MAX];
        gh_pci_format(&a, tmp, sizeof tmp);
        if (strlen(tmp) + 1 > cap)
            return false;
        memcpy(buf, tmp, strlen(tmp) + 1);
    }
    if (out)
        *out = a;
    return true;
}
