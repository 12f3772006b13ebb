#!/usr/bin/env bash
# Creates (once) the Python virtual environment with locust, the load tool that `bench/run.sh serve-load`
# runs headless against `bin/xla-actors serve` (bench/serve_load.py: streamed completions, each client
# disconnecting at a random point). Prints the venv's python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/locust-venv-<locust version>
set -euo pipefail
locust_version=2.47.0
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/locust-venv-$locust_version"
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "locust==$locust_version" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
