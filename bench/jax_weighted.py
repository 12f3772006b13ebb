"""The JAX half of `bench/run.sh weighted`: the reference peer for bench/WeightedCallbackBench.java.

y = relu(x[1,2048] . W[2048,2048]) with W (16 MiB) on the device and relu a host callback, each call
from a NumPy x to a NumPy y (upload x, run, download y), as the Java side does:

  weighted_pure_callback  jax.jit of x @ w followed by jax.pure_callback(relu), W committed to the device
  matmul_jit              jax.jit of the bare x @ w, W on the device
"""
import os
import platform

import jax
import jax.numpy as jnp
import numpy as np

from jax_probe import measure

D = 2048


def main():
    seconds = float(os.environ.get("BENCH_WEIGHTED_SECONDS", "6"))
    budget = (300, 3_000, seconds)
    print(
        f"INFO side=jax jax={jax.__version__} numpy={np.__version__} backend={jax.default_backend()} "
        f"python={platform.python_version()} cpu_count={os.cpu_count()} XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        flush=True,
    )
    rng = np.random.default_rng(1)
    w = ((rng.random((D, D), dtype=np.float32) * 2 - 1) * 0.03).astype(np.float32)
    x = (rng.random((1, D), dtype=np.float32) * 2 - 1).astype(np.float32)
    w_device = jax.device_put(w).block_until_ready()

    spec = jax.ShapeDtypeStruct((1, D), jnp.float32)

    def relu(h):
        return np.maximum(np.asarray(h), 0).astype(np.float32)

    weighted = jax.jit(lambda w, x: jax.pure_callback(relu, spec, x @ w))
    matmul = jax.jit(lambda w, x: x @ w)

    expected = np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0)
    np.testing.assert_allclose(np.asarray(weighted(w_device, x)), expected, atol=1e-3)
    np.testing.assert_allclose(np.maximum(np.asarray(matmul(w_device, x)), 0), expected, atol=1e-3)

    measure("weighted_pure_callback", 0, 0, 1, *budget, lambda: np.asarray(weighted(w_device, x)))
    measure("matmul_jit", 0, 0, 1, *budget, lambda: np.asarray(matmul(w_device, x)))


if __name__ == "__main__":
    main()
