// Command etcd: the test control plane's etcd. etcd's own server module
// carries replace lines in its go.mod, so it cannot be built with `go build
// module@version` or as a `tool` of this module without them; this small main
// of ours, inside this module, calls the upstream entry point instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
