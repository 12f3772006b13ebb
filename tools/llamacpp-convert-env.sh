#!/usr/bin/env bash
# Creates (once) the Python virtual environment that runs llama.cpp's checkpoint converter
# (convert_hf_to_gguf.py, through tools/llamacpp_convert.py) for `bench/run.sh llamacpp`, and prints its python.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/llamacpp-convert-venv-<sentencepiece version>
#
# The converter imports torch, transformers, numpy and safetensors: those come from the venv of
# tools/torch-env.sh (~5 GB, installed once for the Hugging Face fixtures) through a .pth file naming its
# site-packages, so nothing is installed twice and nothing is added to that venv's pins. This venv holds what
# the converter needs beyond them: sentencepiece (its Llama path imports it before it looks for a
# tokenizer.model) and its own copy of gguf-py comes from the llama.cpp source (PYTHONPATH).
set -euo pipefail
sentencepiece_version=0.2.3
tools="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
torch_python="$(bash "$tools/torch-env.sh")"
python="$(bash "$tools/pinned-venv.sh" "llamacpp-convert-venv-$sentencepiece_version" "$torch_python" \
  "sentencepiece==$sentencepiece_version")"
site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
torch_site="$("$torch_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# After this venv's own site-packages: its pins win where both hold a package.
echo "$torch_site" > "$site/torch-venv.pth"
echo "$python"
