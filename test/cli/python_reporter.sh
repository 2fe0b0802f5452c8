#!/usr/bin/env bash
# The Python reporter's unit tests (python/tests, unittest, standard library
# only): the lines it writes, never blocking or raising with the agent
# absent or slow, reconnection, the resume contract, the framework
# callbacks. The round trip into the C telemetry socket is
# test/unit/test_agent_telemetry.c (test_python_round_trip).
set -uo pipefail
cd "$GH_SOURCE_DIR"
if ! command -v python3 >/dev/null 2>&1 ||
   ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
  echo "python_reporter: skipped (no python3 >= 3.9)"
  exit 0
fi
export PYTHONDONTWRITEBYTECODE=1
python3 -m unittest discover -v python/tests 2>&1
