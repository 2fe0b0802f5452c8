/* test_engine_hw_evidence.c - how hardware signals count as evidence (the
 * second outside review of issue 5): SXid weight (non-fatal only when it
 * repeats, a fatal one and the XID 74 it propagates as are one incident),
 * XID 154's recovery action, a NIC link training after a boot that is not
 * a flap, and the XID 63 that announced a pending row remap as that
 * incident's first evidence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_engine_helpers.h"

static void sxid(struct gh_engine *e, double t, const char *node, int code, const char *msg)
{
    struct gh_signal s = sig(GH_KIND_SXID, t, node, -1);
    s.code = code;
    sset(&s.msg, msg);
    sset(&s.switch_id, "nvidia-nvswitch0");
    feed(e, s);
}

static void xid_msg(struct gh_engine *e, double t, const char *node, int gpu, int code,
                    const char *msg)
{
    struct gh_signal s = sig(GH_KIND_XID, t, node, gpu);
    s.code = code;
    sset(&s.msg, msg);
    feed(e, s);
}

static void nic(struct gh_engine *e, double t, const char *node, enum gh_link_state st)
{
    struct gh_signal s = sig(GH_KIND_NIC, t, node, -1);
    sset(&s.device, "mlx5_0");
    s.has_port = true;
    s.port = 1;
    s.state = st;
    feed(e, s);
}

static void test_sxid_nonfatal_repeats(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    const char *m = "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate";
    for (int i = 0; i < 4; i++)
        sxid(e, 10 + 60 * i, "gpu-01", 20009, m);
    gh_engine_tick(e, T0 + S(400));
    assert_int_equal(sk.n, 0); /* four in an hour: nothing yet */
    sxid(e, 300, "gpu-01", 20009, m);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_INTERCONNECT);
    assert_string_equal(sk.v[0].node, "gpu-01");
    /* an SXid the fabric manager says to ignore never counts */
    struct sink sk2;
    struct gh_engine *e2 = engine(topo_2x8(), &sk2);
    for (int i = 0; i < 10; i++)
        sxid(e2, 10 + i, "gpu-01", 26008, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26008, SOE Watchdog error");
    gh_engine_finish(e2, INT64_MAX);
    assert_int_equal(sk2.n, 0);
    gh_engine_free(e);
    gh_engine_free(e2);
}

static void test_sxid_fatal_then_xid74_one_incident(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    sxid(e, 10, "gpu-02", 24007,
         "nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)");
    for (int g = 0; g < 8; g++)
        xid_msg(e, 10.5 + g * 0.01, "gpu-02", g, 74, "NVRM: Xid (PCI:0000:5d:00): 74, NVLink: fatal error");
    /* an XID 74 long after the SXid is news of its own */
    xid_msg(e, 10 + 4 * 3600, "gpu-02", 3, 74, "NVRM: Xid (PCI:0000:5d:00): 74, NVLink: fatal error");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_int_equal(sk.v[0].cls, GH_CLASS_INTERCONNECT);
    assert_string_equal(sk.v[0].rule, "nvswitch-error");
    assert_int_equal(sk.v[1].gpu, 3);
    assert_int_equal(sk.v[1].first_ts, T0 + S(10 + 4 * 3600));
    /* a non-fatal SXid does not swallow an XID 74 */
    struct sink sk2;
    struct gh_engine *e2 = engine(topo_2x8(), &sk2);
    sxid(e2, 10, "gpu-02", 20009, "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04");
    xid_msg(e2, 10.5, "gpu-02", 1, 74, "NVRM: Xid (PCI:0000:29:00): 74, NVLink: fatal error");
    gh_engine_finish(e2, INT64_MAX);
    assert_int_equal(sk2.n, 1);
    assert_int_equal(sk2.v[0].gpu, 1);
    gh_engine_free(e);
    gh_engine_free(e2);
}

static void test_xid154_recovery_action(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    xid_msg(e, 10, "gpu-01", 3, 154,
            "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)");
    /* 0x0: nothing to do any more */
    xid_msg(e, 5000, "gpu-02", 1, 154,
            "NVRM: Xid (PCI:0000:29:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].actions[0], GH_ACT_DRAIN_NODE);
    assert_int_equal(sk.v[0].actions[1], GH_ACT_RESET_GPU);
    assert_int_equal(sk.v[0].gpu, 3);
    gh_engine_free(e);

    /* after an incident: absorbed when it asks for nothing new, a follow-up
     * incident when it asks for more (a node reboot) */
    struct gh_engine *e2 = engine(topo_2x8(), &sk);
    xid_msg(e2, 10, "gpu-01", 6, 119, "NVRM: Xid (PCI:0000:b8:00): 119, Timeout after 6s of waiting for RPC response");
    xid_msg(e2, 10.5, "gpu-01", 6, 154,
            "NVRM: Xid (PCI:0000:b8:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)");
    xid_msg(e2, 11, "gpu-01", 6, 154,
            "NVRM: Xid (PCI:0000:b8:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x2 (Node Reboot Required)");
    xid_msg(e2, 12, "gpu-01", 6, 154,
            "NVRM: Xid (PCI:0000:b8:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x2 (Node Reboot Required)");
    gh_engine_finish(e2, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_true(got_action(&sk.v[0], GH_ACT_RESET_GPU));
    assert_false(got_action(&sk.v[0], GH_ACT_REBOOT_NODE));
    assert_int_equal(sk.v[1].actions[0], GH_ACT_REBOOT_NODE);
    assert_int_equal(sk.v[1].first_ts, T0 + S(11));
    gh_engine_free(e2);
}

static void test_nic_bringup_after_boot(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    feed(e, sig(GH_KIND_NODE_NOT_READY, 0, "gpu-09", -1));
    feed(e, sig(GH_KIND_NODE_READY, 180, "gpu-09", -1));
    nic(e, 185, "gpu-09", GH_LINK_DOWN);
    nic(e, 192, "gpu-09", GH_LINK_UP);
    gh_engine_tick(e, T0 + S(300));
    assert_int_equal(sk.n, 0); /* the link training after the boot */
    nic(e, 400, "gpu-09", GH_LINK_DOWN); /* up since: a real flap */
    nic(e, 405, "gpu-09", GH_LINK_UP);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_NETWORK);
    gh_engine_free(e);

    /* without a boot, the same down-then-up is a flap */
    struct gh_engine *e2 = engine(topo_2x8(), &sk);
    nic(e2, 185, "gpu-09", GH_LINK_DOWN);
    nic(e2, 192, "gpu-09", GH_LINK_UP);
    gh_engine_finish(e2, INT64_MAX);
    assert_int_equal(sk.n, 1);
    gh_engine_free(e2);
}

static void test_xid63_is_remap_evidence(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    xid_msg(e, 40, "gpu-01", 2, 63, "NVRM: Xid (PCI:0000:3b:00): 63, Row Remapper: New row marked for remapping");
    xid_msg(e, 40.5, "gpu-01", 5, 63, "NVRM: Xid (PCI:0000:9a:00): 63, Row Remapper: New row marked for remapping");
    struct gh_signal s = sig(GH_KIND_ROW_REMAP, 41, "gpu-01", 2);
    s.pending = true;
    s.uncorrectable = 1;
    feed(e, s);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_GPU_MEMORY);
    assert_int_equal(sk.v[0].gpu, 2);
    assert_int_equal(sk.v[0].n_evidence, 2); /* GPU 5's XID 63 is not this one */
    assert_int_equal(sk.v[0].first_ts, T0 + S(40));
    assert_int_equal(sk.v[0].decided_ts, T0 + S(41));
    gh_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sxid_nonfatal_repeats),
        cmocka_unit_test(test_sxid_fatal_then_xid74_one_incident),
        cmocka_unit_test(test_xid154_recovery_action),
        cmocka_unit_test(test_nic_bringup_after_boot),
        cmocka_unit_test(test_xid63_is_remap_evidence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
