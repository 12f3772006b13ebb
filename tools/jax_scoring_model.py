"""The scoring model served by ModelServer's tests and `bench/run.sh serve`: y = relu(x . W), with relu a
Java host callback, exported with jax.export at several batch sizes, the weights as safetensors.

    $(bash tools/jax-env.sh) tools/jax_scoring_model.py --dim 2048 --out DIR   # the bench's: W is 16 MiB
    $(bash tools/jax-env.sh) tools/jax_scoring_model.py --dim 64 --out actors/src/test/resources/scoring

writes into DIR:
  score_b<B>.jax      Exported.serialize() of score(params, inputs) at batch B (1, 2, 4, 8, 16, 32 by default):
                      params = {"w": f32[D, D]} (bound once, from the weights), inputs = {"x": f32[B, D]}
                      (the per-request input, one row per request); the output is y: f32[B, D]
  weights.safetensors {"w": f32[D, D]}, drawn from a fixed seed (re-running reproduces the files)
  model.properties    dim, batch sizes, callback names, and the sha256 of the weights

The host callback inside each program is named relu_b<B>: a callback's output template is fixed, and the
callback of the batch-B program returns f32[B, D] (it sees the whole padded batch), so each batch size
has its own name. The Java side registers one function under each name.
"""
import argparse
import hashlib
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from safetensors.numpy import save_file


def make_score(batch):
    def score(params, inputs):
        h = inputs["x"] @ params["w"]
        # The bridge's FFI handler; `callback` names the Java function (registered by the server's user).
        return jax.ffi.ffi_call(
            "xla_actors.host_callback",
            jax.ShapeDtypeStruct(h.shape, h.dtype),
            has_side_effect=True,
        )(h, callback=f"relu_b{batch}")

    return score


def weights(dim):
    rng = np.random.default_rng(23)
    # Scaled so that x . W stays O(1) for x in [-1, 1]: about half the pre-activations are negative.
    return {"w": (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,2,4,8,16,32")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dim, batches = a.dim, [int(b) for b in a.batches.split(",")]
    params = weights(dim)
    unsafe = [export.DisabledSafetyCheck.custom_call("xla_actors.host_callback")]
    pspec = {"w": jax.ShapeDtypeStruct((dim, dim), jnp.float32)}
    for b in batches:
        exp = export.export(jax.jit(make_score(b)), disabled_checks=unsafe)(
            pspec, {"x": jax.ShapeDtypeStruct((b, dim), jnp.float32)})
        (out / f"score_b{b}.jax").write_bytes(exp.serialize())
    save_file(params, out / "weights.safetensors")
    sha = hashlib.sha256((out / "weights.safetensors").read_bytes()).hexdigest()
    (out / "model.properties").write_text(
        f"# made by tools/jax_scoring_model.py with jax {jax.__version__}: y = relu(x . W), relu the host callback relu_b<B>\n"
        f"dim={dim}\nbatches={','.join(map(str, batches))}\ncallbacks={','.join(f'relu_b{b}' for b in batches)}\n"
        f"weights_sha256={sha}\n")
    print(out)


if __name__ == "__main__":
    main()
