#!/usr/bin/env bash
# Compiles the C++ bridge (JNI over the PJRT C API plus the XLA FFI handlers) into
#   $1/libxla_actors_bridge.so
# against the headers fetched by fetch-third-party.sh. Skips the build when the library is newer
# than every source.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="$1"
cache="$(bash "$here/fetch-third-party.sh" | tail -n1)"
prop() { sed -n "s/^$1=//p" "$here/third-party.properties"; }
pjrt_include="$cache/xla-cpu-pjrt-$(prop xla_cpu_pjrt.version)/include"
ffi_include="$cache/jaxlib-$(prop jaxlib.version)/include"
java_home="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")}"
library="$out_dir/libxla_actors_bridge.so"
sources=("$here"/src/main/cpp/*.cc)
mkdir -p "$out_dir"
if [ -f "$library" ] && [ -z "$(find "$here/src/main/cpp" "$here/third-party.properties" -newer "$library" -print -quit)" ]; then
  exit 0
fi
echo "compiling $library" >&2
g++ -std=c++17 -O2 -g -fPIC -shared -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter \
  -I"$pjrt_include" -I"$ffi_include" -I"$java_home/include" -I"$java_home/include/linux" \
  -o "$library.tmp" "${sources[@]}" -ldl -lpthread
mv "$library.tmp" "$library"
