"""The JAX half of `bench/run.sh execute`: the reference peer for bench/ExecuteBench.java.

Measures the same operations on the same sizes under the same names, and prints the same kind of
lines (`INFO ...`, `BENCH side=jax name=... median_us=... p99_us=... samples=... bytes=... gbps=...`):

  execute_f32x8        jit-compiled f32[8] add on device arrays, block_until_ready() each call
  run_f32x8            the same add called on NumPy arrays, result read back with np.asarray
                       (upload + execute + download, like Executable.run)
  roundtrip_1MiB/64MiB jax.device_put(np_array) + np.asarray(...), block_until_ready() between
  roundtrip_*_copyout  the same with np.array(..., copy=True): np.asarray of a CPU array is a
                       zero-copy view, so this row is the one that copies both ways, as Java does
"""
import os
import platform
import sys

import jax

# Four CPU devices, as the xla-actors CPU client reports on this machine, for the device-1 rows.
jax.config.update("jax_num_cpu_devices", 4)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jax_probe import measure


def main():
    device = jax.devices()[0]
    print(
        f"INFO side=jax jax={jax.__version__} numpy={np.__version__} backend={jax.default_backend()} "
        f"devices={len(jax.devices())} python={platform.python_version()} cpu_count={os.cpu_count()} "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        flush=True,
    )

    # Budgets match ExecuteBench: (warm-up iterations, iterations, max seconds).
    tiny = (2_000, 20_000, 4.0)

    a = np.arange(8, dtype=np.float32)
    b = 10 * np.arange(8, dtype=np.float32)
    expected = a + b
    add = jax.jit(lambda x, y: x + y)
    device_a = jax.device_put(a, device).block_until_ready()
    device_b = jax.device_put(b, device).block_until_ready()
    # A benchmark of a wrong answer is worthless: check once (this also compiles) before timing.
    np.testing.assert_array_equal(np.asarray(add(device_a, device_b)), expected)
    measure("execute_f32x8", 0, 0, 1, *tiny, lambda: add(device_a, device_b).block_until_ready())
    measure("run_f32x8", 0, 0, 1, *tiny, lambda: np.asarray(add(a, b)))

    # The same add committed to the second device, and a 1 MiB device-to-device copy (device 0 -> 1).
    device1 = jax.devices()[1]
    a1 = jax.device_put(a, device1).block_until_ready()
    out1 = add(a1, a1)
    assert out1.devices() == {device1}, out1.devices()
    np.testing.assert_array_equal(np.asarray(out1), a + a)
    measure("execute_f32x8_device1", 0, 0, 1, *tiny, lambda: add(a1, a1).block_until_ready())
    mib = jax.device_put(np.arange((1 << 20) // 4, dtype=np.float32), device).block_until_ready()
    np.testing.assert_array_equal(np.asarray(jax.device_put(mib, device1)), np.asarray(mib))
    measure("copy_d2d_1MiB", 1 << 20, 1, 1, 50, 500, 4.0, lambda: jax.device_put(mib, device1).block_until_ready())

    for name, size, budget in (
        ("roundtrip_1MiB", 1 << 20, (50, 500, 4.0)),
        ("roundtrip_64MiB", 64 << 20, (3, 30, 8.0)),
    ):
        values = np.arange(size // 4, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(jax.device_put(values, device)), values)
        measure(name, size, 2, 1, *budget,
                lambda: np.asarray(jax.device_put(values, device).block_until_ready()))
        measure(name + "_copyout", size, 2, 1, *budget,
                lambda: np.array(jax.device_put(values, device).block_until_ready(), copy=True))


if __name__ == "__main__":
    sys.exit(main())
