"""Writes a 124 M GPT-2 checkpoint with random weights in Hugging Face's layout (what GPT2LMHeadModel's
save_pretrained writes: config.json, model.safetensors with Conv1D [in, out] weights and the head tied to
wte), for bench/run.sh kernels to import with `bin/xla-actors import hf ... --tiktoken r50k_base` as a user
imports a downloaded GPT-2. Nothing is downloaded; no torch: numpy and safetensors (the venv of
tools/jax-env.sh). Weights ~ N(0, 0.02) like GPT-2's initialisation, LayerNorm gains 1 and biases 0.

    $(bash tools/jax-env.sh) bench/hf_gpt2.py OUT_DIR
"""
import json
import pathlib
import sys

import numpy as np
from safetensors.numpy import save_file

LAYERS, D, HEADS, CONTEXT, VOCAB = 12, 768, 12, 1024, 50257


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(124)
    normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    t = {"transformer.wte.weight": normal(VOCAB, D), "transformer.wpe.weight": normal(CONTEXT, D),
         "transformer.ln_f.weight": np.ones(D, np.float32), "transformer.ln_f.bias": np.zeros(D, np.float32)}
    for i in range(LAYERS):
        h = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            t[h + ln + ".weight"] = np.ones(D, np.float32)
            t[h + ln + ".bias"] = np.zeros(D, np.float32)
        for name, n_in, n_out in (("attn.c_attn", D, 3 * D), ("attn.c_proj", D, D), ("mlp.c_fc", D, 4 * D),
                                  ("mlp.c_proj", 4 * D, D)):
            t[h + name + ".weight"] = normal(n_in, n_out)
            t[h + name + ".bias"] = np.zeros(n_out, np.float32)
    save_file(t, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": VOCAB, "n_positions": CONTEXT,
              "n_embd": D, "n_layer": LAYERS, "n_head": HEADS, "activation_function": "gelu_new",
              "layer_norm_epsilon": 1e-5, "bos_token_id": 50256, "eos_token_id": 50256, "tie_word_embeddings": True}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
