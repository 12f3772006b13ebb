#!/usr/bin/env bash
# Opt-in: fetches the pinned XLA CUDA PJRT plugin (jax-cuda13-pjrt, sha256-checked) into the cache, for
# machines with an NVIDIA GPU. Never run by the build or the tests. Prints the plugin's path on its last
# line; point xla-actors.runtime.gpu-plugin-path (or XLA_ACTORS_GPU_PLUGIN) at it, or leave it where it
# is: the runtime looks there by default.
#
#   cache: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/jax-cuda13-pjrt-<version>/xla_cuda_plugin.so
#
# The plugin also needs the CUDA runtime libraries at run time (on GPU machines with JAX for CUDA 13
# installed they are there already; otherwise pip install "jax[cuda13]").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prop() { sed -n "s/^$1=//p" "$here/third-party.properties"; }
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
version="$(prop jax_cuda13_pjrt.version)"
sha="$(prop jax_cuda13_pjrt.sha256)"
dir="$cache/jax-cuda13-pjrt-$version"
if [ ! -f "$dir/.complete" ]; then
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  echo "fetching jax-cuda13-pjrt==$version (about 135 MB)" >&2
  if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version 3.11 --platform "$(prop jax_cuda13_pjrt.platform)" -d "$dl" "jax-cuda13-pjrt==$version" >&2; then
    echo "download of jax-cuda13-pjrt==$version failed (is the Python package index reachable?);" \
      "fetch the wheel by hand and unpack jax_plugins/xla_cuda13/xla_cuda_plugin.so into $dir" >&2
    exit 1
  fi
  wheel="$(ls "$dl"/jax_cuda13_pjrt-"$version"-*.whl)"
  if ! echo "$sha  $wheel" | sha256sum -c --status; then
    echo "sha256 mismatch for $wheel: expected $sha, got $(sha256sum "$wheel" | cut -d' ' -f1)" >&2
    exit 1
  fi
  mkdir -p "$dir"
  python3 - "$wheel" "$dir" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open("jax_plugins/xla_cuda13/xla_cuda_plugin.so") as src, \
        open(sys.argv[2] + "/xla_cuda_plugin.so", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  touch "$dir/.complete"
fi
echo "$dir/xla_cuda_plugin.so"
