#!/usr/bin/env bash
# Side-by-side benchmarks of xla-actors (Java) against JAX, on this machine, in one run.
# See bench/README.md for what each mode measures and how to read its output.
#
#   bench/run.sh execute     tiny-program execute latency and host<->device round trips
#
# Environment: JAX_PYTHON  a python with jax installed (default: the venv of tools/jax-env.sh)
#              JAVA_OPTS   extra JVM options for the Java harness
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out_dir="$repo/bench/out"  # git-ignored; keeps the raw lines of the last run
classpath_file="$repo/bench/target/classpath.txt"

usage() {
  cat >&2 <<'USAGE'
usage: bench/run.sh MODE

modes:
  execute   time to execute a tiny compiled program (f32[8] add), with pre-uploaded buffers and
            through upload+execute+download, and 1 MiB / 64 MiB host->device->host round trips;
            Java (xla-actors) and JAX side by side. Last line:
            RESULT execute java_us=<median> jax_us=<median> ratio=<java/jax>
USAGE
}

# Builds the modules (once, or again when a source or pom changed since the last build) and records
# the bench module's runtime classpath; the stamp is the classpath file.
ensure_java_built() {
  local changed=""
  if [ -f "$classpath_file" ] && [ -d bench/target/classes/dev/xlaactors/bench ]; then
    changed="$(find pom.xml native runtime bench -newer "$classpath_file" -type f \
      -not -path '*/target/*' -not -path bench/run.sh \( -name '*.java' -o -name '*.cc' -o -name '*.h' -o -name '*.sh' \
      -o -name 'pom.xml' -o -name '*.conf' -o -name '*.properties' \) -print -quit)"
  fi
  if [ ! -f "$classpath_file" ] || [ -n "$changed" ]; then
    echo "building (mvn install -DskipTests)..." >&2
    mvn -q -B install -DskipTests >&2
    mvn -q -B -pl bench dependency:build-classpath -Dmdep.outputFile="$classpath_file" >&2
  fi
}

java_bench() {
  # A bounded heap bounds the direct memory the 64 MiB round trips churn through (MaxDirectMemorySize
  # defaults to the heap size), so the run behaves the same on big and small machines.
  # shellcheck disable=SC2086
  java -Xms1g -Xmx1g ${JAVA_OPTS:-} -cp "bench/target/classes:$(cat "$classpath_file")" "$@"
}

jax_python() {
  if [ -n "${JAX_PYTHON:-}" ]; then
    echo "$JAX_PYTHON"
  else
    bash "$repo/tools/jax-env.sh"
  fi
}

machine_summary() {
  local cpu
  cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
  echo "machine: ${cpu:-unknown cpu}, $(nproc) cores online, $(uname -sr)"
}

# Merges the BENCH lines of both sides into a table. Each row names a java measurement and a jax
# measurement; they differ only where JAX has a variant worth showing (see README).
print_table() {
  local java_file="$1" jax_file="$2"
  awk '
    function field(line, key,   n, i, parts, kv) {
      n = split(line, parts, " ")
      for (i = 1; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
      return ""
    }
    /^BENCH / { side = field($0, "side"); name = field($0, "name")
                median[side, name] = field($0, "median_us"); p99[side, name] = field($0, "p99_us")
                gbps[side, name] = field($0, "gbps"); seen[side, name] = 1 }
    function row(label, jname, xname,   ratio, jg, xg) {
      if (!((("java", jname) in seen) && (("jax", xname) in seen))) { missing = missing " " label; return }
      ratio = median["java", jname] / median["jax", xname]
      jg = gbps["java", jname] + 0 > 0 ? sprintf("%.2f", gbps["java", jname]) : "-"
      xg = gbps["jax", xname] + 0 > 0 ? sprintf("%.2f", gbps["jax", xname]) : "-"
      printf "%-38s %12.1f %12.1f %8.2f %12.1f %12.1f %8s %8s\n", label, median["java", jname], \
        median["jax", xname], ratio, p99["java", jname], p99["jax", xname], jg, xg
    }
    END {
      printf "%-38s %12s %12s %8s %12s %12s %8s %8s\n", "measurement", "java med us", "jax med us", \
        "java/jax", "java p99 us", "jax p99 us", "java GB/s", "jax GB/s"
      row("execute f32[8] add (device buffers)", "execute_f32x8", "execute_f32x8")
      row("run f32[8] add (upload+exec+download)", "run_f32x8", "run_f32x8")
      row("round trip 1 MiB", "roundtrip_1MiB", "roundtrip_1MiB")
      row("round trip 1 MiB (jax copies out)", "roundtrip_1MiB", "roundtrip_1MiB_copyout")
      row("round trip 1 MiB (java reuses host buf)", "roundtrip_1MiB_reuse", "roundtrip_1MiB_copyout")
      row("round trip 64 MiB", "roundtrip_64MiB", "roundtrip_64MiB")
      row("round trip 64 MiB (jax copies out)", "roundtrip_64MiB", "roundtrip_64MiB_copyout")
      row("round trip 64 MiB (java reuses host buf)", "roundtrip_64MiB_reuse", "roundtrip_64MiB_copyout")
      if (missing != "") { print "missing measurements:" missing > "/dev/stderr"; exit 1 }
    }' "$java_file" "$jax_file"
}

run_execute() {
  ensure_java_built
  local python
  python="$(jax_python)"
  mkdir -p "$out_dir"
  local java_out="$out_dir/execute-java.txt" jax_out="$out_dir/execute-jax.txt"
  # One side at a time: running them together would make each compete with the other for cores.
  echo "running Java harness (dev.xlaactors.bench.ExecuteBench)..." >&2
  java_bench dev.xlaactors.bench.ExecuteBench > "$java_out"
  echo "running JAX harness (bench/jax_execute.py)..." >&2
  "$python" "$repo/bench/jax_execute.py" > "$jax_out"

  machine_summary
  grep -h '^INFO ' "$java_out" "$jax_out"
  echo
  print_table "$java_out" "$jax_out"
  echo
  awk '
    /^BENCH / && /name=execute_f32x8 / {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      median[f["side"]] = f["median_us"]
    }
    END {
      if (!("java" in median) || !("jax" in median)) { print "no execute_f32x8 result" > "/dev/stderr"; exit 1 }
      printf "RESULT execute java_us=%.3f jax_us=%.3f ratio=%.3f\n", median["java"], median["jax"], median["java"] / median["jax"]
    }' "$java_out" "$jax_out"
}

case "${1:-}" in
  execute) run_execute ;;
  *) usage; exit 2 ;;
esac
