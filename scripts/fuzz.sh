#!/usr/bin/env bash
# Builds every fuzz target (fuzz/fuzz_*.c) with libFuzzer + ASan + UBSan and
# runs it. Modes:
#   scripts/fuzz.sh              fuzz each target for FUZZ_SECONDS (default 60)
#   scripts/fuzz.sh --regress    run each target once over its kept corpus
#                                (fuzz/corpus/<name>/), then FUZZ_SECONDS
#                                (default 5; 0 = none) of fresh inputs; prints
#                                "fuzz: N passed, N failed"
# New inputs found while fuzzing go to build-fuzz/new-corpus/<name>/; copy the
# interesting ones into fuzz/corpus/<name>/ to keep them.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
secs=${FUZZ_SECONDS:-60}
[ "$mode" = "--regress" ] && secs=${FUZZ_SECONDS:-5}
B=build-fuzz
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
make -s -j"${JOBS:-2}" CC=clang BUILD=$B OPT="-O1 -g $SAN -fsanitize=fuzzer-no-link" \
  $B/libmssqlcdc.a $B/libmcdcsim.a >/dev/null || { echo "fuzz: 0 passed, 1 failed"; exit 1; }
INC="-Iinclude $(for d in src/*/; do printf -- '-I%s ' "${d%/}"; done)"
pass=0; fail=0
for src in fuzz/fuzz_*.c; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .c); name=${name#fuzz_}
  bin=$B/fuzz_$name
  if ! clang -std=c17 -D_GNU_SOURCE -O1 -g $SAN -fsanitize=fuzzer $INC "$src" \
       $B/libmcdcsim.a $B/libmssqlcdc.a $(make -s --no-print-directory print-ldlibs) \
       -o "$bin"; then
    echo "fuzz_$name: build failed"; fail=$((fail+1)); continue
  fi
  corpus=fuzz/corpus/$name; new=$B/new-corpus/$name
  mkdir -p "$corpus" "$new"
  ok=1
  if [ "$mode" = "--regress" ] && [ -n "$(ls -A "$corpus")" ]; then
    "$bin" -runs=0 "$corpus" >"$B/fuzz_$name.log" 2>&1 || ok=0
  fi
  if [ $ok = 1 ] && [ "$secs" -gt 0 ]; then
    "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -artifact_prefix="$B/crash-$name-" \
      "$new" "$corpus" >>"$B/fuzz_$name.log" 2>&1 || ok=0
  fi
  if [ $ok = 1 ]; then echo "fuzz_$name: ok"; pass=$((pass+1));
  else echo "fuzz_$name: FAILED (see $B/fuzz_$name.log)"; tail -30 "$B/fuzz_$name.log"; fail=$((fail+1)); fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail -eq 0 ]
