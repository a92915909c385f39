// Command etcd builds the etcd server used by envtest and `make dev`.
//
// It lives in its own module so that etcd's dependency graph never touches
// the project's go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
