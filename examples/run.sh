#!/usr/bin/env bash
# Runs an example by name, building the project first if needed (the first build fetches the XLA
# CPU plugin into ~/.cache/xla-actors). Usage: examples/run.sh <example> [args...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
declare -A mains=(
  [quickstart]=dev.xlaactors.examples.Quickstart
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
  mvn -q -B -Dstyle.color=never install -DskipTests
  mvn -q -B -Dstyle.color=never -pl examples dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
fi
exec java -Dconfig.file=conf/application.conf -Dlogback.configurationFile=conf/logback.xml \
  -cp "examples/target/classes:$(cat examples/target/classpath.txt)" "${mains[$name]}" "$@"
