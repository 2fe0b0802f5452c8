#!/bin/sh
# fake-reboot.sh - the agent's reboot_node command on the real test node
# (test/node/e2e): a container cannot reboot the test host, so a "reboot" is
# a new boot id in the file the agent reads (--boot-id-file, $BOOT_ID_FILE on
# the agent's state hostPath) and the agent's own exit (SIGTERM to the agent,
# this script's parent: the agent runs in the host's PID namespace, hostPID,
# so PID 1 is the host's init, never to be signalled); the kubelet restarts
# the container and the agent, starting with the new boot id, completes the
# request and runs its validate command.
set -eu
cat /proc/sys/kernel/random/uuid > "$BOOT_ID_FILE.tmp"
mv "$BOOT_ID_FILE.tmp" "$BOOT_ID_FILE"
[ "$PPID" -gt 1 ] || { echo "fake-reboot: no parent agent to stop (PPID $PPID)" >&2; exit 1; }
kill -TERM "$PPID"
