#!/usr/bin/env bash
# Fetches the pinned XLA CPU PJRT plugin (xla-cpu-pjrt, with its pjrt_c_api.h), the build named by
# XLA_ACTORS_PLUGIN_BUILD when that is another supported one (third-party.properties, cpu_plugin.builds), and the
# XLA FFI headers (from jaxlib) into a cache outside the repository, verifying each wheel's sha256 and each
# plugin file's. Idempotent: a complete cache is reused.
#
#   cache: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}; headers for the build under $cache/include
#   prints the cache directory on its last line (not with --no-print, which the Maven build passes).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prop() { sed -n "s/^$1=//p" "$here/third-party.properties"; }
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
jaxlib_version="$(prop jaxlib.version)"
plugin_dir="$cache/xla-cpu-pjrt-$(prop cpu_plugin.xla-cpu-pjrt.version)"  # holds the PJRT C API header
ffi_dir="$cache/jaxlib-$jaxlib_version"

# fetch_wheel NAME VERSION SHA256 PYTHON PLATFORM -> prints the verified wheel's path
fetch_wheel() {
  local name="$1" version="$2" sha="$3" python="$4" platform="$5"
  local dl="$cache/wheels"
  mkdir -p "$dl"
  local wheel
  wheel="$(ls "$dl"/"${name//-/_}"-"$version"-*.whl 2>/dev/null | head -n1 || true)"
  if [ -z "$wheel" ] || ! echo "$sha  $wheel" | sha256sum -c --status; then
    rm -f "$dl"/"${name//-/_}"-"$version"-*.whl
    echo "fetching $name==$version ($platform)" >&2
    local pip_args=(download --disable-pip-version-check --no-deps --only-binary=:all:
      --python-version "$python" --platform "$platform" -d "$dl" "$name==$version")
    if ! python3 -m pip --quiet "${pip_args[@]}" >&2; then
      wheel=""
    else
      wheel="$(ls "$dl"/"${name//-/_}"-"$version"-*.whl 2>/dev/null | head -n1 || true)"
    fi
    if [ -z "$wheel" ]; then
      {
        echo "download of $name==$version failed (pip's message is above; is a package index reachable?)."
        echo "To fetch it by hand: on a machine with network access run"
        echo "  python3 -m pip ${pip_args[*]:0:8} -d . $name==$version"
        echo "copy the .whl into $dl/ (its sha256 must be $sha) and run this script again."
      } >&2
      exit 1
    fi
    if ! echo "$sha  $wheel" | sha256sum -c --status; then
      echo "sha256 mismatch for $wheel: expected $sha, got $(sha256sum "$wheel" | cut -d' ' -f1)" >&2
      rm -f "$wheel"
      exit 1
    fi
  fi
  echo "$wheel"
}

# fetch_plugin BUILD: the build's plugin file, unpacked from its wheel into $cache/<build>-<version>/ and
# checked against its own pin; a cut-short or changed file is unpacked again. A checked plugin gets <file>.pin
# beside it (size and sha256), which Plugin.load checks before dlopen. The xla-cpu-pjrt wheel also gives the
# PJRT C API header the native bridge compiles against.
fetch_plugin() {
  local build="$1"
  local version member so_sha so_size dir so pin wheel tmp
  version="$(prop "cpu_plugin.$build.version")"
  if [ -z "$version" ]; then
    echo "XLA_ACTORS_PLUGIN_BUILD=$build is not a supported XLA CPU plugin build; supported: $(prop cpu_plugin.builds)" >&2
    exit 2
  fi
  member="$(prop "cpu_plugin.$build.member")"
  so_sha="$(prop "cpu_plugin.$build.so.sha256")"
  so_size="$(prop "cpu_plugin.$build.so.size")"
  dir="$cache/$build-$version"
  so="$dir/$(basename "$member")"
  pin="$so.pin"
  if [ -f "$dir/.complete" ] && { [ ! -f "$pin" ] || [ "$(stat -c %s "$so" 2>/dev/null)" != "$so_size" ] || [ "$so" -nt "$pin" ]; }; then
    if echo "$so_sha  $so" | sha256sum -c --status 2>/dev/null; then
      printf 'sha256=%s\nsize=%s\n' "$so_sha" "$so_size" > "$pin.tmp" && mv "$pin.tmp" "$pin"
    else
      echo "$so is not the pinned plugin (cut short or changed); unpacking it again" >&2
      rm -f "$dir/.complete" "$pin"
    fi
  fi
  if [ ! -f "$dir/.complete" ]; then
    wheel="$(fetch_wheel "$build" "$version" "$(prop "cpu_plugin.$build.sha256")" 3.11 "$(prop "cpu_plugin.$build.platform")")"
    tmp="$(mktemp -d)"
    python3 - "$wheel" "$tmp" "$member" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extract(sys.argv[3], sys.argv[2])
    header = "xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h"
    if header in z.namelist():
        z.extract(header, sys.argv[2])
PY
    mkdir -p "$dir"
    mv "$tmp/$member" "$so"
    if [ -f "$tmp/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h" ]; then
      mkdir -p "$dir/include/xla/pjrt/c"
      mv "$tmp/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h" "$dir/include/xla/pjrt/c/"
    fi
    rm -rf "$tmp"
    if ! echo "$so_sha  $so" | sha256sum -c --status; then
      echo "sha256 mismatch for $so unpacked from $wheel: expected $so_sha, got $(sha256sum "$so" | cut -d' ' -f1)" >&2
      exit 1
    fi
    printf 'sha256=%s\nsize=%s\n' "$so_sha" "$so_size" > "$pin.tmp" && mv "$pin.tmp" "$pin"
    touch "$dir/.complete"
  fi
}

fetch_plugin xla-cpu-pjrt
selected="${XLA_ACTORS_PLUGIN_BUILD:-$(prop cpu_plugin.default)}"
[ "$selected" = xla-cpu-pjrt ] || fetch_plugin "$selected"

if [ ! -f "$ffi_dir/.complete" ]; then
  wheel="$(fetch_wheel jaxlib "$jaxlib_version" "$(prop jaxlib.sha256)" "$(prop jaxlib.python)" "$(prop jaxlib.platform)")"
  mkdir -p "$ffi_dir"
  python3 - "$wheel" "$ffi_dir" <<'PY'
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z:
    for m in z.namelist():
        if m.startswith("jaxlib/include/xla/ffi/api/") and m.endswith(".h"):
            target = os.path.join(sys.argv[2], "include", m[len("jaxlib/include/"):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(m) as src, open(target, "wb") as dst:
                dst.write(src.read())
PY
  touch "$ffi_dir/.complete"
fi
# One include root for the build (JavaCPP's parser and g++): xla/pjrt from the plugin wheel, xla/ffi from
# jaxlib, as links to the pinned versions.
mkdir -p "$cache/include/xla"
ln -sfn "$plugin_dir/include/xla/pjrt" "$cache/include/xla/pjrt"
ln -sfn "$ffi_dir/include/xla/ffi" "$cache/include/xla/ffi"
# The wheels are unpacked and marked complete; keep the cache small.
rm -f "$cache"/wheels/*.whl
[ "${1:-}" = "--no-print" ] || echo "$cache"
