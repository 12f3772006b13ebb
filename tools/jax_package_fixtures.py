"""Model packages (docs/model-package.md) for the ModelPackage tests: tiny, real jax.export programs.

Run with the JAX venv's python (`bash tools/jax-env.sh` prints it) from the repository root:
    $(bash tools/jax-env.sh) tools/jax_package_fixtures.py
It rewrites runtime/src/test/resources/fixtures/packages/:
  tensor/          kind tensor: `main` at batch 1 and 2, y = x @ P['w'] + P['b'], one safetensors file
  tensor-sharded/  the same programs and weights, in two shards and a Hugging Face index
  causal-lm/       kind causal-lm: a toy model whose state at a position is the sum of the embeddings of
                   the tokens up to it, logits = state @ P['head']; score at batch 1 and 2, and the three
                   slot programs at 2 slots, with the signatures of the role table
  embedding/       kind embedding: `embed` at batch 1 and 2, hidden = (P['embed'][tokens] + P['position']) * mask,
                   exported for cpu and cuda (so a load binds JAX's platform index too)
  broken/          programs that break the causal-lm's contract, for the refusal tests to swap in: a slot_cache
                   whose cache differs from the other slot programs', and a prefill_slot that ignores `length`
                   (so JAX drops that input from the module)
The weights are small integers and halves so the tests can compute the expected values exactly.
"""
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from safetensors.numpy import save_file

jax.config.update("jax_platforms", "cpu")
OUT = os.path.join(os.path.dirname(__file__), "..", "runtime", "src", "test", "resources", "fixtures", "packages")
spec = jax.ShapeDtypeStruct


def fresh(name):
    path = os.path.join(OUT, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def write_export(directory, name, fn, *args, donate=(), platforms=None):
    with open(os.path.join(directory, name), "wb") as f:
        f.write(export.export(jax.jit(fn, donate_argnums=donate), platforms=platforms)(*args).serialize())


def write_manifest(directory, manifest):
    with open(os.path.join(directory, "xla-model.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


def specs(params):
    return {k: spec(v.shape, v.dtype) for k, v in params.items()}


def affine(p, x):
    return x @ p["w"] + p["b"]


def tensor_packages():
    params = {"w": np.arange(6, dtype=np.float32).reshape(3, 2) - 2.0, "b": np.array([0.5, -1.0], np.float32)}
    manifest = {
        "format": 1,
        "name": "affine",
        "kind": "tensor",
        "source": {"generator": "tools/jax_package_fixtures.py"},
        "weights": {"file": "model.safetensors"},
        "programs": [{"role": "main", "batch": b, "file": f"main_b{b}.jax"} for b in (1, 2)],
        "limits": {},
    }
    single = fresh("tensor")
    for b in (1, 2):
        write_export(single, f"main_b{b}.jax", affine, specs(params), spec((b, 3), jnp.float32))
    save_file(params, os.path.join(single, "model.safetensors"))
    write_manifest(single, manifest)

    sharded = fresh("tensor-sharded")
    for b in (1, 2):
        shutil.copy(os.path.join(single, f"main_b{b}.jax"), sharded)
    shards = {"model-00001-of-00002.safetensors": ["w"], "model-00002-of-00002.safetensors": ["b"]}
    for file, names in shards.items():
        save_file({n: params[n] for n in names}, os.path.join(sharded, file))
    index = {"metadata": {"total_size": int(sum(v.nbytes for v in params.values()))},
             "weight_map": {n: file for file, names in shards.items() for n in names}}
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    write_manifest(sharded, dict(manifest, name="affine-sharded", weights={"index": "model.safetensors.index.json"}))


V, D, T, CONTEXT, SLOTS = 8, 4, 4, 8, 2


def score(p, tokens):
    return jnp.cumsum(p["embed"][tokens], axis=1) @ p["head"]  # [B,T,V]


def slot_cache(p):
    del p  # the cache does not depend on the weights; the dict is still the first argument
    return jnp.zeros((SLOTS, CONTEXT, D), jnp.float32)


def prefill_slot(p, tokens, length, slot, cache):
    rows = jnp.where((jnp.arange(T) < length)[:, None], p["embed"][tokens[0]], 0.0)  # [T,D]
    row = jnp.zeros((CONTEXT, D), jnp.float32).at[:T].set(rows)
    cache = jax.lax.dynamic_update_slice(cache, row[None], (slot, 0, 0))
    return jnp.sum(rows, axis=0)[None] @ p["head"], cache  # [1,V]


def decode_slots(p, tokens, positions, cache):
    cache = cache.at[jnp.arange(SLOTS), positions].set(p["embed"][tokens])
    seen = jnp.arange(CONTEXT)[None, :] <= positions[:, None]  # [S,CONTEXT]
    state = jnp.sum(jnp.where(seen[:, :, None], cache, 0.0), axis=1)  # [S,D]
    return state @ p["head"], cache  # [S,V]


def causal_lm_package():
    directory = fresh("causal-lm")
    embed = (np.arange(V * D, dtype=np.float32).reshape(V, D) % 5) - 2.0
    head = (np.arange(D * V, dtype=np.float32).reshape(D, V) % 3) * 0.5 - 0.5
    params = {"embed": embed, "head": head}
    p = specs(params)
    i32 = jnp.int32
    cache = spec((SLOTS, CONTEXT, D), jnp.float32)
    for b in (1, 2):
        write_export(directory, f"score_b{b}.jax", score, p, spec((b, T), i32))
    write_export(directory, "prefill_slot_s2.jax", prefill_slot, p, spec((1, T), i32), spec((), i32), spec((), i32),
                 cache, donate=4)
    write_export(directory, "decode_slots_s2.jax", decode_slots, p, spec((SLOTS,), i32), spec((SLOTS,), i32), cache,
                 donate=3)
    write_export(directory, "slot_cache_s2.jax", slot_cache, p)
    save_file(params, os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0", "model": {"type": "WordLevel", "vocab": {}, "unk_token": "[UNK]"}}\n')
    with open(os.path.join(directory, "chat_template.jinja"), "w") as f:
        f.write("{% for m in messages %}{{ m['content'] }}{% endfor %}\n")
    write_manifest(directory, {
        "format": 1,
        "name": "toy-lm",
        "kind": "causal-lm",
        "source": {"architecture": "ToyCumulativeLM", "dtype": "float32"},
        "weights": {"file": "model.safetensors"},
        "programs": [
            {"role": "score", "batch": 2, "length": T, "file": "score_b2.jax"},
            {"role": "score", "batch": 1, "length": T, "file": "score_b1.jax"},
            {"role": "prefill_slot", "slots": SLOTS, "length": T, "file": "prefill_slot_s2.jax"},
            {"role": "decode_slots", "slots": SLOTS, "file": "decode_slots_s2.jax"},
            {"role": "slot_cache", "slots": SLOTS, "file": "slot_cache_s2.jax"},
        ],
        "host_callbacks": [],
        "tokenizer": {"huggingface": "tokenizer.json"},
        "chat_template": "chat_template.jinja",
        "generation": {"eos_token_ids": [0, 7], "bos_token_id": None, "max_tokens": 5, "temperature": 0.5,
                       "top_k": 3, "top_p": 0.9},
        "limits": {"vocabulary": V, "context_length": CONTEXT},
    })


def embed_states(p, tokens, mask):
    return (p["embed"][tokens] + p["position"][None]) * mask[..., None].astype(jnp.float32)  # [B,T,D]


def embedding_package():
    directory = fresh("embedding")
    params = {"embed": (np.arange(V * D, dtype=np.float32).reshape(V, D) % 7) - 3.0,
              "position": np.arange(T * D, dtype=np.float32).reshape(T, D) * 0.25}
    for b in (1, 2):
        write_export(directory, f"embed_b{b}.jax", embed_states, specs(params), spec((b, T), jnp.int32),
                     spec((b, T), jnp.int32), platforms=["cpu", "cuda"])
    save_file(params, os.path.join(directory, "model.safetensors"))
    write_manifest(directory, {
        "format": 1,
        "name": "toy-embedder",
        "kind": "embedding",
        "weights": {"file": "model.safetensors"},
        "programs": [{"role": "embed", "batch": b, "length": T, "file": f"embed_b{b}.jax"} for b in (1, 2)],
        "tokenizer": {"tiktoken": "cl100k_base"},
        "embedding": {"pooling": "mean", "normalize": True},
        "limits": {"vocabulary": V, "context_length": T},
    })


def prefill_ignoring_length(p, tokens, length, slot, cache):
    del length
    return prefill_slot(p, tokens, T, slot, cache)


def broken_programs():
    directory = fresh("broken")
    params = {"embed": spec((V, D), jnp.float32), "head": spec((D, V), jnp.float32)}
    i32 = jnp.int32
    write_export(directory, "slot_cache_s2_wide.jax", lambda p: jnp.zeros((SLOTS, CONTEXT, D + 1), jnp.float32), params)
    write_export(directory, "prefill_slot_s2_no_length.jax", prefill_ignoring_length, params, spec((1, T), i32),
                 spec((), i32), spec((), i32), spec((SLOTS, CONTEXT, D), jnp.float32))


def main():
    os.makedirs(OUT, exist_ok=True)
    tensor_packages()
    causal_lm_package()
    embedding_package()
    broken_programs()


if __name__ == "__main__":
    main()
