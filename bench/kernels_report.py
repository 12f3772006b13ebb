"""Prints bench/run.sh kernels' tables and RESULT line from its raw files.

    kernels_report.py DECODE GEMV BANDWIDTH

DECODE: lines "<variant> <ModelsBench JSON>" (variant xla-f32, native-f32, xla-int8, native-int8), one per
round and variant; GEMV: KernelsBench's INFO and GEMV lines; BANDWIDTH: ReadBandwidthProbe's lines.
"""
import json
import statistics
import sys

VARIANTS = ["xla-f32", "native-f32", "xla-int8", "native-int8"]


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
    print("GEMV y = x[1,K] . W, W resident (KernelsBench): us min / median / max over the rounds, GB/s at the median")
    print(f"{'shape KxN':<12}{'variant':<12}{'us':>28}{'GB/s':>8}{'of bw':>8}")
    fractions = {}
    for line in open(gemv_path):
        if line.startswith("INFO"):
            print(line.strip())
        if not line.startswith("GEMV"):
            continue
        f = dict(kv.split("=", 1) for kv in line.split()[1:])
        gbps = float(f["gbps_median"])
        fractions.setdefault(f["variant"], []).append(gbps / bw)
        us = f"{float(f['us_min']):8.1f} / {float(f['us_median']):8.1f} / {float(f['us_max']):8.1f}"
        print(f"{f['shape']:<12}{f['variant']:<12}{us:>28}{gbps:8.2f}{gbps / bw:8.2f}")

    def ratio(a, b):
        return med.get(a, float("nan")) / med.get(b, float("nan"))

    print()
    print("RESULT kernels decode1_native_over_xla=%.3f decode8_native_over_xla=%.3f decode1_int8_over_xla_f32=%.3f "
          "decode8_int8_over_xla_f32=%.3f gemv_native_bw_fraction=%.2f gemv_xla_bw_fraction=%.2f" % (
              ratio(("native-f32", 1), ("xla-f32", 1)), ratio(("native-f32", 8), ("xla-f32", 8)),
              ratio(("native-int8", 1), ("xla-f32", 1)), ratio(("native-int8", 8), ("xla-f32", 8)),
              statistics.median(fractions.get("native_f32", [float("nan")])),
              statistics.median(fractions.get("xla_f32", [float("nan")]))))


if __name__ == "__main__":
    main()
