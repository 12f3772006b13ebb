"""Checks an imported model package against what transformers computed for its checkpoint.

Run with the venv of tools/jax-env.sh, on a package made by tools/hf_import.py from one of the fixtures of
cli/src/test/resources/hf/ (whose reference.json tools/hf_reference.py wrote):

    $(bash tools/jax-env.sh) tools/hf_check.py PKG HF_DIR

It runs the package's own artifacts (jax.export.deserialize) on the package's weights and compares:
causal-lm: score's logits at every position of reference input_ids; for every slot count, the same logits
from prefill_slot + decode_slots (one token per step) and the greedy tokens, decoded in the last slot while
the other slots decode other prompts;
embedding: mean-pooled, CLS and normalized embeddings from embed at every batch size. Prints one JSON line
of the largest errors and exits 1 when one is over its tolerance.
"""
import json
import pathlib
import sys

import jax
import numpy as np
from jax import export

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from hf_import import Checkpoint  # noqa: E402  (the same reader, bf16 included)

# (rtol, atol) of f32 results against transformers' f32 ones: rounding only.
F32_TOLERANCE = (1e-3, 1e-4)
# Against transformers' bf16 run, which rounds every activation to 8 bits of mantissa where the package
# computes in f32: its errors scale with the logits' range rather than with each logit, so the allowance
# is this fraction of the largest |logit|.
BF16_OF_RANGE = 2.5e-2


def errors(got, want, rtol, atol):
    """Largest absolute error; largest relative error over the values of magnitude 0.01 and more (below,
    relative errors say little); the largest error as a fraction of its allowance atol + rtol * |want|
    (at most 1 passes)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    diff, scale = np.abs(got - want), np.abs(want)
    allowed = atol + rtol * scale
    return {"max_abs": float(diff.max()), "max_rel": float((diff / scale)[scale >= 0.01].max()),
            "of_tolerance": float((diff / allowed).max()), "ok": bool(np.all(diff <= allowed))}


def load(pkg):
    manifest = json.loads((pkg / "xla-model.json").read_text())
    ckpt = Checkpoint(pkg)
    weights = {n: np.asarray(ckpt.array(n)) for n in ckpt.tensors}
    progs = {p["file"]: (p, export.deserialize(bytearray((pkg / p["file"]).read_bytes())))
             for p in manifest["programs"]}
    return manifest, weights, progs


def program(progs, role, **attrs):
    for spec, exp in progs.values():
        if spec["role"] == role and all(spec.get(k) == v for k, v in attrs.items()):
            return spec, exp
    raise SystemExit(f"the package has no {role} program with {attrs}")


def weights_for(exp, weights):
    """The weights a program takes (the keys of its first argument), on the device."""
    tree = exp.in_tree.unflatten(list(range(len(exp.in_avals))))
    return jax.device_put({n: weights[n] for n in tree[0][0]})


def check_causal(manifest, weights, progs, ref):
    result = {}
    spec, score = program(progs, "score")
    ids = ref["input_ids"]
    tokens = np.zeros((1, spec["length"]), np.int32)
    tokens[0, : len(ids)] = ids
    logits = np.asarray(score.call(weights_for(score, weights), tokens))[0, : len(ids)]
    if ref["dtype"] == "float32":
        result["score_logits"] = errors(logits, ref["logits"], *F32_TOLERANCE)
    else:
        result["score_logits_vs_upcast_f32"] = errors(logits, ref["logits_upcast_f32"], *F32_TOLERANCE)
        allowance = BF16_OF_RANGE * float(np.abs(np.asarray(ref["logits"])).max())
        result["score_logits_vs_bf16_run"] = errors(logits, ref["logits"], 0.0, allowance)
    vocab = manifest["limits"]["vocabulary"]
    for S in sorted({p["slots"] for p, _ in progs.values() if p["role"] == "slot_cache"}):
        # The reference sequence's first 4 tokens prefilled, the rest fed one decode step each: the logits
        # of positions 3..T-1, which score computed all at once.
        stepped, _ = slot_run(progs, weights, S, ids[:4], ids[4:], vocab)
        if ref["dtype"] == "float32":
            result[f"slot_logits_s{S}"] = errors(stepped, ref["logits"][3:], *F32_TOLERANCE)
        else:
            result[f"slot_logits_s{S}_vs_upcast_f32"] = errors(stepped, ref["logits_upcast_f32"][3:], *F32_TOLERANCE)
        steps = len(ref["greedy_tokens"])
        _, got = slot_run(progs, weights, S, ref["greedy_prompt"], [None] * (steps - 1), vocab)
        result[f"greedy_s{S}"] = {"tokens": got, "ok": got == ref["greedy_tokens"]}
    return result


def slot_run(progs, weights, S, prompt, feed, vocab):
    """Runs `prompt` in the last of S slots while every other slot decodes another prompt (as
    tools/jax_gpt.py's slot_greedy does): sequences sharing a batch must not disturb each other. After the
    prefill, one decode step per entry of `feed`, whose token is that entry, or the greedy choice where it
    is None. Returns the last slot's logits (the prefill's, then each step's) and its greedy tokens."""
    pspec, prefill = program(progs, "prefill_slot", slots=S)
    _, decode = program(progs, "decode_slots", slots=S)
    _, empty = program(progs, "slot_cache", slots=S)
    T = pspec["length"]
    pre = jax.jit(prefill.call, donate_argnums=4)
    step = jax.jit(decode.call, donate_argnums=3)
    pw, dw = weights_for(prefill, weights), weights_for(decode, weights)
    cache = empty.call()
    tok, pos = np.zeros(S, np.int32), np.zeros(S, np.int32)
    logits_seen = []
    for s in range(S):
        # The other slots' prompts are longer and shorter than the checked one, so the slots decode at
        # different positions in one batch.
        p = prompt if s == S - 1 else [(t * (s + 3) + 1) % vocab for t in (prompt * 3)[: len(prompt) + 5 - 3 * s]]
        padded = np.zeros((1, T), np.int32)
        padded[0, : len(p)] = p
        logits, cache = pre(pw, padded, np.int32(len(p)), np.int32(s), cache)
        tok[s], pos[s] = int(np.argmax(np.asarray(logits)[0])), len(p)
    logits_seen.append(np.asarray(logits)[0])
    greedy = [int(tok[S - 1])]
    for fed in feed:
        if fed is not None:
            tok[S - 1] = fed
        logits, cache = step(dw, tok, pos, cache)
        logits = np.asarray(logits)
        logits_seen.append(logits[S - 1])
        tok = np.argmax(logits, axis=-1).astype(np.int32)
        pos = pos + 1
        greedy.append(int(tok[S - 1]))
    return np.stack(logits_seen), greedy


def check_embedding(weights, progs, ref):
    rtol, atol = F32_TOLERANCE
    ids, mask = np.asarray(ref["input_ids"], np.int32), np.asarray(ref["attention_mask"], np.int32)
    result = {}
    for spec, exp in progs.values():
        if spec["role"] != "embed":
            continue
        B, T = spec["batch"], spec["length"]
        w = weights_for(exp, weights)
        means, cls = [], []
        # The reference rows in batches of B; rows past them repeat the first, with a mask of their own.
        for start in range(0, len(ids), B):
            rows = [start + r if start + r < len(ids) else 0 for r in range(B)]
            tokens, m = np.zeros((B, T), np.int32), np.zeros((B, T), np.int32)
            tokens[:, : ids.shape[1]], m[:, : ids.shape[1]] = ids[rows], mask[rows]
            hidden = np.asarray(exp.call(w, tokens, m))
            for r in range(min(B, len(ids) - start)):
                keep = m[r].astype(bool)
                means.append(hidden[r][keep].mean(axis=0))
                cls.append(hidden[r, 0])
        means = np.stack(means)
        normalized = means / np.linalg.norm(means, axis=-1, keepdims=True)
        result[f"embed_b{B}"] = {
            "mean": errors(means, ref["mean_embeddings"], rtol, atol),
            "cls": errors(cls, ref["cls_embeddings"], rtol, atol),
            "normalized_mean": errors(normalized, ref["normalized_mean_embeddings"], rtol, atol),
        }
    return result


def all_ok(node):
    if isinstance(node, dict):
        return node.get("ok", True) and all(all_ok(v) for v in node.values())
    return True


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    pkg, hf_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    ref = json.loads((hf_dir / "reference.json").read_text())
    manifest, weights, progs = load(pkg)
    if manifest["kind"] == "causal-lm":
        result = check_causal(manifest, weights, progs, ref)
    else:
        result = check_embedding(weights, progs, ref)
    print(json.dumps({"package": str(pkg), "reference_dtype": ref["dtype"], **result}))
    sys.exit(0 if all_ok(result) else 1)


if __name__ == "__main__":
    main()
