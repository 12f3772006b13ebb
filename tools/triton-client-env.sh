#!/usr/bin/env bash
# Creates (once) the Python virtual environment with tritonclient[http], the Open Inference Protocol
# (KServe v2) client that OpenInferenceClientTest drives against a live HttpServer. Prints the venv's
# python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/triton-client-venv-<tritonclient version>
set -euo pipefail
tritonclient_version=2.73.0
numpy_version=2.3.5
exec bash "$(dirname "${BASH_SOURCE[0]}")/pinned-venv.sh" "triton-client-venv-$tritonclient_version" python3 \
  "tritonclient[http]==$tritonclient_version" "numpy==$numpy_version"
