/* test_agent_peer.c - unit tests of the telemetry socket's peer
 * identification (agent/peer.h): the pod UID of /proc/<pid>/cgroup texts
 * in the kubelet's layouts (cgroup v1 and v2, the cgroupfs and systemd
 * drivers, Guaranteed/Burstable/BestEffort, kind's nested kubelet slices,
 * a static pod's plain UID, paths relative to another cgroup namespace),
 * host processes (no pod), and what is refused: two different pods, a pod
 * segment without a valid UID, a "pod" segment outside kubepods is no pod;
 * and gh_peer_identify on a real socket pair with an injected proc root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/peer.h"

#define UID "8f2c3a4e-1b2d-4c5e-9f6a-7b8c9d0e1f2a"
#define UIDS "8f2c3a4e_1b2d_4c5e_9f6a_7b8c9d0e1f2a"

static int parse(const char *text, char *uid)
{
    struct gh_err err = {{0}};
    int rc = gh_peer_pod_uid_parse(text, strlen(text), uid, GH_PEER_UID_MAX, &err);
    if (rc)
        printf("  (%s)\n", err.msg);
    return rc;
}

static void expect_uid(const char *text, const char *want)
{
    char uid[GH_PEER_UID_MAX] = "";
    assert_int_equal(parse(text, uid), GH_OK);
    assert_string_equal(uid, want);
}

static void test_layouts(void **state)
{
    (void)state;
    /* cgroup v2, systemd driver, Burstable (containerd) */
    expect_uid("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDS
               ".slice/cri-containerd-0123abcd.scope\n",
               UID);
    /* Guaranteed: no QoS slice */
    expect_uid("0::/kubepods.slice/kubepods-pod" UIDS ".slice/cri-containerd-0123.scope\n", UID);
    /* cgroup v2, cgroupfs driver */
    expect_uid("0::/kubepods/besteffort/pod" UID "/4f3e2d1c\n", UID);
    expect_uid("0::/kubepods/pod" UID "/4f3e2d1c\n", UID);
    /* cgroup v1: one line per hierarchy, all naming the pod */
    expect_uid("12:memory:/kubepods/burstable/pod" UID "/abc\n"
               "11:cpu,cpuacct:/kubepods/burstable/pod" UID "/abc\n"
               "1:name=systemd:/kubepods/burstable/pod" UID "/abc\n"
               "0::/\n",
               UID);
    /* kind / nested kubelet: kubelet-kubepods-... slices */
    expect_uid("0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
               "kubelet-kubepods-besteffort-pod" UIDS ".slice/cri-containerd-9.scope\n",
               UID);
    /* read from another cgroup namespace: relative */
    expect_uid("0::/../../kubepods-burstable-pod" UIDS ".slice/cri-containerd-1.scope\n", UID);
    /* cgroupfs read from the agent's own cgroup namespace (cgroup v2):
     * the kubepods ancestor both share is hidden above ".." */
    expect_uid("0::/../../burstable/pod" UID "/4f3e2d1c\n", UID);
    expect_uid("0::/../pod" UID "/4f3e2d1c\n", UID);
    /* a static pod: its config hash, 32 plain hex digits */
    expect_uid("0::/kubepods/burstable/pod0123456789abcdef0123456789abcdef/x\n",
               "0123456789abcdef0123456789abcdef");
    /* no final newline; the path may hold ':' */
    expect_uid("0::/kubepods/pod" UID "/a:b", UID);
}

static void test_host_processes(void **state)
{
    (void)state;
    char uid[GH_PEER_UID_MAX];
    assert_int_equal(parse("0::/system.slice/sshd.service\n", uid), GH_ENOTFOUND);
    assert_int_equal(parse("0::/user.slice/user-0.slice/session-3.scope\n", uid), GH_ENOTFOUND);
    assert_int_equal(parse("0::/kubepods.slice/kubepods-burstable.slice\n", uid), GH_ENOTFOUND);
    assert_int_equal(parse("", uid), GH_ENOTFOUND);
    assert_int_equal(parse("garbage without colons\n\n", uid), GH_ENOTFOUND);
    /* "pod..." outside kubepods is not a pod's cgroup */
    assert_int_equal(parse("0::/system.slice/pod" UID "/x\n", uid), GH_ENOTFOUND);
    assert_int_equal(parse("0::/podman-" UIDS ".slice\n", uid), GH_ENOTFOUND);
    assert_int_equal(parse("0::/../../../system.slice/cron.service\n", uid), GH_ENOTFOUND);
}

static void test_refused(void **state)
{
    (void)state;
    char uid[GH_PEER_UID_MAX];
    /* two lines, two pods */
    assert_int_equal(parse("2:memory:/kubepods/pod" UID "/a\n"
                           "0::/kubepods/pod11111111-2222-3333-4444-555555555555/a\n",
                           uid),
                     GH_EINVAL);
    /* malformed UIDs under kubepods */
    assert_int_equal(parse("0::/kubepods/podnot-a-uid/a\n", uid), GH_EINVAL);
    assert_int_equal(parse("0::/kubepods/pod" UID "0/a\n", uid), GH_EINVAL);
    assert_int_equal(parse("0::/kubepods/pod8F2C3A4E-1B2D-4C5E-9F6A-7B8C9D0E1F2A/a\n", uid),
                     GH_EINVAL); /* the API's UIDs are lowercase */
    assert_int_equal(parse("0::/kubepods.slice/kubepods-pod" UID ".slice/x\n", uid),
                     GH_EINVAL); /* systemd escapes '-' as '_' */
    assert_int_equal(parse("0::/kubepods.slice/kubepods-burstable-pod.slice/x\n", uid), GH_EINVAL);
    /* a buffer too small */
    struct gh_err err;
    char small[8];
    assert_int_equal(
        gh_peer_pod_uid_parse("0::/kubepods/pod" UID, 20 + 36, small, sizeof small, &err),
        GH_EINVAL);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_identify(void **state)
{
    (void)state;
    char root[] = "/tmp/gh-peer-XXXXXX", dir[128], file[160];
    assert_non_null(mkdtemp(root));
    snprintf(dir, sizeof dir, "%s/%d", root, (int)getpid());
    snprintf(file, sizeof file, "%s/cgroup", dir);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct gh_peer p;
    struct gh_err err = {{0}};
    /* no such process under the proc root: cannot tell */
    assert_int_equal(gh_peer_identify(sv[0], root, &p, &err), GH_EIO);
    assert_non_null(strstr(err.msg, "/cgroup"));
    assert_int_equal(mkdir(dir, 0700), 0);
    write_file(file, "0::/kubepods/burstable/pod" UID "/c\n");
    assert_int_equal(gh_peer_identify(sv[0], root, &p, &err), GH_OK);
    assert_int_equal(p.pid, getpid());
    assert_int_equal(p.uid, geteuid());
    assert_string_equal(p.pod_uid, UID);
    write_file(file, "0::/system.slice/x.service\n");
    assert_int_equal(gh_peer_identify(sv[0], root, &p, &err), GH_OK);
    assert_string_equal(p.pod_uid, "");
    write_file(file, "0::/kubepods/podbad/c\n");
    assert_int_equal(gh_peer_identify(sv[0], root, &p, &err), GH_EINVAL);
    /* the real /proc: this process is a host process or in a pod, and
     * either way it is identified */
    assert_int_equal(gh_peer_identify(sv[0], NULL, &p, &err), GH_OK);
    close(sv[0]);
    close(sv[1]);
    unlink(file);
    rmdir(dir);
    rmdir(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_host_processes),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_identify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
