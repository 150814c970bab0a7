#!/usr/bin/env bash
# Installs what the build and the tests need and is missing: Debian packages
# (as root, or with sudo), the Python virtual environment used by the
# interop tests and benchmarks (.venv, from tests/requirements.txt; moto's S3
# server among them) and Azurite, the Azure Storage emulator the object-store
# tests start (.node, from npm; the version pinned below).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential pkg-config clang libclang-rt-14-dev llvm
      freetds-dev freetds-bin libgnutls28-dev libsqlite3-dev libjansson-dev
      libzstd-dev libsnappy-dev liblz4-dev zlib1g-dev libroaring-dev libcurl4-gnutls-dev
      libmicrohttpd-dev chromium prometheus libinih-dev
      tzdata python3-venv valgrind time bc)
# Spark (pyspark + delta-spark, interop tests) needs a Java 17+ runtime.
command -v java >/dev/null 2>&1 || PKGS+=(openjdk-17-jre-headless)
# Azurite (the Azure tests' emulator) runs on Node.js; npm installs it.
command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python only for interop tests and benchmarks against the readers users trust.
REQ=tests/requirements.txt
STAMP=.venv/.installed
if [ ! -f "$STAMP" ] || ! cmp -s "$REQ" "$STAMP"; then
  echo "install-deps: preparing .venv from $REQ"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r "$REQ"
  # delta-spark's jars come from Maven Central on a SparkSession's first
  # start (ivy cache ~/.ivy2*): fetch them now, not in the middle of a test.
  # hadoop-aws (s3a, at the version of pyspark's hadoop client) with them:
  # tests/interop/test_objstore_spark.py reads our tables on S3 through it.
  echo "install-deps: fetching delta-spark's and hadoop-aws' jars"
  .venv/bin/python - >/dev/null 2>.venv/spark-warmup.log <<'PY' ||
import glob, os, re
import pyspark
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession
api = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar"))
extra = ["org.apache.hadoop:hadoop-aws:" + re.search(r"api-(.+)\.jar$", api[0]).group(1)] if api else []
b = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
configure_spark_with_delta_pip(b, extra_packages=extra).getOrCreate().stop()
PY
    echo "install-deps: warning: Spark with delta-spark did not start (see .venv/spark-warmup.log)"
  cp "$REQ" "$STAMP"
fi

# Azurite (npm) for the Azure Blob tests: a local install under .node, kept
# out of the system's node_modules.
AZURITE=3.37.0
if [ ! -x .node/node_modules/.bin/azurite ] ||
   ! grep -q "\"version\": \"$AZURITE\"" .node/node_modules/azurite/package.json 2>/dev/null; then
  echo "install-deps: installing azurite $AZURITE under .node"
  npm install --silent --no-save --no-audit --no-fund --prefix .node "azurite@$AZURITE" >/dev/null
fi

# Spark 4.0 and 4.1, each in a virtual environment of its own (.venv-spark40,
# .venv-spark41), next to .venv's Spark 4.2, for tests/interop/test_spark40.py:
# the stream source's reader for Spark before 4.2 (4.1's with delta-spark, for
# to_delta). Only when asked (make deps-spark40 / deps-spark41, which make
# soak runs): pyspark's source package is large and slow to build.
legacy_spark() {  # $1: 40 or 41
  local req=tests/requirements-spark$1.txt venv=.venv-spark$1
  if [ ! -f "$venv/.installed" ] || ! cmp -s "$req" "$venv/.installed"; then
    echo "install-deps: preparing $venv from $req"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q -r "$req"
    cp "$req" "$venv/.installed"
  fi
}
if [ -n "${MCDC_DEPS_SPARK40:-}" ]; then
  legacy_spark 40
fi
if [ -n "${MCDC_DEPS_SPARK41:-}" ]; then
  legacy_spark 41
fi
