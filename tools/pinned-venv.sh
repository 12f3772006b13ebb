#!/usr/bin/env bash
# Creates (once) a Python virtual environment holding exactly the pinned requirements given, and prints its
# python path. The per-tool scripts (openai-env.sh, triton-client-env.sh, locust-env.sh,
# schemathesis-env.sh) name the venv, the python that makes it and the pins.
#
#   tools/pinned-venv.sh NAME PYTHON REQUIREMENT...     venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/NAME
#
# A venv is complete once its marker, named after the requirements, exists: changing a pin makes a new one.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: tools/pinned-venv.sh NAME PYTHON REQUIREMENT..." >&2; exit 2; }
name="$1"
python="$2"
shift 2
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/$name"
marker="$venv/.complete-$(printf '%s\n' "$@" | sha256sum | cut -c1-16)"
if [ ! -f "$marker" ]; then
  rm -rf "$venv"
  mkdir -p "$cache"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2
  touch "$marker"
fi
echo "$venv/bin/python"
