#!/usr/bin/env bash
# Creates (once) the Python virtual environment with tritonclient[http], the Open Inference Protocol
# (KServe v2) client that OpenInferenceClientTest drives against a live HttpServer. Prints the venv's
# python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/triton-client-venv-<tritonclient version>
set -euo pipefail
tritonclient_version=2.73.0
numpy_version=2.3.5
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/triton-client-venv-$tritonclient_version"
if [ ! -f "$venv/.complete-numpy$numpy_version" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "tritonclient[http]==$tritonclient_version" "numpy==$numpy_version" >&2
  touch "$venv/.complete-numpy$numpy_version"
fi
echo "$venv/bin/python"
