// Command kube-apiserver builds the upstream API server used by envtest,
// the e2e suite and `make dev`.
//
// It lives in its own module because k8s.io/kubernetes can only be required
// with every staging module replaced by its published release.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
