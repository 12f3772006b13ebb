"""Prints the tables and the RESULT line of bench/run.sh plugins: the XLA CPU plugin builds side by side.

Usage: plugins_report.py OUT_DIR DEFAULT_BUILD BUILD...

OUT_DIR holds models-<side>-<round>.txt (ModelsBench's / tools/jax_gpt.py bench's JSON line) for each side (every
build, and jax) and round, and rows.tsv: the other benches' table rows (bench, build, then run.sh's ROW or RATE
line pairing the build's measurement with JAX's of the same round). Per measurement: each side's min / median /
max over the rounds, and each build's median against JAX's.
"""
import glob
import json
import os
import re
import statistics
import sys

# ModelsBench / jax_gpt.py bench fields shown, with whether higher is better.
MODEL_FIELDS = [
    ("decode_s1_tokens_per_s", "decode tokens/s, 1 slot", True),
    ("decode_s8_tokens_per_s", "decode tokens/s, 8 slots", True),
    ("prefill_s1_ms", "prefill 128 tokens, 1 slot (ms)", False),
    ("load_ms", "load weights (ms)", False),
    ("peak_rss_bytes", "peak RSS, 1 slot (MB)", False),
    ("peak_rss_all_bytes", "peak RSS, 8 slots (MB)", False),
]


def model_values(path):
    """{field: value} from the JSON line(s) of one models file (the median of its inner repetitions)."""
    values = {}
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        for field, _, _ in MODEL_FIELDS:
            v = row.get(field)
            if isinstance(v, dict):
                v = v["median"]
            if v is not None:
                values[field] = v / 1e6 if field.endswith("bytes") else v
    return values


def collect_models(out, side):
    return [model_values(p) for p in sorted(glob.glob(os.path.join(out, f"models-{side}-*.txt")))]


def read_rows(out):
    """{bench: {label: {build: [(ours_us, jax_us), ...]}}} from rows.tsv (bench, build, then a ROW line of run.sh)."""
    rows = {}
    path = os.path.join(out, "rows.tsv")
    if not os.path.exists(path):
        return rows
    for line in open(path, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        bench, build, kind, label = f[0], f[1], f[2], f[3]
        if kind == "ROW":
            pair = (float(f[4]), float(f[5]))
        elif kind == "RATE":  # calls per second: higher is better, so keep them as time per call
            pair = (1e6 / float(f[4]), 1e6 / max(float(f[5]), float(f[6])))
            label += " (us per call, from calls/s)"
        else:
            continue
        rows.setdefault(bench, {}).setdefault(label, {}).setdefault(build, []).append(pair)
    return rows


def stat(xs):
    return (min(xs), statistics.median(xs), max(xs)) if xs else None


def fmt(s):
    return "-" if s is None else f"{s[0]:.4g} / {s[1]:.4g} / {s[2]:.4g}"


def main():
    out, default, builds = sys.argv[1], sys.argv[2], sys.argv[3:]
    sides = builds + ["jax"]
    result = {}
    models = {side: collect_models(out, side) for side in sides}
    if models["jax"]:
        print(f"## models: min / median / max over {len(models['jax'])} rounds; build / JAX of the medians (above 1: the build is better)")
        print("| measurement | " + " | ".join(sides) + " | " + " | ".join(f"{b} / JAX" for b in builds) + " |")
        print("|" + "---|" * (1 + len(sides) + len(builds)))
        for key, label, higher in MODEL_FIELDS:
            stats = {side: stat([r[key] for r in models[side] if key in r]) for side in sides}
            ratios = []
            for b in builds:
                if stats[b] is None or stats["jax"] is None:
                    ratios.append("-")
                    continue
                r = stats[b][1] / stats["jax"][1] if higher else stats["jax"][1] / stats[b][1]
                result[("models", key, b)] = r
                ratios.append(f"{r:.2f}")
            print(f"| {label} | " + " | ".join(fmt(stats[s]) for s in sides) + " | " + " | ".join(ratios) + " |")
        print()
    for bench, labels in read_rows(out).items():
        print(f"## {bench}: microseconds, min / median / max over the rounds; JAX / build of the medians (above 1: the build is faster)")
        print("| measurement | " + " | ".join(sides) + " | " + " | ".join(f"JAX / {b}" for b in builds) + " |")
        print("|" + "---|" * (1 + len(sides) + len(builds)))
        for label, per_build in labels.items():
            jax = stat([x for b in builds for _, x in per_build.get(b, [])])
            stats = {b: stat([o for o, _ in per_build.get(b, [])]) for b in builds}
            ratios = ["-" if stats[b] is None else f"{jax[1] / stats[b][1]:.2f}" for b in builds]
            print(f"| {label} | " + " | ".join(fmt(stats[b]) for b in builds) + f" | {fmt(jax)} | " + " | ".join(ratios) + " |")
        print()
    parts = [f"default={default}"]
    for b in builds:
        for key, name in (("decode_s1_tokens_per_s", "b1"), ("decode_s8_tokens_per_s", "b8")):
            if ("models", key, b) in result:
                parts.append(f"{b}_decode_ratio_{name}={result[('models', key, b)]:.2f}")
    print("RESULT plugins " + " ".join(parts))


if __name__ == "__main__":
    main()
