#!/usr/bin/env bash
# Fetches the pinned XLA CPU PJRT plugin (with its pjrt_c_api.h) and the XLA FFI headers (from jaxlib)
# into a cache outside the repository, verifying each wheel's sha256. Idempotent: a complete cache is reused.
#
#   cache: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}; headers for the build under $cache/include
#   prints the cache directory on its last line (not with --no-print, which the Maven build passes).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prop() { sed -n "s/^$1=//p" "$here/third-party.properties"; }
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
pjrt_version="$(prop xla_cpu_pjrt.version)"
jaxlib_version="$(prop jaxlib.version)"
plugin_dir="$cache/xla-cpu-pjrt-$pjrt_version"
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

if [ ! -f "$plugin_dir/.complete" ]; then
  wheel="$(fetch_wheel xla-cpu-pjrt "$pjrt_version" "$(prop xla_cpu_pjrt.sha256)" 3.11 "$(prop xla_cpu_pjrt.platform)")"
  tmp="$(mktemp -d)"
  python3 - "$wheel" "$tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for m in ("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h"):
        z.extract(m, sys.argv[2])
PY
  mkdir -p "$plugin_dir/include/xla/pjrt/c"
  mv "$tmp/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" "$plugin_dir/"
  mv "$tmp/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h" "$plugin_dir/include/xla/pjrt/c/"
  rm -rf "$tmp"
  touch "$plugin_dir/.complete"
fi

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
