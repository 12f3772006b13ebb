#!/usr/bin/env bash
# Fetches the verbatim chat templates of several model families that the chat-template test renders
# (http's ChatTemplateReferenceTest, against the ids tools/chat_template_reference.py made with transformers).
# They come from llama.cpp's models/templates/, vendored in PyPI's llama-cpp-python sdist: downloaded once
# with pip (sha256-checked; pip prepares the sdist's metadata, which installs its build tools into a
# throwaway environment: a few minutes the first time) and only the templates below unpacked. Nothing of it
# is committed. Idempotent: a complete cache is reused.
#
#   cache: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/chat-templates-llama-cpp-python-<version>/<name>.jinja
#   prints the templates' directory on its last line (not with --no-print).
#   --best-effort: a failed download warns and exits 0 (the build goes on; the test says it is skipped and why).
set -euo pipefail
version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
templates=(
  Qwen-Qwen2.5-7B-Instruct
  Qwen-Qwen3-0.6B
  mistralai-Mistral-Nemo-Instruct-2407
  microsoft-Phi-3.5-mini-instruct
  google-gemma-2-2b-it
  meta-llama-Llama-3.1-8B-Instruct
  meta-llama-Llama-3.2-3B-Instruct
  HuggingFaceTB-SmolLM3-3B
)
print=1
best_effort=0
for arg in "$@"; do
  case "$arg" in
    --no-print) print=0 ;;
    --best-effort) best_effort=1 ;;
    *) echo "usage: tools/chat-templates.sh [--no-print] [--best-effort]" >&2; exit 2 ;;
  esac
done
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
dir="$cache/chat-templates-llama-cpp-python-$version"
sdist="$cache/sdists/llama_cpp_python-$version.tar.gz"

fail() {
  echo "chat-templates: $1" >&2
  if [ "$best_effort" = 1 ]; then
    echo "chat-templates: going on without them; the chat-template reference test will be skipped" >&2
    exit 0
  fi
  exit 1
}

complete=1
[ -f "$dir/.complete" ] || complete=0
for t in "${templates[@]}"; do
  [ -f "$dir/$t.jinja" ] || complete=0 # a template added to the list since the cache was made
done
if [ "$complete" = 0 ]; then
  if [ ! -f "$sdist" ] || ! echo "$sha256  $sdist" | sha256sum -c --status; then
    rm -f "$sdist"
    mkdir -p "$cache/sdists"
    tmp="$(mktemp -d)"
    echo "fetching llama-cpp-python==$version (sdist, for its chat templates)" >&2
    # Bounded: pip installs the sdist's build tools to read its metadata (minutes on a busy machine).
    if ! timeout 900 python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: -d "$tmp" \
        "llama-cpp-python==$version" >&2; then
      rm -rf "$tmp"
      fail "pip download llama-cpp-python==$version failed (its message is above; is PyPI reachable?)"
    fi
    if ! echo "$sha256  $tmp/llama_cpp_python-$version.tar.gz" | sha256sum -c --status; then
      got="$(sha256sum "$tmp"/*.tar.gz 2>/dev/null | cut -d' ' -f1)"
      rm -rf "$tmp"
      fail "sha256 mismatch for llama_cpp_python-$version.tar.gz: expected $sha256, got ${got:-nothing}"
    fi
    mv "$tmp/llama_cpp_python-$version.tar.gz" "$sdist"
    rm -rf "$tmp"
  fi
  tmp="$(mktemp -d)"
  members=()
  for t in "${templates[@]}"; do
    members+=("llama_cpp_python-$version/vendor/llama.cpp/models/templates/$t.jinja")
  done
  tar -xzf "$sdist" -C "$tmp" "${members[@]}" || { rm -rf "$tmp"; fail "$sdist lacks a template of: ${templates[*]}"; }
  rm -rf "$dir"
  mkdir -p "$dir"
  mv "$tmp/llama_cpp_python-$version/vendor/llama.cpp/models/templates/"*.jinja "$dir/"
  rm -rf "$tmp"
  touch "$dir/.complete"
fi
if [ "$print" = 1 ]; then
  echo "$dir"
fi
