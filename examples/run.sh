#!/usr/bin/env bash
# Runs an example by name, building the project first if needed (the first build fetches the XLA
# CPU plugin into ~/.cache/xla-actors, about a minute). Usage: examples/run.sh <example> [args...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
declare -A mains=(
  [quickstart]=dev.xlaactors.examples.Quickstart
  [jax-model]=dev.xlaactors.examples.JaxModel
  [batch-inference]=dev.xlaactors.examples.BatchInference
  [generation]=dev.xlaactors.examples.TextGeneration
)
name="${1:-}"
if [ -z "$name" ] || [ -z "${mains[$name]:-}" ]; then
  echo "usage: examples/run.sh <example> [args...]; examples: ${!mains[*]}" >&2
  exit 2
fi
shift
if [ ! -f examples/target/classpath.txt ] || [ -n "$(find native/src runtime/src actors/src examples/src -newer examples/target/classpath.txt -print -quit)" ]; then
  mkdir -p examples/target
  # Build quietly; show the log only if the build fails.
  if ! { mvn -B -Dstyle.color=never -DskipTests -pl examples -am install &&
    mvn -B -Dstyle.color=never -pl examples dependency:build-classpath -Dmdep.outputFile=target/classpath.txt; } \
    > examples/target/build.log 2>&1; then
    cat examples/target/build.log >&2
    echo "build failed (log: examples/target/build.log)" >&2
    exit 1
  fi
fi
exec java -Dslf4j.internal.verbosity=ERROR -Dconfig.file=conf/application.conf -Dlogback.configurationFile=conf/logback.xml \
  -cp "examples/target/classes:$(cat examples/target/classpath.txt)" "${mains[$name]}" "$@"
