#!/usr/bin/env bash
# The GPU checks of docs/architecture.md ("On a GPU"), for a GPU machine that has JAX for CUDA installed
# (its jax_plugins/xla_cuda13 is the CUDA plugin used) but no JDK, no Maven and no network, and takes a
# small upload (the lent machines here take 64 MiB):
#
#   tools/gpu-check.sh bundle   here, after `mvn -DskipTests install`: writes .gpu/ (about 60 MB, git-ignored
#                               through .git/info/exclude): a jlink'd JRE, the CPU plugin (stripped; the CPU
#                               side of the comparisons), the runtime's classes and test classes, their jars
#                               without OpenBLAS, the JUnit console launcher, and the matmul bench
#   tools/gpu-check.sh run      there, from the repository root: the runtime's tests tagged gpu, then
#                               `MatmulBench gpu` against bench/jax_matmul.py on the same GPU, then the
#                               runtime's other tests on that machine's CPU (the Lapack* and PluginFetcher
#                               classes left out; OpenBLAS does not travel, so the 13 linalg programs of
#                               JaxCompatibilityTest fail there, and so do 3 tests that need the plugin's .pin)
#
# Outputs of `run` go to $OUT (default /tmp/gpu-check). SKIP_BENCH=1 skips the bench, CPU_TEST_S bounds the
# CPU tests (default 300 s), GPU_TEST_CLASSES names the gpu-tagged classes to run (default: all four).
# `CPU_PLUGIN=0 tools/gpu-check.sh bundle` leaves the CPU plugin out (25 MB instead of 60: the tree that travels
# is limited to 64 MiB with the repository); then only GPU-only classes run (PackageGpuTest).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$repo/.gpu"
console_version=1.11.3

make_bundle() {
  cd "$repo"
  grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpu/' >> .git/info/exclude; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$bundle" "$work/app/lib" "$work/app/bench-classes/dev/xlaactors/bench"
  echo "JRE (jlink, stripped)" >&2
  # The modules the runtime's tests use (logback needs java.naming); each one left out saves the upload's space.
  jlink --add-modules java.base,java.naming,jdk.unsupported,java.logging,java.xml \
    --strip-debug --no-header-files --no-man-pages --compress=2 --output "$work/jre"
  strip --strip-unneeded "$work/jre/lib/server/libjvm.so"
  tar -C "$work" -cf - jre | xz -T0 -9 > "$bundle/jre.tar.xz"
  echo "runtime classes and jars" >&2
  mvn -B -q -o -pl runtime dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$work/cp.txt" >/dev/null
  mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1:get \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$console_version" >/dev/null
  tr ':' '\n' < "$work/cp.txt" | grep -v -e openblas -e junit -e opentest4j -e apiguardian -e xla-actors-native \
    | xargs -I{} cp {} "$work/app/lib/"
  cp native/target/xla-actors-native-*.jar "$work/app/lib/"
  cp "$HOME/.m2/repository/org/junit/platform/junit-platform-console-standalone/$console_version/junit-platform-console-standalone-$console_version.jar" "$work/app/lib/"
  cp -r runtime/target/classes "$work/app/classes"
  cp -r runtime/target/test-classes "$work/app/test-classes"
  cp bench/target/classes/dev/xlaactors/bench/{MatmulBench,LatencyProbe}*.class "$work/app/bench-classes/dev/xlaactors/bench/"
  tar -C "$work" -cf - app | xz -T0 -9 > "$bundle/app.tar.xz"
  rm -f "$bundle/xla_cpu_pjrt.so.xz"
  if [ "${CPU_PLUGIN:-1}" != 0 ]; then
    echo "CPU plugin (stripped; minutes)" >&2
    strip --strip-unneeded -o "$work/xla_cpu_pjrt.so" "${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/xla-cpu-pjrt-0.0.1/xla_cpu_pjrt.so"
    xz -T0 -9 -c "$work/xla_cpu_pjrt.so" > "$bundle/xla_cpu_pjrt.so.xz"
  fi
  du -sh "$bundle"
}

run_checks() {
  cd "$repo"
  local out="${OUT:-/tmp/gpu-check}" x=/tmp/gpu-check-unpacked cache=/tmp/gpu-check-cache
  mkdir -p "$out" "$x" "$cache/xla-cpu-pjrt-0.0.1"
  tar -C "$x" -xJf "$bundle/jre.tar.xz"
  tar -C "$x" -xJf "$bundle/app.tar.xz"
  if [ -f "$bundle/xla_cpu_pjrt.so.xz" ]; then
    xz -T0 -dc "$bundle/xla_cpu_pjrt.so.xz" > "$cache/xla-cpu-pjrt-0.0.1/xla_cpu_pjrt.so"
  fi
  (nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; lscpu; uname -a) > "$out/machine.txt" 2>&1 || true
  local py="${PY:-python3}" site plugin libs
  site="$("$py" -c "import site; print(' '.join(site.getsitepackages()))")"
  plugin="${XLA_ACTORS_GPU_PLUGIN:-$(for d in $site; do ls "$d"/jax_plugins/xla_cuda*/xla_cuda_plugin.so 2>/dev/null || true; done | head -1)}"
  libs="$(for d in $site; do ls -d "$d"/nvidia/*/lib "$d"/nvidia/*/*/lib 2>/dev/null || true; done | paste -sd:)"
  echo "CUDA plugin: ${plugin:-none found}" >&2
  export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" XLA_ACTORS_GPU_PLUGIN="$plugin" XLA_ACTORS_CACHE="$cache"
  local java="$x/jre/bin/java" app="$x/app" jars cp
  jars="$(ls "$app"/lib/*.jar | grep -v console | paste -sd:)"
  cp="$app/lib/junit-platform-console-standalone-$console_version.jar:$app/test-classes:$app/classes:$jars"
  local launch=("$java" -Xmx8g -cp "$cp" org.junit.platform.console.ConsoleLauncher execute --disable-banner --disable-ansi-colors)
  for c in ${GPU_TEST_CLASSES:-dev.xlaactors.runtime.PluginsTest dev.xlaactors.graph.SegmentedGpuTest dev.xlaactors.runtime.model.GpuModelTest dev.xlaactors.runtime.model.PackageGpuTest}; do
    # One JVM per class: a crash inside the plugin would end only its own class's run.
    timeout 240 "${launch[@]}" --details=tree --include-tag gpu --select-class "$c" 2>&1 | tee -a "$out/gpu-tests.txt" | grep -v '^\s*$' | tail -20 || true
  done
  if [ "${SKIP_BENCH:-0}" = 0 ]; then
    timeout 120 "$java" -cp "$app/bench-classes:$app/classes:$jars" dev.xlaactors.bench.MatmulBench gpu 2>&1 | tee "$out/matmul-java.txt" | grep -E '^(INFO|BENCH)' || true
    (cd bench && timeout 120 "$py" jax_matmul.py 2>&1 | tee "$out/matmul-jax.txt" | grep -E '^(INFO|BENCH)') || true
  fi
  timeout "${CPU_TEST_S:-300}" "${launch[@]}" --details=testfeed --exclude-tag gpu --select-package dev.xlaactors \
    --exclude-classname '.*(Lapack|PluginFetcher).*' --reports-dir "$out/reports" > "$out/cpu-tests.txt" 2>&1 || true
  grep -E 'tests (successful|failed|aborted|skipped)|:: (FAILED|ABORTED)' "$out/cpu-tests.txt" | head -40
}

case "${1:-}" in
  bundle) make_bundle ;;
  run) run_checks ;;
  *) echo "usage: tools/gpu-check.sh bundle|run" >&2; exit 2 ;;
esac
