"""Expected values for the graph builder's whole-program tests, computed by JAX.

Run with the JAX venv's python (jax==0.10.2) from the repository root:
    ~/.cache/xla-actors/jax-venv-0.10.2/bin/python tools/jax_fixtures.py
It rewrites runtime/src/test/resources/fixtures/: for every program a <name>.txt file with the inputs
(drawn from a fixed seed, so the output is reproducible) and JAX's outputs, and for the programs that
are also exported, <name>.mlir with the text of jax.jit(f).lower(...).as_text().

Text format, one tensor per two lines:
    input|output <index> <dtype> <dims comma-separated, '-' for a scalar>
    <row-major values separated by spaces>
Floats are written with repr() of the exact float32 value, so Java's Float.parseFloat gets it back.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_platforms", "cpu")
OUT = os.path.join(os.path.dirname(__file__), "..", "runtime", "src", "test", "resources", "fixtures")
DTYPES = {np.float32: "f32", np.int32: "s32", np.bool_: "pred"}


def dense(x, w, b):
    return x @ w + b


def layer_norm(x, g, b, eps=1e-5):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.var(x, axis=-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + eps) * g + b


def mlp(x, w1, b1, w2, b2):
    return jax.nn.softmax(dense(jax.nn.relu(dense(x, w1, b1)), w2, b2), axis=-1)


def attention_block(x, g1, b1, wq, wk, wv, wo, g2, b2, w1, w2):
    """A pre-norm transformer block: 2-head self-attention and a GELU MLP, each with a residual."""
    bsz, seq, d = x.shape
    heads = 2
    h = layer_norm(x, g1, b1)

    def split(t):
        return t.reshape(bsz, seq, heads, d // heads).transpose(0, 2, 1, 3)

    q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.float32(np.sqrt(d // heads))
    attn = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
    x = x + attn.transpose(0, 2, 1, 3).reshape(bsz, seq, d) @ wo
    return x + jax.nn.gelu(layer_norm(x, g2, b2) @ w1, approximate=True) @ w2


def logsumexp(x):
    m = jnp.max(x, axis=-1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(x - m), axis=-1)) + m[..., 0]


def loop_sum_squares(x):
    def body(i, acc):
        return acc + x[i] * x[i]

    return lax.fori_loop(0, x.shape[0], body, jnp.zeros(x.shape[1:], x.dtype))


def cond_scale(p, x):
    return lax.cond(p, lambda t: t * 2.0, lambda t: -t, x)


def argmax_one_hot(x):
    idx = jnp.argmax(x, axis=-1).astype(jnp.int32)
    return idx, (lax.broadcasted_iota(jnp.int32, x.shape, 1) == idx[:, None]).astype(jnp.float32)


def moving_average(x):
    p = jnp.pad(x, ((0, 0), (1, 1)))
    return (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) / np.float32(3)


def int_ops(a, b):
    return lax.div(a, b), lax.rem(a, b), jnp.clip(a, -10, 10), jnp.sum(a, axis=0)


def standardize(x):
    return (x - jnp.mean(x, axis=0)) / jnp.sqrt(jnp.var(x, axis=0) + np.float32(1e-6))


def batched_scores(a, b):
    return jnp.einsum("bij,bkj->bik", a, b), jnp.tanh(a).sum(axis=(1, 2))


def concat_slice_update(x, i):
    y = jnp.concatenate([x, x * 2], axis=1)
    z = lax.dynamic_slice(y, (i, np.int32(1)), (2, 3))
    return lax.dynamic_update_slice(y, jnp.ones((1, 2), y.dtype), (i, i)), z


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def programs(rng):
    d, hidden = 8, 16
    return {
        "mlp": (mlp, [f32(rng, 4, 8), f32(rng, 8, 16, scale=0.3), f32(rng, 16), f32(rng, 16, 4, scale=0.3), f32(rng, 4)]),
        "attention": (attention_block, [f32(rng, 2, 5, d), 1 + f32(rng, d, scale=0.1), f32(rng, d, scale=0.1),
                                        f32(rng, d, d, scale=0.3), f32(rng, d, d, scale=0.3), f32(rng, d, d, scale=0.3),
                                        f32(rng, d, d, scale=0.3), 1 + f32(rng, d, scale=0.1), f32(rng, d, scale=0.1),
                                        f32(rng, d, hidden, scale=0.3), f32(rng, hidden, d, scale=0.3)]),
        "layer_norm": (layer_norm, [f32(rng, 3, 6, scale=3), f32(rng, 6), f32(rng, 6)]),
        "gelu": (lambda x: jax.nn.gelu(x, approximate=True), [f32(rng, 5, 4, scale=3)]),
        "logsumexp": (logsumexp, [f32(rng, 3, 7, scale=10)]),
        "loop_sum_squares": (loop_sum_squares, [f32(rng, 6, 3)]),
        "cond_scale": (cond_scale, [np.array(True), f32(rng, 4)]),
        "argmax_one_hot": (argmax_one_hot, [f32(rng, 4, 5)]),
        "moving_average": (moving_average, [f32(rng, 2, 6)]),
        "int_ops": (int_ops, [rng.integers(-50, 50, (3, 4)).astype(np.int32),
                              rng.choice([-7, -3, -2, 2, 3, 5], (3, 4)).astype(np.int32)]),
        "standardize": (standardize, [f32(rng, 10, 3, scale=4)]),
        "batched_scores": (batched_scores, [f32(rng, 2, 3, 4), f32(rng, 2, 5, 4)]),
        "concat_slice_update": (concat_slice_update, [f32(rng, 3, 4), np.array(1, np.int32)]),
    }


EXPORTED = ["mlp", "attention", "loop_sum_squares", "cond_scale", "argmax_one_hot"]


def line(kind, i, a):
    a = np.asarray(a)
    dims = ",".join(str(s) for s in a.shape) or "-"
    if a.dtype == np.float32:
        values = " ".join(repr(float(v)) for v in a.ravel())
    elif a.dtype == np.bool_:
        values = " ".join("1" if v else "0" for v in a.ravel())
    else:
        values = " ".join(str(int(v)) for v in a.ravel())
    return f"{kind} {i} {DTYPES[a.dtype.type]} {dims}\n{values}\n"


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240603)
    for name, (fn, args) in programs(rng).items():
        outs = jax.jit(fn)(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write(f"# {name}: generated by tools/jax_fixtures.py with jax {jax.__version__}\n")
            for i, a in enumerate(args):
                f.write(line("input", i, a))
            for i, o in enumerate(outs):
                f.write(line("output", i, o))
        if name in EXPORTED:
            text = jax.jit(fn).lower(*args).as_text()
            with open(os.path.join(OUT, name + ".mlir"), "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
