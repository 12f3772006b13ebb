#!/usr/bin/env bash
# Creates (once) the Python virtual environment with schemathesis, the OpenAPI fuzzer that
# `bench/run.sh serve-fuzz` runs against `bin/xla-actors serve` and its /openapi.json. Prints the venv's
# python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/schemathesis-venv-<schemathesis version>-py<python version>
#
# The python: $SCHEMATHESIS_PYTHON, else the first of python3.13, python3.12 (on PATH or installed by pyenv)
# and python3 that runs: on Python 3.11.7, hypothesis (under schemathesis)
# trips CPython's "AST constructor recursion depth mismatch" (gh-106905, fixed in later releases) while it
# describes a filter, which ends that operation's tests with a runtime error.
set -euo pipefail
schemathesis_version=4.32.5
candidates=("${SCHEMATHESIS_PYTHON:-}" python3.13 python3.12)
if command -v pyenv >/dev/null; then
  for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[2-9]' | sort -V -r); do
    candidates+=("$(pyenv root)/versions/$v/bin/python3")
  done
fi
candidates+=(python3)
python=""
for c in "${candidates[@]}"; do
  if [ -n "$c" ] && "$c" -c 'import sys' >/dev/null 2>&1; then
    python="$c"
    break
  fi
done
python_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
exec bash "$(dirname "${BASH_SOURCE[0]}")/pinned-venv.sh" "schemathesis-venv-$schemathesis_version-py$python_version" "$python" \
  "schemathesis==$schemathesis_version"
