package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.XlaActors_MatmulKernelIsa;
import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.XlaActors_MatmulKernelThreads;

/**
 * The bridge's native matrix products, which compiled programs call as the typed-FFI custom calls
 * {@code xla_actors.matmul_f32} ({@code x f32[..., K]} times {@code w f32[K, N]}, or {@code w f32[N, K]} with
 * the attribute {@code w_transposed = 1}), {@code xla_actors.matmul_bf16} and {@code xla_actors.matmul_f16}
 * ({@code x f32[..., K]} times {@code w bf16[N, K]} or {@code w f16[N, K]}, each weight widened to the f32 of
 * its value as it is loaded: matmul_f32's products on those values from half the bytes) and
 * {@code xla_actors.matmul_q8} ({@code x f32[..., K]} times
 * Q8_0-style int8 weights {@code q s8[N, K]} with one f32 scale per 32 inputs, {@code scales f32[N, K/32]}),
 * and its decode attention {@code xla_actors.decode_attention} (one step of B sequences: {@code q f32[B, H, Dh]}
 * against the KV cache {@code f32|f16|bf16[layers, 2, slots, kv_heads, positions, Dh]} at each sequence's
 * slot, up to its position, with the attributes {@code layer} and {@code scale}; it reads the cache in place),
 * its prompt chunk attention {@code xla_actors.chunk_attention} ({@code q f32[C, H, Dh]}, a chunk at positions
 * {@code start .. start + C - 1} of one slot, each row against that slot's cache up to its own position; the
 * operands after the cache are {@code slot} and {@code start}, one s32 each, the attributes as decode's),
 * and its fused decoder layer {@code xla_actors.decoder_layer} (one decoding step of a whole pre-norm layer, GPT-2's
 * or Llama's form, for B sequences: norms, products by f32, bf16, f16 or int8 weights, rotary positions, this step's keys and values
 * written into the cache, which its second result aliases, attention and MLP, the pool's threads taken once for
 * the layer; its operands and attributes are listed in {@code native/src/main/cpp/matmul_kernels.cc}), and the
 * KV cache's maker {@code xla_actors.zeros} (no operands; any f32, f16, bf16, f64, s8, s32 or s64 result, all
 * zeros, its whole pages left for the kernel to map at their first write, so that a cache holds memory for
 * the positions written, not for its whole context). {@code tools/hf_import.py --kernels native} emits them for
 * the weight matmuls, the decode steps' layers and their attention, the prompt chunks' attention and the
 * empty cache.
 *
 * <p>The kernels are chosen once per process from the CPU's features (AVX-512, AVX2 with FMA, or the
 * x86-64 baseline), capped by {@code XLA_ACTORS_KERNEL_ISA} ({@code avx512}, {@code avx2}, {@code portable})
 * or else by {@code XLA_FLAGS}' {@code --xla_cpu_max_isa}; {@code XLA_ACTORS_KERNEL_THREADS} caps how many
 * threads split one product (XLA's own intra-op pool's threads where the plugin lends them to FFI handlers, as
 * the pinned one does, else a pool of the bridge's). Both are environment variables because the choice is made
 * natively, on the first call, for the whole process. Thread-safe.
 */
public final class MatmulKernels {
  static {
    NativeLibrary.load();
  }

  private MatmulKernels() {}

  /**
   * The instruction set the kernels run with: {@code "avx512-vnni"} (AVX-512 with int8 products for quantised
   * activations), {@code "avx512"}, {@code "avx2"} or {@code "portable"}.
   */
  public static String isa() {
    return XlaActors_MatmulKernelIsa().getString();
  }

  /** The most threads, the calling XLA thread included, that split one product's output columns. */
  public static int threads() {
    return XlaActors_MatmulKernelThreads();
  }
}
