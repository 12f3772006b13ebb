"""Turns a Hugging Face checkpoint directory into a model package (docs/model-package.md).

Run with the venv of tools/jax-env.sh (JAX, numpy, safetensors, flatbuffers; ml_dtypes comes with JAX):

    $(bash tools/jax-env.sh) tools/hf_import.py HF_DIR --out PKG [--name NAME] [--dtype as-is|f32|bf16|f16]
        [--slots 1,4] [--prefill-chunks 32,64,128] [--decode-lengths 256,1024] [--attention-block 128] [--context-length N]
        [--kv-cache-memory 1GiB] [--kv-cache-dtype f32|f16|bf16] [--score-length N] [--embed-batches 1,4] [--embed-length N]
        [--tiktoken ENCODING] [--platforms cpu,cuda] [--kernels native|xla] [--quantize none|int8|w8a8]

HF_DIR is what `save_pretrained` writes: config.json, model.safetensors (or shards and
model.safetensors.index.json), tokenizer.json, tokenizer_config.json, generation_config.json when present.
Architectures: GPT2LMHeadModel; LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (kind causal-lm:
programs score, prefill_chunk per chunk length, decode_batch per batch size and attention window,
score_chunk, slot_cache); BertModel, BertForMaskedLM (kind embedding: program embed per batch size).
Anything else exits with status 2 naming what is wrong.

The programs are written here in jax.numpy from the architecture's definition and exported with jax.export;
their first argument is the flat dict of weights keyed by the checkpoint's own tensor names, so the weights
are copied as they are (or converted by --dtype, or rewritten without the tensors no program takes, which
the contract refuses: BERT's pooler, say). Programs compute in f32 whatever the weights' dtype.

--kernels native has the f32, bf16 and f16 weight matmuls call the bridge's native kernels, typed-FFI custom
calls xla_actors.matmul_f32 / matmul_bf16 / matmul_f16 / matmul_q8 (WeightAccess; [K,N] weights, GPT-2's
Conv1D, are stored transposed for them, W.t [N,K]; bf16 and f16 weights are widened to f32 as the kernel loads
them), decode's attention call xla_actors.decode_attention, which reads each
sequence's positions in use where the cache holds them (so the decode programs need one attention window, the
context), and a prompt chunk's attention xla_actors.chunk_attention, which does the same for the chunk's rows
on every core; each decode step's layer, when its weights are all of one dtype (f32, bf16, f16 or int8), is
one call of xla_actors.decoder_layer (norms, products, rotary positions, the cache's update and attention, MLP:
the bridge's threads taken once per layer rather than once per product); native is the default for a CPU
package.
--kernels xla (the default when --platforms names cuda) leaves every matmul to XLA, for a package that runs
on any PJRT plugin. --quantize int8 stores each matmul
weight whose input size is a multiple of 32 as Q8_0-style int8 (W.q8 s8[N,K] and W.q8_scales f32[N,K/32]:
blocks of 32 inputs, scale = the block's largest magnitude / 127), which every program multiplies by with the
native int8 kernel (or dequantises before an XLA dot with --kernels xla); a tied embedding is looked up from
the same int8 table. --quantize w8a8 stores the same int8 weights, and each product quantises its activations
too, as llama.cpp's Q8_0 products do: every row by blocks of 32 inputs, one scale each (quantize_activations_q8),
at every call; the native kernel then multiplies one row in integers where the CPU has AVX-512 VNNI, and the
--kernels xla programs quantise the activations the same way before their dot.


The KV cache is one array [layers, 2 (key, value), slots, kv_heads, context, head_dim] (f32, or f16/bf16 with
--kv-cache-dtype; attention reads it back as f32) of N = max(--slots) slots, keys stored after the rotary
embedding; the programs donate it and update it in place with dynamic_update_slice. A prompt of any length up
to the context is written by chunks (prefill_chunk at an offset of a slot's row), each attending to the row by
blocks of positions up to its own last one (--attention-block of them in XLA's loop; 64 in the bridge's kernel
with --kernels native); a decode step of B <= N sequences names their rows and reads only the first L
positions of each (the smallest window holding every running sequence; with --kernels native, each sequence's
own positions), so one sequence on a server of N slots costs one row of one window. Attention masks every
cache position after a sequence's own position, so padding and stale entries of an earlier, longer sequence
are never attended, and decode writes position p before it reads it. The context defaults to the checkpoint's,
capped so that the cache fits --kv-cache-memory (1 GiB by default). With --kernels native the empty cache is
the bridge's xla_actors.zeros, whose pages the kernel maps at their first write: the steps write only the
positions they fill and the native attention reads only the positions in use, so a cache takes memory for the
positions its sequences have reached, not for every slot's whole context (--kv-cache-memory bounds what it
can grow to).

Prints the package's path on its last line.
"""
import argparse
import functools
import json
import math
import os
import pathlib
import re
import shutil
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import export, lax

IMPORTER_VERSION = "2"
ALIGNMENT = 64  # the data section starts on this boundary, like tools/jax_gpt.py's align_data
F32 = jnp.float32
BF16 = jnp.bfloat16
F16 = jnp.float16
NEG = -1e30  # the score of a masked position: exp() of it is 0 in f32, and no inf - inf can make a NaN

SAFETENSORS_DTYPES = {
    "F64": np.dtype(np.float64), "F32": np.dtype(np.float32), "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16), "I64": np.dtype(np.int64), "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16), "I8": np.dtype(np.int8), "U8": np.dtype(np.uint8), "BOOL": np.dtype(np.bool_),
}
DTYPE_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


# The bridge's native matmul targets (native/src/main/cpp/matmul_kernels.cc; --kernels native).
MATMUL_F32 = "xla_actors.matmul_f32"
MATMUL_Q8 = "xla_actors.matmul_q8"
MATMUL_BF16 = "xla_actors.matmul_bf16"  # --kernels native: bf16 weights [N,K], multiplied in f32 from half the bytes
MATMUL_F16 = "xla_actors.matmul_f16"  # --kernels native: f16 weights [N,K], likewise
DECODE_ATTENTION = "xla_actors.decode_attention"  # --kernels native: decode's attention, reading the cache in place
CHUNK_ATTENTION = "xla_actors.chunk_attention"  # --kernels native: a prompt chunk's attention, likewise
DECODER_LAYER = "xla_actors.decoder_layer"  # --kernels native: a whole layer of a decode step (Decoder.layer_call)
ZEROS = "xla_actors.zeros"  # --kernels native: the slot cache, zeros whose pages are mapped at their first write
NORM_LAYER, NORM_RMS = 0, 1  # decoder_layer's `norm`
MLP_GELU_TANH, MLP_GELU_ERF, MLP_SWIGLU = 0, 1, 2  # decoder_layer's `mlp`
NATIVE_MAX_ROWS = 16  # f32 [K,N] matmuls of at most this many rows use the native kernel, larger ones XLA's
Q8_BLOCK = 32
Q8_SUFFIX, Q8_SCALE_SUFFIX = ".q8", ".q8_scales"  # the int8 values and scales of weight W: W.q8, W.q8_scales
T_SUFFIX = ".t"  # --kernels native, f32, bf16 or f16: weight W [K,N] stored transposed as W.t [N,K]


class Refusal(Exception):
    """An input this importer cannot turn into a package; the message names the file or key and the fix."""


# ---------------------------------------------------------------- reading the checkpoint


def read_json(path, what):
    if not path.is_file():
        raise Refusal(f"{path} is missing: {what}")
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise Refusal(f"{path} is not valid JSON ({e})")


def safetensors_header(path):
    """The header of a safetensors file and the offset of its data section."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise Refusal(f"{path} is not a safetensors file (shorter than its 8-byte header length)")
        n = int.from_bytes(raw, "little")
        if n > os.path.getsize(path) - 8:
            raise Refusal(f"{path} is not a safetensors file (its header length {n} runs past the end)")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise Refusal(f"{path} is not a safetensors file (its header is not JSON: {e})")
    return header, 8 + n


class Checkpoint:
    """The tensors of a checkpoint, one file or shards with their index, read lazily (memory-mapped)."""

    def __init__(self, hf_dir):
        index = hf_dir / "model.safetensors.index.json"
        single = hf_dir / "model.safetensors"
        if index.is_file():
            self.index = read_json(index, "the index of a sharded checkpoint")
            weight_map = self.index.get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise Refusal(f"{index} has no \"weight_map\" (tensor name -> shard file)")
            self.files = list(dict.fromkeys(weight_map.values()))  # shards in their first-use order
        elif single.is_file():
            self.index = None
            self.files = ["model.safetensors"]
        else:
            bins = sorted(p.name for p in hf_dir.glob("*.bin"))
            hint = (f" (it has {', '.join(bins)}: PyTorch pickles, which this importer does not read; save the "
                    "model with save_pretrained(..., safe_serialization=True))") if bins else ""
            raise Refusal(f"{hf_dir} has neither model.safetensors nor model.safetensors.index.json{hint}")
        self.dir = hf_dir
        self.tensors = {}  # name -> (file, info, data start)
        self.headers = {}  # file -> (header, data start)
        for file in self.files:
            path = hf_dir / file
            if not path.is_file():
                raise Refusal(f"{path} is missing (model.safetensors.index.json names it)")
            header, start = safetensors_header(path)
            self.headers[file] = (header, start)
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                if info.get("dtype") not in SAFETENSORS_DTYPES:
                    raise Refusal(f"{path}: tensor {name} has dtype {info.get('dtype')}, not one of "
                                  f"{sorted(SAFETENSORS_DTYPES)}")
                self.tensors[name] = (file, info, start)
        if self.index is not None:
            missing = sorted(n for n, f in self.index["weight_map"].items()
                             if n not in self.tensors or self.tensors[n][0] != f)
            if missing:
                raise Refusal(f"{index} maps {missing[:5]} to shards that do not hold them")

    def dtype_code(self, name):
        return self.tensors[name][1]["dtype"]

    def spec(self, name, dtype_code=None):
        info = self.tensors[name][1]
        return jax.ShapeDtypeStruct(tuple(info["shape"]), SAFETENSORS_DTYPES[dtype_code or info["dtype"]])

    def array(self, name):
        file, info, start = self.tensors[name]
        begin, end = info["data_offsets"]
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        count = (end - begin) // dtype.itemsize
        flat = np.memmap(self.dir / file, dtype=dtype, mode="r", offset=start + begin, shape=(count,))
        return flat.reshape(info["shape"])


def write_safetensors(path, names, shape_of, dtype_code_of, array_of, metadata):
    """Writes the named tensors with the header padded (with spaces, which the format allows) so the data
    starts on a 64-byte boundary: a runtime that maps the file can hand aligned bytes to the device.
    The tensors are read (and converted) one at a time, as they are written."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name in names:
        code, shape = dtype_code_of(name), shape_of(name)
        size = math.prod(shape) * SAFETENSORS_DTYPES[code].itemsize
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-(8 + len(text))) % ALIGNMENT)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name in names:
            f.write(np.ascontiguousarray(array_of(name)).tobytes())
    return offset


# ---------------------------------------------------------------- the models


class Config:
    """config.json, with refusals that name the key."""

    def __init__(self, hf_dir):
        self.path = hf_dir / "config.json"
        self.raw = read_json(self.path, "every Hugging Face checkpoint has one (save_pretrained writes it)")

    def get(self, key, default=None):
        return self.raw.get(key, default)

    def need(self, key):
        if key not in self.raw:
            raise Refusal(f"{self.path} has no \"{key}\", which this architecture needs")
        value = self.raw[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise Refusal(f"{self.path}: \"{key}\" is {value!r}, expected a number")
        return value

    def refuse_unless(self, key, allowed, default):
        value = self.raw.get(key, default)
        if value not in allowed:
            raise Refusal(f"{self.path}: \"{key}\" is {value!r}; this importer supports {allowed}")
        return value


def layer_norm(x, w, b, eps):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x * lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps) * w


def times_transposed(x, w):
    """x [..., K] times w [N, K] transposed: a dot contracting w's second dimension. Not x @ w.T: XLA's CPU
    compiler materialises that transpose, a copy of the whole weight on every run (every Llama weight, and
    GPT-2's head, once per decode step: more bytes than the step's own reads of the weights)."""
    return lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ())))


def attention(q, keys, values, visible, scale):
    """Grouped-query attention. q [B,Tq,H,Dh]; keys, values [B,KVH,Tk,Dh] (the cache's layout); visible
    bool [B,Tq,Tk]. Query head h reads KV head h // (H/KVH), as Hugging Face's repeat_kv lays them out."""
    B, Tq, H, Dh = q.shape
    KVH = keys.shape[1]
    q = q.reshape(B, Tq, KVH, H // KVH, Dh)
    s = jnp.einsum("bqkgd,bksd->bkgqs", q, keys) * scale
    s = jnp.where(visible[:, None, None], s, NEG)
    o = jnp.einsum("bkgqs,bksd->bqkgd", jax.nn.softmax(s, axis=-1), values)
    return o.reshape(B, Tq, H * Dh)


class WeightAccess:
    """How programs read weights and multiply by them: the one place that knows --kernels and --quantize.

    kernels "xla": every weight matmul is an XLA dot. "native": the bridge's typed-FFI custom calls
    (native/src/main/cpp/matmul_kernels.cc) for f32 weights stored [N,K] at every row count (decode, where
    XLA's dot emitter reads well under the memory bandwidth, and prompt chunks, where XLA's dot on an [N,K]
    weight measured half the native kernel's speed); GPT-2's [K,N] Conv1D weights are stored transposed for
    it (t_derived), and any [K,N] weight left takes the native kernel up to NATIVE_MAX_ROWS rows and XLA's
    dot above (where XLA is fast on [K,N]). Weights named in `q8` are stored as Q8_0-style
    int8 (`name + Q8_SUFFIX`: s8[N,K], `name + Q8_SCALE_SUFFIX`: f32[N,K/32]) and multiplied by the native
    int8 kernel at every row count, or, with kernels "xla", dequantised in the program before an XLA dot.
    `matmul_weights` records, while tracing, each weight a matmul reads and whether it is [N,K]."""

    kernels = "xla"
    q8 = frozenset()
    q8_activations = False  # --quantize w8a8: products by int8 weights quantise their activations too
    transposed_copies = frozenset()  # [K,N] weights stored as name + T_SUFFIX [N,K] (t_derived)
    emitted = set()  # the native targets the programs traced since it was last reset call

    def matmul(self, P, name, x, transposed=False):
        """x [..., K] times the weight `name`: [K,N] (Conv1D), or [N,K] when transposed (nn.Linear, the head)."""
        self.matmul_weights = getattr(self, "matmul_weights", {})
        self.matmul_weights[name] = transposed
        if name in self.transposed_copies:
            name, transposed = name + T_SUFFIX, True
        rows = math.prod(x.shape[:-1])
        if name in self.q8:
            q, scales = P[name + Q8_SUFFIX], P[name + Q8_SCALE_SUFFIX]
            n, k = q.shape
            if self.kernels == "native":
                self.emitted.add(MATMUL_Q8)
                return jax.ffi.ffi_call(MATMUL_Q8, jax.ShapeDtypeStruct(x.shape[:-1] + (n,), F32))(
                    x.astype(F32), q, scales, **self.q8_attributes())
            w = (q.astype(F32).reshape(n, k // Q8_BLOCK, Q8_BLOCK) * scales[..., None]).reshape(n, k)
            return times_transposed(quantize_activations_q8(x) if self.q8_activations else x, w)
        stored = P[name]
        if self.kernels == "native" and transposed and stored.dtype in (BF16, F16):
            # bf16 or f16 weights [N,K] (a [K,N] one is stored transposed): the native kernel widens each to f32
            # as it loads it, the same values XLA's dot multiplies after upcasting, from half the bytes.
            target = MATMUL_BF16 if stored.dtype == BF16 else MATMUL_F16
            self.emitted.add(target)
            return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape[:-1] + (stored.shape[0],), F32))(
                x.astype(F32), stored)
        if self.kernels == "native" and (transposed or rows <= NATIVE_MAX_ROWS) and stored.dtype == F32 \
                and x.dtype == F32:
            n = stored.shape[0] if transposed else stored.shape[1]
            self.emitted.add(MATMUL_F32)
            return jax.ffi.ffi_call(MATMUL_F32, jax.ShapeDtypeStruct(x.shape[:-1] + (n,), F32))(
                x, stored, w_transposed=np.int32(1 if transposed else 0))
        w = self.w(P, name)
        return times_transposed(x, w) if transposed else x @ w

    def q8_attributes(self):
        """The attributes of a native call's int8 products: activations=1 when they quantise their activations."""
        return {"activations": np.int32(1)} if self.q8_activations else {}

    def rows_of(self, P, name, index):
        """Rows `index` of the table `name` in f32 (an embedding lookup), dequantised when stored as int8."""
        if name in self.q8:
            q, scales = P[name + Q8_SUFFIX][index], P[name + Q8_SCALE_SUFFIX][index]
            return (q.astype(F32).reshape(q.shape[:-1] + (-1, Q8_BLOCK)) * scales[..., None]).reshape(q.shape)
        return P[name][index].astype(F32)


def quantize_activations_q8(x):
    """x [..., K] (K a multiple of 32) as the native kernel quantises a product's activations with --quantize
    w8a8 (matmul_kernels_isa.inc's QuantizeRowsQ8, llama.cpp's Q8_0 activations): by blocks of 32, d = the block's
    largest magnitude / 127, x * (1 / d) rounded to the nearest (ties to even) in [-127, 127], times d: the f32
    values the product multiplies."""
    x = x.astype(F32)
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // Q8_BLOCK, Q8_BLOCK))
    d = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True) / np.float32(127)
    inverse = jnp.where(d > 0, np.float32(1) / jnp.where(d > 0, d, np.float32(1)), np.float32(0))
    q = jnp.clip(jnp.round(blocks * inverse), -127, 127)
    return (q * d).reshape(x.shape)


def quantize_q8(w):
    """Q8_0: w [N,K] (K a multiple of 32) as int8 values and one f32 scale per block of 32 along K, the
    scale being the block's largest magnitude / 127 (so each block's extreme is exactly +-127)."""
    n, k = w.shape
    blocks = np.asarray(w, np.float32).reshape(n, k // Q8_BLOCK, Q8_BLOCK)
    scales = np.abs(blocks).max(axis=-1) / np.float32(127)
    safe = np.where(scales > 0, scales, np.float32(1))
    q = np.clip(np.rint(blocks / safe[..., None]), -127, 127).astype(np.int8)
    return q.reshape(n, k), scales.astype(np.float32)


class Decoder(WeightAccess):
    """A pre-norm decoder-only transformer: x += attn(norm1(x)); x += mlp(norm2(x)). Subclasses give the
    architecture's pieces; the programs (score and the slot programs) are written once here."""

    kind = "causal-lm"
    droppable = ()  # patterns of checkpoint tensors no program needs (buffers saved by old versions)
    cache_dtype = F32  # --kv-cache-dtype: what the cache stores; attention reads it back as f32
    attention_block = 128  # --attention-block: the cache positions a prompt chunk's attention takes at a time

    def __init__(self, names):
        self.names = names

    def to_cache(self, kv):
        """Keys and values as the cache stores them (f16/bf16 round to nearest even)."""
        return kv.astype(self.cache_dtype)

    @staticmethod
    def from_cache(kv):
        """Keys and values read from the cache, for attention in f32."""
        return kv.astype(F32)

    def w(self, P, name):
        """A weight in f32 (bf16 checkpoints are upcast inside the program)."""
        return P[name].astype(F32)

    def run(self, P, x, positions, attend, cache=None):
        """The layers over hidden states x [B,T,D] at positions [B,T]. attend(i, q, k, v, cache) -> (o
        [B,T,H*Dh], cache), where q [B,T,H,Dh] and k, v [B,T,KVH,Dh] are layer i's projections: the slot
        programs write k and v into the cache there and attend to it. Returns (x, cache)."""
        for i in range(self.layers):
            q, k, v = self.qkv(P, i, self.norm1(P, i, x), positions)
            o, cache = attend(i, q, k, v, cache)
            x = x + self.attn_out(P, i, o)
            x = x + self.mlp(P, i, self.norm2(P, i, x))
        return x, cache

    def logits(self, P, x):
        return self.matmul(P, self.head_name, self.final_norm(P, x), transposed=True)

    def score(self, P, tokens):
        B, T = tokens.shape
        positions = jnp.broadcast_to(jnp.arange(T), (B, T))
        causal = jnp.broadcast_to(jnp.tril(jnp.ones((T, T), bool)), (B, T, T))

        def attend(i, q, k, v, cache):
            return attention(q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), causal, self.scale(i)), cache

        x, _ = self.run(P, self.embed(P, tokens, positions), positions, attend)
        return self.logits(P, x)

    def prefill_slot(self, P, tokens, length, slot, cache):
        T = tokens.shape[1]
        positions = jnp.arange(T)[None]
        causal = jnp.tril(jnp.ones((T, T), bool))[None]

        def attend(i, q, k, v, cache):
            k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [1,KVH,T,Dh]
            # Positions 0..T-1 of the slot's row; those at or past `length` hold the padding's keys, which
            # no later step reads before decode_slots overwrites them.
            cache = lax.dynamic_update_slice(cache, self.to_cache(jnp.stack([k, v])[None]), (i, 0, slot, 0, 0, 0))
            return attention(q, k, v, causal, self.scale(i)), cache

        x, cache = self.run(P, self.embed(P, tokens, positions), positions, attend, cache)
        last = lax.dynamic_slice_in_dim(x, length - 1, 1, axis=1)[:, 0]
        return self.logits(P, last), cache

    def chunk(self, P, tokens, start, slot, cache):
        """The hidden states of a chunk of C tokens at positions start..start+C-1 of `slot`, written into its
        cache rows there; each position attends to the slot's cache below `start` (earlier chunks) and to the
        chunk's own positions up to itself. The caller keeps start + C <= context: dynamic_update_slice clamps
        an index that would run past the end, which would write the chunk at the wrong positions."""
        C = tokens.shape[1]
        positions = (start + jnp.arange(C))[None]  # [1,C]

        def attend(i, q, k, v, cache):
            kv = jnp.stack([k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)])[None]  # [1,2,1,KVH,C,Dh]
            cache = lax.dynamic_update_slice(cache, self.to_cache(kv), (i, 0, slot, 0, start, 0))
            return self.chunk_attention(i, q, cache, slot, start), cache

        return self.run(P, self.embed(P, tokens, positions), positions, attend, cache)

    def chunk_attention(self, i, q, cache, slot, start):
        """Attention of a chunk's queries q [1,C,H,Dh] at positions start..start+C-1 to layer i's keys and
        values of `slot` at positions 0..start+C-1, in blocks of `attention_block` cache positions (an
        online softmax, as FlashAttention's): a loop runs only the blocks up to the chunk's last position, so a
        chunk early in a long context neither copies nor multiplies the positions after it (attending to the
        whole row did both, every chunk). Returns [1,C,H*Dh]."""
        C, H, Dh, KVH, context = q.shape[1], q.shape[2], self.head_dim, self.kv_heads, cache.shape[4]
        if self.kernels == "native":
            # The bridge's kernel: the same blocks and online softmax on every core, the queries' rows as
            # vector lanes; XLA's loop below runs each block's small batched dots one after the other.
            self.emitted.add(CHUNK_ATTENTION)
            o = jax.ffi.ffi_call(CHUNK_ATTENTION, jax.ShapeDtypeStruct((C, H, Dh), F32))(
                q[0].astype(F32), cache, jnp.asarray(slot, jnp.int32), jnp.asarray(start, jnp.int32),
                layer=np.int32(i), scale=np.float32(self.scale(i)))
            return o.reshape(1, C, H * Dh)
        G = H // KVH
        block = min(self.attention_block, context)
        qg = q[0].astype(F32).reshape(C, KVH, G, Dh).transpose(1, 2, 0, 3)  # [KVH,G,C,Dh]
        query_positions = start + jnp.arange(C)
        scale = self.scale(i)

        def step(j, carry):
            top, total, out = carry  # [KVH,G,C], [KVH,G,C], [KVH,G,C,Dh]
            first = j * block
            # The last block of a context that is not a multiple of `block` is read from context - block on;
            # the positions an earlier block already took are masked.
            at = jnp.minimum(first, context - block)
            kv = self.from_cache(lax.dynamic_slice(cache, (i, 0, slot, 0, at, 0), (1, 2, 1, KVH, block, Dh)))[0, :, 0]
            key_positions = at + jnp.arange(block)
            visible = (key_positions[None, :] <= query_positions[:, None]) & (key_positions[None, :] >= first)
            scores = jnp.where(visible, jnp.einsum("kgqd,ksd->kgqs", qg, kv[0]) * scale, NEG)
            new_top = jnp.maximum(top, scores.max(axis=-1))
            weights = jnp.exp(scores - new_top[..., None])
            shrink = jnp.exp(top - new_top)
            return (new_top, total * shrink + weights.sum(axis=-1),
                    out * shrink[..., None] + jnp.einsum("kgqs,ksd->kgqd", weights, kv[1]))

        blocks = (start + C + block - 1) // block
        init = (jnp.full((KVH, G, C), NEG, F32), jnp.zeros((KVH, G, C), F32), jnp.zeros((KVH, G, C, Dh), F32))
        _, total, out = lax.fori_loop(0, blocks, step, init)
        return (out / total[..., None]).transpose(2, 0, 1, 3).reshape(1, C, H * Dh)

    def prefill_chunk(self, P, tokens, start, last, slot, cache):
        """One chunk of a prompt (see chunk): the logits of its row `last` (the prompt's last token when this
        is the prompt's last chunk) and the cache."""
        x, cache = self.chunk(P, tokens, start, slot, cache)
        return self.logits(P, lax.dynamic_slice_in_dim(x, last, 1, axis=1)[:, 0]), cache

    def score_chunk(self, P, tokens, start, slot, cache):
        """One chunk of a sequence to score (see chunk): the logits of every row, f32[1,C,V], and the cache."""
        x, cache = self.chunk(P, tokens, start, slot, cache)
        return self.logits(P, x), cache

    def decode_slots(self, P, tokens, positions, cache):
        S, C = tokens.shape[0], cache.shape[4]
        pos = positions[:, None]  # [S,1]: one step of each slot
        visible = (jnp.arange(C)[None, None, :] <= positions[:, None, None])  # [S,1,C]

        def attend(i, q, k, v, cache):
            # One dynamic_update_slice per slot, at its own position: XLA updates the donated cache in place
            # with these (tools/jax_gpt.py measured a scatter over the slots 2x slower).
            for s in range(S):
                kv = jnp.stack([k[s, 0], v[s, 0]])[None, :, None, :, None, :]  # [1,2,1,KVH,1,Dh]
                cache = lax.dynamic_update_slice(cache, self.to_cache(kv), (i, 0, s, 0, positions[s], 0))
            return attention(q, self.from_cache(cache[i, 0]), self.from_cache(cache[i, 1]), visible, self.scale(i)), cache

        x, cache = self.run(P, self.embed(P, tokens[:, None], pos), pos, attend, cache)
        return self.logits(P, x[:, 0]), cache

    def decode_batch(self, P, tokens, positions, slots, cache, length):
        """One decoding step of B sequences held in cache rows `slots` (any of the cache's N), each reading
        its token at its position (below `length`, the program's static attention window: only the first
        `length` positions of each row are read, so a step's cost follows the lengths in use, not the
        context). Rows of the cache not named are left as they are."""
        if self.kernels == "native":
            fused = self.fused_decode(P, tokens, positions, slots, cache)
            if fused is not None:
                return fused
        B = tokens.shape[0]
        pos = positions[:, None]  # [B,1]
        visible = (jnp.arange(length)[None, None, :] <= positions[:, None, None])  # [B,1,length]

        def attend(i, q, k, v, cache):
            rows = []
            for b in range(B):
                kv = jnp.stack([k[b, 0], v[b, 0]])[None, :, None, :, None, :]  # [1,2,1,KVH,1,Dh]
                cache = lax.dynamic_update_slice(cache, self.to_cache(kv), (i, 0, slots[b], 0, positions[b], 0))
            if self.kernels == "native":
                # The native kernel reads each sequence's positions 0..positions[b] where the cache holds
                # them; XLA's attention below copies every sequence's window out of the cache first.
                self.emitted.add(DECODE_ATTENTION)
                H = q.shape[2]
                o = jax.ffi.ffi_call(DECODE_ATTENTION, jax.ShapeDtypeStruct((B, H, self.head_dim), F32))(
                    q[:, 0].astype(F32), cache, slots, positions, layer=np.int32(i), scale=np.float32(self.scale(i)))
                return o.reshape(B, 1, H * self.head_dim), cache
            for b in range(B):
                rows.append(lax.dynamic_slice(cache, (i, 0, slots[b], 0, 0, 0),
                                              (1, 2, 1, self.kv_heads, length, self.head_dim))[0, :, 0])
            window = self.from_cache(jnp.stack(rows, axis=1))  # [2,B,KVH,length,Dh]
            return attention(q, window[0], window[1], visible, self.scale(i)), cache

        x, cache = self.run(P, self.embed(P, tokens[:, None], pos), pos, attend, cache)
        return self.logits(P, x[:, 0]), cache

    def fused_decode(self, P, tokens, positions, slots, cache):
        """decode_batch with each layer one xla_actors.decoder_layer call, which updates the cache in place
        (its second result aliases the cache operand) and reads each sequence's positions in use; None when a
        layer's weights are not all of one dtype (f32, bf16 or f16 [N,K], or int8), or the architecture has no
        layer_call."""
        calls = [self.layer_call(P, i) for i in range(self.layers)]
        if any(c is None for c in calls):
            return None
        x = self.embed(P, tokens[:, None], positions[:, None])[:, 0].astype(F32)  # [B,D]
        self.emitted.add(DECODER_LAYER)
        for operands, attrs in calls:
            x, cache = jax.ffi.ffi_call(
                DECODER_LAYER, (jax.ShapeDtypeStruct(x.shape, F32), jax.ShapeDtypeStruct(cache.shape, cache.dtype)),
                input_output_aliases={1: 1})(x, cache, slots, positions, *operands, **attrs)
        return self.logits(P, x), cache

    def layer_call(self, P, i):
        """Layer i's operands after (x, cache, slots, positions) and attributes for xla_actors.decoder_layer,
        or None (the layer runs as XLA ops and one native call per product)."""
        return None

    def layer_attributes(self, i, q8, biases, **form):
        """xla_actors.decoder_layer's attributes for layer i: those every architecture sets (layer, eps, heads, q8,
        biases, scale, and activations when its int8 products quantise their activations), then `form`, the
        architecture's own (norm, mlp, rope, qkv), each an int32."""
        return dict(layer=np.int32(i), eps=np.float32(self.eps), heads=np.int32(self.heads), q8=np.int32(q8),
                    biases=np.int32(biases), scale=np.float32(self.scale(i)), **(self.q8_attributes() if q8 else {}),
                    **{k: np.int32(v) for k, v in form.items()})

    def fused_linears(self, P, products):
        """The operands of a decoder_layer's products, each (weight name, transposed, bias name or None):
        ([each product's operands], q8, biases), a product's operands being its weight as [N,K] f32, bf16, f16 or
        int8 values and scales, then its bias; None unless every weight is f32 [N,K] (a [K,N] one stored
        transposed), every one bf16 [N,K] or every one f16 [N,K] (likewise), or every one int8. Records each
        weight in matmul_weights as matmul does (the importer's first pass decides the rewrites from them)."""
        self.matmul_weights = getattr(self, "matmul_weights", {})
        operands, kinds, biases = [], set(), 0
        for j, (name, transposed, bias) in enumerate(products):
            self.matmul_weights[name] = transposed
            if name in self.q8:
                ops = [P[name + Q8_SUFFIX], P[name + Q8_SCALE_SUFFIX]]
                kinds.add("q8")
            else:
                if name in self.transposed_copies:
                    name, transposed = name + T_SUFFIX, True
                if not transposed or P[name].dtype not in (F32, BF16, F16):
                    return None
                ops = [P[name]]
                kinds.add(jnp.dtype(P[name].dtype).name)
            if bias is not None:
                ops.append(self.w(P, bias))
                biases |= 1 << j
            operands.append(ops)
        if len(kinds) != 1:
            return None
        return operands, kinds == {"q8"}, biases

    def slot_cache_shape(self, slots, context):
        return (self.layers, 2, slots, self.kv_heads, context, self.head_dim)


class Gpt2(Decoder):
    """GPT2LMHeadModel: learned positions, LayerNorm, fused q|k|v Conv1D ([in, out] weights), GELU MLP,
    the head tied to wte unless the checkpoint has lm_head.weight."""

    # Causal-mask buffers that older transformers versions saved with the weights.
    droppable = (r"\.attn\.(bias|masked_bias)$",)
    activations = {"gelu_new": True, "gelu_pytorch_tanh": True, "gelu_fast": True, "gelu": False}

    def __init__(self, cfg, names):
        super().__init__(names)
        self.layers = cfg.need("n_layer")
        self.d = cfg.need("n_embd")
        self.heads = self.kv_heads = cfg.need("n_head")
        self.head_dim = self.d // self.heads
        self.context = cfg.need("n_positions")
        self.vocab = cfg.need("vocab_size")
        self.eps = cfg.get("layer_norm_epsilon", 1e-5)
        act = cfg.refuse_unless("activation_function", sorted(self.activations), "gelu_new")
        self.tanh_gelu = self.activations[act]
        self.scale_weights = cfg.get("scale_attn_weights", True)
        self.by_layer = cfg.get("scale_attn_by_inverse_layer_idx", False)
        self.p = "transformer." if "transformer.wte.weight" in names else ""
        self.embedding_name = self.p + "wte.weight"
        self.head_name = "lm_head.weight" if "lm_head.weight" in names else self.embedding_name

    def scale(self, i):
        s = 1.0 / math.sqrt(self.head_dim) if self.scale_weights else 1.0
        return s / (i + 1) if self.by_layer else s

    def ln(self, P, name, x):
        return layer_norm(x, self.w(P, name + ".weight"), self.w(P, name + ".bias"), self.eps)

    def conv1d(self, P, name, x):
        return self.matmul(P, name + ".weight", x) + self.w(P, name + ".bias")

    def embed(self, P, tokens, positions):
        return self.rows_of(P, self.p + "wte.weight", tokens) + P[self.p + "wpe.weight"][positions].astype(F32)

    def norm1(self, P, i, x):
        return self.ln(P, f"{self.p}h.{i}.ln_1", x)

    def norm2(self, P, i, x):
        return self.ln(P, f"{self.p}h.{i}.ln_2", x)

    def qkv(self, P, i, x, positions):
        B, T = x.shape[:2]
        q, k, v = jnp.split(self.conv1d(P, f"{self.p}h.{i}.attn.c_attn", x), 3, axis=-1)
        return (t.reshape(B, T, self.heads, self.head_dim) for t in (q, k, v))

    def attn_out(self, P, i, o):
        return self.conv1d(P, f"{self.p}h.{i}.attn.c_proj", o)

    def mlp(self, P, i, x):
        h = jax.nn.gelu(self.conv1d(P, f"{self.p}h.{i}.mlp.c_fc", x), approximate=self.tanh_gelu)
        return self.conv1d(P, f"{self.p}h.{i}.mlp.c_proj", h)

    def final_norm(self, P, x):
        return self.ln(P, self.p + "ln_f", x)

    def layer_call(self, P, i):
        h = f"{self.p}h.{i}."
        names = [h + n for n in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]
        linears = self.fused_linears(P, [(n + ".weight", False, n + ".bias" if n + ".bias" in self.names else None)
                                         for n in names])
        if linears is None:
            return None
        (qkv, o, fc, proj), q8, biases = linears
        norm = lambda n: [self.w(P, f"{h}{n}.weight"), self.w(P, f"{h}{n}.bias")]
        attrs = self.layer_attributes(i, q8, biases, norm=NORM_LAYER, mlp=MLP_GELU_TANH if self.tanh_gelu else MLP_GELU_ERF,
                                      rope=0, qkv=1)
        return norm("ln_1") + qkv + o + norm("ln_2") + fc + proj, attrs


class Llama(Decoder):
    """LlamaForCausalLM and its cousins Mistral and Qwen2: RMSNorm, rotary positions ("rotate half"),
    grouped-query attention with optional q/k/v/o biases (Qwen2 has q/k/v ones), SwiGLU MLP."""

    # The rotary frequencies, a buffer that older transformers versions saved with the weights.
    droppable = (r"\.rotary_emb\.inv_freq$",)

    def __init__(self, cfg, names):
        super().__init__(names)
        self.layers = cfg.need("num_hidden_layers")
        self.d = cfg.need("hidden_size")
        self.heads = cfg.need("num_attention_heads")
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        if self.heads % self.kv_heads:
            raise Refusal(f"{cfg.path}: num_attention_heads {self.heads} is not a multiple of "
                          f"num_key_value_heads {self.kv_heads}")
        self.head_dim = cfg.get("head_dim") or self.d // self.heads
        self.context = cfg.need("max_position_embeddings")
        self.vocab = cfg.need("vocab_size")
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        cfg.refuse_unless("hidden_act", ["silu"], "silu")
        self.sliding_window_cap(cfg)
        self.inv_freq = self.rope_frequencies(cfg)
        # A tied head reads the embedding unless the checkpoint saved lm_head.weight anyway (then both hold
        # the same values); an untied one needs lm_head.weight, which the trace then asks for by name.
        tied = cfg.get("tie_word_embeddings", False) and "lm_head.weight" not in names
        self.embedding_name = "model.embed_tokens.weight"
        self.head_name = self.embedding_name if tied else "lm_head.weight"

    def sliding_window_cap(self, cfg):
        """Mistral's (and Qwen2's, when use_sliding_window) attention sees only the last sliding_window
        positions; within that many positions it is plain causal attention, so the context is capped there
        rather than the window masked."""
        window = cfg.get("sliding_window")
        if window and cfg.get("use_sliding_window", True) and window < self.context:
            print(f"hf_import: context capped at sliding_window {window} (max_position_embeddings "
                  f"{self.context}): longer sequences would need the window's mask", file=sys.stderr)
            self.context = window

    def rope_frequencies(self, cfg):
        """The inverse frequencies of the rotary embedding, as transformers computes them (in f32).
        Newer configs hold rope_parameters (with rope_theta inside), older ones rope_theta + rope_scaling."""
        rope = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
        kind = rope.get("rope_type", rope.get("type", "default"))
        supported = ["default", "linear", "llama3"]
        if kind not in supported:
            raise Refusal(f"{cfg.path}: rope type {kind!r} is not supported (supported: {supported})")
        if rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)) != 1.0:
            raise Refusal(f"{cfg.path}: partial_rotary_factor is not supported (only full rotary embeddings)")
        theta = np.float32(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
        dim = self.head_dim
        inv = (np.float32(1.0) / theta ** (np.arange(0, dim, 2).astype(np.float32) / np.float32(dim))).astype(np.float32)
        if kind == "linear":
            inv = inv / np.float32(self.rope_key(cfg, rope, "factor"))
        elif kind == "llama3":
            factor = self.rope_key(cfg, rope, "factor")
            low, high = self.rope_key(cfg, rope, "low_freq_factor"), self.rope_key(cfg, rope, "high_freq_factor")
            old = rope.get("original_max_position_embeddings", self.context)
            low_wavelen, high_wavelen = old / low, old / high
            wavelen = 2 * math.pi / inv
            scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
            smooth = (old / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
            inv = np.where(medium, smoothed, scaled).astype(np.float32)
        return inv

    @staticmethod
    def rope_key(cfg, rope, key):
        if key not in rope:
            raise Refusal(f"{cfg.path}: rope scaling {rope.get('rope_type', rope.get('type'))!r} needs \"{key}\"")
        return rope[key]

    def scale(self, i):
        return 1.0 / math.sqrt(self.head_dim)

    def linear(self, P, name, x):
        y = self.matmul(P, name + ".weight", x, transposed=True)
        return y + self.w(P, name + ".bias") if name + ".bias" in self.names else y

    def rope(self, x, positions):
        """Rotates each head's first and second halves (HF's rotate_half), not interleaved pairs."""
        freqs = positions[..., None].astype(F32) * jnp.asarray(self.inv_freq)  # [B,T,Dh/2]
        emb = jnp.concatenate([freqs, freqs], axis=-1)[:, :, None, :]
        x1, x2 = jnp.split(x, 2, axis=-1)
        return x * jnp.cos(emb) + jnp.concatenate([-x2, x1], axis=-1) * jnp.sin(emb)

    def embed(self, P, tokens, positions):
        return self.rows_of(P, self.embedding_name, tokens)

    def norm1(self, P, i, x):
        return rms_norm(x, self.w(P, f"model.layers.{i}.input_layernorm.weight"), self.eps)

    def norm2(self, P, i, x):
        return rms_norm(x, self.w(P, f"model.layers.{i}.post_attention_layernorm.weight"), self.eps)

    def qkv(self, P, i, x, positions):
        B, T = x.shape[:2]
        a = f"model.layers.{i}.self_attn."
        q = self.linear(P, a + "q_proj", x).reshape(B, T, self.heads, self.head_dim)
        k = self.linear(P, a + "k_proj", x).reshape(B, T, self.kv_heads, self.head_dim)
        v = self.linear(P, a + "v_proj", x).reshape(B, T, self.kv_heads, self.head_dim)
        return self.rope(q, positions), self.rope(k, positions), v

    def attn_out(self, P, i, o):
        return self.linear(P, f"model.layers.{i}.self_attn.o_proj", o)

    def mlp(self, P, i, x):
        m = f"model.layers.{i}.mlp."
        gate, up = self.linear(P, m + "gate_proj", x), self.linear(P, m + "up_proj", x)
        return self.linear(P, m + "down_proj", jax.nn.silu(gate) * up)

    def final_norm(self, P, x):
        return rms_norm(x, self.w(P, "model.norm.weight"), self.eps)

    def layer_call(self, P, i):
        a, m = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        names = [a + "q_proj", a + "k_proj", a + "v_proj", a + "o_proj", m + "gate_proj", m + "up_proj", m + "down_proj"]
        products = [(n + ".weight", True, n + ".bias" if n + ".bias" in self.names else None) for n in names]
        linears = self.fused_linears(P, products)
        if linears is None:
            return None
        operands, q8, biases = linears
        attention, mlp = sum(operands[:4], []), sum(operands[4:], [])  # q, k, v, o; gate, up, down
        norm = lambda n: [self.w(P, f"model.layers.{i}.{n}.weight")]
        attrs = self.layer_attributes(i, q8, biases, norm=NORM_RMS, mlp=MLP_SWIGLU, rope=1, qkv=3)
        return [jnp.asarray(self.inv_freq)] + norm("input_layernorm") + attention + norm("post_attention_layernorm") + mlp, attrs


class Bert(WeightAccess):
    """BertModel (or the encoder of BertForMaskedLM, tensors named bert.*): post-norm encoder, learned
    absolute positions, token type 0 everywhere, exact (erf) GELU. Its pooler and MLM head are not used."""

    kind = "embedding"
    droppable = (r"^(bert\.)?pooler\.", r"^cls\.", r"position_ids$")

    def __init__(self, cfg, names):
        self.names = names
        self.layers = cfg.need("num_hidden_layers")
        self.d = cfg.need("hidden_size")
        self.heads = cfg.need("num_attention_heads")
        self.head_dim = self.d // self.heads
        self.context = cfg.need("max_position_embeddings")
        self.vocab = cfg.need("vocab_size")
        self.eps = cfg.get("layer_norm_eps", 1e-12)
        cfg.refuse_unless("hidden_act", ["gelu"], "gelu")
        cfg.refuse_unless("position_embedding_type", ["absolute"], "absolute")
        self.p = "bert." if "bert.embeddings.word_embeddings.weight" in names else ""
        self.embedding_name = self.p + "embeddings.word_embeddings.weight"

    def w(self, P, name):
        return P[name].astype(F32)

    def ln(self, P, name, x):
        # Checkpoints from before transformers renamed them call LayerNorm's parameters gamma and beta.
        gain, bias = (".weight", ".bias") if name + ".weight" in self.names else (".gamma", ".beta")
        return layer_norm(x, self.w(P, name + gain), self.w(P, name + bias), self.eps)

    def linear(self, P, name, x):
        return self.matmul(P, name + ".weight", x, transposed=True) + self.w(P, name + ".bias")

    def embed(self, P, tokens, mask):
        B, T = tokens.shape
        e = self.p + "embeddings."
        x = (P[self.embedding_name][tokens].astype(F32)
             + self.w(P, e + "position_embeddings.weight")[:T][None]
             + self.w(P, e + "token_type_embeddings.weight")[0])
        x = self.ln(P, e + "LayerNorm", x)
        visible = jnp.broadcast_to((mask != 0)[:, None, :], (B, T, T))  # padding keys are never attended
        for i in range(self.layers):
            a = f"{self.p}encoder.layer.{i}."
            q, k, v = (self.linear(P, a + "attention.self." + n, x).reshape(B, T, self.heads, self.head_dim)
                       for n in ("query", "key", "value"))
            o = attention(q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), visible, 1.0 / math.sqrt(self.head_dim))
            x = self.ln(P, a + "attention.output.LayerNorm", x + self.linear(P, a + "attention.output.dense", o))
            h = jax.nn.gelu(self.linear(P, a + "intermediate.dense", x), approximate=False)
            x = self.ln(P, a + "output.LayerNorm", x + self.linear(P, a + "output.dense", h))
        return x


ARCHITECTURES = {
    "GPT2LMHeadModel": Gpt2,
    "LlamaForCausalLM": Llama, "MistralForCausalLM": Llama, "Qwen2ForCausalLM": Llama,
    "BertModel": Bert, "BertForMaskedLM": Bert,
}


# ---------------------------------------------------------------- the programs


def used_weights(fn, weights, file, cfg, *args):
    """The names of the weights a program reads, found by tracing it (nothing is computed)."""
    seen = set()

    class Recorder(dict):
        def __getitem__(self, key):
            if key not in self:
                raise Refusal(f"the checkpoint has no tensor {key!r}, which {cfg.path} implies (the config "
                              "and the weights disagree, or the weights are another architecture's)")
            seen.add(key)
            return dict.__getitem__(self, key)

    try:
        jax.eval_shape(lambda P, *a: fn(Recorder(P), *a), weights, *args)
    except (TypeError, ValueError) as e:  # a shape mismatch: jax names the operation and the shapes
        raise Refusal(f"{file}: the weights' shapes do not fit {cfg.path}'s sizes: "
                      f"{str(e).splitlines()[0]}")
    return seen


def program_plan(model, a, context):
    """(role attributes, file, function, donated argument or None, argument specs after the weights)."""
    i32 = jax.ShapeDtypeStruct((), jnp.int32)
    plan = []
    if model.kind == "embedding":
        T = min(context, a.embed_length)
        for B in a.embed_batches:
            tokens = jax.ShapeDtypeStruct((B, T), jnp.int32)
            plan.append(({"role": "embed", "batch": B, "length": T}, f"embed_b{B}.jax", model.embed, None,
                         (tokens, tokens)))
        return plan
    T = min(context, a.score_length)
    plan.append(({"role": "score", "batch": 1, "length": T}, "score_b1.jax", model.score, None,
                 (jax.ShapeDtypeStruct((1, T), jnp.int32),)))
    # One cache of N slots (the largest batch); decode programs for each batch size B and attention window
    # L read only the rows and positions in use; prompts of any length up to the context go in by chunks.
    # With --kernels native, decode's attention is the native kernel, which reads each sequence's positions
    # in use wherever they are: one window, the context, serves every length.
    N = max(a.slots)
    cache = jax.ShapeDtypeStruct(model.slot_cache_shape(N, context), model.cache_dtype)
    for C in chunk_lengths(a, context):
        plan.append(({"role": "prefill_chunk", "slots": N, "length": C}, f"prefill_chunk_s{N}_c{C}.jax",
                     model.prefill_chunk, 5, (jax.ShapeDtypeStruct((1, C), jnp.int32), i32, i32, i32, cache)))
    for B in sorted(set(a.slots)):
        for L in decode_lengths(a, context) if model.kernels == "xla" else [context]:
            plan.append(({"role": "decode_batch", "slots": N, "batch": B, "length": L},
                         f"decode_batch_s{N}_b{B}_l{L}.jax", functools.partial(model.decode_batch, length=L), 4,
                         (jax.ShapeDtypeStruct((B,), jnp.int32), jax.ShapeDtypeStruct((B,), jnp.int32),
                          jax.ShapeDtypeStruct((B,), jnp.int32), cache)))
    plan.append(({"role": "slot_cache", "slots": N}, f"slot_cache_s{N}.jax", None, None, ()))
    # Scoring a sequence longer than score's length: chunks of the longest prefill chunk over a cache of its own.
    C = max(chunk_lengths(a, context))
    score_cache = jax.ShapeDtypeStruct(model.slot_cache_shape(1, context), model.cache_dtype)
    plan.append(({"role": "score_chunk", "slots": 1, "length": C}, f"score_chunk_s1_c{C}.jax", model.score_chunk, 4,
                 (jax.ShapeDtypeStruct((1, C), jnp.int32), i32, i32, score_cache)))
    if N != 1:
        plan.append(({"role": "slot_cache", "slots": 1}, "slot_cache_s1.jax", None, None, ()))
    return plan


def chunk_lengths(a, context):
    """The prefill chunk lengths: as asked, capped at the context (a context shorter than a chunk takes the
    whole prompt in one)."""
    return sorted({min(C, context) for C in a.prefill_chunks})


def decode_lengths(a, context):
    """The attention windows of the decode programs: as asked below the context, and the context itself."""
    return sorted({L for L in a.decode_lengths if L < context} | {context})


def cache_bytes(model, slots, context):
    return jnp.dtype(model.cache_dtype).itemsize * math.prod(model.slot_cache_shape(slots, context))


def choose_context(model, a, notes):
    """The context the package serves: the checkpoint's, capped by --context-length and by what a cache of
    max(--slots) slots may take (--kv-cache-memory); refused when not even the shortest prompt chunk fits."""
    context = model.context
    if a.context_length is not None and a.context_length < context:
        context = a.context_length
    if model.kind != "causal-lm":
        return context
    slots = max(a.slots)
    per_position = cache_bytes(model, slots, 1)
    fits = a.kv_cache_memory // per_position
    if fits < context:
        if fits < 16:
            raise Refusal(f"--kv-cache-memory {a.kv_cache_memory} bytes holds {fits} positions of {slots} slot(s) "
                          f"({per_position} bytes each): raise it, or import with fewer --slots")
        capped = fits // 16 * 16  # a multiple of 16, like the chunk and window lengths
        notes.append(f"context capped at {capped} positions (the checkpoint has {context}): a cache of {slots} "
                     f"slot(s) takes {per_position} bytes a position and --kv-cache-memory is {a.kv_cache_memory}; "
                     "raise it, or lower --slots, for more")
        context = capped
    return context


def export_program(fn, donated, weights, args, platforms, name, custom_calls=()):
    jitted = jax.jit(fn, donate_argnums=donated) if donated is not None else jax.jit(fn)
    # The native kernels' custom calls are outside jax.export's allow-list of targets it knows are stable.
    checks = [export.DisabledSafetyCheck.custom_call(t) for t in sorted(custom_calls)]
    exp = export.export(jitted, platforms=platforms, disabled_checks=checks)(weights, *args)
    if donated is not None:
        text = exp.mlir_module()
        if "tf.aliasing_output" not in text and "jax.buffer_donor" not in text:
            raise RuntimeError(f"{name}: the export lost the cache's donation (jax {jax.__version__})")
    return exp.serialize()


def export_slot_cache(shape, dtype, platforms, kernels):
    """The empty cache. With --kernels native it is the bridge's zeros, which leaves the pages of the cache
    unmapped until a step writes them (the steps write only the positions they fill and the native attention reads
    only the positions in use), so a cache holds memory for the positions its sequences reached, not for the
    context; XLA's zeros write every page up front."""
    if kernels == "native":
        make = lambda: jax.ffi.ffi_call(ZEROS, jax.ShapeDtypeStruct(shape, dtype))()
        checks = [export.DisabledSafetyCheck.custom_call(ZEROS)]
    else:
        make, checks = (lambda: jnp.zeros(shape, dtype)), []
    return export.export(jax.jit(make), platforms=platforms, disabled_checks=checks)().serialize()


# ---------------------------------------------------------------- tokenizer and generation defaults


def post_processor_adds(processor, token):
    """Whether tokenizer.json's post-processor puts `token` in front of a single sequence."""
    if not processor:
        return False
    kind = processor.get("type")
    if kind == "Sequence":
        return any(post_processor_adds(p, token) for p in processor.get("processors", []))
    if kind == "TemplateProcessing":
        first = (processor.get("single") or [{}])[0]
        return first.get("SpecialToken", {}).get("id") == token
    if kind in ("BertProcessing", "RobertaProcessing"):
        return processor.get("cls", [None])[0] == token
    return False


def token_text(value):
    """tokenizer_config.json writes a special token as a string or as {"content": ...}."""
    return value.get("content") if isinstance(value, dict) else value


def generation_defaults(hf_dir, cfg, tokenizer, tok_config, notes):
    gen_path = hf_dir / "generation_config.json"
    gen = read_json(gen_path, "") if gen_path.is_file() else {}
    eos = gen.get("eos_token_id", cfg.get("eos_token_id"))
    eos_ids = [] if eos is None else eos if isinstance(eos, list) else [eos]
    # The tokenizer's own EOS ends a sequence too, as vLLM adds it to generation_config's: in chat checkpoints
    # it is often the end of an assistant turn (Qwen2.5's <|im_end|>, Llama 3 Instruct's <|eot_id|>), which
    # generation_config.json may leave out.
    eos_text = token_text(tok_config.get("eos_token"))
    eos_id = token_id(tokenizer, eos_text) if eos_text is not None and tokenizer is not None else None
    if eos_id is not None and eos_id not in eos_ids:
        eos_ids = eos_ids + [eos_id]
        notes.append(f"eos_token_ids {eos_ids}: tokenizer_config.json's eos_token {eos_text} added to generation_config.json's")
    if not eos_ids:
        notes.append("no eos_token_id in generation_config.json or config.json: generation stops only at max_tokens")
    out = {"eos_token_ids": eos_ids, "bos_token_id": None}

    # BOS: Hugging Face tokenizers add it in tokenizer.json's post-processor (Llama 3) or, in older slow
    # tokenizer configs, through add_bos_token. The Java side tokenizes with tokenizer.json and prepends
    # bos_token_id when set, so it is set only when the tokenizer should add BOS and its file does not.
    bos_text = token_text(tok_config.get("bos_token"))
    if bos_text is not None and tokenizer is not None:
        if post_processor_adds(tokenizer.get("post_processor"), bos_text):
            notes.append(f"bos_token_id null: tokenizer.json's post-processor already adds {bos_text}")
        elif tok_config.get("add_bos_token", False):
            bos_id = token_id(tokenizer, bos_text)
            if bos_id is None:
                raise Refusal(f"tokenizer_config.json's bos_token {bos_text!r} is not in tokenizer.json")
            out["bos_token_id"] = bos_id
            notes.append(f"bos_token_id {bos_id}: tokenizer_config.json has add_bos_token and tokenizer.json "
                         "does not add it")

    if "max_new_tokens" in gen:
        out["max_tokens"] = gen["max_new_tokens"]
    if gen.get("repetition_penalty") not in (None, 1.0):
        out["repetition_penalty"] = gen["repetition_penalty"]
    # Sampling settings count only when the checkpoint samples by default (do_sample); otherwise HF decodes
    # greedily and ignores them.
    if gen.get("do_sample"):
        for key in ("temperature", "top_k", "top_p", "min_p"):
            if gen.get(key) is not None:
                out[key] = gen[key]
    return out


def token_id(tokenizer, text):
    """The id tokenizer.json gives the whole token text (an added token's, else the vocabulary's), or None."""
    vocab = tokenizer.get("model", {}).get("vocab", {})
    added = {t["content"]: t["id"] for t in tokenizer.get("added_tokens", [])}
    return added.get(text, vocab.get(text) if isinstance(vocab, dict) else None)


SPECIAL_TOKEN_NAME = re.compile(r"[a-z][a-z0-9_]*_token")


def special_tokens(tok_config):
    """The special-token texts apply_chat_template passes a chat template (bos_token, eos_token, unk_token,
    pad_token, ...), from tokenizer_config.json: the package keeps them, since the template writes them into
    the prompt (Llama 2's {{ bos_token }}) whether or not the tokenizer adds them itself."""
    out = {}
    for name, value in tok_config.items():
        text = token_text(value)
        if SPECIAL_TOKEN_NAME.fullmatch(name) and isinstance(text, str):
            out[name] = text
    return out


def chat_template(hf_dir, tok_config):
    """The chat template: chat_template.jinja (transformers 4.5x and later) or tokenizer_config.json's
    chat_template, a string or a list of named templates of which "default" is the chat one."""
    jinja = hf_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    template = tok_config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template}
        template = named.get("default")
    return template if isinstance(template, str) else None


# ---------------------------------------------------------------- the weights


DTYPE_CONVERSIONS = {"as-is": None, "f32": "F32", "bf16": "BF16", "f16": "F16"}
# --kv-cache-dtype: what the KV cache stores (attention computes in f32 either way).
KV_CACHE_DTYPES = {"f32": F32, "f16": jnp.float16, "bf16": jnp.bfloat16}


def q8_derived(model, weight_specs):
    """For --quantize int8 or w8a8: {package tensor: (checkpoint tensor, Q8_SUFFIX or Q8_SCALE_SUFFIX, transposed)}
    for every floating matmul weight whose input size K is a multiple of 32, with their specs put in
    weight_specs in place of the f32 weight's."""
    derived = {}
    for name, transposed in sorted(model.matmul_weights.items()):
        spec = weight_specs[name]
        n, k = spec.shape if transposed else spec.shape[::-1]
        if spec.dtype not in (np.float32, np.float16, ml_dtypes.bfloat16) or k % Q8_BLOCK:
            continue
        weight_specs[name + Q8_SUFFIX] = jax.ShapeDtypeStruct((n, k), jnp.int8)
        weight_specs[name + Q8_SCALE_SUFFIX] = jax.ShapeDtypeStruct((n, k // Q8_BLOCK), F32)
        del weight_specs[name]
        derived[name + Q8_SUFFIX] = (name, Q8_SUFFIX, transposed)
        derived[name + Q8_SCALE_SUFFIX] = (name, Q8_SCALE_SUFFIX, transposed)
    return derived


def t_derived(model, weight_specs):
    """For --kernels native without --quantize: {package tensor: (checkpoint tensor, T_SUFFIX, False)} for
    every f32, bf16 or f16 matmul weight stored [K,N] (GPT-2's Conv1D), with its [N,K] spec put in weight_specs
    in place of the weight's. The native f32 kernel reads [N,K] weights as one contiguous run per output (its dot
    form, register tiles of 3 x 4); a [K,N] weight takes its axpy form, which measured 0.5-0.6x the dot form
    at one sequence and 0.2-0.5x at eight (KernelsBench, -Dkernels.layouts=both). The bf16 and f16 kernels have
    the dot form only."""
    derived = {}
    for name, transposed in sorted(model.matmul_weights.items()):
        spec = weight_specs[name]
        if transposed or spec.dtype not in (np.float32, ml_dtypes.bfloat16, np.float16):
            continue
        weight_specs[name + T_SUFFIX] = jax.ShapeDtypeStruct(spec.shape[::-1], spec.dtype)
        del weight_specs[name]
        derived[name + T_SUFFIX] = (name, T_SUFFIX, False)
    return derived


def write_weights(ckpt, keep, target, out, notes, derived=None):
    """Writes the kept tensors into out as the checkpoint shipped them (one file, or the same shards with
    a rewritten index): a file is copied when nothing in it changes and its data is already aligned, else
    rewritten. Tensors in `derived` (q8_derived, t_derived) are quantised or transposed from their checkpoint
    tensor and written in its file. Returns the manifest's "weights" entry and the package's dtype."""
    floating = {"F64", "F32", "F16", "BF16"}
    derived = derived or {}
    quantized = {}

    def code_of(name):
        if name in derived and derived[name][1] != T_SUFFIX:
            return "I8" if derived[name][1] == Q8_SUFFIX else "F32"
        code = ckpt.dtype_code(derived[name][0] if name in derived else name)
        return target if target and code in floating else code

    def shape_of(name):
        if name not in derived:
            return ckpt.tensors[name][1]["shape"]
        source, part, transposed = derived[name]
        n, k = ckpt.tensors[source][1]["shape"][:: 1 if transposed else -1]
        return [n, k] if part in (Q8_SUFFIX, T_SUFFIX) else [n, k // Q8_BLOCK]

    def array_of(name):
        if name in derived and derived[name][1] != T_SUFFIX:
            source, part, transposed = derived[name]
            if source not in quantized:
                w = ckpt.array(source).astype(np.float32)
                quantized[source] = quantize_q8(w if transposed else w.T)
            return quantized[source][0 if part == Q8_SUFFIX else 1]
        source = derived[name][0] if name in derived else name  # a T_SUFFIX copy: its weight, transposed
        a = ckpt.array(source)
        if name in derived:
            a = np.ascontiguousarray(a.T)
        code = code_of(name)
        return a if code == ckpt.dtype_code(source) else a.astype(SAFETENSORS_DTYPES[code])

    weight_map, total = {}, 0
    for file in ckpt.files:
        header, start = ckpt.headers[file]
        names = sorted([n for n in header if n != "__metadata__" and n in keep]
                       + [n for n, (source, _, _) in derived.items() if source in header and n in keep])
        if not names:
            notes.append(f"{file} dropped: none of its tensors is used")
            continue
        unchanged = (len(names) == len(header) - ("__metadata__" in header) and not any(n in derived for n in names)
                     and all(code_of(n) == ckpt.dtype_code(n) for n in names) and start % ALIGNMENT == 0)
        if unchanged:
            shutil.copyfile(ckpt.dir / file, out / file)
            total += os.path.getsize(out / file) - start
        else:
            total += write_safetensors(out / file, names, shape_of, code_of, array_of, header.get("__metadata__"))
        weight_map.update({n: file for n in names})
    codes = {code_of(n) for n in keep if code_of(n) in floating}
    dtype = DTYPE_NAMES[codes.pop()] if len(codes) == 1 else "mixed"
    if ckpt.index is None:
        return {"file": "model.safetensors"}, dtype
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return {"index": "model.safetensors.index.json"}, dtype


# ---------------------------------------------------------------- the import


def architecture_of(cfg):
    archs = cfg.get("architectures")
    if not isinstance(archs, list) or len(archs) != 1:
        raise Refusal(f"{cfg.path}: \"architectures\" is {archs!r}, expected one of {sorted(ARCHITECTURES)} "
                      "in a list of one")
    if archs[0] not in ARCHITECTURES:
        raise Refusal(f"{cfg.path}: architecture {archs[0]!r} is not supported; supported: {sorted(ARCHITECTURES)}")
    return archs[0]


def import_checkpoint(a):
    hf_dir = a.hf_dir
    if not hf_dir.is_dir():
        raise Refusal(f"{hf_dir} is not a directory (expected a Hugging Face checkpoint: config.json, model.safetensors, ...)")
    cfg = Config(hf_dir)
    arch = architecture_of(cfg)
    ckpt = Checkpoint(hf_dir)
    model = ARCHITECTURES[arch](cfg, set(ckpt.tensors))
    model.cache_dtype = KV_CACHE_DTYPES[a.kv_cache_dtype]
    model.attention_block = a.attention_block
    notes = []
    context = choose_context(model, a, notes)
    target = DTYPE_CONVERSIONS[a.dtype]

    tokenizer_path = hf_dir / "tokenizer.json"
    tokenizer = read_json(tokenizer_path, "") if tokenizer_path.is_file() else None
    if tokenizer is not None and a.tiktoken:
        raise Refusal(f"--tiktoken {a.tiktoken} given but {tokenizer_path} exists: the package takes one tokenizer")
    if tokenizer is None and not a.tiktoken and model.kind == "causal-lm":
        raise Refusal(f"{tokenizer_path} is missing: a causal-lm package needs the Hugging Face tokenizer file "
                      "(a fast tokenizer's save_pretrained writes it), or --tiktoken ENCODING for a "
                      "vocabulary JTokkit bundles (r50k_base is GPT-2's)")
    tok_config_path = hf_dir / "tokenizer_config.json"
    tok_config = read_json(tok_config_path, "") if tok_config_path.is_file() else {}

    # Which tensors the programs read decides what the package's weights hold.
    model.kernels = a.kernels
    plan = program_plan(model, a, context)
    weight_specs = {n: ckpt.spec(n, target if target and ckpt.dtype_code(n) in DTYPE_NAMES else None)
                    for n in ckpt.tensors}
    rows = weight_specs[model.embedding_name].shape[0]
    derived = {}
    rewrites = a.quantize != "none" or a.kernels == "native"
    for rewriting in (False, True) if rewrites else (False,):
        if rewriting and a.quantize != "none":  # the first pass recorded which weights the matmuls read
            derived = q8_derived(model, weight_specs)
            model.q8 = frozenset(source for source, _, _ in derived.values())
            model.q8_activations = a.quantize == "w8a8"
            notes.append(f"{len(model.q8)} matmul weight(s) stored as int8 (Q8_0: blocks of 32, f32 scales)"
                         + (", their products' activations quantised the same way" if model.q8_activations else ""))
        elif rewriting:
            derived = t_derived(model, weight_specs)
            if not derived:  # every matmul weight is [N,K] already (nn.Linear): the first pass's programs stand
                break
            model.transposed_copies = frozenset(source for source, _, _ in derived.values())
            notes.append(f"{len(derived)} [K,N] matmul weight(s) stored transposed, [N,K], for the native kernels")
        used, custom_calls = {}, {}
        for attrs, file, fn, donated, args in plan:
            if fn is not None:
                model.emitted = set()
                used[file] = used_weights(fn, weight_specs, file, cfg, *args)
                custom_calls[file] = model.emitted
    keep = set().union(*used.values())
    if rows != model.vocab:
        raise Refusal(f"{cfg.path}: vocab_size is {model.vocab} but {model.embedding_name} has {rows} rows")
    unused = sorted(set(ckpt.tensors) - keep - {source for source, _, _ in derived.values()})
    unknown = [n for n in unused if not any(re.search(p, n) for p in model.droppable)]
    if unknown:
        raise Refusal(f"the checkpoint has tensors the {arch} programs here do not use: {unknown[:8]}"
                      f"{' ...' if len(unknown) > 8 else ''}; they suggest a variant this importer does not "
                      "implement (it refuses rather than drop weights it does not understand)")
    if unused:
        notes.append(f"dropped {len(unused)} tensor(s) no program uses: {unused[:6]}{' ...' if len(unused) > 6 else ''}")

    out = a.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise Refusal(f"{out} exists and is not an empty directory: remove it or choose another --out")
    partial = out.with_name(out.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        weights_entry, dtype = write_weights(ckpt, keep, target, partial, notes, derived)
        programs = []
        for attrs, file, fn, donated, args in plan:
            if fn is None:
                blob = export_slot_cache(model.slot_cache_shape(attrs["slots"], context), model.cache_dtype, a.platforms,
                                         model.kernels)
            else:
                specs = {n: weight_specs[n] for n in sorted(used[file])}
                # Exporting traces fn again: what it emits goes to a set of its own, not into the last traced
                # program's (which then listed every native target of every program as its own).
                model.emitted = set()
                blob = export_program(fn, donated, specs, args, a.platforms, file, custom_calls[file])
            (partial / file).write_bytes(blob)
            programs.append({**attrs, "file": file})

        manifest = {
            "format": 1,
            "name": a.name or re.sub(r"[^A-Za-z0-9._-]+", "-", hf_dir.resolve().name),
            "kind": model.kind,
            "source": {"architecture": arch, "dtype": dtype, "importer": f"tools/hf_import.py {IMPORTER_VERSION}",
                       "jax": jax.__version__, "kernels": a.kernels,
                       **({"quantization": {"int8": "q8_0", "w8a8": "q8_0-w8a8"}[a.quantize]} if a.quantize != "none" else {}),
                       **({"kv_cache_dtype": a.kv_cache_dtype} if a.kv_cache_dtype != "f32" else {})},
            "weights": weights_entry,
            "programs": programs,
        }
        if tokenizer is not None:
            shutil.copyfile(tokenizer_path, partial / "tokenizer.json")
            manifest["tokenizer"] = {"huggingface": "tokenizer.json"}
        elif a.tiktoken:
            manifest["tokenizer"] = {"tiktoken": a.tiktoken}
        if model.kind == "causal-lm":
            template = chat_template(hf_dir, tok_config)
            if template is not None:
                (partial / "chat_template.jinja").write_text(template)
                manifest["chat_template"] = "chat_template.jinja"
                tokens = special_tokens(tok_config)
                if tokens:
                    manifest["special_tokens"] = tokens
            else:
                notes.append("no chat template (tokenizer_config.json has none): chat requests will be refused")
            manifest["generation"] = generation_defaults(hf_dir, cfg, tokenizer, tok_config, notes)
        else:
            manifest["embedding"] = {"pooling": "mean", "normalize": False}
        manifest["limits"] = {"vocabulary": model.vocab, "context_length": context}
        (partial / "xla-model.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            out.rmdir()
        os.replace(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    for note in notes:
        print(f"hf_import: {note}", file=sys.stderr)
    return out


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers, e.g. 1,4")
    return values


def byte_size(text):
    """A byte count: digits with an optional KiB, MiB or GiB (or K, M, G) suffix."""
    m = re.fullmatch(r"\s*(\d+)\s*(|K|KiB|M|MiB|G|GiB)\s*", text)
    if not m or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count (e.g. 1GiB, 512MiB, 1073741824)")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30,
                              "GiB": 1 << 30}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hf_dir", type=pathlib.Path, metavar="HF_DIR")
    ap.add_argument("--out", type=pathlib.Path, required=True, metavar="PKG", help="the package directory to make")
    ap.add_argument("--name", help="the package's name (default: HF_DIR's name)")
    ap.add_argument("--dtype", choices=sorted(DTYPE_CONVERSIONS), default="as-is",
                    help="the weights' floating dtype in the package (programs compute in f32 either way)")
    # native by default for a CPU package: with GPT-2's [K,N] weights stored transposed and register tiles of
    # 3 x 4 (2026-11-29, GPT-2 124 M, 2 cores) it decoded 1.1-1.2x XLA's dots at one sequence and 1.8-2.5x at
    # eight (the Llama: level, and 2.3x), with prompts at XLA's speed; xla where a GPU is among the platforms.
    ap.add_argument("--kernels", choices=["native", "xla"], default=None,
                    help="the weight matmuls: native (the bridge's FFI kernels for every f32 and int8 matmul and "
                    "decode's attention; the default for --platforms cpu: the package then runs only on the CPU "
                    "plugin with the bridge) or xla (XLA's dots alone, the default with cuda among the "
                    "platforms: the package runs on any PJRT plugin)")
    ap.add_argument("--quantize", choices=["none", "int8", "w8a8"], default="none",
                    help="int8: store the matmul weights as Q8_0-style int8 (blocks of 32 inputs, one f32 scale "
                    "each), about 3.6x smaller; activations stay f32. w8a8: the same weights, and each product "
                    "quantises its activations the same way at each call (llama.cpp's Q8_0 arithmetic; int8 "
                    "products on AVX-512 VNNI)")
    ap.add_argument("--slots", type=int_list, default=[1, 4],
                    help="the batch sizes of the decode programs; the cache holds max(SLOTS) sequences")
    ap.add_argument("--score-length", type=int, default=32,
                    help="score's length (capped at the context); longer sequences are scored by chunks")
    ap.add_argument("--prefill-chunks", type=int_list, default=[32, 64, 128],
                    help="the prompt chunk lengths of prefill_chunk (a prompt of any length up to the context "
                    "goes in by chunks of these; 64 between 32 and 128 writes a 64-token prompt in one pass "
                    "over the weights instead of two)")
    ap.add_argument("--prefill-length", type=int,
                    help="the same as --prefill-chunks N (one chunk length); kept for older command lines")
    ap.add_argument("--decode-lengths", type=int_list, default=None,
                    help="with --kernels xla: the attention windows of the decode programs below the context (the "
                    "context is always one; default 256,1024): a step reads only the smallest window that holds "
                    "every running sequence. --kernels native reads each sequence's own positions and ignores it")
    ap.add_argument("--attention-block", type=int, default=128,
                    help="the cache positions a prompt chunk attends to at a time (an online softmax over blocks "
                    "up to the chunk's last position, so a chunk reads only the positions before it); --kernels "
                    "xla only: --kernels native attends with the bridge's kernel and ignores it")
    ap.add_argument("--embed-batches", type=int_list, default=[1, 4], help="batch sizes of embed")
    ap.add_argument("--embed-length", type=int, default=32, help="embed's length (capped at the context)")
    ap.add_argument("--context-length", "--max-model-len", dest="context_length", type=int,
                    help="cap the context (limits.context_length and the cache's positions) below the model's")
    ap.add_argument("--kv-cache-memory", type=byte_size, default=byte_size("1GiB"),
                    help="the most bytes the cache of max(SLOTS) sequences may take; the context is "
                    "capped to fit (default 1GiB; suffixes KiB, MiB, GiB)")
    ap.add_argument("--kv-cache-dtype", choices=sorted(KV_CACHE_DTYPES), default="f32",
                    help="what the KV cache stores: f32 (the default, exact), f16 or bf16 (half the memory, so "
                    "twice the context in the same --kv-cache-memory, and half the bytes a decode step reads "
                    "from it; rounded, attention still computes in f32)")
    ap.add_argument("--tiktoken", choices=["r50k_base", "p50k_base", "cl100k_base", "o200k_base"],
                    help="for a checkpoint without tokenizer.json: an encoding JTokkit bundles (r50k_base is GPT-2's)")
    # cpu alone by default: a module lowered for several platforms takes the platform index as a run-time
    # argument, and XLA keeps every platform's code behind a conditional; on the CPU that measured 3.1x
    # slower decode (124 M GPT, one slot: 6.8 against 21.5 tokens/s) and 7x longer compiles.
    ap.add_argument("--platforms", default="cpu", help="what the programs are lowered for: cpu (default), cuda, "
                    "or cpu,cuda for one package that runs on both (slower on the CPU)")
    a = ap.parse_args()
    a.platforms = [p for p in a.platforms.split(",") if p]
    if a.kernels is None:
        a.kernels = "native" if a.platforms == ["cpu"] else "xla"
    elif a.kernels == "native" and a.platforms != ["cpu"]:
        ap.error(f"--kernels native with --platforms {','.join(a.platforms)}: the native kernels are the bridge's "
                 "CPU handlers, which no GPU plugin has; use --kernels xla, or --platforms cpu")
    if a.decode_lengths is not None and a.kernels == "native":
        print("hf_import: --decode-lengths has no effect with --kernels native (the default for a CPU package): its "
              "decode attention reads each sequence's own positions, so each batch size has one program; add "
              "--kernels xla for windows", file=sys.stderr)
    if a.decode_lengths is None:
        a.decode_lengths = [256, 1024]
    if a.name is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", a.name):
        ap.error(f"--name {a.name!r}: use letters, digits, '.', '_' and '-'")
    for flag in ("score_length", "prefill_length", "embed_length", "context_length", "attention_block"):
        if getattr(a, flag) is not None and getattr(a, flag) < 1:
            ap.error(f"--{flag.replace('_', '-')} must be at least 1")
    if a.prefill_length is not None:
        a.prefill_chunks = [a.prefill_length]
    try:
        print(import_checkpoint(a))
    except Refusal as e:
        print(f"hf_import: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
