#!/usr/bin/env bash
# Builds (once) llama.cpp, the CPU server bench/run.sh llamacpp measures beside us, and prints the folder
# holding its programs (llama-bench, llama-batched-bench, llama-quantize, llama-server, llama-simple) on the
# last line of stdout. The source is the llama.cpp that PyPI's llama-cpp-python sdist vendors
# (vendor/llama.cpp, ggml-org/llama.cpp@0c1e57098 for 0.3.36), fetched from PyPI and sha256-checked; nothing
# of it is committed.
#
#   tools/llamacpp-build.sh            build dir: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/llamacpp-<ver>-<flags>
#   tools/llamacpp-build.sh --source   prints the unpacked vendor/llama.cpp folder only (for convert_hf_to_gguf.py)
#
# The build takes ~20 min with one job on 2 cores; LLAMACPP_JOBS (default 1) sets make's -j. It runs under
# nice -n 10 so that it yields to other work on a shared machine.
set -euo pipefail
version=0.3.36
# The sdist's address on PyPI's simple index (what `pip download llama-cpp-python==0.3.36 --no-deps
# --no-binary :all:` fetches; pip would also build the sdist's metadata, which installs scikit-build-core and
# cmake first, minutes for nothing we use) and its sha256 from that index.
url="https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$version.tar.gz"
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
flags=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
       -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DBUILD_SHARED_LIBS=OFF)
targets=(llama-bench llama-batched-bench llama-quantize llama-server llama-simple)
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
src_root="$cache/llama-cpp-python-$version"
src="$src_root/llama_cpp_python-$version/vendor/llama.cpp"
# GGML_NATIVE=ON compiles for this CPU: the CPU's flags are part of the key, so a cache copied to another
# machine builds again rather than running instructions that CPU lacks.
cpu_key="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-8)"
key="$(printf '%s\n' "${flags[@]}" "${targets[@]}" "$cpu_key" | sha256sum | cut -c1-12)"
build="$cache/llamacpp-$version-$key"

if [ ! -f "$src_root/.complete" ]; then
  rm -rf "$src_root"
  mkdir -p "$src_root"
  tarball="$src_root/llama_cpp_python-$version.tar.gz"
  echo "llamacpp-build: fetching llama-cpp-python $version from PyPI" >&2
  curl -sSfL --retry 3 -o "$tarball" "$url"
  got="$(sha256sum "$tarball" | cut -d' ' -f1)"
  if [ "$got" != "$sha256" ]; then
    echo "llamacpp-build: $tarball has sha256 $got, expected $sha256; delete $src_root and run again" >&2
    exit 1
  fi
  tar -xzf "$tarball" -C "$src_root"
  rm -f "$tarball"
  touch "$src_root/.complete"
fi
if [ "${1:-}" = "--source" ]; then
  echo "$src"
  exit 0
fi

mkdir -p "$build"
# One build at a time per folder: a second caller (another bench run) waits for the first one's build.
exec 9> "$build/.lock"
flock 9
if [ ! -f "$build/.complete" ]; then
  echo "llamacpp-build: building llama.cpp into $build (~20 min with one job on 2 cores)" >&2
  nice -n 10 cmake -S "$src" -B "$build/cmake" "${flags[@]}" >&2
  nice -n 10 cmake --build "$build/cmake" --config Release -j "${LLAMACPP_JOBS:-1}" --target "${targets[@]}" >&2
  for t in "${targets[@]}"; do
    [ -x "$build/cmake/bin/$t" ] || { echo "llamacpp-build: $t was not built (see the cmake output above)" >&2; exit 1; }
  done
  touch "$build/.complete"
fi
echo "$build/cmake/bin"
