"""The JAX half of `bench/run.sh matmul`: the reference peer for bench/MatmulBench.java.

y = x[1,2048] . W[2048,2048] (f32) jit-compiled, W committed to the device once. Same rows, names and
BENCH lines as the Java half:

  matmul_execute             np.asarray(f(x_numpy, W_device)): x transferred, y read back
  matmul_execute_resident_x  f(x_device, W_device).block_until_ready(): no transfers
  download_y_8KiB            np.array(y_device, copy=True) (np.asarray of a CPU array is a view)
  upload_x_8KiB              jax.device_put(x_numpy).block_until_ready()
"""
import os
import platform
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jax_probe import measure

N = 2048


def main():
    device = jax.devices()[0]
    print(
        f"INFO side=jax jax={jax.__version__} numpy={np.__version__} backend={jax.default_backend()} "
        f"devices={len(jax.devices())} python={platform.python_version()} cpu_count={os.cpu_count()} "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        flush=True,
    )
    i = np.arange(N)
    x = (i % 3 - 1).astype(np.float32).reshape(1, N)
    w = ((7 * i[:, None] + 3 * i[None, :]) % 5 - 2).astype(np.float32)
    expected = x @ w
    f = jax.jit(lambda x, w: jnp.dot(x, w))
    w_device = jax.device_put(w, device).block_until_ready()
    x_device = jax.device_put(x, device).block_until_ready()
    np.testing.assert_array_equal(np.asarray(f(x, w_device)), expected)
    budget = (300, 3_000, 6.0)
    small = (2_000, 20_000, 3.0)
    measure("matmul_execute", 0, 0, 1, *budget, lambda: np.asarray(f(x, w_device)))
    measure("matmul_execute_resident_x", 0, 0, 1, *budget, lambda: f(x_device, w_device).block_until_ready())
    y = f(x_device, w_device).block_until_ready()
    measure("download_y_8KiB", 4 * N, 1, 1, *small, lambda: np.array(y, copy=True))
    measure("upload_x_8KiB", 4 * N, 1, 1, *small, lambda: jax.device_put(x, device).block_until_ready())


if __name__ == "__main__":
    sys.exit(main())
