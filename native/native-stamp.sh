#!/usr/bin/env bash
# Lets the build skip the native compilation (JavaCPP's parse and g++, 35-50 s on 2 cores) when nothing
# it reads has changed since the last one in this target/ folder.
#
#   native-stamp.sh check CACHE JAVACPP_VERSION   writes target/native-build.properties with
#                                                 native.skip=true when the stamp matches and the built
#                                                 library and generated sources are still there
#   native-stamp.sh save CACHE JAVACPP_VERSION    records the stamp after a compilation
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

case "$action" in
  check)
    mkdir -p "$target"
    skip=false
    if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$(stamp)" ] \
        && [ -n "$(find "$target/classes" -name 'libjniPjrt.so' 2>/dev/null | head -n 1)" ] \
        && [ -d "$target/generated-sources/javacpp" ]; then
      skip=true
      echo "native bridge up to date (native/native-stamp.sh): skipping JavaCPP's parse and the C++ compilation"
    else
      rm -f "$stamp_file"
      echo "compiling the native bridge (JavaCPP parse and g++, about 40 s on 2 cores)"
    fi
    echo "native.skip=$skip" > "$target/native-build.properties"
    ;;
  save)
    stamp > "$stamp_file"
    ;;
  *)
    echo "usage: native-stamp.sh check|save CACHE JAVACPP_VERSION" >&2
    exit 2
    ;;
esac
