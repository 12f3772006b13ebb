"""Prints the table and the RESULT line of bench/run.sh models from the two sides' JSON lines.

    python bench/models_report.py JAVA_JSON JAX_JSON [WEIGHTED_LINE_FILE]

Each JSON file holds one line per repetition of the side (ModelsBench, tools/jax_gpt.py bench); the table
shows min / median / max over all of them. WEIGHTED_LINE_FILE, if given and present, holds the RESULT
line of the 16 MiB-weight program's bench, whose ratio becomes weighted_ratio (else "n/a").
"""
import json
import re
import sys


def lines(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def merged(runs, key):
    # Over repetitions: min of mins, median of medians, max of maxes.
    mins = sorted(r[key]["min"] for r in runs)
    meds = sorted(r[key]["median"] for r in runs)
    maxs = sorted(r[key]["max"] for r in runs)
    return mins[0], meds[len(meds) // 2], maxs[-1]


java, jax = lines(sys.argv[1]), lines(sys.argv[2])
keys = [k for k in java[0] if isinstance(java[0][k], dict)]
print(f"| {'measurement (min / median / max)':<34} | {'xla-actors':<30} | {'JAX':<30} | ours/JAX (median) |")
print(f"|{'-' * 36}|{'-' * 32}|{'-' * 32}|{'-' * 19}|")
med = {}
for k in keys:
    a, b = merged(java, k), merged(jax, k)
    med[k] = (a[1], b[1])
    label = (k.replace("_ms", " (ms)").replace("_tokens_per_s", " (tokens/s)").replace("_s", ", slots ")
             .replace("load", "load weights").replace("prefill", "prefill 128 tokens").replace("decode", "decode + sample"))
    print(f"| {label:<34} | {'%.1f / %.1f / %.1f' % a:<30} | {'%.1f / %.1f / %.1f' % b:<30} | {a[1] / b[1]:>17.2f} |")
weights = java[0]["weights_bytes"]
for key, label in (("peak_rss_bytes", "peak RSS / weights, 1 slot"), ("peak_rss_all_bytes", "peak RSS / weights, all")):
    a, b = max(r[key] for r in java), max(r[key] for r in jax)
    print(f"| {label:<34} | {'%.2f (%.0f MB)' % (a / weights, a / 1e6):<30} | "
          f"{'%.2f (%.0f MB)' % (b / weights, b / 1e6):<30} | {a / b:>17.2f} |")
rss_java = max(r["peak_rss_bytes"] for r in java)
print(f"weights: {weights / 1e6:.1f} MB")
decode = [k for k in keys if k.startswith("decode")]
# decode_ratio: over the slot counts, the lowest of our tokens/s over JAX's (the honest one).
decode_ratio = min(med[k][0] / med[k][1] for k in decode)
weighted = "n/a"
if len(sys.argv) > 3:
    try:
        m = re.search(r"weighted_ratio=([0-9.]+)", open(sys.argv[3]).read())
        weighted = m.group(1) if m else "n/a"
    except OSError:
        pass
print(f"RESULT models weighted_ratio={weighted} decode_ratio={decode_ratio:.2f} "
      f"load_ratio={med['load_ms'][0] / med['load_ms'][1]:.2f} rss_over_weights={rss_java / weights:.2f}")
