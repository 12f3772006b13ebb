#!/usr/bin/env bash
# Creates (once) the Python virtual environment with the official OpenAI client (openai-python), used to
# check the OpenAI API of `bin/xla-actors serve` with the client people use (tools/openai_client_check.py,
# run by the cli module's OpenAiClientsTest). Prints the venv's python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/openai-venv-<openai version>
set -euo pipefail
openai_version=3.51.0
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/openai-venv-$openai_version"
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "openai==$openai_version" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
