#!/usr/bin/env bash
# Prints the python of a venv holding guidellm (the vLLM project's load tool), for bench/run.sh serve-clients.
# guidellm requires torch and transformers: rather than a second multi-GB copy, this venv sees the packages
# of tools/torch-env.sh (made first, if missing) through a .pth file, and pip installs guidellm and the rest
# of its requirements beside them. Made once under ~/.cache/xla-actors.
set -euo pipefail
guidellm_version=0.8.1
here="$(dirname "${BASH_SOURCE[0]}")"
torch_python="$(bash "$here/torch-env.sh")"
torch_site="$("$torch_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/guidellm-venv-$guidellm_version"
marker="$venv/.complete-$(printf '%s\n' "$guidellm_version" "$torch_site" | sha256sum | cut -c1-16)"
if [ ! -f "$marker" ]; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$torch_site" > "$site/xla-actors-torch-env.pth"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "guidellm==$guidellm_version" >&2
  touch "$marker"
fi
echo "$venv/bin/python"
