"""A GPT-2-shaped decoder-only transformer in plain jax.numpy, exported with jax.export for the Java side.

Run with the venv of tools/jax-env.sh:

    $(bash tools/jax-env.sh) tools/jax_gpt.py make --config gpt2-124m      # the 124 M model, ~1 min
    $(bash tools/jax-env.sh) tools/jax_gpt.py make --config tiny           # 2 layers, d_model 32
    $(bash tools/jax-env.sh) tools/jax_gpt.py greedy --dir DIR --tokens 464,2068 --steps 20
    $(bash tools/jax-env.sh) tools/jax_gpt.py export-hf --dir DIR --out HF_DIR  # as a GPT2LMHeadModel checkpoint
    $(bash tools/jax-env.sh) tools/jax_gpt.py package --config gpt2-124m   # make + export-hf + hf_import.py
    $(bash tools/jax-env.sh) tools/jax_gpt.py bench --dir PKG               # JAX's side of bench/run.sh models

`make` writes into DIR (default ~/.cache/xla-actors/models/<config>-<hash>/, the hash covering the config
and this script's format version) and prints DIR on its last line:

- weights.safetensors  the parameters, a flat dict named like GPT-2's own ("wte", "wpe", "h.0.ln_1.g", ...).
                       No package registry ships GPT-2's pretrained weights (the PyPI packages that mention
                       GPT-2 download them from a model hub at run time), so they are seeded: a fixed seed
                       and GPT-2's initialisation scales (normal 0.02, wpe 0.01, residual projections
                       0.02 / sqrt(2 * layers), biases 0, LayerNorm gain 1).
- prefill_b<B>.jax     Exported.serialize() of prefill(params, tokens[B,T] i32, length i32)
                       -> (logits of position length-1 [B,V] f32, kv cache [layers,2,B,heads,ctx,head_dim] f32)
- decode_b<B>.jax      decode_step(params, token[B] i32, pos i32, kv cache) -> (logits [B,V], kv cache)
- decode_sample_b<B>.jax  decode_step followed by the host callback "sample" (typed FFI target
                       xla_actors.host_callback, which the Java side serves): (next token [B] i32, kv cache).
                       jax.export refuses Python callbacks but keeps a custom call to a named FFI target
                       once its safety check is disabled for that target.
- prefill_slot_s<S>.jax  continuous batching over a cache of S slots (one sequence each):
                       prefill_slot(params, tokens[1,T] i32, length i32, slot i32, kv cache [layers,2,S,heads,ctx,head_dim])
                       -> (logits of position length-1 [1,V], kv cache with the prompt written into row `slot`);
                       the cache is donated, the other slots are left as they are.
- decode_slots_s<S>.jax  decode_slots(params, token[S] i32, pos[S] i32, kv cache) -> (logits [S,V], kv cache):
                       one step of every slot, each at its own position (a slot not in use passes any
                       position; what it writes is overwritten by the next prefill into that slot).
- slot_cache_s<S>.jax  slot_cache() -> a zero kv cache of S slots (stale keys past a prompt must be finite).
- score_b1.jax         score(params, tokens[1,T] i32, length i32) -> mean negative log-likelihood of tokens
                       1..length-1 [1] f32 (perplexity = exp of it), for the batch-scoring job.
- manifest.json        config, sha256 of the weights file, files, batch sizes, prefill length, whether
                       donation survived the export, and how long making it took.
- model.properties     the config and the reference run as flat key=value lines (for java.util.Properties).
- reference.json       JAX's own run of the exported artifacts on a fixed prompt: last-position logits of
                       prefill (tiny config: all of them), the logits of one decode step, greedy tokens.

`package` turns the made model into the model package the examples and benches run (docs/model-package.md),
the way a user imports a Hugging Face checkpoint: export-hf, then tools/hf_import.py (--tiktoken r50k_base
for the 124 M model; the tiny one gets the 512-id byte-level tokenizer.json of tiny_tokenizer_json), into
DIR-package (default ~/.cache/xla-actors/models/<config>-<hash>-package), with reference.json copied in.
`bench` runs that package's programs, the same files as the Java side.

The KV cache is one fixed-shape array updated with lax.dynamic_update_slice, so a runtime that donates it
updates it in place (the decode exports keep donate_argnums as an input/output alias, which xla-actors reads
from the compiled module; the StableHLO text, Exported.mlir_module(), is not written: print it from the
.jax file with jax.export.deserialize when you want to read it). prefill pads the prompt to T tokens;
positions past `length` hold garbage that decode overwrites before it can be read (decode masks every position after `pos`).
"""
import argparse
import contextlib
import hashlib
import json
import math
import os
import pathlib
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

FORMAT_VERSION = 6  # bump when the files written change: the directory name changes with it
CONFIGS = {
    # GPT-2 small: 124 M parameters.
    "gpt2-124m": dict(layers=12, d_model=768, heads=12, vocab=50257, ctx=1024, prefill_len=128,
                      batches=[1, 8], seed=0),
    # Small enough to commit as a test fixture (~190 KB of weights); tokens must be < vocab.
    # init_scale 10 makes its greedy run vary (at GPT-2's scales a tiny random model repeats one token).
    "tiny": dict(layers=2, d_model=32, heads=2, vocab=512, ctx=32, prefill_len=8, batches=[1], seed=0,
                 init_scale=10.0),
}
# Sequences of the slot programs (continuous batching, GenerationServer): one KV cache row each.
# Bump FORMAT_VERSION when these change (the directory name does not cover them).
SLOTS = {"gpt2-124m": 8, "tiny": 4}
REFERENCE_PROMPT = [464, 2068, 7586, 21831, 18045, 625, 262, 16931]  # "The quick brown fox jumps over the lazy"


def config_hash(cfg):
    text = json.dumps({"format": FORMAT_VERSION, **cfg}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def default_dir(name, cfg):
    cache = pathlib.Path(os.environ.get("XLA_ACTORS_CACHE", pathlib.Path.home() / ".cache/xla-actors"))
    return cache / "models" / f"{name}-{config_hash(cfg)}"


# ---------------------------------------------------------------- the model


def init_params(cfg):
    rng = np.random.default_rng(cfg["seed"])
    d, L = cfg["d_model"], cfg["layers"]

    def normal(shape, std):
        return rng.normal(0.0, std * cfg.get("init_scale", 1.0), shape).astype(np.float32)

    p = {"wte": normal((cfg["vocab"], d), 0.02), "wpe": normal((cfg["ctx"], d), 0.01)}
    proj_std = 0.02 / math.sqrt(2 * L)
    for i in range(L):
        h = f"h.{i}."
        p[h + "ln_1.g"] = np.ones(d, np.float32)
        p[h + "ln_1.b"] = np.zeros(d, np.float32)
        p[h + "attn.c_attn.w"] = normal((d, 3 * d), 0.02)
        p[h + "attn.c_attn.b"] = np.zeros(3 * d, np.float32)
        p[h + "attn.c_proj.w"] = normal((d, d), proj_std)
        p[h + "attn.c_proj.b"] = np.zeros(d, np.float32)
        p[h + "ln_2.g"] = np.ones(d, np.float32)
        p[h + "ln_2.b"] = np.zeros(d, np.float32)
        p[h + "mlp.c_fc.w"] = normal((d, 4 * d), 0.02)
        p[h + "mlp.c_fc.b"] = np.zeros(4 * d, np.float32)
        p[h + "mlp.c_proj.w"] = normal((4 * d, d), proj_std)
        p[h + "mlp.c_proj.b"] = np.zeros(d, np.float32)
    p["ln_f.g"] = np.ones(d, np.float32)
    p["ln_f.b"] = np.zeros(d, np.float32)
    return p


def layer_norm(x, g, b, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * g + b


def mlp(p, h, x):
    u = jax.nn.gelu(x @ p[h + "mlp.c_fc.w"] + p[h + "mlp.c_fc.b"], approximate=True)
    return u @ p[h + "mlp.c_proj.w"] + p[h + "mlp.c_proj.b"]


def make_functions(cfg):
    L, d, H, C = cfg["layers"], cfg["d_model"], cfg["heads"], cfg["ctx"]
    Dh = d // H
    scale = 1.0 / math.sqrt(Dh)

    def logits_of(p, x):
        return layer_norm(x, p["ln_f.g"], p["ln_f.b"]) @ p["wte"].T  # tied output embedding

    def prefill(p, tokens, length):
        B, T = tokens.shape
        x = p["wte"][tokens] + p["wpe"][:T][None]
        cache = jnp.zeros((L, 2, B, H, C, Dh), jnp.float32)
        causal = jnp.tril(jnp.ones((T, T), bool))
        for i in range(L):
            h = f"h.{i}."
            a = layer_norm(x, p[h + "ln_1.g"], p[h + "ln_1.b"])
            qkv = a @ p[h + "attn.c_attn.w"] + p[h + "attn.c_attn.b"]
            q, k, v = (t.reshape(B, T, H, Dh).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
            cache = lax.dynamic_update_slice(cache, jnp.stack([k, v])[None], (i, 0, 0, 0, 0, 0))
            s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * scale
            s = jnp.where(causal, s, -1e30)
            o = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)
            x = x + o.transpose(0, 2, 1, 3).reshape(B, T, d) @ p[h + "attn.c_proj.w"] + p[h + "attn.c_proj.b"]
            x = x + mlp(p, h, layer_norm(x, p[h + "ln_2.g"], p[h + "ln_2.b"]))
        last = lax.dynamic_slice_in_dim(x, length - 1, 1, axis=1)[:, 0]
        return logits_of(p, last), cache

    def decode_step(p, token, pos, cache):
        B = token.shape[0]
        x = p["wte"][token] + lax.dynamic_slice_in_dim(p["wpe"], pos, 1, axis=0)
        visible = (jnp.arange(C) <= pos)[None, None]
        for i in range(L):
            h = f"h.{i}."
            a = layer_norm(x, p[h + "ln_1.g"], p[h + "ln_1.b"])
            qkv = a @ p[h + "attn.c_attn.w"] + p[h + "attn.c_attn.b"]
            q, k, v = (t.reshape(B, H, Dh) for t in jnp.split(qkv, 3, axis=-1))
            cache = lax.dynamic_update_slice(cache, jnp.stack([k, v])[None, :, :, :, None], (i, 0, 0, 0, pos, 0))
            keys, values = cache[i, 0], cache[i, 1]
            s = jnp.einsum("bhd,bhcd->bhc", q, keys) * scale
            s = jnp.where(visible, s, -1e30)
            o = jnp.einsum("bhc,bhcd->bhd", jax.nn.softmax(s, axis=-1), values)
            x = x + o.reshape(B, d) @ p[h + "attn.c_proj.w"] + p[h + "attn.c_proj.b"]
            x = x + mlp(p, h, layer_norm(x, p[h + "ln_2.g"], p[h + "ln_2.b"]))
        return logits_of(p, x), cache

    def decode_sample(p, token, pos, cache):
        logits, cache = decode_step(p, token, pos, cache)
        # The Java side's sampler: temperature, top-k, top-p, stop tokens and its RNG live there.
        nxt = jax.ffi.ffi_call("xla_actors.host_callback", jax.ShapeDtypeStruct(token.shape, jnp.int32),
                               has_side_effect=True)(logits, callback="sample")
        return nxt, cache

    def score(p, tokens, length):
        """Mean negative log-likelihood of tokens 1..length-1 of each row, each given the ones before it."""
        B, T = tokens.shape
        x = p["wte"][tokens] + p["wpe"][:T][None]
        causal = jnp.tril(jnp.ones((T, T), bool))
        for i in range(L):
            h = f"h.{i}."
            a = layer_norm(x, p[h + "ln_1.g"], p[h + "ln_1.b"])
            qkv = a @ p[h + "attn.c_attn.w"] + p[h + "attn.c_attn.b"]
            q, k, v = (t.reshape(B, T, H, Dh).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
            s = jnp.where(causal, jnp.einsum("bhqd,bhkd->bhqk", q, k) * scale, -1e30)
            o = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)
            x = x + o.transpose(0, 2, 1, 3).reshape(B, T, d) @ p[h + "attn.c_proj.w"] + p[h + "attn.c_proj.b"]
            x = x + mlp(p, h, layer_norm(x, p[h + "ln_2.g"], p[h + "ln_2.b"]))
        logp = jax.nn.log_softmax(logits_of(p, x[:, :-1]), axis=-1)
        nll = -jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]
        counted = jnp.arange(1, T)[None] < length
        return jnp.sum(jnp.where(counted, nll, 0.0), axis=1) / (length - 1).astype(jnp.float32)

    return prefill, decode_step, decode_sample, score


def make_slot_functions(cfg, slots):
    """The continuous-batching programs: prefill into one slot of a cache of `slots` rows, and one decode
    step of every slot at its own position. They reuse prefill's and decode_step's arithmetic."""
    prefill, _, _, _ = make_functions(cfg)
    L, d, H, C = cfg["layers"], cfg["d_model"], cfg["heads"], cfg["ctx"]
    Dh = d // H
    scale = 1.0 / math.sqrt(Dh)

    def prefill_slot(p, tokens, length, slot, cache):
        logits, one = prefill(p, tokens, length)  # one: [L,2,1,H,C,Dh]
        return logits, lax.dynamic_update_slice(cache, one, (0, 0, slot, 0, 0, 0))

    def decode_slots(p, token, pos, cache):
        S = token.shape[0]
        x = p["wte"][token] + p["wpe"][pos]
        visible = (jnp.arange(C)[None, :] <= pos[:, None])[:, None, :]  # [S,1,C]
        for i in range(L):
            h = f"h.{i}."
            a = layer_norm(x, p[h + "ln_1.g"], p[h + "ln_1.b"])
            qkv = a @ p[h + "attn.c_attn.w"] + p[h + "attn.c_attn.b"]
            q, k, v = (t.reshape(S, H, Dh) for t in jnp.split(qkv, 3, axis=-1))
            # Each slot's key and value written at its own position, one dynamic_update_slice per slot: XLA
            # updates a donated buffer in place with these (a scatter over the slots measured 2x slower
            # from Java on the 124 M model).
            for s in range(S):
                kv = jnp.stack([k[s], v[s]])[None, :, None, :, None, :]  # [1, 2, 1, H, 1, Dh]
                cache = lax.dynamic_update_slice(cache, kv, (i, 0, s, 0, pos[s], 0))
            keys, values = cache[i, 0], cache[i, 1]
            s = jnp.einsum("bhd,bhcd->bhc", q, keys) * scale
            s = jnp.where(visible, s, -1e30)
            o = jnp.einsum("bhc,bhcd->bhd", jax.nn.softmax(s, axis=-1), values)
            x = x + o.reshape(S, d) @ p[h + "attn.c_proj.w"] + p[h + "attn.c_proj.b"]
            x = x + mlp(p, h, layer_norm(x, p[h + "ln_2.g"], p[h + "ln_2.b"]))
        return layer_norm(x, p["ln_f.g"], p["ln_f.b"]) @ p["wte"].T, cache

    def slot_cache():
        return jnp.zeros((L, 2, slots, H, C, Dh), jnp.float32)

    return prefill_slot, decode_slots, slot_cache


# ---------------------------------------------------------------- making the artifacts


def export_all(cfg_name, cfg, params, out):
    from jax import export

    prefill, decode_step, decode_sample, score = make_functions(cfg)
    L, d, H, C = cfg["layers"], cfg["d_model"], cfg["heads"], cfg["ctx"]
    pspec = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in params.items()}
    i32 = jax.ShapeDtypeStruct((), jnp.int32)
    donation = {}
    files = []
    unsafe = [export.DisabledSafetyCheck.custom_call("xla_actors.host_callback")]
    for B in cfg["batches"]:
        cache = jax.ShapeDtypeStruct((L, 2, B, H, C, d // H), jnp.float32)
        jobs = [
            (f"prefill_b{B}", jax.jit(prefill), (pspec, jax.ShapeDtypeStruct((B, cfg["prefill_len"]), jnp.int32), i32), []),
            (f"decode_b{B}", jax.jit(decode_step, donate_argnums=3),
             (pspec, jax.ShapeDtypeStruct((B,), jnp.int32), i32, cache), []),
            (f"decode_sample_b{B}", jax.jit(decode_sample, donate_argnums=3),
             (pspec, jax.ShapeDtypeStruct((B,), jnp.int32), i32, cache), unsafe),
        ]
        if B == 1:
            jobs.append((f"score_b{B}", jax.jit(score), (pspec, jax.ShapeDtypeStruct((B, cfg["prefill_len"]), jnp.int32), i32), []))
        for name, fn, args, checks in jobs:
            exp = export.export(fn, disabled_checks=checks)(*args)
            (out / f"{name}.jax").write_bytes(exp.serialize())
            files.append(f"{name}.jax")
            if name.startswith("decode"):
                text = exp.mlir_module()  # the runtime reads the alias from the compiled module; this checks it is there
                donation[name] = "tf.aliasing_output" in text or "jax.buffer_donor" in text
    S = SLOTS[cfg_name]
    prefill_slot, decode_slots, slot_cache = make_slot_functions(cfg, S)
    cache = jax.ShapeDtypeStruct((L, 2, S, H, C, d // H), jnp.float32)
    for name, fn, args in [
        (f"prefill_slot_s{S}", jax.jit(prefill_slot, donate_argnums=4),
         (pspec, jax.ShapeDtypeStruct((1, cfg["prefill_len"]), jnp.int32), i32, i32, cache)),
        (f"decode_slots_s{S}", jax.jit(decode_slots, donate_argnums=3),
         (pspec, jax.ShapeDtypeStruct((S,), jnp.int32), jax.ShapeDtypeStruct((S,), jnp.int32), cache)),
        (f"slot_cache_s{S}", jax.jit(slot_cache), ()),
    ]:
        exp = export.export(fn)(*args)
        (out / f"{name}.jax").write_bytes(exp.serialize())
        files.append(f"{name}.jax")
        if name != f"slot_cache_s{S}":
            text = exp.mlir_module()  # as above: checks the alias is there
            donation[name] = "tf.aliasing_output" in text or "jax.buffer_donor" in text
    return files, donation


def align_data(path, alignment=64):
    """Pads the header with spaces (which the format allows) so the data starts on a 64-byte boundary.

    Every tensor of these models is a multiple of 64 bytes, so each then starts aligned, and a runtime that
    memory-maps the file can hand the mapped bytes to the device as they are (xla-actors' CPU uploads do).
    """
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    padded = n + (-(8 + n)) % alignment
    path.write_bytes(padded.to_bytes(8, "little") + raw[8:8 + n] + b" " * (padded - n) + raw[8 + n:])


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load(dir_):
    from jax import export
    from safetensors.numpy import load_file

    manifest = json.loads((dir_ / "manifest.json").read_text())
    if sha256_of(dir_ / "weights.safetensors") != manifest["weights_sha256"]:
        sys.exit(f"{dir_}/weights.safetensors does not match the sha256 in manifest.json: delete {dir_} and make it again")
    params = load_file(dir_ / "weights.safetensors")
    progs = {p.stem: export.deserialize(bytearray(p.read_bytes())) for p in dir_.glob("*.jax")}
    return manifest, params, progs


def greedy(manifest, params, progs, prompt, steps, batch=1):
    """JAX's greedy run of the exported artifacts: returns (prefill logits, first decode logits, tokens)."""
    cfg = manifest["config"]
    T = cfg["prefill_len"]
    if not 1 <= len(prompt) <= T:
        raise ValueError(f"prompt has {len(prompt)} tokens, expected 1..{T}")
    tokens = np.zeros((batch, T), np.int32)
    tokens[:, : len(prompt)] = prompt
    dev = jax.device_put(params)
    prefill = jax.jit(progs[f"prefill_b{batch}"].call)
    step = jax.jit(progs[f"decode_b{batch}"].call, donate_argnums=3)
    logits, cache = prefill(dev, tokens, np.int32(len(prompt)))
    first = np.asarray(logits)
    out, step_logits = [], None
    tok = np.argmax(first, axis=-1).astype(np.int32)
    pos = len(prompt)
    for _ in range(steps):
        out.append(int(tok[0]))
        if len(out) == steps or pos >= cfg["ctx"]:
            break
        logits, cache = step(dev, tok, np.int32(pos), cache)
        if step_logits is None:
            step_logits = np.asarray(logits)
        tok = np.argmax(np.asarray(logits), axis=-1).astype(np.int32)
        pos += 1
    return first, step_logits, out


def slot_greedy(manifest, params, progs, prompt, steps):
    """Greedy tokens of `prompt` decoded in the last slot while every other slot decodes another prompt:
    the slot programs' check that sequences sharing a batch do not disturb each other."""
    cfg = manifest["config"]
    S, T = SLOTS[manifest["name"]], cfg["prefill_len"]
    dev = jax.device_put(params)
    prefill = jax.jit(progs[f"prefill_slot_s{S}"].call, donate_argnums=4)
    step = jax.jit(progs[f"decode_slots_s{S}"].call, donate_argnums=3)
    cache = progs[f"slot_cache_s{S}"].call()
    tok, pos = np.zeros(S, np.int32), np.zeros(S, np.int32)
    for s in range(S):
        p = prompt if s == S - 1 else [(t * (s + 3) + 1) % cfg["vocab"] for t in prompt[: max(1, len(prompt) - s - 1)]]
        padded = np.zeros((1, T), np.int32)
        padded[0, : len(p)] = p
        logits, cache = prefill(dev, padded, np.int32(len(p)), np.int32(s), cache)
        tok[s], pos[s] = int(np.argmax(np.asarray(logits)[0])), len(p)
    out = [int(tok[S - 1])]
    while len(out) < steps and pos[S - 1] < cfg["ctx"]:
        logits, cache = step(dev, tok, pos, cache)
        tok = np.argmax(np.asarray(logits), axis=-1).astype(np.int32)
        pos = np.minimum(pos + 1, cfg["ctx"] - 1)
        out.append(int(tok[S - 1]))
    return out


def make(name, out):
    from safetensors.numpy import save_file

    cfg = CONFIGS[name]
    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    params = init_params(cfg)
    meta = {"config": json.dumps(cfg, sort_keys=True), "name": name, "format": str(FORMAT_VERSION)}
    save_file(params, str(out / "weights.safetensors"), metadata=meta)
    align_data(out / "weights.safetensors")
    files, donation = export_all(name, cfg, params, out)
    manifest = {
        "name": name, "format": FORMAT_VERSION, "config": cfg, "config_hash": config_hash(cfg),
        "weights": "weights.safetensors", "weights_sha256": sha256_of(out / "weights.safetensors"),
        "weights_bytes": (out / "weights.safetensors").stat().st_size,
        "parameters": int(sum(v.size for v in params.values())),
        "files": files, "donation_kept_by_export": donation, "jax_version": jax.__version__,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _, loaded, progs = load(out)
    steps = 16
    prompt = [t % cfg["vocab"] for t in REFERENCE_PROMPT]
    first, step_logits, toks = greedy(manifest, loaded, progs, prompt, steps)
    padded = np.zeros((1, cfg["prefill_len"]), np.int32)
    padded[0, : len(prompt)] = prompt
    nll = np.asarray(jax.jit(progs["score_b1"].call)(jax.device_put(loaded), padded, np.int32(len(prompt))))
    slot_toks = slot_greedy(manifest, loaded, progs, prompt, steps)
    if slot_toks != toks:
        sys.exit(f"the slot programs' greedy tokens {slot_toks} differ from the batch programs' {toks}")
    ref = {"prompt": prompt, "greedy_tokens": toks, "score_nll": float(nll[0]),
           "prefill_last_logits_top": [int(i) for i in np.argsort(-first[0])[:10]]}
    if name == "tiny":
        ref["prefill_last_logits"] = [float(x) for x in first[0]]
        ref["decode_step_logits"] = [float(x) for x in step_logits[0]]
    (out / "reference.json").write_text(json.dumps(ref))
    manifest["make_seconds"] = round(time.time() - started, 1)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    # The same facts as flat key=value lines, which the Java side reads with java.util.Properties.
    flat = {**{k: v for k, v in cfg.items()}, "slots": SLOTS[name], "name": name, "parameters": manifest["parameters"],
            "weights_sha256": manifest["weights_sha256"], "weights_bytes": manifest["weights_bytes"],
            "make_seconds": manifest["make_seconds"], "jax_version": jax.__version__}
    flat.update({k: v for k, v in ref.items()})
    (out / "model.properties").write_text(
        "".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}\n" for k, v in flat.items()))
    # A marker written last: a directory without it is a half-made one, remade on the next use.
    (out / ".complete").write_text("")
    print(f"made {name} ({manifest['parameters']:,} parameters) in {manifest['make_seconds']} s", file=sys.stderr)
    print(out)


# ---------------------------------------------------------------- as a Hugging Face checkpoint


def hf_name(key):
    """GPT2LMHeadModel's name of a parameter: "h.0.ln_1.g" -> "transformer.h.0.ln_1.weight". The layouts
    agree: both store Conv1D weights [in, out] and c_attn as q, k, v concatenated on the last axis."""
    if key in ("wte", "wpe"):
        return f"transformer.{key}.weight"
    base, leaf = key.rsplit(".", 1)
    return f"transformer.{base}." + {"g": "weight", "w": "weight", "b": "bias"}[leaf]


def export_hf(dir_, out):
    """Writes a made model as what GPT2LMHeadModel.save_pretrained writes (config.json, model.safetensors;
    the head tied to wte, so no lm_head.weight), for tools/hf_import.py. The 124 M model's token ids are
    r50k_base's (GPT-2's), so it gets no tokenizer.json (import it with --tiktoken r50k_base); the tiny one's
    512 ids get the byte-level BPE of tiny_tokenizer_json, its last id <|endoftext|>."""
    from safetensors.numpy import save_file

    manifest, params, _ = load(dir_)
    cfg = manifest["config"]
    out.mkdir(parents=True, exist_ok=True)
    # metadata format "pt": transformers refuses to load a safetensors file without it.
    save_file({hf_name(k): v for k, v in params.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    align_data(out / "model.safetensors")
    if cfg["vocab"] == R50K_VOCAB:
        special = R50K_ENDOFTEXT  # r50k_base's <|endoftext|>, GPT-2's bos and eos
    else:
        special = cfg["vocab"] - 1
        (out / "tokenizer.json").write_text(json.dumps(tiny_tokenizer_json(cfg["vocab"]), indent=1) + "\n")
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "dtype": "float32",
        "vocab_size": cfg["vocab"], "n_positions": cfg["ctx"], "n_embd": cfg["d_model"], "n_layer": cfg["layers"],
        "n_head": cfg["heads"], "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": True, "scale_attn_weights": True, "bos_token_id": special, "eos_token_id": special,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(out)


R50K_VOCAB = 50257
R50K_ENDOFTEXT = 50256
# What the tiny tokenizer's merges are learned from: any fixed English text (changing it changes the ids).
TINY_TOKENIZER_CORPUS = (
    "The quick brown fox jumps over the lazy dog. A language model reads the tokens of a prompt and predicts "
    "the next one, then the one after that, until it reaches a stop token or the length it was given. "
    "The weights of this model are seeded, not trained, so the text it writes means nothing; the programs, "
    "the cache of keys and values, the sampling and the streaming are the real ones. Each step of the decoder "
    "reads one token per sequence and writes its key and value into the cache, where the next step finds "
    "them. Sequences that share the device take turns in one batch: a new one is admitted when another ends. "
    "Hello, world! It is a small model for tests and examples, with two layers and a context of thirty-two "
    "positions, and its vocabulary has five hundred and twelve entries: the bytes, the merges learned here "
    "and the end of the text."
)


def byte_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters (what a byte-level BPE vocabulary spells)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tiny_tokenizer_json(vocab):
    """A GPT-2-style byte-level BPE tokenizer.json of exactly `vocab` ids (vocab - 257 merges, learned here in
    plain Python from TINY_TOKENIZER_CORPUS, deterministically): ids 0..255 the bytes (in GPT-2's order),
    then the merges, then <|endoftext|> last. lm's Gpt2TokenizerJson is GPT-2's 50257, which a 512-id model
    cannot use; this one turns any text into ids the tiny model takes and decodes every id it can produce."""
    b2u = byte_to_unicode()
    alphabet = sorted(b2u.values())
    words = {}
    for w in re.findall(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+", TINY_TOKENIZER_CORPUS):
        key = tuple(b2u[b] for b in w.encode("utf-8"))
        words[key] = words.get(key, 0) + 1
    merges = []
    while len(merges) < vocab - 257:
        pairs = {}
        for w, n in words.items():
            for pair in zip(w, w[1:]):
                pairs[pair] = pairs.get(pair, 0) + n
        if not pairs:
            sys.exit(f"the tiny tokenizer's corpus allows {len(merges)} merges, {vocab - 257} needed: lengthen it")
        best = min(pairs, key=lambda p: (-pairs[p], p))  # the most frequent pair; ties by spelling
        merges.append(best)
        merged = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    ids = {t: i for i, t in enumerate(alphabet)}
    for a, b in merges:
        ids[a + b] = len(ids)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab - 1, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": {**byte_level, "trim_offsets": False}, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": ids, "merges": [[a, b] for a, b in merges]},
    }


# ---------------------------------------------------------------- as a model package


def package_dir(name, cfg):
    return default_dir(name, cfg).with_name(default_dir(name, cfg).name + "-package")


def package(name, out, platforms="cpu"):
    """The model package of config `name` (docs/model-package.md), made as a user makes one from a Hugging
    Face checkpoint: `make` (when not made yet), export-hf, then tools/hf_import.py. Its programs are the
    importer's (score, and prefill_slot, decode_slots, slot_cache for 1 and SLOTS[name] slots), which
    compute what make's do from the same weights; reference.json (JAX's run of make's programs) is copied
    in beside the manifest, for the examples' and tests' checks. Prints the package's path last.

    The programs are lowered for `platforms`, the CPU only by default: xla-actors passes a multi-platform
    export's platform index as an argument, so XLA keeps every platform's lowering behind a conditional and
    cannot fold it; on the 124 M package (cpu,cuda) that made each decode step 3-4.4x slower and the load
    (compiling the programs) 45 s instead of a few (measured with bench's ModelsBench; JAX calling the same
    files: 1.3x). Ask for cpu,cuda to run the package on a GPU."""
    import shutil
    import subprocess
    import tempfile

    cfg = CONFIGS[name]
    made = default_dir(name, cfg)
    if not (made / ".complete").exists():
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            make(name, made)
    if out.exists():
        shutil.rmtree(out)  # a half-made one (no .complete): the caller checked
    started = time.time()
    with tempfile.TemporaryDirectory(prefix=f"{name}-hf-") as hf:
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            export_hf(made, pathlib.Path(hf))
        command = [sys.executable, str(pathlib.Path(__file__).with_name("hf_import.py")), hf, "--out", str(out),
                   "--name", name, "--slots", f"1,{SLOTS[name]}", "--prefill-length", str(cfg["prefill_len"]),
                   "--score-length", str(cfg["prefill_len"]), "--platforms", platforms]
        if cfg["vocab"] == R50K_VOCAB:
            command += ["--tiktoken", "r50k_base"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    shutil.copyfile(made / "reference.json", out / "reference.json")
    (out / ".complete").write_text("")
    print(f"packaged {name} in {time.time() - started:.1f} s", file=sys.stderr)
    print(out)


# ---------------------------------------------------------------- JAX's side of bench/run.sh models


def sample_numpy(logits, temperature=0.8, top_k=40, rng=np.random.default_rng(1)):
    """The sampler of JAX's decode loop, on the host: temperature + top-k, like the Java one."""
    logits = np.asarray(logits, np.float32) / temperature
    out = np.empty(logits.shape[0], np.int32)
    for b, row in enumerate(logits):
        top = np.argpartition(-row, top_k)[:top_k]
        w = np.exp(row[top] - row[top].max())
        out[b] = top[rng.choice(top_k, p=w / w.sum())]
    return out


def stats(xs):
    xs = sorted(xs)
    return {"min": xs[0], "median": xs[len(xs) // 2], "max": xs[-1]}


def peak_rss_bytes():
    """VmHWM of /proc/self/status: the process's peak resident set (what ModelsBench reads)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return -1


def bench(dir_, reps, steps):
    """JAX's side of bench/run.sh models on a model package (what `package` makes; ModelsBench runs the same
    files): load the weights, prefill a full prompt into one slot, decode with every slot of each slot count
    busy and the next tokens sampled on the host from the step's logits (sample_numpy), as the Java side.
    Peak RSS: VmHWM of /proc/self/status after each slot count's decode, as ModelsBench reads it."""
    from jax import export
    from safetensors.numpy import load_file

    manifest = json.loads((dir_ / "xla-model.json").read_text())
    weights = dir_ / manifest["weights"]["file"]
    loads = []
    for _ in range(reps):
        t0 = time.perf_counter()
        params = jax.device_put(load_file(weights))
        jax.block_until_ready(params)
        loads.append((time.perf_counter() - t0) * 1e3)
        del params
    params = jax.device_put(load_file(weights))
    progs = {(p["role"], p.get("slots")): export.deserialize(bytearray((dir_ / p["file"]).read_bytes()))
             for p in manifest["programs"]}
    vocab = manifest["limits"]["vocabulary"]
    result = {"load_ms": stats(loads)}
    slot_counts = sorted({p["slots"] for p in manifest["programs"] if p["role"] == "decode_slots"})
    for S in slot_counts:
        T = next(p["length"] for p in manifest["programs"] if p["role"] == "prefill_slot" and p["slots"] == S)
        prefill = jax.jit(progs[("prefill_slot", S)].call, donate_argnums=4)
        decode = jax.jit(progs[("decode_slots", S)].call, donate_argnums=3)
        cache = progs[("slot_cache", S)].call()
        prompt = (np.arange(T, dtype=np.int32) % vocab)[None]
        pf, tps = [], []
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            logits, cache = prefill(params, prompt, np.int32(T), np.int32(0), cache)
            jax.block_until_ready(logits)
            pf.append((time.perf_counter() - t0) * 1e3)
            for s in range(1, S):
                logits, cache = prefill(params, prompt, np.int32(T), np.int32(s), cache)
            tok, pos = np.zeros(S, np.int32), np.full(S, T, np.int32)
            t0 = time.perf_counter()
            for _ in range(steps):
                logits, cache = decode(params, tok, pos, cache)
                tok = sample_numpy(np.asarray(logits))  # the logits to the host, as the Java side's
                pos = pos + 1
            tps.append(S * steps / (time.perf_counter() - t0))
        result[f"prefill_s{S}_ms"] = stats(pf[1:])  # the first rep compiles
        result[f"decode_s{S}_tokens_per_s"] = stats(tps[1:])
        del cache  # the next slot count's cache is made after this one is freed, as ModelsBench's decoder is closed
        result[f"peak_rss_s{S}_bytes"] = peak_rss_bytes()  # the peak of everything so far (VmHWM only grows)
        if S == slot_counts[0]:  # load and serve the fewest slots (8 add their 600 MB KV cache)
            result["peak_rss_bytes"] = peak_rss_bytes()
    result["peak_rss_all_bytes"] = peak_rss_bytes()
    result["weights_bytes"] = weights.stat().st_size
    print(json.dumps(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write the weights, the exported programs and JAX's reference run")
    m.add_argument("--config", choices=sorted(CONFIGS), required=True)
    m.add_argument("--out", type=pathlib.Path, help="default: ~/.cache/xla-actors/models/<config>-<hash>")
    d = sub.add_parser("dir", help="print the default directory of a config")
    d.add_argument("--config", choices=sorted(CONFIGS), required=True)
    d.add_argument("--package", action="store_true", help="its model package's directory instead")
    k = sub.add_parser("package", help="make the config's model package (make, export-hf, tools/hf_import.py)")
    k.add_argument("--config", choices=sorted(CONFIGS), required=True)
    k.add_argument("--out", type=pathlib.Path, help="default: ~/.cache/xla-actors/models/<config>-<hash>-package")
    k.add_argument("--platforms", default="cpu", help="what the programs are lowered for (cpu,cuda for a GPU; see package())")
    g = sub.add_parser("greedy", help="JAX's greedy tokens for a prompt, one per line")
    g.add_argument("--dir", type=pathlib.Path, required=True)
    g.add_argument("--tokens", required=True, help="comma-separated token ids")
    g.add_argument("--steps", type=int, default=20)
    b = sub.add_parser("bench", help="JAX's figures for bench/run.sh models on a model package, one JSON line")
    b.add_argument("--dir", type=pathlib.Path, required=True, help="the package (tools/jax_gpt.py dir --package)")
    b.add_argument("--reps", type=int, default=5)
    b.add_argument("--steps", type=int, default=32)
    e = sub.add_parser("export-hf", help="write a made model as a GPT2LMHeadModel checkpoint (config.json, model.safetensors)")
    e.add_argument("--dir", type=pathlib.Path, required=True)
    e.add_argument("--out", type=pathlib.Path, required=True)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.config, a.out or default_dir(a.config, CONFIGS[a.config]))
    elif a.cmd == "dir":
        print((package_dir if a.package else default_dir)(a.config, CONFIGS[a.config]))
    elif a.cmd == "package":
        package(a.config, a.out or package_dir(a.config, CONFIGS[a.config]), a.platforms)
    elif a.cmd == "greedy":
        manifest, params, progs = load(a.dir)
        toks = [int(t) for t in a.tokens.split(",") if t]
        print("\n".join(str(t) for t in greedy(manifest, params, progs, toks, a.steps)[2]))
    elif a.cmd == "export-hf":
        export_hf(a.dir, a.out)
    else:
        bench(a.dir, a.reps, a.steps)


if __name__ == "__main__":
    main()
