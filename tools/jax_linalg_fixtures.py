"""JAX linear-algebra exports and expected values for the LAPACK custom-call handlers' tests.

Run with the JAX venv's python (jax==0.10.2) from the repository root:
    $(bash tools/jax-env.sh) tools/jax_linalg_fixtures.py
It rewrites runtime/src/test/resources/fixtures/linalg/: for each program and dtype (f32, f64, c64, c128)
<program>_<dtype>.mlir.gz, the text of jax.jit(f).lower(...).as_text(), whose CPU lowering calls
lapack_*_ffi custom calls, and <program>_<dtype>.txt with the inputs (fixed seed) and JAX's outputs.
Functions are grouped into a few programs per dtype, and the exports are gzipped (deterministically:
no name, no time stamp), to keep the fixtures small: as plain text they come to about 640 KB, gzipped to
about a tenth of that. `zcat` shows one.

Text format: as tools/jax_fixtures.py (one tensor per two lines: `input|output <index> <dtype> <dims>`,
then the row-major values), plus f64, c64 and c128 (complex values as interleaved real and imaginary
parts), u32, s64, and NaN/Infinity spelled as Java parses them. A line `# names: ...` names the outputs.
"""
import gzip
import os

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", True)
OUT = os.path.join(os.path.dirname(__file__), "..", "runtime", "src", "test", "resources", "fixtures", "linalg")
NAMES = {np.float32: "f32", np.float64: "f64", np.complex64: "c64", np.complex128: "c128",
         np.int32: "s32", np.int64: "s64", np.uint32: "u32", np.bool_: "pred"}


def square(a, s, b, a4):
    """Square-matrix routines: potrf, getrf, trsm, syevd/heevd, geev."""
    sign, logdet = jnp.linalg.slogdet(a)
    w_h, v_h = jnp.linalg.eigh(s)
    w_e, v_e = jnp.linalg.eig(a)
    return {
        "cholesky": jnp.linalg.cholesky(s),
        "solve": jnp.linalg.solve(a, b),
        "inv": jnp.linalg.inv(a),
        "det": jnp.linalg.det(a4),
        "slogdet_sign": sign,
        "slogdet_logabsdet": logdet,
        "lu": jax.lax.linalg.lu(a)[0],
        "lu_pivots": jax.lax.linalg.lu(a)[1],
        "lu_permutation": jax.lax.linalg.lu(a)[2],
        "eigh_w": w_h,
        "eigh_v": v_h,
        "eigvalsh": jnp.linalg.eigvalsh(s, UPLO="U"),
        "eig_w": w_e,
        "eig_v": v_e,
        "eigvals": jnp.linalg.eigvals(a),
        "solve_triangular_lower": jsl.solve_triangular(s, b, lower=True),
        "solve_triangular_upper_trans_unit": jsl.solve_triangular(a, b, lower=False, trans=1, unit_diagonal=True),
        "solve_triangular_conj_trans": jsl.solve_triangular(s, b, lower=True, trans=2),
    }


def rect(m, w, y):
    """Rectangular-matrix routines: geqrf, orgqr/ungqr, gesdd ('A', 'S', 'N')."""
    q, r = jnp.linalg.qr(m)
    qc, rc = jnp.linalg.qr(m, mode="complete")
    u, sv, vh = jnp.linalg.svd(m)
    ut, svt, vht = jnp.linalg.svd(m, full_matrices=False)
    x, resid, rank, lsv = jnp.linalg.lstsq(w, y)
    return {
        "qr_q": q, "qr_r": r, "qr_complete_q": qc, "qr_complete_r": rc,
        "svd_u": u, "svd_s": sv, "svd_vh": vh,
        "svd_thin_u": ut, "svd_thin_s": svt, "svd_thin_vh": vht,
        "svdvals": jnp.linalg.svd(m, compute_uv=False),
        "pinv": jnp.linalg.pinv(m),
        "matrix_rank": jnp.linalg.matrix_rank(m),
        "lstsq_x": x, "lstsq_resid": resid, "lstsq_rank": rank, "lstsq_sv": lsv,
    }


def singular(z, z4, indefinite, b):
    """Exactly singular and indefinite inputs: what JAX returns (inf, NaN, zero) must come back."""
    sign, logdet = jnp.linalg.slogdet(z)
    return {
        "solve": jnp.linalg.solve(z, b),
        "inv": jnp.linalg.inv(z),
        "det": jnp.linalg.det(z4),
        "slogdet_sign": sign,
        "slogdet_logabsdet": logdet,
        "cholesky_indefinite": jnp.linalg.cholesky(indefinite),
        "eigh_indefinite_w": jnp.linalg.eigvalsh(indefinite),
        "svdvals": jnp.linalg.svd(z, compute_uv=False),
    }


def more(m, sq, h, dl, d, du, b):
    """jax.lax.linalg and jax.scipy.linalg extras: gesvd, geqp3, gehrd, sytrd/hetrd, gtsv."""
    qr_svd = jax.lax.linalg.SvdAlgorithm.QR
    u, sv, vh = jax.lax.linalg.svd(m, algorithm=qr_svd)
    ut, svt, vht = jax.lax.linalg.svd(m, full_matrices=False, algorithm=qr_svd)
    pq, pr, pp = jax.vmap(lambda x: jsl.qr(x, pivoting=True))(m)
    hh, hq = jax.vmap(lambda x: jsl.hessenberg(x, calc_q=True))(sq)
    arr, td, te, ttau = jax.lax.linalg.tridiagonal(h)
    return {
        "svd_qr_u": u, "svd_qr_s": sv, "svd_qr_vh": vh,
        "svd_qr_thin_u": ut, "svd_qr_thin_s": svt, "svd_qr_thin_vh": vht,
        "svd_qr_values": jax.lax.linalg.svd(m, compute_uv=False, algorithm=qr_svd),
        "qr_pivoting_q": pq, "qr_pivoting_r": pr, "qr_pivoting_p": pp,
        "hessenberg_h": hh, "hessenberg_q": hq,
        "tridiagonal_a": arr, "tridiagonal_d": td, "tridiagonal_e": te, "tridiagonal_taus": ttau,
        "tridiagonal_solve": jax.lax.linalg.tridiagonal_solve(dl, d, du, b),
    }


def schur_ormqr(sq, reflectors, taus, c_left, c_right):
    """gees (Schur form) and ormqr/unmqr (applying the product of Householder reflectors without forming
    it, on both sides; any reflectors and taus define one, so they are random inputs here)."""
    t, z = jax.vmap(jsl.schur)(sq)
    return {
        "schur_t": t, "schur_z": z,
        "ormqr_left_transpose": jax.lax.linalg.ormqr(reflectors, taus, c_left, left=True, transpose=True),
        "ormqr_left": jax.lax.linalg.ormqr(reflectors, taus, c_left, left=True, transpose=False),
        "ormqr_right": jax.lax.linalg.ormqr(reflectors, taus, c_right, left=False, transpose=False),
    }


def orthogonal(dtype):
    init = jax.nn.initializers.orthogonal()

    def f(key):
        return {"orthogonal": init(jax.random.wrap_key_data(key), (4, 3), dtype)}

    return f


def rand(rng, dtype, *shape):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def spd(rng, dtype, *shape):
    x = rand(rng, dtype, *shape)
    n = shape[-1]
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dtype)


def tridiagonal(rng, dtype, batch, n):
    """A diagonally dominant tridiagonal system: dl[..., 0] and du[..., -1] are zero, as JAX requires."""
    dl, du = rand(rng, dtype, batch, n), rand(rng, dtype, batch, n)
    dl[:, 0] = 0
    du[:, -1] = 0
    d = (rand(rng, dtype, batch, n) + 4).astype(dtype)
    return [dl, d, du]


def programs(rng, dtype):
    extra = np.random.default_rng([20261122, np.dtype(dtype).num])
    # Small integer entries make the elimination exact, so the zero pivot is exactly zero here and in JAX.
    z = np.array([[2, 4, 6], [1, 2, 3], [1, 0, 1]], np.float64)
    z4 = np.array([[2, 4, 6, 1], [1, 2, 3, 0.5], [1, 0, 1, 2], [0, 1, 1, 1]], np.float64)
    indefinite = np.array([[1, 2, 0], [2, 1, 0], [0, 0, 3]], np.float64)
    if np.issubdtype(dtype, np.complexfloating):
        z = z * (1 + 1j)
        z4 = z4 * (1 - 1j)
    return {
        "square": (square, [rand(rng, dtype, 2, 3, 3), spd(rng, dtype, 2, 3, 3), rand(rng, dtype, 2, 3, 2),
                            rand(rng, dtype, 2, 4, 4)]),
        "rect": (rect, [rand(rng, dtype, 2, 4, 3), rand(rng, dtype, 4, 3), rand(rng, dtype, 4, 2)]),
        "singular": (singular, [z.astype(dtype), z4.astype(dtype), indefinite.astype(dtype),
                                np.ones((3, 1), dtype)]),
        "orthogonal": (orthogonal(dtype), [np.array([0, 42], np.uint32)]),
        # Its own generator, so that adding it left the other programs' inputs as they were.
        "more": (more, [rand(extra, dtype, 2, 4, 3), rand(extra, dtype, 2, 4, 4), spd(extra, dtype, 2, 4, 4),
                        *tridiagonal(extra, dtype, 2, 4), rand(extra, dtype, 2, 4, 2)]),
        "schur_ormqr": (schur_ormqr, [rand(extra, dtype, 2, 4, 4), rand(extra, dtype, 2, 4, 3),
                                      rand(extra, dtype, 2, 3), rand(extra, dtype, 2, 4, 2), rand(extra, dtype, 2, 2, 4)]),
    }


def number(v):
    v = float(v)
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def line(kind, i, a):
    a = np.asarray(a)
    dims = ",".join(str(s) for s in a.shape) or "-"
    flat = a.ravel()
    if np.issubdtype(a.dtype, np.complexfloating):
        values = " ".join(f"{number(v.real)} {number(v.imag)}" for v in flat)
    elif np.issubdtype(a.dtype, np.floating):
        values = " ".join(number(v) for v in flat)
    elif a.dtype == np.bool_:
        values = " ".join("1" if v else "0" for v in flat)
    else:
        values = " ".join(str(int(v)) for v in flat)
    return f"{kind} {i} {NAMES[a.dtype.type]} {dims}\n{values}\n"


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261122)
    for dtype in (np.float32, np.float64, np.complex64, np.complex128):
        for name, (fn, args) in programs(rng, dtype).items():
            names = sorted(jax.eval_shape(fn, *args))  # pytrees order dict keys so

            def flat(*xs, fn=fn):
                out = fn(*xs)
                return tuple(out[k] for k in sorted(out))

            outs = jax.jit(flat)(*args)
            base = os.path.join(OUT, f"{name}_{NAMES[dtype]}")
            with open(base + ".txt", "w") as f:
                f.write(f"# {name}_{NAMES[dtype]}: generated by tools/jax_linalg_fixtures.py with jax {jax.__version__}\n")
                f.write("# names: " + " ".join(names) + "\n")
                for i, a in enumerate(args):
                    f.write(line("input", i, a))
                for i, o in enumerate(outs):
                    f.write(line("output", i, o))
            text = jax.jit(flat).lower(*args).as_text().encode("utf-8")
            with open(base + ".mlir.gz", "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
                f.write(text)


if __name__ == "__main__":
    main()
