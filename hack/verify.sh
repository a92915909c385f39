#!/usr/bin/env bash
# Fails when a generated file is stale (CRDs, RBAC, deepcopy), go.mod is
# untidy, code is unformatted or go vet complains. CI runs it before the
# tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

fail=0
generated=(api config/crd config/rbac go.mod go.sum)

make -s manifests generate
go mod tidy
if ! git diff --quiet -- "${generated[@]}" || [[ -n "$(git ls-files --others --exclude-standard -- "${generated[@]}")" ]]; then
	echo "generated files are stale; run 'make manifests generate && go mod tidy' and commit:" >&2
	git status --short -- "${generated[@]}" >&2
	git diff --stat -- "${generated[@]}" >&2
	fail=1
fi

unformatted="$(gofmt -s -l $(git ls-files '*.go'))"
if [[ -n "$unformatted" ]]; then
	echo "unformatted Go files; run 'make fmt':" >&2
	echo "$unformatted" >&2
	fail=1
fi

go vet ./...
# Nothing may write into the module cache (a generator once rewrote
# dependencies' files there): every module's dependencies must verify.
go mod verify >/dev/null || { echo "the module cache no longer matches go.sum" >&2; fail=1; }
for mod in hack/tools/*/; do
	(cd "$mod" && go mod verify >/dev/null) || { echo "tool module $mod does not verify" >&2; fail=1; }
done

exit "$fail"
