"""A model package for the lm module's tests: tools/jax_package_fixtures.py's toy causal LM, with its decode
step passing the logits through the host callback "observe" (typed FFI target xla_actors.host_callback), so a
test decides how long each decode step takes: a step that hangs in its callback, one that is cancelled.

Run with the JAX venv's python from the repository root:
    $(bash tools/jax-env.sh) tools/jax_lm_fixtures.py
It rewrites lm/src/test/resources/packages/toy-lm-observed/.
"""
import os
import shutil
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(__file__))
import jax_package_fixtures as toy  # noqa: E402  (the toy model and its helpers)

OUT = os.path.join(os.path.dirname(__file__), "..", "lm", "src", "test", "resources", "packages", "toy-lm-observed")
UNSAFE = [export.DisabledSafetyCheck.custom_call("xla_actors.host_callback")]


def decode_slots_observed(p, tokens, positions, cache):
    logits, cache = toy.decode_slots(p, tokens, positions, cache)
    observed = jax.ffi.ffi_call("xla_actors.host_callback", jax.ShapeDtypeStruct(logits.shape, logits.dtype),
                                has_side_effect=True)(logits, callback="observe")
    return observed, cache


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    embed = (np.arange(toy.V * toy.D, dtype=np.float32).reshape(toy.V, toy.D) % 5) - 2.0
    head = (np.arange(toy.D * toy.V, dtype=np.float32).reshape(toy.D, toy.V) % 3) * 0.5 - 0.5
    params = {"embed": embed, "head": head}
    p = toy.specs(params)
    i32 = jnp.int32
    spec = jax.ShapeDtypeStruct
    cache = spec((toy.SLOTS, toy.CONTEXT, toy.D), jnp.float32)
    toy.write_export(OUT, "score_b1.jax", toy.score, p, spec((1, toy.T), i32))
    toy.write_export(OUT, "prefill_slot_s2.jax", toy.prefill_slot, p, spec((1, toy.T), i32), spec((), i32), spec((), i32),
                     cache, donate=4)
    with open(os.path.join(OUT, "decode_slots_s2.jax"), "wb") as f:
        f.write(export.export(jax.jit(decode_slots_observed, donate_argnums=3), disabled_checks=UNSAFE)(
            p, spec((toy.SLOTS,), i32), spec((toy.SLOTS,), i32), cache).serialize())
    toy.write_export(OUT, "slot_cache_s2.jax", toy.slot_cache, p)
    save_file(params, os.path.join(OUT, "model.safetensors"))
    with open(os.path.join(OUT, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0", "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1, "b": 2, "c": 3, "d": 4, '
                '"e": 5, "f": 6, "g": 7}, "unk_token": "[UNK]"}, "pre_tokenizer": {"type": "Whitespace"}, '
                '"decoder": {"type": "WordPiece", "prefix": "##", "cleanup": false}}\n')
    toy.write_manifest(OUT, {
        "format": 1,
        "name": "toy-lm-observed",
        "kind": "causal-lm",
        "source": {"architecture": "ToyCumulativeLM", "dtype": "float32"},
        "weights": {"file": "model.safetensors"},
        "programs": [
            {"role": "score", "batch": 1, "length": toy.T, "file": "score_b1.jax"},
            {"role": "prefill_slot", "slots": toy.SLOTS, "length": toy.T, "file": "prefill_slot_s2.jax"},
            {"role": "decode_slots", "slots": toy.SLOTS, "file": "decode_slots_s2.jax"},
            {"role": "slot_cache", "slots": toy.SLOTS, "file": "slot_cache_s2.jax"},
        ],
        "host_callbacks": ["observe"],
        "tokenizer": {"huggingface": "tokenizer.json"},
        "generation": {"eos_token_ids": [0]},
        "limits": {"vocabulary": toy.V, "context_length": toy.CONTEXT},
    })


if __name__ == "__main__":
    main()
