#!/usr/bin/env bash
# Runs an example by name, or any main class on the project's classpath, building the project first if
# a source changed since the last build (the first build fetches the XLA CPU plugin into
# ~/.cache/xla-actors, about a minute).
#
#   examples/run.sh <example> [args...]           an example below
#   examples/run.sh --class <main class> [args...] any class with a main method on the project classpath
#
# Environment: JAVA_OPTS  extra JVM options, e.g. JAVA_OPTS='-Dxla-actors.actors.runs.timeout=1m'
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
declare -A mains=(
  [quickstart]=dev.xlaactors.examples.Quickstart
  [jax-model]=dev.xlaactors.examples.JaxModel
  [batch-inference]=dev.xlaactors.examples.BatchInference
  [generation]=dev.xlaactors.examples.TextGeneration
)
usage() {
  echo "usage: examples/run.sh <example> [args...]  or  examples/run.sh --class <main class> [args...]" >&2
  echo "examples: ${!mains[*]}" >&2
  exit 2
}
name="${1:-}"
if [ "$name" = "--class" ]; then
  main="${2:-}"
  [ -n "$main" ] || usage
  shift 2
elif [ -n "$name" ] && [ -n "${mains[$name]:-}" ]; then
  main="${mains[$name]}"
  shift
else
  usage
fi
stamp=examples/target/classpath.txt
if [ ! -f "$stamp" ] || [ -n "$(find pom.xml native runtime actors examples -newer "$stamp" -type f -not -path '*/target/*' \
    \( -name '*.java' -o -name '*.cc' -o -name '*.h' -o -name '*.sh' -o -name 'pom.xml' -o -name '*.conf' -o -name '*.properties' \) \
    -print -quit)" ]; then
  mkdir -p examples/target
  # Package in the reactor, never install: the classpath then names this checkout's module jars, not
  # copies in ~/.m2 that another checkout of the project may have installed. Quiet unless it fails.
  if ! mvn -B -Dstyle.color=never -DskipTests -pl examples -am package dependency:build-classpath \
      -Dmdep.outputFile="$root/$stamp" > examples/target/build.log 2>&1; then
    cat examples/target/build.log >&2
    echo "build failed (log: examples/target/build.log)" >&2
    exit 1
  fi
  touch "$stamp" # the dependency plugin leaves an unchanged classpath file alone; it is the stamp
fi
# shellcheck disable=SC2086
exec java -Dslf4j.internal.verbosity=ERROR -Dconfig.file=conf/application.conf -Dlogback.configurationFile=conf/logback.xml \
  ${JAVA_OPTS:-} -cp "examples/target/classes:$(cat "$stamp")" "$main" "$@"
