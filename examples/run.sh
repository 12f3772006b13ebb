#!/usr/bin/env bash
# Runs an example by name, or any main class on the project's classpath, building the project first if
# a source or pom changed since the last build (the first build fetches the XLA CPU plugin into
# ~/.cache/xla-actors, about a minute). The build stays inside this checkout: the reactor packages the
# modules and the classpath points at their target/ folders, so nothing is installed into ~/.m2.
#
#   examples/run.sh <example> [args...]            quickstart, jax-model, batch-inference, generation, generate, perplexity,
#                                                  cluster, cluster-callbacks, node, serve
#   examples/run.sh --class <main-class> [args...] any class on the classpath (add yours with EXTRA_CLASSPATH)
#   examples/run.sh --classpath                    prints the classpath (after building if needed)
#
# Environment: JAVA_OPTS (JVM options, e.g. JAVA_OPTS='-Dxla-actors.actors.runs.timeout=1m'),
# EXTRA_CLASSPATH (entries put before the project's classes, e.g. your own compiled classes).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
declare -A mains=(
  [quickstart]=dev.xlaactors.examples.Quickstart
  [jax-model]=dev.xlaactors.examples.JaxModel
  [batch-inference]=dev.xlaactors.examples.BatchInference
  [generation]=dev.xlaactors.examples.TextGeneration
  [generate]=dev.xlaactors.examples.GenerateText
  [perplexity]=dev.xlaactors.examples.Perplexity
  [cluster]=dev.xlaactors.examples.ClusterJobs
  [cluster-callbacks]=dev.xlaactors.examples.TwoNodeCallbacks
  [node]=dev.xlaactors.examples.ClusterNode
  [serve]=dev.xlaactors.examples.Serve
)
usage() {
  echo "usage: examples/run.sh <example> [args...] | --class <main-class> [args...] | --classpath" >&2
  echo "examples: ${!mains[*]}; JVM options go in JAVA_OPTS, your own classes in EXTRA_CLASSPATH" >&2
  exit 2
}
name="${1:-}"
main=""
case "$name" in
  --class) [ -n "${2:-}" ] || usage; main="$2"; shift 2 ;;
  --classpath) shift ;;
  *) { [ -n "$name" ] && [ -n "${mains[$name]:-}" ]; } || usage; main="${mains[$name]}"; shift ;;
esac

stamp=examples/target/.built
classpath_file=examples/target/classpath.txt
if [ ! -f "$stamp" ] || [ ! -f "$classpath_file" ] ||
  [ -n "$(find pom.xml native runtime actors lm cluster http examples -newer "$stamp" -type f -not -path '*/target/*' \
    \( -name '*.java' -o -name '*.cc' -o -name '*.h' -o -name '*.sh' -o -name 'pom.xml' -o -name '*.conf' -o -name '*.properties' \) \
    -print -quit)" ]; then
  mkdir -p examples/target
  # Build in the reactor (package, not install: ~/.m2 may be shared). Maven runs quietly (.mvn/maven.config),
  # so what it prints is the build's progress: fetching the plugin, compiling the native bridge.
  echo "building xla-actors (log: examples/target/build.log): fetching the XLA CPU plugin if missing," \
    "compiling the native bridge if it changed, compiling the Java modules" >&2
  started=$SECONDS
  if ! mvn -B -Dstyle.color=never -DskipTests -pl examples -am package dependency:build-classpath \
    -Dmdep.outputFile=target/classpath.txt 2>&1 | tee examples/target/build.log | sed -u -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d' -e 's/^/  /' >&2; then
    echo "build failed (log: examples/target/build.log)" >&2
    exit 1
  fi
  echo "built in $((SECONDS - started)) s" >&2
  touch "$stamp" # rewritten on every build, so an unchanged tree is not built again
fi
classpath="${EXTRA_CLASSPATH:+$EXTRA_CLASSPATH:}$root/examples/target/classes:$(cat "$classpath_file")"
if [ -z "$main" ]; then
  echo "$classpath"
  exit 0
fi
echo "starting $main" >&2
# shellcheck disable=SC2086 # JAVA_OPTS holds several options on purpose
exec java -Dconfig.file=conf/application.conf -Dlogback.configurationFile=conf/logback.xml ${JAVA_OPTS:-} \
  -cp "$classpath" "$main" "$@"
