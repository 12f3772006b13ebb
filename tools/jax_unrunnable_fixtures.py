"""Exports the JAX programs that cannot run from Java, as jax 0.10.2 writes them, for the runtime's
UnrunnableExportsTest: each must be refused at load with a message saying why and what to do instead.

    $(bash tools/jax-env.sh) tools/jax_unrunnable_fixtures.py
writes runtime/src/test/resources/fixtures/unrunnable/*.mlir
"""
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

OUT = pathlib.Path(__file__).resolve().parent.parent / "runtime/src/test/resources/fixtures/unrunnable"


def python_callback(x):
    y = jax.pure_callback(lambda v: np.sin(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return y * 2


def ordered_print(x):
    jax.debug.print("x = {}", x, ordered=True)
    return x + 1


def scaled(x):
    return jnp.tanh(x) * 3


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    x = np.zeros((4,), np.float32)
    (OUT / "python_callback.mlir").write_text(jax.jit(python_callback).lower(x).as_text())
    # jax.export refuses host callbacks, so the ordered effect is lowered the way docs/imports.md exports.
    (OUT / "ordered_effect.mlir").write_text(jax.jit(ordered_print).lower(x).as_text())
    batch = export.symbolic_shape("b, 8")
    spec = jax.ShapeDtypeStruct(batch, np.float32)
    (OUT / "symbolic_batch.mlir").write_text(export.export(jax.jit(scaled))(spec).mlir_module())


if __name__ == "__main__":
    main()
