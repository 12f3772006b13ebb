#!/usr/bin/env bash
# Lets the build skip the native compilation (JavaCPP's parse and g++, 35-50 s on 2 cores) when nothing
# it reads has changed since the last one in this target/ folder.
#
#   native-stamp.sh check CACHE JAVACPP_VERSION   writes target/native-build.properties with
#                                                 native.skip=true when the stamp matches and the built
#                                                 library and generated sources are still there
#   native-stamp.sh save CACHE JAVACPP_VERSION    records the stamp after a compilation
#   native-stamp.sh keep CACHE JAVACPP_VERSION    keeps a copy of the compilation's outputs in
#                                                 CACHE/native-builds/<stamp>.tar, which check restores in
#                                                 another checkout of the same sources
#
# The stamp is a sha256 over the bridge's C++ and headers, the preset class, native/pom.xml, the pinned
# third-party versions, the fetched PJRT and FFI headers, the JavaCPP version and the compiler's version.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
action="$1" cache="$2" javacpp_version="$3"
target="$here/target"
stamp_file="$target/native.stamp"

stamp() {
  {
    echo "javacpp $javacpp_version"
    g++ --version 2>/dev/null | head -n 1 || echo "no g++"
    cd "$here"
    find src/main/cpp src/main/java/dev/xlaactors/nativebridge/presets pom.xml third-party.properties -type f \
      | LC_ALL=C sort | xargs sha256sum
    # The headers are links into the versioned cache folders: hash what they point to.
    find -L "$cache/include" -type f -name '*.h' | LC_ALL=C sort | xargs sha256sum | sed "s|$cache/||"
  } | sha256sum | cut -d' ' -f1
}

# What a compilation leaves that a later build of the same stamp can reuse: the generated Java bindings and
# the library. A copy goes into the cache, one tar per stamp, so a fresh clone of the same sources (CI's)
# restores them instead of compiling again.
builds="$cache/native-builds"
outputs=(generated-sources/javacpp classes/dev/xlaactors/nativebridge/linux-x86_64)

case "$action" in
  check)
    mkdir -p "$target"
    skip=false
    current="$(stamp)"
    if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$current" ] \
        && [ -n "$(find "$target/classes" -name 'libjniPjrt.so' 2>/dev/null | head -n 1)" ] \
        && [ -d "$target/generated-sources/javacpp" ]; then
      skip=true
      echo "native bridge up to date (native/native-stamp.sh): skipping JavaCPP's parse and the C++ compilation"
    elif [ -f "$builds/$current.tar" ] && tar -xf "$builds/$current.tar" -C "$target" \
        && [ -n "$(find "$target/classes" -name 'libjniPjrt.so' 2>/dev/null | head -n 1)" ]; then
      echo "$current" > "$stamp_file"
      skip=true
      echo "native bridge restored from $builds/$current.tar (the same sources, compiler and headers built it)"
    else
      rm -f "$stamp_file"
      echo "compiling the native bridge (JavaCPP parse and g++, about 40 s on 2 cores)"
    fi
    echo "native.skip=$skip" > "$target/native-build.properties"
    ;;
  save)
    stamp > "$stamp_file"
    ;;
  keep)
    current="$(stamp)"
    # Into the cache under a temporary name, then renamed: two builds at once never see half a tar. The
    # newest 4 are kept.
    if mkdir -p "$builds" && tar -cf "$builds/$current.tar.$$" -C "$target" "${outputs[@]}" 2>/dev/null; then
      mv -f "$builds/$current.tar.$$" "$builds/$current.tar"
      # shellcheck disable=SC2012
      ls -t "$builds"/*.tar 2>/dev/null | tail -n +5 | xargs -r rm -f
    else
      rm -f "$builds/$current.tar.$$"
    fi
    ;;
  *)
    echo "usage: native-stamp.sh check|save|keep CACHE JAVACPP_VERSION" >&2
    exit 2
    ;;
esac
