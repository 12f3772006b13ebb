"""Timing shared by the JAX halves of the benchmarks (jax_execute.py, jax_callbacks.py): the same warm-up,
sampling and percentile rules as bench's LatencyProbe.java, and the same BENCH line format."""
import math
import time


def percentile(sorted_ns, fraction):
    """Nearest-rank percentile; the same definition as LatencyProbe.percentile."""
    rank = math.ceil(fraction * len(sorted_ns))
    return sorted_ns[max(0, min(len(sorted_ns) - 1, rank - 1))]


def measure(name, payload_bytes, copies, steps, warmup_iterations, iterations, max_seconds, operation):
    """Warm up, then sample; as LatencyProbe.measure. Times are divided by `steps` (callbacks per run)."""
    warmup_deadline = time.perf_counter_ns() + int(max_seconds * 0.25e9)
    for _ in range(warmup_iterations):
        operation()
        if time.perf_counter_ns() > warmup_deadline:
            break
    samples = []
    deadline = time.perf_counter_ns() + int(max_seconds * 0.75e9)
    clock = time.perf_counter_ns
    while len(samples) < iterations:
        start = clock()
        operation()
        end = clock()
        samples.append(end - start)
        if end > deadline:
            break
    samples.sort()
    median_us = percentile(samples, 0.50) / 1e3 / steps
    p99_us = percentile(samples, 0.99) / 1e3 / steps
    gbps = copies * payload_bytes / (median_us * 1e-6) / 1e9 if payload_bytes else 0.0
    print(
        f"BENCH side=jax name={name} median_us={median_us:.3f} p99_us={p99_us:.3f} "
        f"samples={len(samples)} bytes={payload_bytes} gbps={gbps:.3f}",
        flush=True,
    )
