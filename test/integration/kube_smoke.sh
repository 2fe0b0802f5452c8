#!/usr/bin/env bash
# The control-plane smoke test (test/kube/smoke-test) against the suite's
# control plane: readyz, a kwok fake GPU node Ready, a GPU pod Running, RBAC.
exec "$GH_SOURCE_DIR/test/kube/smoke-test"
