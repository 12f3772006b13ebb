"""Prints the tables and the RESULT line of bench/run.sh models from the two sides' JSON lines.

    python bench/models_report.py JAVA_JSON JAX_JSON [WEIGHTED_LINE_FILE] [--package DIR] [--bandwidth FILE]

Each JSON file holds one line per repetition of the side (ModelsBench, tools/jax_gpt.py bench); the table
shows min / median / max over all of them. WEIGHTED_LINE_FILE, if given and present, holds the RESULT
line of the 16 MiB-weight program's bench, whose ratio becomes weighted_ratio (else "n/a").

--package: the model package both sides ran; the bytes a decode step reads are computed from it (every
weight once, from the safetensors header, plus the whole KV cache of the step's slots, from the shape of
its slot_cache program's output: decode_slots attends over all the context positions of every slot, masked,
so it reads them all). --bandwidth: the BANDWIDTH lines of bench ReadBandwidthProbe (one per round); the
best of them is the limit of the roofline columns. Without them the roofline is "n/a".
"""
import argparse
import json
import re
import struct


def lines(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def merged(runs, key):
    # Over repetitions: min of mins, median of medians, max of maxes.
    mins = sorted(r[key]["min"] for r in runs)
    meds = sorted(r[key]["median"] for r in runs)
    maxs = sorted(r[key]["max"] for r in runs)
    return mins[0], meds[len(meds) // 2], maxs[-1]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def weight_tensor_bytes(package):
    """The bytes of every tensor of the package's safetensors file(s), from their headers (not the padding)."""
    manifest = json.load(open(f"{package}/xla-model.json"))
    total = 0
    with open(f"{package}/{manifest['weights']['file']}", "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    for name, t in header.items():
        if name != "__metadata__":
            total += t["data_offsets"][1] - t["data_offsets"][0]
    return total, manifest


def cache_bytes(package, manifest, slots):
    """The bytes of the slot cache of `slots` slots: its slot_cache program's output shape (JAX's export)."""
    from jax import export
    import numpy as np

    prog = next(p for p in manifest["programs"] if p["role"] == "slot_cache" and p.get("slots") == slots)
    aval = export.deserialize(bytearray(open(f"{package}/{prog['file']}", "rb").read())).out_avals[0]
    return int(np.prod(aval.shape)) * np.dtype(aval.dtype).itemsize, tuple(aval.shape)


ap = argparse.ArgumentParser()
ap.add_argument("java")
ap.add_argument("jax")
ap.add_argument("weighted", nargs="?")
ap.add_argument("--package")
ap.add_argument("--bandwidth")
a = ap.parse_args()

java, jax = lines(a.java), lines(a.jax)
keys = [k for k in java[0] if isinstance(java[0][k], dict) and "median" in java[0][k]]
print(f"| {'measurement (min / median / max)':<34} | {'xla-actors':<30} | {'JAX':<30} | ours/JAX (median) |")
print(f"|{'-' * 36}|{'-' * 32}|{'-' * 32}|{'-' * 19}|")
med = {}
for k in keys:
    x, y = merged(java, k), merged(jax, k)
    med[k] = (x[1], y[1])
    label = (k.replace("_ms", " (ms)").replace("_tokens_per_s", " (tokens/s)").replace("_s", ", slots ")
             .replace("load", "load weights").replace("prefill", "prefill 128 tokens").replace("decode", "decode + sample"))
    print(f"| {label:<34} | {'%.1f / %.1f / %.1f' % x:<30} | {'%.1f / %.1f / %.1f' % y:<30} | {x[1] / y[1]:>17.2f} |")
weights = java[0]["weights_bytes"]
decode = [k for k in keys if k.startswith("decode")]
slot_counts = sorted(int(re.match(r"decode_s(\d+)_", k).group(1)) for k in decode)
rss = {}  # slots -> (ours, JAX): the peak (VmHWM) up to that slot count's decode, the highest over the rounds
for s in slot_counts:
    key = f"peak_rss_s{s}_bytes"
    if all(key in r for r in java + jax):
        rss[s] = (max(r[key] for r in java), max(r[key] for r in jax))
    elif s == slot_counts[0]:  # lines of before the per-slot keys
        rss[s] = (max(r["peak_rss_bytes"] for r in java), max(r["peak_rss_bytes"] for r in jax))
    else:
        rss[s] = (max(r["peak_rss_all_bytes"] for r in java), max(r["peak_rss_all_bytes"] for r in jax))
for s, (x, y) in rss.items():
    label = f"peak RSS / weights, {s} slot{'s' if s > 1 else ''}"
    print(f"| {label:<34} | {'%.2f (%.0f MB)' % (x / weights, x / 1e6):<30} | "
          f"{'%.2f (%.0f MB)' % (y / weights, y / 1e6):<30} | {x / y:>17.2f} |")
plugin = java[0].get("plugin", "unknown")
print(f"weights: {weights / 1e6:.1f} MB; plugin (Java side): {plugin}, PJRT C API {java[0].get('plugin_api', '?')}")

# ---- roofline: the bytes a decode step reads, the bandwidth that achieves, its fraction of the measured limit
roofline = {}
bandwidth = []
if a.bandwidth:
    try:
        for l in open(a.bandwidth):
            m = re.search(r"read_gb_per_s=([0-9.]+)", l)
            if l.startswith("BANDWIDTH") and m:
                bandwidth.append(float(m.group(1)) * 1e9)
    except OSError:
        pass
if a.package and bandwidth:
    tensor_bytes, manifest = weight_tensor_bytes(a.package)
    limit = max(bandwidth)
    print()
    print(f"roofline: read bandwidth {limit / 1e9:.1f} GB/s (best of {len(bandwidth)} probes, the median of their bests "
          f"{median(bandwidth) / 1e9:.1f}; bench ReadBandwidthProbe: one thread per core, 1 GiB, best of 10 passes)")
    print("| decode row | bytes a step reads (weights + KV cache) | steps/s ours | steps/s JAX | GB/s ours | GB/s JAX "
          "| of limit, ours | of limit, JAX |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for s in slot_counts:
        kv, shape = cache_bytes(a.package, manifest, s)
        step = tensor_bytes + kv
        ours, theirs = (t / s for t in med[f"decode_s{s}_tokens_per_s"])
        roofline[s] = (step * ours / limit, step * theirs / limit)
        print(f"| {s} slot{'s' if s > 1 else ' '} | {step / 1e6:.0f} MB ({tensor_bytes / 1e6:.0f} + {kv / 1e6:.0f}, cache "
              f"f32{list(shape)}) | {ours:.2f} | {theirs:.2f} | {step * ours / 1e9:.2f} | {step * theirs / 1e9:.2f} "
              f"| {roofline[s][0]:.2f} | {roofline[s][1]:.2f} |")

# ---- our resident memory at points of the run, and the fixed overhead itemised from it
points = {}
for r in java:
    for p in r.get("memory", []):
        points.setdefault(p["point"], []).append(p)
if points:
    MB = 1e6
    fields = ("rss", "peak", "anon", "plugin", "weights", "other_files", "heap_committed", "non_heap_committed")
    at = {name: {f: median([p[f] for p in ps]) for f in fields + ("threads",)} for name, ps in points.items()}
    print()
    print("xla-actors' resident memory at points of ModelsBench (MB, medians over the rounds; /proc/self/smaps Rss by "
          "mapping, heap and non-heap committed from the JVM's memory pools)")
    print("| point | RSS | peak | anon | plugin .so | weights file | other files | heap committed | non-heap committed | threads |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, v in at.items():
        print(f"| {name} | " + " | ".join(f"{v[f] / MB:.0f}" for f in fields) + f" | {v['threads']} |")
    s1 = slot_counts[0]
    need = ("jvm", "client", "loaded", f"cache_s{s1}", f"decoded_s{s1}")
    if all(n in at for n in need):
        jvm, client, loaded, cache, decoded = (at[n] for n in need)
        prefilled = at.get(f"prefilled_s{s1}", cache)  # lines of before that point: all in the decode row
        peak = rss[s1][0]
        items = [
            ("JVM at start (heap %.0f MB committed, non-heap %.0f MB, JDK files %.0f MB)"
             % (jvm["heap_committed"] / MB, jvm["non_heap_committed"] / MB, jvm["other_files"] / MB), jvm["rss"]),
            ("plugin code and data (the .so's resident pages)", client["plugin"]),
            ("actor system, PJRT client, callback runtime (RSS growth, less the plugin)",
             client["rss"] - jvm["rss"] - client["plugin"]),
            ("programs compiled, small weights copied, load timing's leftovers (anon growth over the load)",
             loaded["anon"] - client["anon"]),
            (f"KV cache, {s1} slot (anon growth when the decoder is made)", cache["anon"] - loaded["anon"]),
            ("weights: the mapped safetensors, resident once decoding has read them (uploaded in place)",
             decoded["weights"]),
            (f"the first prefill at {s1} slot: anon growth (340 MB more with XNNPACK on the prefill's matmuls, its packed"
             " copy of the blocks' matrices: bench/README.md)",
             prefilled["anon"] - cache["anon"]),
            (f"decode at {s1} slot and the other prefills: anon growth (step temporaries)", decoded["anon"] - prefilled["anon"]),
            ("rest: JVM heap and libraries touched later, threads (peak less the above)", None),
        ]
        known = sum(v for _, v in items if v is not None)
        items[-1] = (items[-1][0], peak - known)
        print()
        print(f"xla-actors' peak RSS at {s1} slot itemised ({peak / MB:.0f} MB; weights {weights / MB:.0f} MB):")
        for label, v in items:
            print(f"  {v / MB:8.0f} MB  {label}")
        twice = decoded["anon"] - cache["anon"]
        print(f"  kept twice? after decoding, the weights file is {decoded['weights'] / MB:.0f} MB resident and anon memory "
              f"grew {twice / MB:.0f} MB over prefill and decode ({twice / weights:.0%} of the weights' bytes), "
              f"{(prefilled['anon'] - cache['anon']) / MB:.0f} MB of it at the first prefill (with XNNPACK on a program's "
              "matmuls, xla-cpu-pjrt keeps a packed copy of their weights per program: bench/README.md)")

# ---- the RESULT line
ratios = {s: med[f"decode_s{s}_tokens_per_s"][0] / med[f"decode_s{s}_tokens_per_s"][1] for s in slot_counts}
decode_ratio = min(ratios.values())  # the lowest of the slot counts: the honest one, for older readers
weighted = "n/a"
if a.weighted:
    try:
        m = re.search(r"weighted_ratio=([0-9.]+)", open(a.weighted).read())
        weighted = m.group(1) if m else "n/a"
    except OSError:
        pass
b1, b8 = slot_counts[0], slot_counts[-1]
print(f"RESULT models weighted_ratio={weighted} decode_ratio={decode_ratio:.2f} decode_ratio_b{b1}={ratios[b1]:.2f} "
      f"decode_ratio_b{b8}={ratios[b8]:.2f} roofline_b{b1}={'%.2f' % roofline[b1][0] if b1 in roofline else 'n/a'} "
      f"load_ratio={med['load_ms'][0] / med['load_ms'][1]:.2f} rss_ratio_b{b1}={rss[b1][0] / rss[b1][1]:.2f} "
      f"rss_ratio_b{b8}={rss[b8][0] / rss[b8][1]:.2f} plugin={plugin}")
