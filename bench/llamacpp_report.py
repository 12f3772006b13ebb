"""bench/run.sh llamacpp's bookkeeping: turns each side's raw output into measure lines, then prints the
tables (min / median / max over the rounds) and the RESULT line. See bench/README.md, section llamacpp.

    llamacpp_report.py ours MEASURES MODEL VARIANT JSON                  ModelsBench's JSON line (one round)
    llamacpp_report.py llamacpp MEASURES MODEL VARIANT JSONL PEAK_KB     llama-batched-bench --output-format jsonl
    llamacpp_report.py guidellm MEASURES MODEL SIDE PROFILE REPORT_JSON  guidellm benchmark's --output-path file
    llamacpp_report.py report MEASURES NA_FILE                           tables, then RESULT llamacpp ...

MEASURES is a tab-separated file of `model side variant metric value` lines (side: ours | llamacpp); NA_FILE
holds `field<TAB>why` lines for RESULT figures our side cannot produce yet.
"""
import json
import statistics
import sys

# RESULT field -> (model, metric, our variant, llama.cpp's variant); the ratio is ours / llama.cpp's,
# except rss where lower is better for both and the ratio is still ours / llama.cpp's. rss is one sequence
# on each side with one sequence's cache of the same context: llama.cpp's one-sequence run (-c the context)
# against our package of one slot (the 8-slot package holds eight sequences' caches: its row is shown too).
# The _bf16 fields pair llama.cpp's BF16 GGUF with our --dtype bf16 package (the same bf16 weights; ours multiply
# by them in f32, llama.cpp's products round the activations to bf16 too). The _q8 fields pair llama.cpp's Q8_0
# with our w8a8 package, the same arithmetic (int8 weights by blocks of 32, each product's activations quantised
# the same way); the weight-only int8 package's rows are in the tables.
RESULT_FIELDS = [
    ("decode_b1", "gpt2", "decode_b1", "f32", "f32"),
    ("decode_b8", "gpt2", "decode_b8", "f32", "f32"),
    ("decode_b1_q8", "gpt2", "decode_b1", "w8a8", "q8_0"),
    ("decode_b8_q8", "gpt2", "decode_b8", "w8a8", "q8_0"),
    ("prefill", "gpt2", "prefill_128", "f32", "f32"),
    ("prefill_2k", "llama", "prefill_2000", "f32", "f32"),
    ("rss", "gpt2", "peak_rss_mb", "f32-1slot", "f32"),
    ("serve_sync", "gpt2", "serve_sync_output_tps", "f32", "f32"),
    ("serve_c8", "gpt2", "serve_c8_output_tps", "f32", "f32"),
    # bf16 weights on both sides (ours --dtype bf16, llama.cpp's BF16 GGUF): what most checkpoints ship in.
    ("decode_b1_bf16", "gpt2", "decode_b1", "bf16", "bf16"),
    ("decode_b8_bf16", "gpt2", "decode_b8", "bf16", "bf16"),
    ("prefill_bf16", "gpt2", "prefill_128", "bf16", "bf16"),
    ("llama_decode_b1", "llama", "decode_b1", "f32", "f32"),
    ("llama_decode_b8", "llama", "decode_b8", "f32", "f32"),
    ("llama_prefill", "llama", "prefill_128", "f32", "f32"),
    ("llama_rss", "llama", "peak_rss_mb", "f32", "f32"),
]
UNITS = {"decode_b1": "tok/s", "decode_b8": "tok/s (8 seqs)", "prefill_128": "tok/s", "prefill_2000": "tok/s",
         "peak_rss_mb": "MB", "serve_sync_output_tps": "out tok/s", "serve_c8_output_tps": "out tok/s",
         "serve_sync_ttft_ms": "ms", "serve_c8_ttft_ms": "ms", "serve_sync_itl_ms": "ms", "serve_c8_itl_ms": "ms",
         "serve_sync_cached_tokens": "tokens", "serve_c8_cached_tokens": "tokens"}


def append(path, model, side, variant, metric, value):
    with open(path, "a") as f:
        f.write(f"{model}\t{side}\t{variant}\t{metric}\t{value:.6g}\n")


def ours(measures, model, variant, path):
    """ModelsBench's medians inside one round (it repeats each measurement after a warm-up)."""
    with open(path) as f:
        j = json.loads(f.read().strip().splitlines()[-1])
    length = int(j["prompt_tokens"])
    # One prompt into slot 0 of the smallest slot count the package has (a package that prefills by chunks
    # has one cache of max(--slots) sequences, so its only count is 8).
    prefill = sorted((int(k[len("prefill_s"):-len("_ms")]), v) for k, v in j.items()
                     if k.startswith("prefill_s") and k.endswith("_ms"))
    append(measures, model, "ours", variant, f"prefill_{length}", length / (prefill[0][1]["median"] / 1e3))
    for slots in (1, 8):
        key = f"decode_s{slots}_tokens_per_s"
        if key in j:
            append(measures, model, "ours", variant, f"decode_b{slots}", j[key]["median"])
    if "decode_s1_tokens_per_s" in j:  # the peak of load + one sequence; with 8 slots only, not comparable
        append(measures, model, "ours", variant, "peak_rss_mb", j["peak_rss_bytes"] / 1e6)
    else:
        print(f"ours, {model}: the package has no 1-slot decoder (slot counts: {[c for c, _ in prefill]}): "
              "ModelsBench gives no decode_b1 or one-sequence peak RSS for it", file=sys.stderr)
    if "prefill_long_ms" in j:
        n = int(j["prefill_long_tokens"])
        append(measures, model, "ours", variant, f"prefill_{n}", n / (j["prefill_long_ms"]["median"] / 1e3))
    elif "prefill_long_refused" in j:
        print(f"ours, {model}: the {j['prefill_long_tokens']}-token prompt was refused: {j['prefill_long_refused']}",
              file=sys.stderr)


def llamacpp(measures, model, variant, path, peak_kb):
    """One llama-batched-bench run: its rows by sequences in parallel (pl), prompt (pp) and generated (tg)."""
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    if not rows:
        sys.exit(f"{path}: no jsonl rows from llama-batched-bench (its log is beside it)")
    for r in rows:
        if r["pl"] == 1 and r["tg"] > 1:
            append(measures, model, "llamacpp", variant, f"prefill_{r['pp']}", r["speed_pp"])
            append(measures, model, "llamacpp", variant, "decode_b1", r["speed_tg"])
            if peak_kb:
                append(measures, model, "llamacpp", variant, "peak_rss_mb", int(peak_kb) * 1024 / 1e6)
        elif r["pl"] == 1:
            append(measures, model, "llamacpp", variant, f"prefill_{r['pp']}", r["speed_pp"])
        else:
            append(measures, model, "llamacpp", variant, f"decode_b{r['pl']}", r["speed_tg"])


def guidellm(measures, model, side, profile, path):
    """guidellm's report: one benchmark per profile run; medians over its successful requests."""
    with open(path) as f:
        report = json.load(f)
    bench = report["benchmarks"][0]
    m = bench["metrics"]
    totals = m["request_totals"]
    if not totals["successful"]:
        sys.exit(f"{path}: guidellm's requests all failed ({totals}); see the .log beside it")

    def successful(name, stat):
        return m[name]["successful"][stat]

    append(measures, model, side, "f32", f"serve_{profile}_output_tps", successful("output_tokens_per_second", "mean"))
    append(measures, model, side, "f32", f"serve_{profile}_ttft_ms", successful("time_to_first_token_ms", "median"))
    append(measures, model, side, "f32", f"serve_{profile}_itl_ms", successful("inter_token_latency_ms", "median"))
    # Prompt tokens the server took from a cache (usage.prompt_tokens_details.cached_tokens; none reported: 0).
    cached = [r.get("cached_tokens") or 0 for r in bench["requests"]["successful"]]
    append(measures, model, side, "f32", f"serve_{profile}_cached_tokens", statistics.median(cached))


def report(measures, na_file):
    values = {}
    for line in open(measures):
        model, side, variant, metric, value = line.rstrip("\n").split("\t")
        values.setdefault((model, metric, side, variant), []).append(float(value))
    na = {}
    try:
        for line in open(na_file):
            field, why = line.rstrip("\n").split("\t", 1)
            na[field] = why
    except FileNotFoundError:
        pass

    def cell(xs):
        if not xs:
            return "n/a"
        return f"{min(xs):.1f} / {statistics.median(xs):.1f} / {max(xs):.1f}"

    for model in ("gpt2", "llama"):
        rows = sorted({(m, v) for (mo, m, s, v) in values if mo == model})
        if not rows:
            continue
        print(f"\n{model}: min / median / max over the rounds")
        print(f"| {'measure':<28} | {'variant (ours, llama.cpp)':<26} | {'ours':<24} | {'llama.cpp':<24} | ours/llama.cpp |")
        print(f"|{'-' * 30}|{'-' * 28}|{'-' * 26}|{'-' * 26}|{'-' * 16}|")
        metrics = sorted({m for (m, v) in rows})
        for metric in metrics:
            pairs = [("f32", "f32"), ("bf16", "bf16"), ("int8", "q8_0"), ("w8a8", "q8_0")]
            if metric == "peak_rss_mb" and (model, metric, "ours", "f32-1slot") in values:
                pairs.append(("f32-1slot", "f32"))  # rss's own pair, where the model has a 1-slot package
            for ov, lv in pairs:
                o = values.get((model, metric, "ours", ov), [])
                ll = values.get((model, metric, "llamacpp", lv), [])
                if not o and not ll:
                    continue
                ratio = f"{statistics.median(o) / statistics.median(ll):.2f}" if o and ll else "n/a"
                label = f"{metric} ({UNITS.get(metric, '')})"
                print(f"| {label:<28} | {ov + ', ' + lv:<26} | {cell(o):<24} | {cell(ll):<24} | {ratio:>14} |")
    # Ours alone: one sequence on the 8-slot package (the smallest decode program that holds it) against a
    # package of one slot only, the "one user at one user's cost" of the issue.
    shared = values.get(("gpt2", "decode_b1", "ours", "f32"), [])
    alone = values.get(("gpt2", "decode_b1", "ours", "f32-1slot"), [])
    one_of_8 = "n/a"
    if shared and alone:
        one_of_8 = f"{statistics.median(shared) / statistics.median(alone):.3f}"
        print("\ngpt2, ours: one sequence decoding, min / median / max over the rounds")
        print(f"| {'package':<40} | {'decode (tok/s)':<24} |")
        print(f"|{'-' * 42}|{'-' * 26}|")
        print(f"| {'8 slots (--slots 1,8), 1 running':<40} | {cell(shared):<24} |")
        print(f"| {'1 slot (--slots 1)':<40} | {cell(alone):<24} |")
    # Ours alone: GPT-2 with XLA's dots (--kernels xla) against the native f32 kernels (the default).
    native_rows = [(m, values.get(("gpt2", m, "ours", "f32-xla"), []), values.get(("gpt2", m, "ours", "f32"), []))
                   for m in ("decode_b1", "decode_b8", "prefill_128")]
    if any(x for _, x, _ in native_rows):
        print("\ngpt2, ours: --kernels xla against --kernels native (default), min / median / max over the rounds")
        print(f"| {'measure':<28} | {'xla':<24} | {'native':<24} | native/xla |")
        print(f"|{'-' * 30}|{'-' * 26}|{'-' * 26}|{'-' * 12}|")
        for metric, x, n in native_rows:
            ratio = f"{statistics.median(n) / statistics.median(x):.2f}" if x and n else "n/a"
            print(f"| {metric + ' (' + UNITS.get(metric, '') + ')':<28} | {cell(x):<24} | {cell(n):<24} | {ratio:>10} |")
    fields = []
    for field, model, metric, ov, lv in RESULT_FIELDS:
        o = values.get((model, metric, "ours", ov), [])
        ll = values.get((model, metric, "llamacpp", lv), [])
        if o and ll:
            fields.append(f"{field}={statistics.median(o) / statistics.median(ll):.3f}")
        else:
            fields.append(f"{field}=n/a")
            why = na.get(field) or ("no llama.cpp figure" if o else "no figure of ours" if ll else "neither side measured it")
            print(f"n/a {field}: {why}")
    fields.append(f"one_of_8={one_of_8}")
    print("RESULT llamacpp " + " ".join(fields))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "ours":
        ours(*args)
    elif cmd == "llamacpp":
        llamacpp(*args)
    elif cmd == "guidellm":
        guidellm(*args)
    elif cmd == "report":
        report(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
