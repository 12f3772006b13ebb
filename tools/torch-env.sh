#!/usr/bin/env bash
# Creates (once) the Python virtual environment with PyTorch and Hugging Face transformers, used only by
# tools/hf_reference.py to make the committed Hugging Face test fixtures and their expected outputs
# (a developer runs it once; CI never installs torch). Prints the venv's python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/torch-venv
#
# The versions live in a marker file (.complete-<versions>) rather than in the directory name, so a venv
# that someone already installed with exactly these versions (torch's CUDA wheels are ~5 GB) is adopted
# after a check of what it holds; a venv holding anything else is made again.
set -euo pipefail
torch_version=2.15.0
transformers_version=5.23.0
safetensors_version=0.8.0
tokenizers_version=0.23.3
numpy_version=2.3.5
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
venv="$cache/torch-venv"
pins="torch==$torch_version transformers==$transformers_version safetensors==$safetensors_version"
pins="$pins tokenizers==$tokenizers_version numpy==$numpy_version"
marker="$venv/.complete-torch$torch_version-transformers$transformers_version-safetensors$safetensors_version"
marker="$marker-tokenizers$tokenizers_version-numpy$numpy_version"
if [ ! -f "$marker" ]; then
  # Adopt a venv made outside this script when every pin is installed as asked (torch's local version
  # label, e.g. +cu132, is not part of the distribution's version).
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" - $pins <<'EOF'
import importlib.metadata, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        if importlib.metadata.version(name) != version:
            sys.exit(1)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(1)
EOF
  then
    touch "$marker"
  else
    rm -rf "$venv"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086 # $pins is a list of requirement words
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $pins >&2
    touch "$marker"
  fi
fi
echo "$venv/bin/python"
