#!/usr/bin/env bash
# Creates (once) the Python virtual environment with JAX, the reference peer used to produce StableHLO
# fixtures and expected values, and to run side-by-side benchmarks. Prints the venv's python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/jax-venv-<jax version>
set -euo pipefail
jax_version=0.10.2
numpy_version=2.3.5
safetensors_version=0.8.0 # tools/jax_gpt.py writes and reads the weights with it
# flatbuffers: needed by Exported.serialize()/deserialize (jax.export artifacts).
flatbuffers_version=25.12.19
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/jax-venv-$jax_version"
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "jax==$jax_version" "jaxlib==$jax_version" "numpy==$numpy_version" >&2
  touch "$venv/.complete"
fi
# Added after the first venvs were made: installed on their own so an existing venv gets them too.
if [ ! -f "$venv/.extras-$safetensors_version-$flatbuffers_version" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "safetensors==$safetensors_version" "flatbuffers==$flatbuffers_version" >&2
  touch "$venv/.extras-$safetensors_version-$flatbuffers_version"
fi
echo "$venv/bin/python"
