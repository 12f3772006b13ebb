"""Prints bench/run.sh kernels' tables and RESULT line from its raw files.

    kernels_report.py DECODE GEMV BANDWIDTH [PEERS]

DECODE: lines "<variant> <ModelsBench JSON>" (variant xla-f32, native-f32, xla-int8, native-int8), one per
round and variant; GEMV: KernelsBench's INFO and GEMV lines; BANDWIDTH: ReadBandwidthProbe's lines; PEERS:
bench/gemv_peers.cc's INFO and GEMV lines (ggml and oneDNN on the same shapes and rows), when it ran.
"""
import json
import os
import statistics
import sys

VARIANTS = ["xla-f32", "native-f32", "xla-int8", "native-int8"]
# The GEMV grid's columns: f32 weights, then int8 weights (ours: Q8_0-style, f32 activations; ggml_q8: Q8_0 with
# x quantised to Q8_0 by ggml; onednn_s8: s8 weights, f32 activations).
GEMV_F32 = ["xla_f32", "native_f32", "ggml_f32", "onednn_f32"]
GEMV_INT8 = ["xla_q8", "native_q8", "ggml_q8", "onednn_s8"]


def mmm(xs):
    xs = sorted(xs)
    return xs[0], statistics.median(xs), xs[-1]


def main():
    decode_path, gemv_path, bandwidth_path = sys.argv[1:4]
    decode = {v: {1: [], 8: []} for v in VARIANTS}
    for line in open(decode_path):
        variant, _, body = line.partition(" ")
        if variant not in decode or not body.strip().startswith("{"):
            continue
        record = json.loads(body)
        for slots in (1, 8):
            key = f"decode_s{slots}_tokens_per_s"
            if key in record:
                decode[variant][slots].append(record[key]["median"])
    bandwidths = [float(f.split("=")[1]) for line in open(bandwidth_path) for f in line.split()
                  if f.startswith("read_gb_per_s=")]
    bw = statistics.median(bandwidths) if bandwidths else float("nan")

    print("decode tokens/s, 124 M GPT-2 (min / median / max over the rounds; each round's figure is ModelsBench's median)")
    print(f"{'package':<14}{'1 sequence':>26}{'8 sequences':>26}")
    med = {}
    for v in VARIANTS:
        cells = []
        for slots in (1, 8):
            xs = decode[v][slots]
            if xs:
                lo, mid, hi = mmm(xs)
                med[v, slots] = mid
                cells.append(f"{lo:7.1f} / {mid:7.1f} / {hi:7.1f}")
            else:
                cells.append("missing")
        print(f"{v:<14}{cells[0]:>26}{cells[1]:>26}")
    print()
    print(f"read bandwidth (ReadBandwidthProbe, best pass per round): median {bw:.2f} GB/s over {len(bandwidths)} round(s)")
    print()
    gemv = {}  # (shape, rows, variant) -> the GEMV line's fields
    info = []
    impls = set()
    for path in [gemv_path] + [p for p in sys.argv[4:5] if os.path.exists(p)]:
        for line in open(path):
            if line.startswith("INFO onednn shape=") and " refused" not in line:
                # One per shape and rows; the report keeps which implementations oneDNN picked.
                impls.update(kv.split("=", 1)[1] for kv in line.split() if kv.startswith("impl="))
            elif line.startswith("INFO") and " check " not in line:
                info.append(line.strip())
            if line.startswith("GEMV"):
                f = dict(kv.split("=", 1) for kv in line.split()[1:])
                gemv[f["shape"], int(f.get("rows", "1")), f["variant"]] = f
    print("GEMV y = x[M,K] . W, W resident (KernelsBench; ggml_* and onednn_* from bench/gemv_peers.cc):")
    print("us min / median / max over the rounds, GB/s of weights read at the median, and that against the bandwidth")
    for line in info:
        print(line)
    if impls:
        print("INFO onednn implementations picked: " + ", ".join(sorted(impls)))
    print(f"{'shape KxN':<12}{'rows':>5} {'variant':<12}{'us':>34}{'GB/s':>8}{'of bw':>8}")
    for (shape, rows, variant), f in gemv.items():
        gbps = float(f["gbps_median"])
        us = f"{float(f['us_min']):9.1f} / {float(f['us_median']):9.1f} / {float(f['us_max']):9.1f}"
        print(f"{shape:<12}{rows:>5} {variant:<12}{us:>34}{gbps:8.2f}{gbps / bw:8.2f}")
    print()
    print("median us per call (fraction of the read bandwidth); '-' where a variant did not run")
    columns = GEMV_F32 + GEMV_INT8
    print(f"{'shape KxN':<12}{'rows':>5}" + "".join(f"{c:>19}" for c in columns))
    keys = sorted({(shape, rows) for shape, rows, _ in gemv}, key=lambda k: (k[0] != "768x2304", k[0], k[1]))
    fastest = []
    for shape, rows in keys:
        cells = []
        for c in columns:
            f = gemv.get((shape, rows, c))
            cells.append(f"{float(f['us_median']):.1f} ({float(f['gbps_median']) / bw:.2f})" if f else "-")
        print(f"{shape:<12}{rows:>5}" + "".join(f"{c:>19}" for c in cells))
        for family, names in (("f32 weights", GEMV_F32), ("int8 weights", GEMV_INT8)):
            ran = [(float(gemv[shape, rows, c]["us_median"]), c) for c in names if (shape, rows, c) in gemv]
            if ran:
                us, c = min(ran)
                gbps = float(gemv[shape, rows, c]["gbps_median"])
                fastest.append(f"{shape} rows={rows} {family}: fastest {c}, {us:.1f} us, {gbps:.2f} GB/s = "
                               f"{gbps / bw:.2f} of the read bandwidth")
    print("A fraction above 1 is no miracle: a layer's W (7-9 MB) called again and again stays in the last-level cache,"
          " which the bandwidth probe's 1 GiB cannot; a decode step reads every layer's W once (~500 MB for GPT-2"
          " 124 M), so the 154 MB head is the shape that says what a kernel does from memory. The bandwidth is the probe's"
          " reading in this run: on a shared machine it can read less than the kernels get later.")
    print()
    for line in fastest:
        print(line)

    def ratio(a, b):
        return med.get(a, float("nan")) / med.get(b, float("nan"))

    def head_ratio(ours, peer):
        # Our median us over the peer's on the 768x50257 head at one row: above 1, the peer is faster.
        a, b = gemv.get(("768x50257", 1, ours)), gemv.get(("768x50257", 1, peer))
        return float(a["us_median"]) / float(b["us_median"]) if a and b else float("nan")

    def bw_fraction(variant):
        # Over the shapes at one row, as before rows were measured.
        xs = [float(f["gbps_median"]) / bw for (_, rows, v), f in gemv.items() if rows == 1 and v == variant]
        return statistics.median(xs) if xs else float("nan")

    print()
    print("RESULT kernels decode1_native_over_xla=%.3f decode8_native_over_xla=%.3f decode1_int8_over_xla_f32=%.3f "
          "decode8_int8_over_xla_f32=%.3f gemv_native_bw_fraction=%.2f gemv_xla_bw_fraction=%.2f "
          "ggml_f32_vs_native_f32=%.3f ggml_q8_vs_native_q8=%.3f onednn_f32_vs_native_f32=%.3f "
          "onednn_s8_vs_native_q8=%.3f" % (
              ratio(("native-f32", 1), ("xla-f32", 1)), ratio(("native-f32", 8), ("xla-f32", 8)),
              ratio(("native-int8", 1), ("xla-f32", 1)), ratio(("native-int8", 8), ("xla-f32", 8)),
              bw_fraction("native_f32"), bw_fraction("xla_f32"),
              head_ratio("native_f32", "ggml_f32"), head_ratio("native_q8", "ggml_q8"),
              head_ratio("native_f32", "onednn_f32"), head_ratio("native_q8", "onednn_s8")))


if __name__ == "__main__":
    main()
