"""Exports a JAX program that calls an xla-actors host callback through jax.ffi.ffi_call.

Writes actors/src/test/resources/fixtures/jax_ffi_call.mlir. Run with the venv of tools/jax-env.sh:
    $(bash tools/jax-env.sh) tools/jax_ffi_call_fixture.py
The program is f(x) = 2 * tokenize(sin(x)), where "tokenize" is a Java callback registered with the
CallbackRuntime; the output is deterministic (no random inputs), so re-running reproduces the file.
"""
import pathlib

import jax
import jax.numpy as jnp
import numpy as np


def f(x):
    y = jnp.sin(x)
    # The target is the bridge's FFI handler; keyword attributes become backend_config entries, and
    # `callback` names the Java function. has_side_effect keeps XLA from dropping or merging the call.
    z = jax.ffi.ffi_call(
        "xla_actors.host_callback",
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        has_side_effect=True,
    )(y, callback="tokenize")
    return z * 2


out = pathlib.Path(__file__).resolve().parent.parent / "actors/src/test/resources/fixtures/jax_ffi_call.mlir"
out.write_text(jax.jit(f).lower(np.zeros((4,), np.float32)).as_text())
print(f"wrote {out}")
