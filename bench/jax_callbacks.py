"""The JAX half of `bench/run.sh callbacks`: the reference peer for bench/CallbacksBench.java.

Runs the same program shapes as the Java harness, with the callback made by `jax.pure_callback`
(`pure` rows) and by `jax.experimental.io_callback` (`io` rows, ordered=False), and prints the same
kind of lines (`INFO ...`, `BENCH side=jax name=... median_us=... p99_us=... samples=... bytes=...
gbps=...`; throughput rows `BENCH side=jax name=throughput_<n>_<kind> cbps=...`):

  loop_f32x8_<kind>      jit(fori_loop(0, K, body)) with one callback per iteration on f32[8], each on
                         the previous result; one sample per run, reported per callback (run / K)
  single_f32x8_<kind>    jit of one callback on f32[8], one sample per run
  throughput_<n>_<kind>  callbacks per second of the K-call program run back to back by n Python
                         threads (the GIL serialises the Python callbacks; reported as measured)
  callback_16MiB_pure    fori_loop of BIG_K pure_callbacks on f32[4194304], per callback; GB/s counts
                         the payload twice (into Python and back), as on the Java side
  memcpy_16MiB           np.copyto of 16 MiB, for the same machine's copy bandwidth

The callbacks return their input (counted, so the check before timing proves every call happened).
"""
import itertools
import os
import platform
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from jax_probe import measure

# Keep in step with CallbacksBench.K / BIG_K / BIG_ELEMENTS.
K = 100
BIG_K = 8
BIG_ELEMENTS = 4 << 20
THROUGHPUT_WARMUP_SECONDS = 1.0
# As CallbacksBench.WARMUP_SECONDS: the f32[8] programs run this long before anything is timed.
WARMUP_SECONDS = float(os.environ.get("BENCH_WARMUP_SECONDS", "15"))
THROUGHPUT_SECONDS = 3.0


def throughput(threads, operation):
    """Operations per second of `threads` threads repeating `operation`; as CallbacksBench.throughput."""
    completed = [0] * threads
    failures = []
    warmup_end = time.perf_counter() + THROUGHPUT_WARMUP_SECONDS
    end = warmup_end + THROUGHPUT_SECONDS

    def worker(index):
        try:
            while time.perf_counter() < warmup_end:
                operation()
            n = 0
            while time.perf_counter() < end:
                operation()
                n += 1
            completed[index] = n
        except BaseException as e:  # reported below; a failed thread must fail the benchmark
            failures.append(e)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    finished = time.perf_counter()
    if failures:
        raise failures[0]
    return sum(completed) / (finished - warmup_end)


def main():
    print(
        f"INFO side=jax jax={jax.__version__} numpy={np.__version__} backend={jax.default_backend()} "
        f"devices={len(jax.devices())} python={platform.python_version()} cpu_count={os.cpu_count()} "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        flush=True,
    )
    calls = itertools.count()

    def echo(x):
        next(calls)
        return x

    spec8 = jax.ShapeDtypeStruct((8,), jnp.float32)
    spec_big = jax.ShapeDtypeStruct((BIG_ELEMENTS,), jnp.float32)
    kinds = {
        "pure": lambda spec, x: jax.pure_callback(echo, spec, x),
        "io": lambda spec, x: io_callback(echo, spec, x, ordered=False),
    }

    def loop_program(kind, spec, k):
        call = kinds[kind]
        return jax.jit(lambda x: jax.lax.fori_loop(0, k, lambda i, c: call(spec, c), x))

    def check(fn, x, expected_calls):
        before = next(calls)
        out = np.asarray(fn(x))
        made = next(calls) - before - 1
        if made != expected_calls or not np.array_equal(out, np.asarray(x)):
            raise SystemExit(f"wrong result: {made} callback calls (expected {expected_calls}), output {out[:8]}")

    # Host (NumPy) arrays in, np.asarray out: like CallbackRuntime.run, which takes and returns host
    # tensors, each run uploads its input and reads its output back.
    small = np.arange(1, 9, dtype=np.float32)
    programs = {}
    for kind in kinds:
        loop = loop_program(kind, spec8, K)
        single = jax.jit(lambda x, call=kinds[kind]: call(spec8, x))
        # A benchmark of a wrong answer is worthless: check once (this also compiles) before timing.
        check(loop, small, K)
        check(single, small, 1)
        programs[kind] = (loop, single)
    warmup_end = time.perf_counter() + WARMUP_SECONDS
    while time.perf_counter() < warmup_end:
        for loop, single in programs.values():
            np.asarray(loop(small))
            np.asarray(single(small))
    print(f"INFO side=jax warmup_seconds={WARMUP_SECONDS:.0f}", flush=True)
    for kind, (loop, single) in programs.items():
        measure(f"loop_f32x8_{kind}", 0, 2, K, 30, 5_000, 5.0, lambda: np.asarray(loop(small)))
        measure(f"single_f32x8_{kind}", 0, 2, 1, 2_000, 20_000, 4.0, lambda: np.asarray(single(small)))
    for kind in kinds:
        loop = loop_program(kind, spec8, K)
        np.asarray(loop(small))
        for threads in (1, 8):
            cbps = throughput(threads, lambda: np.asarray(loop(small))) * K
            print(f"BENCH side=jax name=throughput_{threads}_{kind} cbps={cbps:.1f} threads={threads}", flush=True)

    big = np.arange(BIG_ELEMENTS, dtype=np.float32)
    big_loop = loop_program("pure", spec_big, BIG_K)
    check(big_loop, big, BIG_K)
    measure("callback_16MiB_pure", 4 * BIG_ELEMENTS, 2, BIG_K, 2, 60, 8.0, lambda: np.asarray(big_loop(big)))
    source = np.arange(BIG_ELEMENTS, dtype=np.float32)
    target = np.empty_like(source)
    measure("memcpy_16MiB", 4 * BIG_ELEMENTS, 1, 1, 20, 500, 2.0, lambda: np.copyto(target, source))
    np.testing.assert_array_equal(source, target)


if __name__ == "__main__":
    sys.exit(main())
