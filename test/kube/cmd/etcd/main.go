// Copied verbatim (minus license header) from go.etcd.io/etcd/server/v3@v3.7.0 main.go.
// Upstream: Apache License 2.0, The Kubernetes/etcd/kwok Authors.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
