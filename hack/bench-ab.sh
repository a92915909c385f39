#!/usr/bin/env bash
# Runs one `make bench` step on an earlier commit and on the working tree,
# alternated, and prints each run's summary lines: a before/after on one
# machine, under the same load. Usage:
#   hack/bench-ab.sh <commit> <step> [rounds] [extra bench flags...]
# e.g. hack/bench-ab.sh 3a357e6 filters 3 --filter-duration 30s
set -euo pipefail
before=${1:?commit to compare with}
step=${2:?bench step}
rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/before" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/before" "$before" >/dev/null
export HOOKKEEPER_TEST_POSTGRES=${HOOKKEEPER_TEST_POSTGRES:-$("$root/hack/postgres.sh")}
for i in $(seq "$rounds"); do
	for side in before after; do
		dir=$root
		[ "$side" = before ] && dir=$work/before
		out=$work/$side-$i.md
		cp "$root/docs/benchmarks.md" "$out"
		(cd "$dir" && go run ./test/bench --steps "$step" --out "$out" "$@") >"$work/$side-$i.log" 2>&1
		echo "$side $i: $(grep -E '^  ' "$work/$side-$i.log" | tr -s ' ' | tr '\n' ' ')"
	done
done
