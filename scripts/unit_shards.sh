#!/usr/bin/env bash
# unit_shards.sh N COMMAND...: runs a unit-tests COMMAND (valgrind ... build/unit-tests)
# as N processes at once, shard k of N each (MCDC_TEST_SHARD=k/N: every test
# runs in exactly one), then prints each shard's output in turn and one line
# "unit: P passed, F failed" over all of them. Exits non-zero when a shard
# did, or when a shard's output lacks its summary line.
set -uo pipefail
n=$1; shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pids=()
for ((k = 0; k < n; k++)); do
  MCDC_TEST_SHARD="$k/$n" "$@" >"$dir/$k.out" 2>&1 &
  pids+=($!)
done
status=0 passed=0 failed=0
for ((k = 0; k < n; k++)); do
  wait "${pids[$k]}" || status=1
  cat "$dir/$k.out"
  line=$(grep -E '^unit: [0-9]+ passed, [0-9]+ failed$' "$dir/$k.out" | tail -1)
  if [ -z "$line" ]; then
    echo "shard $k/$n: no summary line (it crashed or was killed)"
    status=1
    continue
  fi
  p=${line#unit: }; p=${p%% passed*}
  f=${line#*passed, }; f=${f%% failed}
  passed=$((passed + p)); failed=$((failed + f))
done
echo "unit: $passed passed, $failed failed"
exit "$status"
