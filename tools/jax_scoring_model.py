"""The scoring model served by ModelServer's tests, the serve example and `bench/run.sh serve`: y = relu(x . W),
with relu a Java host callback, as a `tensor` model package (docs/model-package.md).

    $(bash tools/jax-env.sh) tools/jax_scoring_model.py --dim 2048 --out DIR   # the bench's: W is 16 MiB
    $(bash tools/jax-env.sh) tools/jax_scoring_model.py --dim 64 --out actors/src/test/resources/scoring

writes the package into DIR (emptied first):
  main_b<B>.jax       Exported.serialize() of score(weights, x) at batch B (1, 2, 4, 8, 16, 32 by default):
                      weights = {"w": f32[D, D]} (bound once, from the weights), x: f32[B, D] (one row per
                      request); the output is y: f32[B, D]
  model.safetensors   {"w": f32[D, D]}, drawn from a fixed seed (re-running reproduces the files)
  xla-model.json      kind tensor, name "scoring", `main` at each batch size, host_callbacks relu_b<B>;
                      source holds the dimension and the sha256 of the weights. Written last: a directory
                      without it is not a finished package.

The host callback inside each program is named relu_b<B>: a callback's output template is fixed, and the
callback of the batch-B program returns f32[B, D] (it sees the whole padded batch), so each batch size
has its own name. The Java side registers one function under each name before it serves the package.
"""
import argparse
import hashlib
import json
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from safetensors.numpy import save_file


def make_score(batch):
    def score(weights, x):
        h = x @ weights["w"]
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
    shutil.rmtree(out, ignore_errors=True)  # no file of an older layout is left beside the package
    out.mkdir(parents=True)
    dim, batches = a.dim, [int(b) for b in a.batches.split(",")]
    params = weights(dim)
    unsafe = [export.DisabledSafetyCheck.custom_call("xla_actors.host_callback")]
    wspec = {"w": jax.ShapeDtypeStruct((dim, dim), jnp.float32)}
    for b in batches:
        exp = export.export(jax.jit(make_score(b)), platforms=["cpu"], disabled_checks=unsafe)(
            wspec, jax.ShapeDtypeStruct((b, dim), jnp.float32))
        (out / f"main_b{b}.jax").write_bytes(exp.serialize())
    save_file(params, out / "model.safetensors")
    sha = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    manifest = {
        "format": 1,
        "name": "scoring",
        "kind": "tensor",
        "source": {"generator": "tools/jax_scoring_model.py", "jax": jax.__version__, "function": "y = relu(x . W)",
                   "dim": str(dim), "weights_sha256": sha},
        "weights": {"file": "model.safetensors"},
        "programs": [{"role": "main", "batch": b, "file": f"main_b{b}.jax"} for b in batches],
        "host_callbacks": [f"relu_b{b}" for b in batches],
        "limits": {},
    }
    with open(out / "xla-model.json", "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(out)


if __name__ == "__main__":
    main()
