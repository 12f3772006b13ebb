#!/usr/bin/env bash
# Installs xla-actors into a throwaway local Maven repository and builds and runs this sample against it,
# as a project that depends on the installed artifacts only would. The throwaway repository is seeded
# with a copy of ~/.m2/repository (the third-party artifacts, so nothing is downloaded again) minus any
# earlier dev.xlaactors artifacts, and deleted at the end: ~/.m2 is left untouched (it may be shared, and a
# stale install there could hide a packaging bug). SAMPLE_REPO=<dir> keeps the repository in <dir>.
#
#   samples/standalone/run.sh
set -euo pipefail
sample="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$sample/../.." && pwd)"
if [ -n "${SAMPLE_REPO:-}" ]; then
  repo="$SAMPLE_REPO"
  mkdir -p "$repo"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  repo="$work/repository"
fi
if [ -d "$HOME/.m2/repository" ] && [ ! -e "$repo/.seeded" ]; then
  echo "seeding $repo from ~/.m2/repository"
  cp -r "$HOME/.m2/repository/." "$repo/"
  rm -rf "$repo/dev/xlaactors"
  touch "$repo/.seeded"
fi
log="$sample/target/run.log"
mkdir -p "$sample/target"
echo "installing xla-actors into $repo (mvn install -DskipTests; log: $log)"
if ! (cd "$root" && mvn -B -Dstyle.color=never -DskipTests -Dmaven.repo.local="$repo" install) > "$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "mvn install failed (log: $log)" >&2
  exit 1
fi
echo "building the sample against the installed artifacts"
if ! (cd "$sample" && mvn -B -Dstyle.color=never -Dmaven.repo.local="$repo" package dependency:copy-dependencies \
    -DincludeScope=runtime) >> "$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "building the sample failed (log: $log)" >&2
  exit 1
fi
echo "running it (the classpath holds only the sample and its dependencies from $repo)"
java -cp "$sample/target/classes:$sample/target/dependency/*" com.example.Main
