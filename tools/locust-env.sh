#!/usr/bin/env bash
# Creates (once) the Python virtual environment with locust, the load tool that `bench/run.sh serve-load`
# runs headless against `bin/xla-actors serve` (bench/serve_load.py: streamed completions, each client
# disconnecting at a random point). Prints the venv's python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/locust-venv-<locust version>
set -euo pipefail
locust_version=2.47.0
exec bash "$(dirname "${BASH_SOURCE[0]}")/pinned-venv.sh" "locust-venv-$locust_version" python3 "locust==$locust_version"
