"""Writes the safetensors fixture that SafeTensorsTest reads: a file made by Python's `safetensors`
package (the reference writer), one tensor of each dtype the runtime maps, with values the test
recomputes. Run with the JAX venv (it has numpy, ml_dtypes and safetensors):

    $(bash tools/jax-env.sh) tools/safetensors_fixture.py

The output is committed (about 1 KB); rerun this script only when the fixture's contents change.
"""
import os
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "runtime", "src", "test", "resources",
                   "dev", "xlaactors", "runtime", "model", "python.safetensors")


def tensors():
    return {
        "layers.0.f32": (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3),
        "f64": np.arange(4, dtype=np.float64) / 3,
        "f16": np.arange(5, dtype=np.float16) * np.float16(0.25),
        "bf16": (np.arange(4, dtype=np.float32) * 1.5).astype(ml_dtypes.bfloat16).reshape(2, 2),
        "i64": np.array([-(2 ** 40), 0, 7], dtype=np.int64),
        "u64": np.array([2 ** 63 + 5, 1], dtype=np.uint64),
        "i32": np.arange(-3, 3, dtype=np.int32).reshape(2, 3),
        "u32": np.array([4_000_000_000, 3], dtype=np.uint32),
        "i16": np.array([-30_000, 2], dtype=np.int16),
        "u16": np.array([65_000, 4], dtype=np.uint16),
        "i8": np.array([-128, 127, 0], dtype=np.int8),
        "u8": np.array([255, 0, 9], dtype=np.uint8),
        "bool": np.array([True, False, True]),
        "c64": np.array([1 + 2j, -3.5 + 0.25j], dtype=np.complex64),
        "f8_e5m2": np.array([1, 2, -0.5], dtype=ml_dtypes.float8_e5m2),
        "f8_e4m3fn": np.array([1, -2, 0.5], dtype=ml_dtypes.float8_e4m3fn),
        "scalar": np.array(3.25, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "gewicht.\u00e4": np.array([42], dtype=np.int32),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    os.makedirs(os.path.dirname(out), exist_ok=True)
    save_file(tensors(), out, metadata={"format": "np", "source": "tools/safetensors_fixture.py"})
    print(out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
