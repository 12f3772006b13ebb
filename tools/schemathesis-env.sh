#!/usr/bin/env bash
# Creates (once) the Python virtual environment with schemathesis, the OpenAPI fuzzer that
# `bench/run.sh serve-fuzz` runs against `bin/xla-actors serve` and its /openapi.json. Prints the venv's
# python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/schemathesis-venv-<schemathesis version>
set -euo pipefail
schemathesis_version=4.32.5
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/schemathesis-venv-$schemathesis_version"
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$schemathesis_version" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
