#!/usr/bin/env bash
# Formats JaxCompatibilityTest's results as docs/imports.md's Markdown table ("Which JAX exports run").
#
#   mvn -B -q -pl runtime -am test -Dtest=JaxCompatibilityTest -Dsurefire.failIfNoSpecifiedTests=false
#   tools/compat_table.sh [runtime/target/compat-results.tsv]
#
# The input is the TSV the test writes (family, program, expected, result, detail); the output is a
# summary line and one table row per program, in the manifest's order.
set -euo pipefail
results="${1:-$(dirname "$0")/../runtime/target/compat-results.tsv}"
if [ ! -f "$results" ]; then
  echo "no $results: run JaxCompatibilityTest first" >&2
  exit 1
fi
awk -F '\t' '
  function cell(s) { gsub(/\|/, "\\|", s); return s }
  NR == 1 { next }
  {
    n++
    count[$4]++
    if ($4 == "match") {
      result = "match"
    } else if ($4 == "refused") {
      # "imported program <name>: <why>: <what to do>": keep the why.
      why = $5
      sub(/^imported program [^:]*: /, "", why)
      sub(/: .*/, "", why)
      result = "refused: " why
    } else if ($4 ~ /^known-failing/) {
      handler = $5
      sub(/.*No FFI handler registered for /, "", handler)
      sub(/ .*/, "", handler)
      result = "fails: no FFI handler for `" handler "` (LAPACK handlers pending; skipped as known-failing)"
    } else {
      detail = $5
      if (length(detail) > 240) detail = substr(detail, 1, 240) "..."
      result = "**fails**: " detail
    }
    rows[n] = "| " $1 " | `" $2 "` | " cell(result) " |"
  }
  END {
    printf "%d programs: %d match, %d refused as expected, %d fail for want of LAPACK handlers, %d fail otherwise.\n\n",
      n, count["match"], count["refused"], count["known-failing (lapack)"], count["fails"]
    print "| Family | Program | Result |"
    print "|---|---|---|"
    for (i = 1; i <= n; i++) print rows[i]
  }
' "$results"
