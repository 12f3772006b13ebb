"""Exports the model of the jax-model example: a small MLP classifier whose hidden activations pass
through a Java callback ("calibrate") between its two layers.

Writes examples/models/mlp_with_callback.mlir. Run with the venv of tools/jax-env.sh:
    $(bash tools/jax-env.sh) tools/jax_example_model.py
The weights are drawn from a fixed seed and embedded in the program as constants, so re-running
reproduces the file and the Java side passes only the inputs.
"""
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

rng = np.random.default_rng(7)
W1 = rng.normal(0, 0.5, (6, 16)).astype(np.float32)
B1 = rng.normal(0, 0.1, (16,)).astype(np.float32)
W2 = rng.normal(0, 0.5, (16, 3)).astype(np.float32)
B2 = rng.normal(0, 0.1, (3,)).astype(np.float32)


def classify(x):
    hidden = jax.nn.relu(x @ W1 + B1)
    # The Java callback sees the hidden activations and returns calibrated ones of the same shape.
    calibrated = jax.ffi.ffi_call(
        "xla_actors.host_callback",
        jax.ShapeDtypeStruct(hidden.shape, hidden.dtype),
        has_side_effect=True,
    )(hidden, callback="calibrate")
    return jax.nn.softmax(calibrated @ W2 + B2, axis=-1)


out = pathlib.Path(__file__).resolve().parent.parent / "examples/models/mlp_with_callback.mlir"
out.write_text(jax.jit(classify).lower(np.zeros((4, 6), np.float32)).as_text())
print(f"wrote {out}")
