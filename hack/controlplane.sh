#!/usr/bin/env bash
# Builds the real control-plane binaries (etcd, kube-apiserver, kubectl) from
# the Go module proxy into $ASSETS_DIR, the directory envtest reads through
# KUBEBUILDER_ASSETS, and beside them kube-controllers: the upstream namespace,
# garbage-collector and clusterrole-aggregation controllers that a bare
# etcd + kube-apiserver lacks (test/testenv starts it for the suites that need
# namespace deletion, owner-reference collection or the aggregated view/edit/
# admin roles). Each binary is built once per pinned version: a stamp file
# next to it records the version, so later runs return at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
ASSETS_DIR="${ASSETS_DIR:-$ROOT/bin/k8s/${KUBE_VERSION#v}-$(go env GOOS)-$(go env GOARCH)}"

mkdir -p "$ASSETS_DIR"

# build NAME VERSION [LDFLAGS]: builds hack/tools/NAME unless the stamp matches.
build() {
	local name="$1" version="$2" ldflags="${3:-}"
	local out="$ASSETS_DIR/$name" stamp="$ASSETS_DIR/.$name.version"
	if [[ -x "$out" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
		return 0
	fi
	echo "building $name $version into $ASSETS_DIR (once; later runs reuse it)" >&2
	local start=$SECONDS
	(cd "$ROOT/hack/tools/$name" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$out" .)
	echo "$version" >"$stamp"
	echo "built $name in $((SECONDS - start))s" >&2
}

versionflags() {
	local v="$1"
	local major minor
	major="$(echo "${v#v}" | cut -d. -f1)"
	minor="$(echo "${v#v}" | cut -d. -f2)"
	echo "-X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
}

build etcd "$ETCD_VERSION"
build kube-apiserver "$KUBE_VERSION" "$(versionflags "$KUBE_VERSION")"
build kubectl "$KUBE_VERSION" "$(versionflags "$KUBE_VERSION")"
build kube-controllers "$KUBE_VERSION" "$(versionflags "$KUBE_VERSION")"

echo "$ASSETS_DIR"
