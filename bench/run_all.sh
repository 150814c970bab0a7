#!/usr/bin/env bash
# Runs every benchmark (make bench); each prints `name: value` lines.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for b in reader table parquet lake stream snapshot silver object-store many spark; do
  echo "== bench-$b"
  make --no-print-directory "bench-$b" || status=1
done
exit $status
