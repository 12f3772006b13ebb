#!/usr/bin/env bash
# Creates (once) the Python virtual environment with the official OpenAI client (openai-python), used to
# check the OpenAI API of `bin/xla-actors serve` with the client people use (tools/openai_client_check.py,
# run by the cli module's OpenAiClientsTest). Prints the venv's python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/openai-venv-<openai version>
set -euo pipefail
openai_version=3.51.0
exec bash "$(dirname "${BASH_SOURCE[0]}")/pinned-venv.sh" "openai-venv-$openai_version" python3 "openai==$openai_version"
