"""The JAX compatibility suite: real JAX programs exported as StableHLO, with JAX's own results.

Run with the JAX venv's python (jax==0.10.2, CPU) from the repository root:
    $(bash tools/jax-env.sh) tools/jax_compat_suite.py
It rewrites runtime/src/test/resources/fixtures/compat/ (JaxCompatibilityTest runs every program):
    manifest.tsv            one line per program: name, family, expected (match | refused), rtol, atol,
                            and for refused programs the texts the refusal must contain, joined by ' && '
    <name>/program.mlir     jax.jit(f).lower(*args).as_text()
    <name>/tensors.txt      one line per tensor, in order: input|output <index> <dtype> <dims, '-' for a scalar>
    <name>/tensors.bin      the tensors' row-major little-endian bytes, concatenated in the same order
Inputs are drawn from a generator seeded by the program's name, so a second run writes the same bytes.

Tolerances are |actual - expected| <= atol + rtol * |expected| per element (complex: per real and
imaginary part); integers, pred and float8 are compared exactly. The default is rtol = atol = 1e-5; a
program that needs more says why in its `why` note, which goes into the manifest.
"""
import pathlib
import shutil
import zlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_platforms", "cpu")
OUT = pathlib.Path(__file__).resolve().parent.parent / "runtime/src/test/resources/fixtures/compat"

DTYPES = {
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
    np.dtype(jnp.bfloat16): "bf16", np.dtype(np.int8): "s8", np.dtype(np.int32): "s32",
    np.dtype(np.int64): "s64", np.dtype(np.uint8): "u8", np.dtype(np.uint32): "u32",
    np.dtype(np.bool_): "pred", np.dtype(np.complex64): "c64",
    np.dtype(jnp.float8_e4m3fn): "f8e4m3fn", np.dtype(jnp.float8_e5m2): "f8e5m2",
}

PROGRAMS = []  # (name, family, fn, make_args, options)


def program(family, rtol=1e-5, atol=1e-5, why="", refused=None):
    """Registers `fn(*args)`; the decorated function returns (fn, args) given a seeded generator."""

    def register(make):
        PROGRAMS.append((make.__name__, family, make, dict(rtol=rtol, atol=atol, why=why, refused=refused)))
        return make

    return register


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def s32(rng, low, high, *shape):
    return rng.integers(low, high, shape).astype(np.int32)


def spd(rng, n):
    a = f32(rng, n, n)
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


def key(seed):
    return np.asarray(jax.random.PRNGKey(seed))  # legacy raw threefry key, u32[2]


# ---- jax.numpy: elementwise, reductions, shapes, dtypes --------------------------------------------

@program("numpy", rtol=2e-5, atol=2e-6, why="transcendentals: XLA's and Eigen's polynomial approximations differ by a few ulp")
def np_transcendental(rng):
    def f(x):
        return jnp.sin(x), jnp.cos(x), jnp.exp(x), jnp.log1p(jnp.abs(x)), jnp.tanh(x), jnp.sqrt(jnp.abs(x)), x ** 3
    return f, [f32(rng, 3, 5, scale=2)]


@program("numpy")
def np_broadcast_arith(rng):
    def f(a, b, c):
        return a * b + c, jnp.maximum(a, c), jnp.where(a > 0, b, -b), a / (jnp.abs(c) + 1)
    return f, [f32(rng, 4, 1), f32(rng, 1, 6), f32(rng, 6)]


@program("numpy", rtol=1e-5, atol=1e-5)
def np_reductions(rng):
    def f(x):
        return (x.sum(0), x.mean(1), x.max((0, 2)), x.min(), jnp.prod(x[:, :2], -1), x.var(0), x.std(2),
                jnp.linalg.norm(x, axis=-1))
    return f, [f32(rng, 3, 4, 5)]


@program("numpy")
def np_argmax_argmin(rng):
    def f(x):
        return jnp.argmax(x, 0), jnp.argmin(x, 1), jnp.argmax(x)
    return f, [f32(rng, 5, 7)]


@program("numpy")
def np_integer_ops(rng):
    def f(a, b):
        return (a // b, a % b, a & 0x3C, a | b, a ^ b, a << 2, a >> 1, jnp.abs(a), jnp.sign(b), a.sum(0))
    return f, [s32(rng, -1000, 1000, 3, 4), np.array([[-7, -3, 2, 5]] * 3, np.int32)]


@program("numpy")
def np_uint8_wraps(rng):
    def f(a, b):
        return a + b, a - b, a * b, jnp.maximum(a, b), (a.astype(jnp.int32) + b).astype(jnp.uint8)
    return f, [rng.integers(0, 256, (10,)).astype(np.uint8), rng.integers(0, 256, (10,)).astype(np.uint8)]


@program("numpy", rtol=2e-5, atol=2e-6, why="exp and log in the logsumexp")
def np_logsumexp(rng):
    return (lambda x: (jax.scipy.special.logsumexp(x, axis=-1), jax.scipy.special.logsumexp(x))), [f32(rng, 4, 9, scale=10)]


@program("numpy")
def np_rounding(rng):
    def f(x):
        return jnp.round(x), jnp.floor(x), jnp.ceil(x), jnp.trunc(x), jnp.clip(x, -1.5, 2.5), jnp.sign(x), jnp.rint(x)
    return f, [np.concatenate([f32(rng, 12, scale=3), np.array([0.5, 1.5, 2.5, -0.5], np.float32)])]


@program("numpy", rtol=1e-4, atol=1e-5, why="erf, erfinv, lgamma and digamma are rational approximations; digamma near its poles loses digits")
def np_special(rng):
    def f(x, p):
        s = jax.scipy.special
        return s.erf(x), s.erfc(x), s.erfinv(p), s.gammaln(jnp.abs(x) + 0.5), s.digamma(jnp.abs(x) + 0.5), jax.nn.sigmoid(x)
    return f, [f32(rng, 10, scale=2), rng.uniform(-0.99, 0.99, 10).astype(np.float32)]


@program("numpy")
def np_compare_logical(rng):
    def f(a, b):
        return a > b, a == jnp.round(a), jnp.logical_and(a > 0, b > 0), jnp.logical_not(a < b), jnp.isfinite(a / b), jnp.any(a > 1, 0), jnp.all(b < 2, 1)
    return f, [f32(rng, 3, 4), np.array([[0, 1, -1, 2]] * 3, np.float32)]


@program("numpy")
def np_shapes(rng):
    def f(x, y):
        return (jnp.concatenate([x, y], 0), jnp.stack([x, y], -1), jnp.pad(x, ((1, 2), (0, 1)), mode="reflect"),
                x.T.reshape(2, 6), jnp.flip(x, 1), jnp.roll(x, 2, 1), jnp.tile(x[:1], (2, 2)), jnp.tril(x), jnp.triu(y, 1))
    return f, [f32(rng, 3, 4), f32(rng, 3, 4)]


@program("numpy", rtol=1e-5, atol=1e-5)
def np_matmul(rng):
    return (lambda a, b, v: (a @ b, jnp.dot(a[0], v), jnp.outer(v, v), jnp.inner(v, v))), [f32(rng, 2, 3, 4), f32(rng, 2, 4, 5), f32(rng, 4)]


@program("numpy")
def np_dtype_conversions(rng):
    def f(x, i):
        return (x.astype(jnp.int32), i.astype(jnp.float32), x.astype(jnp.bfloat16), x.astype(jnp.float16),
                x.astype(jnp.bfloat16).astype(jnp.float32), i.astype(jnp.int8), (x > 0).astype(jnp.uint8), i.astype(jnp.uint32))
    return f, [f32(rng, 8, scale=100), s32(rng, -300, 300, 8)]


@program("numpy", rtol=1e-2, atol=1e-2, why="bf16 and f16 arithmetic: 8- and 11-bit mantissas; XLA CPU may accumulate the bf16 dot in f32 either side")
def np_half_precision(rng):
    def f(a, b):
        return (a @ b), (a.astype(jnp.float16) * 2 + 1), jnp.tanh(a.astype(jnp.float16))
    return f, [f32(rng, 3, 4).astype(jnp.bfloat16), f32(rng, 4, 2).astype(jnp.bfloat16)]


@program("numpy")
def np_iota_arange(rng):
    return (lambda x: (jnp.arange(12).reshape(3, 4) * x, jnp.linspace(0.0, 1.0, 7), jnp.eye(3, 4, 1))), [s32(rng, -5, 5, 3, 4)]


@program("numpy")
def np_bit_ops(rng):
    def f(i, u):
        return lax.population_count(i), lax.clz(u), jnp.bitwise_count(u), lax.shift_right_logical(i, 3), jnp.left_shift(u, 5)
    return f, [s32(rng, -2 ** 31, 2 ** 31 - 1, 8), rng.integers(0, 2 ** 32, 8).astype(np.uint32)]


@program("numpy", rtol=2e-5, atol=2e-6, why="cbrt, nextafter and cumlogsumexp (exp and log per step)")
def np_float_bits(rng):
    def f(x):
        return (jnp.cbrt(x), jnp.nextafter(x, jnp.inf), lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10),
                lax.cumlogsumexp(x), jnp.frexp(x)[1], jnp.ldexp(x, 3), jnp.isnan(x / x))
    return f, [np.concatenate([f32(rng, 9, scale=5), np.zeros(1, np.float32)])]


@program("numpy", rtol=1e-5, atol=1e-5)
def np_sort_based_statistics(rng):
    def f(x, q):
        return jnp.median(x, axis=1), jnp.quantile(x, q, axis=1), jnp.percentile(x, 90.0), jnp.unique(jnp.round(x), size=6, fill_value=0.0)
    return f, [f32(rng, 3, 7, scale=2), np.array([0.1, 0.5, 0.9], np.float32)]


@program("numpy", rtol=1e-5, atol=1e-5)
def np_searchsorted_interp(rng):
    def f(edges, x):
        return jnp.searchsorted(edges, x), jnp.searchsorted(edges, x, side="right"), jnp.interp(x, edges, jnp.sin(edges)), jnp.digitize(x, edges)
    return f, [np.sort(f32(rng, 8, scale=3)), f32(rng, 10, scale=4)]


@program("numpy", rtol=1e-4, atol=1e-5, why="jnp.convolve and correlate sum up to 5 products per output")
def np_convolve_correlate(rng):
    return (lambda a, v: (jnp.convolve(a, v), jnp.convolve(a, v, mode="same"), jnp.correlate(a, v, mode="valid"))), [f32(rng, 12), f32(rng, 5)]


# ---- jax.nn ------------------------------------------------------------------------------------------

@program("nn")
def nn_relu(rng):
    return (lambda x: (jax.nn.relu(x), jax.nn.relu6(x * 4), jax.nn.leaky_relu(x, 0.1))), [f32(rng, 4, 6, scale=3)]


@program("nn", rtol=2e-5, atol=2e-6, why="erf in the exact GELU")
def nn_gelu_exact(rng):
    return (lambda x: jax.nn.gelu(x, approximate=False)), [f32(rng, 4, 6, scale=3)]


@program("nn", rtol=2e-5, atol=2e-6, why="tanh in the approximate GELU")
def nn_gelu_tanh(rng):
    return (lambda x: jax.nn.gelu(x, approximate=True)), [f32(rng, 4, 6, scale=3)]


@program("nn", rtol=2e-5, atol=1e-6, why="exp and a sum over the row")
def nn_softmax(rng):
    return (lambda x: (jax.nn.softmax(x, axis=-1), jax.nn.softmax(x, axis=0))), [f32(rng, 4, 7, scale=4)]


@program("nn", rtol=2e-5, atol=2e-5, why="exp and log over the row")
def nn_log_softmax(rng):
    return (lambda x: jax.nn.log_softmax(x, axis=-1)), [f32(rng, 4, 7, scale=4)]


@program("nn")
def nn_one_hot(rng):
    return (lambda i: (jax.nn.one_hot(i, 6), jax.nn.one_hot(i, 4, dtype=jnp.int32))), [s32(rng, -1, 7, 3, 4)]


@program("nn", rtol=2e-5, atol=2e-6, why="exp and log1p in sigmoid, softplus, silu, elu")
def nn_smooth_activations(rng):
    def f(x):
        return jax.nn.silu(x), jax.nn.softplus(x), jax.nn.elu(x), jax.nn.log_sigmoid(x), jax.nn.hard_tanh(x), jax.nn.celu(x)
    return f, [f32(rng, 3, 8, scale=4)]


@program("nn", rtol=1e-4, atol=1e-5, why="rsqrt of a variance over a row")
def nn_layer_norm(rng):
    def f(x, g, b):
        m = x.mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(x.var(-1, keepdims=True) + 1e-5) * g + b, jax.nn.standardize(x, axis=0)
    return f, [f32(rng, 4, 8, scale=3), f32(rng, 8), f32(rng, 8)]


# ---- convolutions ------------------------------------------------------------------------------------

def conv(x, w, strides=(1, 1), padding="SAME", lhs_dilation=None, rhs_dilation=None, groups=1, dims=("NHWC", "HWIO", "NHWC")):
    return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                                    dimension_numbers=dims, feature_group_count=groups)


CONV_TOL = dict(rtol=1e-4, atol=1e-5, why="sums of up to 72 products; Eigen's and XLA's summation orders differ")


@program("conv", **CONV_TOL)
def conv1d_same(rng):
    return (lambda x, w: conv(x, w, (1,), "SAME", dims=("NWC", "WIO", "NWC"))), [f32(rng, 2, 10, 3), f32(rng, 3, 3, 4)]


@program("conv", **CONV_TOL)
def conv1d_strided_dilated(rng):
    return (lambda x, w: conv(x, w, (2,), [(2, 1)], rhs_dilation=(2,), dims=("NCW", "OIW", "NCW"))), [f32(rng, 2, 3, 11), f32(rng, 4, 3, 3)]


@program("conv", **CONV_TOL)
def conv2d_same(rng):
    return (lambda x, w: conv(x, w)), [f32(rng, 1, 6, 6, 3), f32(rng, 3, 3, 3, 4)]


@program("conv", **CONV_TOL)
def conv2d_valid_stride2(rng):
    return (lambda x, w: conv(x, w, (2, 2), "VALID", dims=("NCHW", "OIHW", "NCHW"))), [f32(rng, 2, 3, 7, 7), f32(rng, 4, 3, 3, 3)]


@program("conv", **CONV_TOL)
def conv2d_explicit_padding_dilation(rng):
    return (lambda x, w: conv(x, w, (1, 2), [(2, 2), (1, 0)], rhs_dilation=(2, 1))), [f32(rng, 1, 8, 7, 2), f32(rng, 3, 2, 2, 3)]


@program("conv", **CONV_TOL)
def conv2d_lhs_dilation(rng):
    return (lambda x, w: conv(x, w, (1, 1), [(1, 1), (1, 1)], lhs_dilation=(2, 2))), [f32(rng, 1, 4, 4, 2), f32(rng, 3, 3, 2, 2)]


@program("conv", **CONV_TOL)
def conv2d_depthwise(rng):
    return (lambda x, w: conv(x, w, groups=4)), [f32(rng, 1, 5, 5, 4), f32(rng, 3, 3, 1, 4)]


@program("conv", **CONV_TOL)
def conv2d_grouped(rng):
    return (lambda x, w: conv(x, w, (2, 2), "SAME", groups=2)), [f32(rng, 2, 6, 6, 4), f32(rng, 3, 3, 2, 6)]


@program("conv", **CONV_TOL)
def conv2d_transpose(rng):
    return (lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))), [f32(rng, 1, 3, 3, 2), f32(rng, 3, 3, 2, 3)]


@program("conv", **CONV_TOL)
def conv2d_bias_relu_grad(rng):
    def loss(w, x):
        return jnp.sum(jax.nn.relu(conv(x, w)) ** 2)
    return (lambda w, x: jax.grad(loss)(w, x)), [f32(rng, 3, 3, 2, 3, scale=0.5), f32(rng, 1, 5, 5, 2)]


# ---- pooling -----------------------------------------------------------------------------------------

@program("pooling")
def maxpool2d(rng):
    return (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")), [f32(rng, 2, 6, 6, 3)]


@program("pooling")
def maxpool2d_same_stride1(rng):
    return (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")), [f32(rng, 1, 5, 5, 2)]


@program("pooling", rtol=1e-5, atol=1e-6)
def avgpool2d_padded(rng):
    def f(x):
        window, strides, pad = (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0))
        s = lax.reduce_window(x, 0.0, lax.add, window, strides, pad)
        n = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, window, strides, pad)
        return s / n
    return f, [f32(rng, 1, 7, 7, 2)]


@program("pooling")
def maxpool1d_int(rng):
    return (lambda x: lax.reduce_window(x, jnp.iinfo(jnp.int32).min, lax.max, (1, 3), (1, 2), "VALID")), [s32(rng, -100, 100, 2, 11)]


# ---- gather and scatter ------------------------------------------------------------------------------

@program("gather_scatter")
def gather_index(rng):
    return (lambda x, i: (x[i], x[:, i], x[-1, ::2])), [f32(rng, 5, 6), s32(rng, -5, 5, 4)]


@program("gather_scatter")
def gather_advanced_2d(rng):
    return (lambda x, i, j: (x[i, j], x[i[:, None], j[None, :]])), [f32(rng, 5, 6), s32(rng, 0, 5, 3), s32(rng, 0, 6, 3)]


@program("gather_scatter")
def scatter_set(rng):
    return (lambda x, i, v: x.at[i].set(v)), [f32(rng, 6, 3), np.array([4, 0, 2], np.int32), f32(rng, 3, 3)]


@program("gather_scatter", rtol=1e-6, atol=1e-6)
def scatter_add_duplicates(rng):
    return (lambda x, i, v: x.at[i].add(v)), [f32(rng, 5), np.array([0, 3, 3, 1, 0, 3], np.int32), f32(rng, 6)]


@program("gather_scatter")
def scatter_min_max_mul(rng):
    return (lambda x, i, v: (x.at[i].max(v), x.at[i].min(v), x.at[i].multiply(v))), [f32(rng, 5), np.array([2, 2, 4], np.int32), f32(rng, 3)]


@program("gather_scatter")
def take_along_axis(rng):
    def f(x):
        idx = jnp.argsort(x, axis=1)
        return jnp.take_along_axis(x, idx, axis=1), jnp.take(x, jnp.array([2, 0]), axis=1)
    return f, [f32(rng, 4, 5)]


@program("gather_scatter")
def dynamic_slice_update(rng):
    return (lambda x, i: (lax.dynamic_slice(x, (i, i), (2, 3)), lax.dynamic_update_slice(x, jnp.zeros((2, 2)), (i, 0)))), [f32(rng, 5, 6), np.array(2, np.int32)]


@program("gather_scatter", rtol=1e-6, atol=1e-6)
def segment_sum(rng):
    return (lambda x, s: jax.ops.segment_sum(x, s, num_segments=4)), [f32(rng, 8, 2), np.array([0, 0, 1, 3, 3, 3, 1, 0], np.int32)]


@program("gather_scatter", rtol=1e-5, atol=1e-6)
def embedding_lookup_grad(rng):
    def loss(table, ids):
        return jnp.sum(jnp.tanh(table[ids]))
    return (lambda t, i: jax.grad(loss)(t, i)), [f32(rng, 6, 3), np.array([1, 4, 1, 0], np.int32)]


# ---- sorting -----------------------------------------------------------------------------------------

@program("sort")
def sort_values(rng):
    return (lambda x, i: (jnp.sort(x, axis=-1), jnp.sort(x, axis=0), jnp.sort(i))), [f32(rng, 4, 6), s32(rng, -9, 9, 10)]


@program("sort")
def argsort_stable(rng):
    return (lambda i: (jnp.argsort(i, stable=True), jnp.argsort(-i, stable=True, axis=0))), [s32(rng, 0, 4, 3, 8)]


@program("sort")
def top_k(rng):
    return (lambda x: lax.top_k(x, 3)), [f32(rng, 4, 9)]


@program("sort")
def sort_multi_operand(rng):
    return (lambda k, v: lax.sort((k, v), num_keys=1)), [s32(rng, 0, 3, 9), f32(rng, 9)]


# ---- cumulative ops and scans ------------------------------------------------------------------------

@program("scan", rtol=1e-5, atol=1e-5)
def cumsum_cumprod(rng):
    return (lambda x, i: (jnp.cumsum(x, 1), jnp.cumprod(x[:, :5], 1), lax.cummax(x, 0), jnp.cumsum(i))), [f32(rng, 3, 8), s32(rng, -5, 5, 9)]


@program("scan", rtol=1e-4, atol=1e-5, why="tanh recurrence over 7 steps compounds rounding")
def lax_scan_rnn(rng):
    def f(w, u, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h.sum()
        return lax.scan(step, jnp.zeros((2, 4), jnp.float32), xs)
    return f, [f32(rng, 4, 4, scale=0.5), f32(rng, 3, 4, scale=0.5), f32(rng, 7, 2, 3)]


@program("scan", rtol=1e-5, atol=1e-5)
def associative_scan(rng):
    def f(x, a):
        def linear(e1, e2):
            return e1[0] * e2[0], e2[0] * e1[1] + e2[1]
        return lax.associative_scan(jnp.add, x), lax.associative_scan(linear, (a, x))[1], lax.associative_scan(jnp.maximum, x, reverse=True)
    return f, [f32(rng, 10), rng.uniform(0.5, 1.0, 10).astype(np.float32)]


# ---- control flow ------------------------------------------------------------------------------------

@program("control_flow")
def while_loop_collatz(rng):
    def f(n):
        def steps(v):
            return lax.while_loop(lambda c: c[0] != 1, lambda c: (jnp.where(c[0] % 2 == 0, c[0] // 2, 3 * c[0] + 1), c[1] + 1), (v, 0))[1]
        return jax.vmap(steps)(n)
    return f, [np.array([1, 6, 7, 27, 97], np.int32)]


@program("control_flow", rtol=1e-6, atol=1e-6)
def while_loop_newton_sqrt(rng):
    def f(a):
        return lax.while_loop(lambda c: c[1] < 20, lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1), (jnp.ones_like(a), 0))[0]
    return f, [rng.uniform(0.1, 50, 6).astype(np.float32)]


@program("control_flow", rtol=1e-5, atol=1e-5)
def fori_loop_power(rng):
    return (lambda m, v: lax.fori_loop(0, 6, lambda i, x: m @ x / jnp.linalg.norm(m @ x), v)), [f32(rng, 4, 4), f32(rng, 4)]


@program("control_flow")
def cond_branches(rng):
    return (lambda p, x: (lax.cond(p, lambda t: t * 2.0, lambda t: -t, x), lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x))), [np.array(False), f32(rng, 5)]


@program("control_flow", rtol=1e-5, atol=1e-6)
def switch_branches(rng):
    return (lambda i, x: lax.switch(i, [jnp.sin, jnp.exp, lambda t: t * t, jnp.abs], x)), [np.array(2, np.int32), f32(rng, 6)]


@program("control_flow")
def vmap_of_cond(rng):
    return (lambda p, x: jax.vmap(lambda q, t: lax.cond(q, lambda s: s + 1, lambda s: s * 3, t))(p, x)), [np.array([True, False, True]), f32(rng, 3, 2)]


# ---- jax.random (threefry) ---------------------------------------------------------------------------

RANDOM_TOL = dict(rtol=1e-5, atol=1e-5, why="bits are exact; erfinv and log turn them into floats")


@program("random", **RANDOM_TOL)
def random_normal(rng):
    return (lambda k: jax.random.normal(k, (3, 5))), [key(0)]


@program("random")
def random_uniform(rng):
    return (lambda k: (jax.random.uniform(k, (8,)), jax.random.uniform(k, (2, 3), minval=-2, maxval=5))), [key(1)]


@program("random")
def random_categorical(rng):
    return (lambda k, logits: jax.random.categorical(k, logits, shape=(5, 3))), [key(2), f32(rng, 3, 6)]


@program("random")
def random_permutation(rng):
    return (lambda k, x: (jax.random.permutation(k, 10), jax.random.permutation(k, x, axis=1))), [key(3), f32(rng, 2, 5)]


@program("random")
def random_bits_randint_bernoulli(rng):
    def f(k):
        a, b, c = jax.random.split(k, 3)
        return jax.random.bits(a, (4,)), jax.random.randint(b, (6,), -5, 20), jax.random.bernoulli(c, 0.3, (8,)), jax.random.fold_in(k, 7)
    return f, [key(4)]


@program("random", **RANDOM_TOL)
def random_truncated_normal_gumbel(rng):
    return (lambda k: (jax.random.truncated_normal(k, -1.0, 2.0, (6,)), jax.random.gumbel(k, (4,)))), [key(5)]


@program("random", **RANDOM_TOL)
def random_rbg(rng):
    # The rbg implementation lowers to stablehlo.rng_bit_generator rather than threefry arithmetic.
    def f(k):
        key = jax.random.wrap_key_data(k, impl="rbg")
        return jax.random.uniform(key, (6,)), jax.random.bits(key, (4,))
    return f, [np.asarray(jax.random.key_data(jax.random.key(6, impl="rbg")))]


@program("random", rtol=1e-4, atol=1e-5, why="gamma runs a rejection-sampling loop with log, exp and pow")
def random_gamma(rng):
    # (beta and dirichlet are gammas too, and would triple the fixture's size)
    return (lambda k, a: jax.random.gamma(k, a, (2, 3))), [key(7), np.array([0.5, 2.5, 9.0], np.float32)]


# ---- FFT ---------------------------------------------------------------------------------------------

FFT_TOL = dict(rtol=1e-4, atol=1e-5, why="FFT sums n terms with twiddle factors; DUCC's plans may order them differently")


def c64(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


@program("fft", **FFT_TOL)
def fft_complex(rng):
    return (lambda z: jnp.fft.fft(z)), [c64(rng, 2, 8)]


@program("fft", **FFT_TOL)
def ifft_complex(rng):
    return (lambda z: jnp.fft.ifft(z, axis=0)), [c64(rng, 6, 3)]


@program("fft", **FFT_TOL)
def rfft_irfft(rng):
    return (lambda x: (jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x), n=10))), [f32(rng, 3, 10)]


@program("fft", **FFT_TOL)
def fft2_fftn(rng):
    return (lambda z: (jnp.fft.fft2(z), jnp.fft.ifftn(z), jnp.fft.fftshift(jnp.abs(jnp.fft.fft2(z))))), [c64(rng, 4, 6)]


@program("fft", **FFT_TOL)
def rfft2_spectrum(rng):
    return (lambda x: jnp.abs(jnp.fft.rfft2(x)) ** 2), [f32(rng, 2, 6, 8)]


# ---- image resizing ----------------------------------------------------------------------------------

@program("image")
def resize_nearest(rng):
    return (lambda x: (jax.image.resize(x, (8, 6, 2), "nearest"), jax.image.resize(x, (3, 2, 2), "nearest"))), [f32(rng, 5, 4, 2)]


@program("image", rtol=1e-5, atol=1e-5, why="bilinear weights are computed in f32 and summed")
def resize_linear(rng):
    return (lambda x: (jax.image.resize(x, (1, 9, 7, 3), "linear"), jax.image.resize(x, (1, 3, 2, 3), "linear", antialias=True))), [f32(rng, 1, 5, 4, 3)]


@program("image", rtol=1e-4, atol=1e-5, why="cubic (Keys) weights computed in f32 over 4 taps per axis")
def resize_cubic(rng):
    return (lambda x: (jax.image.resize(x, (9, 10), "cubic"), jax.image.resize(x, (3, 3), "lanczos3"))), [f32(rng, 6, 5)]


# ---- attention ---------------------------------------------------------------------------------------

ATT_TOL = dict(rtol=1e-4, atol=1e-5, why="softmax over scores from matmuls")


@program("attention", **ATT_TOL)
def attention_manual(rng):
    def f(q, k, v, mask):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
        s = jnp.where(mask, s, -1e9)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)
    return f, [f32(rng, 2, 5, 2, 4), f32(rng, 2, 6, 2, 4), f32(rng, 2, 6, 2, 4), rng.random((2, 2, 5, 6)) > 0.3]


@program("attention", **ATT_TOL)
def attention_jax_nn(rng):
    return (lambda q, k, v: jax.nn.dot_product_attention(q, k, v)), [f32(rng, 2, 5, 2, 4), f32(rng, 2, 6, 2, 4), f32(rng, 2, 6, 2, 4)]


@program("attention", **ATT_TOL)
def attention_jax_nn_causal_bias(rng):
    return (lambda q, k, v, b: jax.nn.dot_product_attention(q, k, v, bias=b, is_causal=True)), [f32(rng, 1, 6, 2, 4), f32(rng, 1, 6, 2, 4), f32(rng, 1, 6, 2, 4), f32(rng, 1, 2, 6, 6, scale=0.1)]


@program("attention", **ATT_TOL)
def attention_gqa(rng):
    return (lambda q, k, v: jax.nn.dot_product_attention(q, k, v)), [f32(rng, 1, 4, 4, 8), f32(rng, 1, 5, 2, 8), f32(rng, 1, 5, 2, 8)]


# ---- training steps ----------------------------------------------------------------------------------

def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    logits = jax.nn.gelu(x @ w1 + b1) @ w2 + b2
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, logits.shape[-1]), -1))


TRAIN_TOL = dict(rtol=1e-4, atol=1e-5, why="backward pass: matmuls, exp and log, transposed reductions")


def mlp_args(rng):
    return [f32(rng, 4, 8, scale=0.3), f32(rng, 8, scale=0.1), f32(rng, 8, 3, scale=0.3), f32(rng, 3, scale=0.1), f32(rng, 6, 4), s32(rng, 0, 3, 6)]


@program("training", **TRAIN_TOL)
def grad_mlp(rng):
    return (lambda w1, b1, w2, b2, x, y: jax.grad(mlp_loss)((w1, b1, w2, b2), x, y)), mlp_args(rng)


@program("training", **TRAIN_TOL)
def sgd_step_mlp(rng):
    def step(w1, b1, w2, b2, x, y):
        params = (w1, b1, w2, b2)
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
        return loss, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return step, mlp_args(rng)


@program("training", **TRAIN_TOL)
def adam_steps_scan(rng):
    def train(w, x, y):
        def step(c, t):
            w, m, v = c
            g = jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            w = w - 0.01 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
            return (w, m, v), jnp.mean((jnp.tanh(x @ w) - y) ** 2)
        (w, _, _), losses = lax.scan(step, (w, jnp.zeros_like(w), jnp.zeros_like(w)), jnp.arange(1, 6, dtype=jnp.float32))
        return w, losses
    return train, [f32(rng, 3, 2, scale=0.5), f32(rng, 8, 3), f32(rng, 8, 2)]


@program("training", **TRAIN_TOL)
def hessian_vector_product(rng):
    def f(w, v, x):
        loss = lambda w: jnp.sum(jnp.sin(x @ w) ** 2)
        return jax.jvp(jax.grad(loss), (w,), (v,))[1], jax.hessian(loss)(w)
    return f, [f32(rng, 3), f32(rng, 3), f32(rng, 4, 3)]


@program("training", **TRAIN_TOL)
def grad_with_checkpoint(rng):
    # jax.checkpoint (rematerialization) lowers with stablehlo.optimization_barrier.
    def loss(w, x):
        layer = jax.checkpoint(lambda h: jnp.tanh(h @ w))
        return jnp.sum(layer(layer(x)) ** 2)
    return (lambda w, x: jax.value_and_grad(loss)(w, x)), [f32(rng, 4, 4, scale=0.5), f32(rng, 3, 4)]


@program("sharding", rtol=1e-5, atol=1e-5)
def sharding_constraint_single_device(rng):
    # jax 0.10 writes Shardy: an sdy.mesh of one device and an sdy.sharding_constraint.
    def f(x):
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
        spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
        return jax.lax.with_sharding_constraint(x * 2, spec) + 1
    return f, [f32(rng, 4, 3)]


@program("sort")
def approx_max_k(rng):
    # ApproxTopK: on CPU XLA falls back to an exact sort, so the result is exact.
    return (lambda x: lax.approx_max_k(x, 3)), [f32(rng, 2, 16)]


# ---- einsum ------------------------------------------------------------------------------------------

@program("einsum", rtol=1e-5, atol=1e-5)
def einsum_contractions(rng):
    def f(a, b, m, v):
        return (jnp.einsum("bi,ij,bj->b", v, m, v), jnp.einsum("bhqd,bhkd->bhqk", a, b), jnp.einsum("ii->", m),
                jnp.einsum("ij->ji", m), jnp.einsum("ii->i", m), jnp.einsum("bhqd->bqd", a))
    return f, [f32(rng, 2, 2, 3, 4), f32(rng, 2, 2, 5, 4), f32(rng, 4, 4), f32(rng, 3, 4)]


@program("einsum", rtol=1e-5, atol=1e-5)
def einsum_integer(rng):
    return (lambda a, b: jnp.einsum("ij,jk->ik", a, b)), [s32(rng, -9, 9, 3, 4), s32(rng, -9, 9, 4, 2)]


# ---- linear algebra (custom calls to LAPACK) ----------------------------------------------------------
# Outputs are chosen to be unique (e.g. singular values and a reconstruction, not U and V, whose signs
# are LAPACK's choice) so any correct LAPACK matches.

LINALG_TOL = dict(rtol=1e-4, atol=1e-4, why="LAPACK factorizations in f32 on well-conditioned inputs; blocking orders differ")


@program("linalg", **LINALG_TOL)
def linalg_cholesky(rng):
    return (lambda a: jnp.linalg.cholesky(a)), [spd(rng, 4)]


@program("linalg", **LINALG_TOL)
def linalg_solve(rng):
    return (lambda a, b: jnp.linalg.solve(a, b)), [spd(rng, 4) + f32(rng, 4, 4, scale=0.5), f32(rng, 4, 2)]


@program("linalg", **LINALG_TOL)
def linalg_inv(rng):
    return (lambda a: jnp.linalg.inv(a)), [spd(rng, 4)]


@program("linalg", **LINALG_TOL)
def linalg_det(rng):
    return (lambda a: jnp.linalg.det(a)), [f32(rng, 2, 4, 4) + 3 * np.eye(4, dtype=np.float32)]


@program("linalg", **LINALG_TOL)
def linalg_det_3x3(rng):
    # JAX writes 2x2 and 3x3 determinants in closed form, without LAPACK; 4x4 and up go through LU.
    return (lambda a: jnp.linalg.det(a)), [f32(rng, 2, 3, 3) + 2 * np.eye(3, dtype=np.float32)]


@program("linalg", **LINALG_TOL)
def linalg_slogdet(rng):
    return (lambda a: tuple(jnp.linalg.slogdet(a))), [f32(rng, 4, 4) + 3 * np.eye(4, dtype=np.float32)]


@program("linalg", **LINALG_TOL)
def linalg_qr(rng):
    return (lambda a: (lambda q, r: (q @ r, jnp.abs(jnp.diag(r)), q.T @ q))(*jnp.linalg.qr(a))), [f32(rng, 5, 3)]


@program("linalg", **LINALG_TOL)
def linalg_svd(rng):
    def f(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return s, (u * s) @ vt, jnp.linalg.svd(a, compute_uv=False)
    return f, [f32(rng, 5, 3)]


@program("linalg", **LINALG_TOL)
def linalg_eigh(rng):
    return (lambda a: (lambda w, v: (w, (v * w) @ v.T))(*jnp.linalg.eigh(a))), [spd(rng, 4)]


@program("linalg", **LINALG_TOL)
def linalg_eig(rng):
    def f(a):
        w, v = jnp.linalg.eig(a)
        return jnp.sort(w), jnp.linalg.norm(a @ v - v * w, axis=0)
    return f, [f32(rng, 4, 4)]


@program("linalg", **LINALG_TOL)
def linalg_lstsq(rng):
    return (lambda a, b: jnp.linalg.lstsq(a, b)[0]), [f32(rng, 6, 3), f32(rng, 6, 2)]


@program("linalg", **LINALG_TOL)
def linalg_pinv(rng):
    return (lambda a: jnp.linalg.pinv(a)), [f32(rng, 5, 3)]


@program("linalg", **LINALG_TOL)
def linalg_solve_triangular(rng):
    def f(a, b):
        t = jnp.tril(a) + 4 * jnp.eye(4)
        return jax.scipy.linalg.solve_triangular(t, b, lower=True), jax.scipy.linalg.solve_triangular(t.T, b, lower=False, trans=1)
    return f, [f32(rng, 4, 4), f32(rng, 4, 3)]


@program("linalg", **LINALG_TOL)
def linalg_lu(rng):
    return (lambda a: (lambda p, l, u: p @ l @ u)(*jax.scipy.linalg.lu(a))), [f32(rng, 4, 4)]


# ---- complex numbers ---------------------------------------------------------------------------------

@program("complex", rtol=2e-5, atol=2e-6, why="complex exp, abs and angle go through transcendentals")
def complex_elementwise(rng):
    def f(z, w):
        return z * w + jnp.conj(z), jnp.abs(z), jnp.angle(w), jnp.exp(z), z.real * w.imag, lax.complex(z.imag, z.real) / w
    return f, [c64(rng, 6), c64(rng, 6)]


@program("complex", rtol=1e-5, atol=1e-5)
def complex_matmul(rng):
    return (lambda a, b: (a @ b, jnp.einsum("ij,ij->i", a, jnp.conj(a)))), [c64(rng, 3, 4), c64(rng, 4, 2)]


@program("complex", rtol=1e-5, atol=1e-5)
def complex_reductions(rng):
    return (lambda z: (z.sum(0), jnp.prod(z[:, :2], 1), jnp.cumsum(z, 1))), [c64(rng, 3, 5)]


# ---- float8 ------------------------------------------------------------------------------------------

@program("float8")
def float8_conversions(rng):
    def f(x, e4, e5):
        return (x.astype(jnp.float8_e4m3fn), x.astype(jnp.float8_e5m2), e4.astype(jnp.float32), e5.astype(jnp.float32),
                e4.astype(jnp.float8_e5m2), e5.astype(jnp.bfloat16))
    x = np.concatenate([f32(rng, 12, scale=20), np.array([0.0, -0.0, 500.0, 1e-3], np.float32)])
    return f, [x, f32(rng, 8, scale=10).astype(jnp.float8_e4m3fn), f32(rng, 8, scale=1000).astype(jnp.float8_e5m2)]


@program("float8", rtol=1e-5, atol=1e-5, why="f32 accumulation of exactly representable products")
def float8_scaled_matmul(rng):
    def f(a, b, sa, sb):
        return lax.dot(a, b, preferred_element_type=jnp.float32) * sa * sb
    return f, [f32(rng, 3, 4).astype(jnp.float8_e4m3fn), f32(rng, 4, 2).astype(jnp.float8_e4m3fn),
               np.array(0.5, np.float32), np.array(2.0, np.float32)]


# ---- refused: programs that call back into Python ---------------------------------------------------

@program("unrunnable", refused="calls a Python callback && xla_actors.host_callback")
def pure_callback(rng):
    return (lambda x: jax.pure_callback(lambda v: np.sin(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x) * 2), [f32(rng, 4)]


@program("unrunnable", refused="calls a Python callback && xla_actors.host_callback")
def debug_print(rng):
    def f(x):
        jax.debug.print("x = {}", x)
        return x + 1
    return f, [f32(rng, 4)]


@program("unrunnable", refused="calls a Python callback && xla_actors.host_callback")
def io_callback(rng):
    def f(x):
        return jax.experimental.io_callback(lambda v: v, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1
    return f, [f32(rng, 4)]


# ---- writing -----------------------------------------------------------------------------------------

def tensor_line(kind, i, a):
    dims = ",".join(str(s) for s in a.shape) or "-"
    return f"{kind} {i} {DTYPES[a.dtype]} {dims}\n"


def write_program(name, fn, args, refused):
    d = OUT / name
    d.mkdir(parents=True)
    args = [np.asarray(a) for a in args]
    (d / "program.mlir").write_text(jax.jit(fn).lower(*args).as_text())
    tensors = [("input", i, a) for i, a in enumerate(args)]
    if not refused:
        outs = jax.tree.leaves(jax.jit(fn)(*args))
        tensors += [("output", i, np.asarray(o)) for i, o in enumerate(outs)]
    with open(d / "tensors.txt", "w") as t, open(d / "tensors.bin", "wb") as b:
        t.write(f"# {name}: written by tools/jax_compat_suite.py with jax {jax.__version__}; bytes in tensors.bin\n")
        for kind, i, a in tensors:
            t.write(tensor_line(kind, i, a))
            b.write(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())


def main():
    import jax.experimental  # noqa: F401  (io_callback)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    rows = ["# name\tfamily\texpected\trtol\tatol\trefusal contains / why the tolerance\n"]
    for name, family, make, opt in PROGRAMS:
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        fn, args = make(rng)
        write_program(name, fn, args, opt["refused"])
        if opt["refused"]:
            rows.append(f"{name}\t{family}\trefused\t0\t0\t{opt['refused']}\n")
        else:
            rows.append(f"{name}\t{family}\tmatch\t{opt['rtol']:g}\t{opt['atol']:g}\t{opt['why']}\n")
    (OUT / "manifest.tsv").write_text("".join(rows))
    print(f"wrote {len(PROGRAMS)} programs to {OUT}")


if __name__ == "__main__":
    main()
