"""Exports JAX programs that call an xla-actors host callback through jax.ffi.ffi_call.

Writes actors/src/test/resources/fixtures/jax_ffi_call.mlir and jax_ffi_call_in_place.mlir (the same
program with the callback's output written over its input: input_output_aliases={0: 0}). Run with the
venv of tools/jax-env.sh:
    $(bash tools/jax-env.sh) tools/jax_ffi_call_fixture.py
The program is f(x) = 2 * tokenize(sin(x)), where "tokenize" is a Java callback registered with the
CallbackRuntime; the output is deterministic (no random inputs), so re-running reproduces the file.
"""
import pathlib

import jax
import jax.numpy as jnp
import numpy as np


def f(x, in_place=False):
    y = jnp.sin(x)
    # The target is the bridge's FFI handler; keyword attributes become backend_config entries, and
    # `callback` names the Java function. has_side_effect keeps XLA from dropping or merging the call.
    z = jax.ffi.ffi_call(
        "xla_actors.host_callback",
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        has_side_effect=True,
        input_output_aliases={0: 0} if in_place else None,
    )(y, callback="tokenize")
    return z * 2


fixtures = pathlib.Path(__file__).resolve().parent.parent / "actors/src/test/resources/fixtures"
for name, in_place in (("jax_ffi_call", False), ("jax_ffi_call_in_place", True)):
    out = fixtures / f"{name}.mlir"
    program = jax.jit(f, static_argnames="in_place").lower(np.zeros((4,), np.float32), in_place=in_place)
    out.write_text(program.as_text())
    print(f"wrote {out}")
