/* test_pci.c - the one PCI address form: every form NVML, dcgm-exporter,
 * sysfs and the kernel log write gives the spec's "0000:3b:00.0"; what is
 * not an address is refused; an address inside a kernel-log line is found
 * with the bytes it took. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "common/pci.h"

static void test_canon(void **state)
{
    (void)state;
    char out[GH_PCI_MAX];
    static const char *const good[][2] = {
        {"0000:3b:00.0", "0000:3b:00.0"},     {"PCI:0000:3B:00", "0000:3b:00.0"},
        {"00000000:86:00.0", "0000:86:00.0"}, {"3b:00.1", "0000:3b:00.1"},
        {"pci:0009:01:00", "0009:01:00.0"},   {"10000:e1:00.0", "10000:e1:00.0"},
        {"00000000:3B:00.0", "0000:3b:00.0"}, /* NVML's busId, dcgm-exporter's pci_bus_id */
        {" 0000:48:00.0 ", "0000:48:00.0"},   {"FFFFFFFF:FF:1F.7", "ffffffff:ff:1f.7"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        memset(out, 'x', sizeof out);
        assert_true(gh_pci_canon(good[i][0], strlen(good[i][0]), NULL, out, sizeof out));
        assert_string_equal(out, good[i][1]);
    }
    static const char *const bad[] = {"",         "PCI:...",      "3b:00",       "0000:3b:00.0x",
                                      "0000:3b:40.0", "11:28:11", "0000:3b:00.9", "zz:00.0",
                                      "000:3b:00.0",  "000000000:3b:00.0", "0000:3b:00.0 x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(gh_pci_canon(bad[i], strlen(bad[i]), NULL, out, sizeof out));
    assert_false(gh_pci_canon(NULL, 0, NULL, out, sizeof out));
    /* too small a buffer: refused, buffer untouched */
    char small[8] = "keep";
    assert_false(gh_pci_canon("0000:3b:00.0", 12, NULL, small, sizeof small));
    assert_string_equal(small, "keep");
}

static void test_same_device(void **state)
{
    (void)state;
    /* the kernel's, NVML's and a function-1 form name one GPU */
    struct gh_pci a, b, c;
    assert_true(gh_pci_canon("0000:48:00", 10, &a, NULL, 0));
    assert_true(gh_pci_canon("00000000:48:00.0", 16, &b, NULL, 0));
    assert_true(gh_pci_canon("0000:48:00.1", 12, &c, NULL, 0));
    assert_int_equal(gh_pci_device_key(&a), gh_pci_device_key(&b));
    assert_int_equal(gh_pci_device_key(&a), gh_pci_device_key(&c));
    assert_true(gh_pci_canon("0001:48:00.0", 12, &c, NULL, 0));
    assert_true(gh_pci_device_key(&a) != gh_pci_device_key(&c));
}

static void test_scan_in_text(void **state)
{
    (void)state;
    struct gh_pci a;
    size_t used = 0;
    const char *line = "0000:3b:00): 79, pid=1";
    assert_true(gh_pci_scan(line, strlen(line), false, &a, &used));
    assert_int_equal(used, 10);
    char buf[GH_PCI_MAX];
    assert_string_equal(gh_pci_format(&a, buf, sizeof buf), "0000:3b:00.0");
    /* a short form only where allowed, and never followed by a letter */
    assert_false(gh_pci_scan("3b:00.0 x", 9, false, &a, NULL));
    assert_true(gh_pci_scan("3b:00.0 x", 9, true, &a, &used));
    assert_int_equal(used, 7);
    assert_false(gh_pci_scan("0000:3b:00g", 11, false, &a, NULL));
    /* the scan reads no further than n */
    assert_false(gh_pci_scan("0000:3b:00.0", 7, false, &a, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canon),
        cmocka_unit_test(test_same_device),
        cmocka_unit_test(test_scan_in_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
