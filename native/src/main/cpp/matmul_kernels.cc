// Native kernels for the hot loops of model programs, called from compiled programs as XLA typed-FFI
// custom calls (platform "Host"):
//
//   xla_actors.matmul_f32  (x f32[..., K], w f32[K, N] or f32[N, K] with w_transposed = 1) -> f32[..., N]
//   xla_actors.matmul_q8   (x f32[..., K], q s8[N, K], scales f32[N, K/32])                -> f32[..., N]
//   xla_actors.matmul_bf16 (x f32[..., K], w bf16[N, K])                                    -> f32[..., N]
//   xla_actors.matmul_f16  (x f32[..., K], w f16[N, K])                                     -> f32[..., N]
//   xla_actors.decode_attention (q f32[B, H, Dh], cache f32|f16|bf16[layers, 2, N, KVH, C, Dh], slots s32[B],
//                                positions s32[B]; attributes layer, scale)                  -> f32[B, H, Dh]
//   xla_actors.chunk_attention (q f32[C, H, Dh], cache as decode_attention's, slot s32, start s32; attributes
//                               layer, scale)                                                  -> f32[C, H, Dh]
//   xla_actors.decoder_layer (x f32[B, D], cache, slots, positions, then the layer's weights; attributes below)
//                                                                    -> (f32[B, D], the cache updated in place)
//   xla_actors.zeros ()                                    -> any f32|f16|bf16|f64|s8|s32|s64 array, all zeros
//
// matmul_bf16 (and matmul_f16, for IEEE half weights) multiplies by bf16 weights in f32: each weight is widened
// to the f32 of the same value as it is loaded (exact), so the result is matmul_f32's on those values, from half
// the bytes. Decode is bound by the bytes its weights take, and a bf16 or f16 checkpoint (most are shipped so) is
// served from its own weights, neither widened in memory nor left to XLA's dots.
//
// matmul_q8 is Q8_0-style weight-only quantisation: w[n, k] = q[n, k] * scales[n, k / 32], blocks of 32
// along the input dimension. Activations stay f32 (no quantisation of x), so the only error is the
// weights', unless its attribute activations is 1: then each row of x is quantised at each call as llama.cpp's
// Q8_0 products quantise theirs (blocks of 32, one scale each, QuantizeRowsQ8), and with AVX-512 VNNI one row
// is multiplied in integers (DotQ8OneRowVnni).
//
// decode_attention is one decoding step's attention of B sequences, each held in cache row slots[b] and at
// position positions[b]: query head h of sequence b attends to the keys and values of KV head h / (H / KVH)
// at positions 0..positions[b] of that row of layer `layer` (keys cache[layer, 0], values cache[layer, 1]),
// with scores q.k * scale. It reads the cache where it lies and only the positions in use; XLA's own
// attention first copies each sequence's window of the cache out of it, which took a third of a step.
//
// chunk_attention is the attention of a prompt chunk of C positions start..start+C-1 of cache row `slot`:
// row c's query heads attend as decode_attention's do, to positions 0..start+c (the chunk's own keys and values
// are in the cache already: the program writes them before the call). XLA's blocked attention (a while loop
// over blocks of keys, each a few small batched dots and fusions) ran at about 75 GFLOP/s on 2 cores; this
// kernel's register tiles broadcast each key and value element to vectors of query rows, ~250.
//
// decoder_layer is one decoding step of a whole pre-norm transformer layer for B sequences: x + attn(norm1(x)),
// then + mlp(norm2(.)), with this step's keys and values written into the cache (its second result aliases the
// cache operand, output_operand_aliases) before decode_attention's attention reads it. Attributes: layer, heads,
// scale, eps; norm 0 (layer norm: weight and bias) or 1 (RMS norm: weight); qkv 1 (one q|k|v product, GPT-2's)
// or 3 (q, k, v products); rope 1 (Hugging Face's rotate-half rotary positions from an inv_freq f32[Dh/2]
// operand) or 0; mlp 0 (GELU, tanh form), 1 (GELU, erf) or 2 (SwiGLU: gate, up, down); q8 0 (every product's
// weights f32[N,K], or every one's bf16[N,K] or f16[N,K], multiplied as matmul_bf16's) or 1 (int8 s8[N,K] with scales
// f32[N,K/32]); activations (optional) 1 when q8's products quantise their activations as matmul_q8's
// activations = 1 do; biases, a bit per product (in order) that has an f32[N] bias after its weights. Operands after positions: [inv_freq], norm1, the q|k|v or q, k, v products,
// o, norm2, the MLP's products. The calling thread and XLA's pool threads work the whole layer as one team
// (LayerTeam), so a step hands work to the pool once per layer, not once per product.
//
// zeros is the KV cache's maker: its result is all zeros, but the whole pages inside it are left unmapped
// (madvise MADV_DONTNEED on the private anonymous memory XLA's allocator gives: the kernel maps a zeroed page
// at a page's first write, and reads of an untouched page see the shared zero page). A cache of 1,024 positions
// of which a sequence used 256 then holds memory for 256 in each of its rows, not for 1,024: the steps write
// only the positions they decode or prefill and the attention kernels read only the positions in use. XLA's
// own zeros (a broadcast) would write, and so map, every page up front.
//
// Why: decode at a few rows is a chain of matrix-vector products whose speed is the memory bandwidth;
// XLA's CPU dot emitter reads ~0.4 of it on the pinned plugin. These kernels stream each weight once per
// call, in long contiguous runs, on every core: the parts of a call run on XLA's own intra-op pool (the FFI's
// ThreadPool_Schedule; its threads would otherwise spin for work beside ours) and on XLA's thread, which is
// blocked in the handler meanwhile and takes a share itself; a small pool of our own where the plugin has no
// pool to lend.
//
// One source, three instruction sets: the kernels (matmul_kernels_isa.inc, attention_kernels_isa.inc) are
// written over GCC's generic vector types and compiled three times, under `#pragma GCC target` regions
// (AVX-512, AVX2+FMA+F16C) and for the x86-64 baseline, so the library still loads on any x86-64 and the
// choice is made at run time from the CPU's
// features, capped by XLA_FLAGS' --xla_cpu_max_isa (so a run that limits XLA to AVX2 limits us too) or by
// XLA_ACTORS_KERNEL_ISA (avx512, avx2, portable). XLA_ACTORS_KERNEL_THREADS caps the threads one call uses
// (default: the CPUs this process may run on, at most 16).
// The kernels pass wide vectors only between always-inlined functions of one instruction set; the
// warning about the ABI of such vectors across instruction sets does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12 reports the _mm512_undefined_*() inside its own AVX-512 conversion intrinsics as maybe used
// uninitialised (a known false positive of those headers).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bridge.h"
#include "xla/ffi/api/c_api.h"

namespace xla_actors {
namespace {

constexpr const char kMatmulF32Target[] = "xla_actors.matmul_f32";
constexpr const char kMatmulQ8Target[] = "xla_actors.matmul_q8";
constexpr const char kMatmulBf16Target[] = "xla_actors.matmul_bf16";
constexpr const char kMatmulF16Target[] = "xla_actors.matmul_f16";
constexpr const char kDecodeAttentionTarget[] = "xla_actors.decode_attention";
constexpr const char kChunkAttentionTarget[] = "xla_actors.chunk_attention";
constexpr int kQ8Block = 32;

// ---------------------------------------------------------------- the kernels, once per instruction set

struct Problem {
  const float* x;
  const void* w;
  const float* scales;  // matmul_q8 only
  float* y;
  int64_t M, K, N;
  // matmul_q8 with quantised activations (QuantizeRowsQ8): x is then xq * xs in f32, and a kernel may read
  // xq [M,K] and xs [M,K/32] instead.
  const int8_t* xq = nullptr;
  const float* xs = nullptr;
};

using Kernel = void (*)(const Problem&, int64_t n0, int64_t n1);

// What the cache of decode_attention holds.
constexpr int kKvF32 = 0, kKvF16 = 1, kKvBf16 = 2;
// The most query heads one unit of decode_attention's work takes (a KV head's group is split above it).
constexpr int64_t kMaxGroup = 16;

struct AttentionProblem {
  const float* q;       // [B, H, Dh]
  const void* cache;    // [layers, 2, N, KVH, C, Dh] of dtype, item bytes each
  const int32_t* slots;      // [B], each in [0, N)
  const int32_t* positions;  // [B], each in [0, C)
  float* out;           // [B, H, Dh]
  int64_t B, H, KVH, Dh, N, C, layer, item;
  int dtype;
  float scale;
};

// Query heads [h0, h1) of sequence b, within one KV head's group.
using AttentionKernel = void (*)(const AttentionProblem&, int64_t b, int64_t h0, int64_t h1);

struct ChunkAttentionProblem {
  const float* q;     // [C, H, Dh]: the chunk's queries, at positions start..start + C - 1
  const void* cache;  // [layers, 2, N, KVH, Ctx, Dh] of dtype, item bytes each
  float* out;         // [C, H, Dh]
  int64_t C, H, KVH, Dh, N, Ctx, layer, item, slot, start;
  int dtype;
  float scale;
};

// KV head g's query rows [r0, r0 + the ISA's chunk_rows) of a chunk (row r: position r / G, head g * G + r % G).
using ChunkAttentionKernel = void (*)(const ChunkAttentionProblem&, int64_t g, int64_t r0);

// IEEE half and bfloat16 bits to f32 (the portable path, and the tails of the vector ones).
inline float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t{h & 0x8000u} << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ffu, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | ((113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// An IEEE half's bits, as a type of its own: the kernels take bf16 weights as uint16_t and f16 ones as this.
struct HalfBits {
  uint16_t bits;
};

inline float BfloatToFloat(uint16_t h) {
  uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace avx512 {
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#define XLA_ACTORS_L 16
#include "matmul_kernels_isa.inc"
#include "attention_kernels_isa.inc"
#undef XLA_ACTORS_L
#pragma GCC pop_options
}  // namespace avx512

namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define XLA_ACTORS_L 8
#include "matmul_kernels_isa.inc"
#include "attention_kernels_isa.inc"
#undef XLA_ACTORS_L
#pragma GCC pop_options
}  // namespace avx2

namespace portable {  // the x86-64 baseline (SSE2)
#define XLA_ACTORS_L 4
#include "matmul_kernels_isa.inc"
#include "attention_kernels_isa.inc"
#undef XLA_ACTORS_L
}  // namespace portable

using ExpSumKernel = double (*)(const float* x, int64_t n, float shift, double* terms);

struct Isa {
  const char* name;
  Kernel dot_f32, axpy_f32, dot_q8, dot_bf16, dot_f16;
  void (*quantize_rows)(const float* x, int64_t M, int64_t K, int8_t* xq, float* xs, float* xd);
  AttentionKernel attend;
  ChunkAttentionKernel chunk_attend;
  int64_t chunk_rows;  // the query rows one unit of chunk_attend takes
  ExpSumKernel exp_sum;
  void (*gelu_tanh)(float* x, int64_t n);
  void (*silu_times)(float* gate, const float* up, int64_t n);
};

// AVX-512 with VNNI: the same kernels but int8 x int8 products at one row when matmul_q8's activations are
// quantised.
const Isa kAvx512Vnni = {"avx512-vnni", &avx512::DotF32Part, &avx512::AxpyF32Part, &avx512::DotQ8VnniPart,
                         &avx512::DotBf16Part, &avx512::DotF16Part, &avx512::QuantizeRowsQ8, &avx512::AttendHeads,
                         &avx512::ChunkAttendUnit, avx512::kChunkRows, &avx512::ExpSum, &avx512::GeluTanh,
                         &avx512::SiluTimes};
const Isa kAvx512 = {"avx512", &avx512::DotF32Part, &avx512::AxpyF32Part, &avx512::DotQ8Part, &avx512::DotBf16Part,
                     &avx512::DotF16Part, &avx512::QuantizeRowsQ8, &avx512::AttendHeads, &avx512::ChunkAttendUnit,
                     avx512::kChunkRows, &avx512::ExpSum, &avx512::GeluTanh, &avx512::SiluTimes};
const Isa kAvx2 = {"avx2", &avx2::DotF32Part, &avx2::AxpyF32Part, &avx2::DotQ8Part, &avx2::DotBf16Part,
                   &avx2::DotF16Part, &avx2::QuantizeRowsQ8, &avx2::AttendHeads, &avx2::ChunkAttendUnit,
                   avx2::kChunkRows, &avx2::ExpSum, &avx2::GeluTanh, &avx2::SiluTimes};
const Isa kPortable = {"portable", &portable::DotF32Part, &portable::AxpyF32Part, &portable::DotQ8Part,
                       &portable::DotBf16Part, &portable::DotF16Part, &portable::QuantizeRowsQ8,
                       &portable::AttendHeads, &portable::ChunkAttendUnit, portable::kChunkRows, &portable::ExpSum,
                       &portable::GeluTanh, &portable::SiluTimes};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// The widest instruction set this CPU has, capped by XLA_ACTORS_KERNEL_ISA (portable, avx2, avx512: without
// VNNI, avx512-vnni), else by XLA_FLAGS' --xla_cpu_max_isa (SSE4_2, AVX, AVX2, AVX512, AVX512_VNNI...; XLA's
// names), read once.
const Isa& ChooseIsa() {
  __builtin_cpu_init();
  int cap = 3;  // 3: avx512 with VNNI, 2: avx512, 1: avx2, 0: portable
  const char* ours = std::getenv("XLA_ACTORS_KERNEL_ISA");
  const char* flags = std::getenv("XLA_FLAGS");
  if (ours != nullptr && *ours != '\0') {
    std::string v = Lower(ours);
    cap = v == "portable" ? 0 : v == "avx2" ? 1 : v == "avx512" ? 2 : 3;
  } else if (flags != nullptr) {
    std::string f(flags);
    const std::string key = "--xla_cpu_max_isa=";
    size_t at = f.find(key);
    if (at != std::string::npos) {
      std::string v = Lower(f.substr(at + key.size(), f.find_first_of(" \t", at) - at - key.size()));
      if (v == "avx512") cap = 2;
      else if (v.rfind("avx512", 0) == 0 || v.rfind("amx", 0) == 0) cap = 3;
      else if (v == "avx2") cap = 1;
      else cap = 0;  // SSE4_2 or AVX (no FMA): the baseline kernels
    }
  }
  if (cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return cap >= 3 && __builtin_cpu_supports("avx512vnni") ? kAvx512Vnni : kAvx512;
  }
  if (cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return kAvx2;
  }
  return kPortable;
}

const Isa& TheIsa() {
  static const Isa& isa = ChooseIsa();
  return isa;
}

// ---------------------------------------------------------------- the pools

// The fallback pool, for a plugin whose FFI has no thread pool to lend (see RunParts).
// A few persistent workers that split one call's output columns with the calling XLA thread. Workers
// spin briefly after a job (decode makes one call every few tens of microseconds), then sleep. One call
// at a time: a call that finds the pool busy (another run's matmul on another XLA thread) computes on its
// own thread instead of waiting.
class KernelPool {
 public:
  explicit KernelPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }

  // Never destroyed (a static that lives until exit; joining at exit could race XLA's own teardown).
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs part(i) for i in [0, parts), on the workers and the caller; returns when all are done.
  void Run(int parts, const std::function<void(int)>& part) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock() || parts <= 1 || workers_.empty()) {
      for (int i = 0; i < parts; ++i) part(i);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      // A worker still leaving the previous job's Drain takes an index past any job's parts until
      // the new job is fully published.
      next_.store(kClosed);
      part_ = &part;
      parts_ = parts;
      remaining_.store(parts);
      next_.store(0);
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    Drain();
    while (remaining_.load(std::memory_order_acquire) > 0) __builtin_ia32_pause();
  }

 private:
  void Drain() {
    for (int i; (i = next_.fetch_add(1)) < parts_.load();) {
      (*part_.load())(i);
      remaining_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  void Work() {
    uint64_t seen = 0;
    for (;;) {
      // Spin up to kSpin for the next job before sleeping: decode calls follow each other within
      // microseconds, and a wake-up through the condition variable costs tens of them.
      bool ready = false;
      auto until = std::chrono::steady_clock::now() + kSpin;
      for (int spin = 0; !ready; ++spin) {
        ready = generation_.load(std::memory_order_acquire) != seen;
        if (ready || ((spin & 63) == 63 && std::chrono::steady_clock::now() > until)) break;
        __builtin_ia32_pause();
      }
      if (!ready) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_.load() != seen; });
      }
      seen = generation_.load(std::memory_order_acquire);
      Drain();
    }
  }

  static constexpr std::chrono::microseconds kSpin{50};
  static constexpr int kClosed = 1 << 30;

  std::vector<std::thread> workers_;
  std::mutex busy_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<const std::function<void(int)>*> part_{nullptr};
  std::atomic<int> parts_{0};
  std::atomic<int> next_{0};
  std::atomic<int> remaining_{0};
  std::atomic<uint64_t> generation_{0};
};

// The most threads, the caller's included, one call uses: XLA_ACTORS_KERNEL_THREADS, else the CPUs this process
// may run on, at most 16; read once. Also the fallback pool's size.
int ChoosePoolThreads() {
  const char* env = std::getenv("XLA_ACTORS_KERNEL_THREADS");
  if (env != nullptr && *env != '\0') {
    int n = std::atoi(env);
    if (n >= 1) return std::min(n, 64);
  }
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                          : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, std::min(cpus, 16));
}

int PoolThreads() {
  static const int threads = ChoosePoolThreads();
  return threads;
}

KernelPool& Pool() {
  static KernelPool* pool = new KernelPool(PoolThreads());
  return *pool;
}

// The threads of XLA's intra-op pool a handler may schedule tasks on; 0 where the plugin's FFI lends none.
int64_t XlaPoolThreads(const XLA_FFI_CallFrame* frame) {
  const XLA_FFI_Api* api = frame->api;
  if (frame->ctx == nullptr || api->struct_size < XLA_ACTORS_STRUCT_SIZE(XLA_FFI_Api, XLA_FFI_ThreadPool_NumThreads)) {
    return 0;
  }
  int64_t threads = 0;
  XLA_FFI_ThreadPool_NumThreads_Args count{};
  count.struct_size = XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE;
  count.ctx = frame->ctx;
  count.num_threads = &threads;
  if (XLA_FFI_Error* e = api->XLA_FFI_ThreadPool_NumThreads(&count)) {
    DestroyFfiError(api, e);
    return 0;
  }
  return std::max<int64_t>(0, threads);
}

// Schedules task(data) on XLA's intra-op pool (XlaPoolThreads > 0); false when the pool refused it.
bool ScheduleOnXlaPool(const XLA_FFI_CallFrame* frame, void (*task)(void*), void* data) {
  XLA_FFI_ThreadPool_Schedule_Args schedule{};
  schedule.struct_size = XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE;
  schedule.ctx = frame->ctx;
  schedule.task = task;
  schedule.data = data;
  if (XLA_FFI_Error* e = frame->api->XLA_FFI_ThreadPool_Schedule(&schedule)) {
    DestroyFfiError(frame->api, e);
    return false;
  }
  return true;
}

// Parts of one parallel loop, part(i) for i in [0, parts), taken by whichever threads drain it.
struct PartCounter {
  std::atomic<int> next{0};
  std::atomic<int> remaining{0};  // parts not finished
  int parts = 0;
  const std::function<void(int)>* part = nullptr;  // valid while a part is left (the caller waits for them)

  void Drain() {
    for (int i; (i = next.fetch_add(1)) < parts;) {
      (*part)(i);
      remaining.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

// One call's parts handed to XLA's intra-op pool: each task, and the calling thread, takes parts from `work`
// until none is left. Owned jointly by the caller and its tasks (refs): XLA may start a task late, even after
// the call returned (the FFI promises neither when nor in parallel), and such a task finds no part left and
// only drops its reference, so the call never waits for a task that has not started.
struct XlaPoolJob {
  PartCounter work;
  std::atomic<int> refs{0};

  void Release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  static void Task(void* data) {
    auto* job = static_cast<XlaPoolJob*>(data);
    job->work.Drain();
    job->Release();
  }
};

// Runs part(i) for i in [0, parts) on XLA's intra-op pool, up to PoolThreads() threads with the caller; false
// (nothing run) when the plugin's FFI has no pool for this call. On a 2-core machine this measured 1.07-1.33x
// our own pool's eight-sequence decode (GPT-2 f32, four interleaved pairs, 2026-11-29), one sequence level:
// XLA's pool threads spin for work after each of its tasks, and a pool of our own competed with them for the
// cores.
bool RunOnXlaPool(const XLA_FFI_CallFrame* frame, int parts, const std::function<void(int)>& part) {
  const int64_t threads = XlaPoolThreads(frame);
  if (threads < 1) return false;
  auto* job = new XlaPoolJob;
  job->work.parts = parts;
  job->work.part = &part;
  job->work.remaining.store(parts);
  const int helpers = static_cast<int>(std::min<int64_t>({parts - 1, threads, PoolThreads() - 1}));
  job->refs.store(helpers + 1);
  for (int h = 0; h < helpers; ++h) {
    if (!ScheduleOnXlaPool(frame, &XlaPoolJob::Task, job)) job->Release();  // this task will never run
  }
  job->work.Drain();
  while (job->work.remaining.load(std::memory_order_acquire) > 0) __builtin_ia32_pause();
  job->Release();
  return true;
}

// Runs part(i) for i in [0, parts): on XLA's intra-op pool where the plugin lends it, else on ours.
void RunParts(const XLA_FFI_CallFrame* frame, int parts, const std::function<void(int)>& part) {
  if (parts <= 1 || PoolThreads() == 1) {
    for (int i = 0; i < parts; ++i) part(i);
    return;
  }
  if (!RunOnXlaPool(frame, parts, part)) Pool().Run(parts, part);
}

// The columns of each part when the N output columns of p's product are split over the threads, a multiple of
// `align`. Several parts per thread, taken in turn from a shared counter: on a machine shared with other work a
// thread may be descheduled mid-call, and the others then take its share instead of waiting for half the
// product. A small product is one part, run on the calling thread: waking the workers costs more than they save.
int64_t ColumnsPerPart(const Problem& p, int64_t align) {
  const int threads = PoolThreads();
  constexpr int64_t kMinPartWork = int64_t{1} << 17;  // multiply-adds: ~10 µs, well above the hand-off's cost
  const int64_t work = p.M * p.K * p.N;
  const int64_t parts = threads == 1 || work < (int64_t{1} << 16)
                            ? 1
                            : std::max<int64_t>(threads, std::min<int64_t>(threads * 8, work / kMinPartWork));
  const int64_t per = (p.N + parts - 1) / parts;
  return (per + align - 1) / align * align;
}

// Splits [0, N) into parts of ColumnsPerPart columns and runs the kernel on them.
void RunSplit(const XLA_FFI_CallFrame* frame, Kernel kernel, const Problem& p, int64_t align) {
  const int64_t per = ColumnsPerPart(p, align);
  const int parts = static_cast<int>((p.N + per - 1) / per);
  RunParts(frame, parts, [&](int i) {
    int64_t n0 = i * per, n1 = std::min(p.N, n0 + per);
    if (n0 < n1) kernel(p, n0, n1);
  });
}

// ---------------------------------------------------------------- the handlers

std::string Dims(const XLA_FFI_Buffer* b) {
  std::string s = "[";
  for (int64_t d = 0; d < b->rank; ++d) s += (d ? "," : "") + std::to_string(b->dims[d]);
  return s + "]";
}

std::string DtypeName(XLA_FFI_DataType t) {
  switch (t) {
    case XLA_FFI_DataType_F32: return "f32";
    case XLA_FFI_DataType_S8: return "s8";
    case XLA_FFI_DataType_F16: return "f16";
    case XLA_FFI_DataType_BF16: return "bf16";
    case XLA_FFI_DataType_F64: return "f64";
    case XLA_FFI_DataType_S32: return "s32";
    case XLA_FFI_DataType_S64: return "s64";
    default: return "dtype " + std::to_string(static_cast<int>(t));
  }
}

XLA_FFI_Error* Invalid(XLA_FFI_CallFrame* frame, const char* target, const std::string& message) {
  return MakeFfiError(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, std::string(target) + ": " + message);
}

// Checks the frame holds `args` buffers and one buffer result, of the given dtypes.
XLA_FFI_Error* CheckBuffers(XLA_FFI_CallFrame* frame, const char* target, const std::vector<XLA_FFI_DataType>& args,
                            const char* const* names) {
  if (frame->args.size != static_cast<int64_t>(args.size()) || frame->rets.size != 1) {
    return Invalid(frame, target, "expected " + std::to_string(args.size()) + " operands and 1 result, got " +
                                      std::to_string(frame->args.size) + " and " + std::to_string(frame->rets.size));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (frame->args.types[i] != XLA_FFI_ArgType_BUFFER) return Invalid(frame, target, "operands must be buffers");
    auto* b = static_cast<XLA_FFI_Buffer*>(frame->args.args[i]);
    if (b->dtype != args[i]) {
      return Invalid(frame, target, std::string(names[i]) + " must be " + DtypeName(args[i]) + ", got " +
                                        DtypeName(b->dtype) + Dims(b));
    }
  }
  if (frame->rets.types[0] != XLA_FFI_RetType_BUFFER ||
      static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0])->dtype != XLA_FFI_DataType_F32) {
    return Invalid(frame, target, "the result must be an f32 buffer");
  }
  return nullptr;
}

// Checks y is x's shape with the last dimension N; sets M (the product of x's leading dims) and K.
XLA_FFI_Error* CheckRows(XLA_FFI_CallFrame* frame, const char* target, const XLA_FFI_Buffer* x,
                         const XLA_FFI_Buffer* y, int64_t N, int64_t* M, int64_t* K) {
  if (x->rank < 1) return Invalid(frame, target, "x must have at least one dimension, got a scalar");
  bool fits = y->rank == x->rank && y->dims[y->rank - 1] == N;
  *M = 1;
  for (int64_t d = 0; d + 1 < x->rank; ++d) {
    *M *= x->dims[d];
    fits = fits && y->dims[d] == x->dims[d];
  }
  *K = x->dims[x->rank - 1];
  if (!fits) {
    std::string expected = "[";
    for (int64_t d = 0; d + 1 < x->rank; ++d) expected += std::to_string(x->dims[d]) + ",";
    return Invalid(frame, target, "the result is f32" + Dims(y) + ", expected f32" + expected + std::to_string(N) +
                                      "] for x f32" + Dims(x));
  }
  return nullptr;
}

// An integer attribute (any integer or bool scalar), or `fallback` when absent. *bad is set when the
// attribute is there but not an integer scalar.
int64_t IntAttribute(const XLA_FFI_CallFrame* frame, const char* name, int64_t fallback, bool* bad) {
  int64_t i = FindAttribute(frame, name);
  if (i < 0) return fallback;
  if (frame->attrs.types[i] != XLA_FFI_AttrType_SCALAR) {
    *bad = true;
    return fallback;
  }
  auto* s = static_cast<XLA_FFI_Scalar*>(frame->attrs.attrs[i]);
  switch (s->dtype) {
    case XLA_FFI_DataType_PRED: return *static_cast<bool*>(s->value) ? 1 : 0;
    case XLA_FFI_DataType_S8: return *static_cast<int8_t*>(s->value);
    case XLA_FFI_DataType_U8: return *static_cast<uint8_t*>(s->value);
    case XLA_FFI_DataType_S32: return *static_cast<int32_t*>(s->value);
    case XLA_FFI_DataType_S64: return *static_cast<int64_t*>(s->value);
    default: *bad = true; return fallback;
  }
}

// The element kind of a KV cache buffer (kKvF32, kKvF16, kKvBf16), or -1 for another dtype.
int CacheDtype(const XLA_FFI_Buffer* cache) {
  switch (cache->dtype) {
    case XLA_FFI_DataType_F32: return kKvF32;
    case XLA_FFI_DataType_F16: return kKvF16;
    case XLA_FFI_DataType_BF16: return kKvBf16;
    default: return -1;
  }
}

// Checks slots and positions are s32[B] and that each of the B sequences' slot and position lies in a cache of N
// slots of C positions. `row` names what a sequence is to the caller ("sequence of q", "row of x").
XLA_FFI_Error* CheckSequences(XLA_FFI_CallFrame* frame, const char* target, const XLA_FFI_Buffer* slots,
                              const XLA_FFI_Buffer* positions, int64_t B, int64_t N, int64_t C, const char* row) {
  for (auto* index : {slots, positions}) {
    if (index->dtype != XLA_FFI_DataType_S32 || index->rank != 1 || index->dims[0] != B) {
      return Invalid(frame, target, std::string(index == slots ? "slots" : "positions") + " must be s32[" +
                                        std::to_string(B) + "] (one per " + row + "), got " + DtypeName(index->dtype) +
                                        Dims(index));
    }
  }
  const auto* slot = static_cast<const int32_t*>(slots->data);
  const auto* position = static_cast<const int32_t*>(positions->data);
  for (int64_t b = 0; b < B; ++b) {
    if (slot[b] < 0 || slot[b] >= N || position[b] < 0 || position[b] >= C) {
      return Invalid(frame, target, "sequence " + std::to_string(b) + " has slot " + std::to_string(slot[b]) +
                                        " and position " + std::to_string(position[b]) + "; the cache holds slots [0, " +
                                        std::to_string(N) + ") of positions [0, " + std::to_string(C) + ")");
    }
  }
  return nullptr;
}

// The buffers of one product's quantised activations (QuantizeRowsQ8), reused from call to call.
struct QuantizedRows {
  std::vector<int8_t> xq;
  std::vector<float> xs, xd;

  // Quantises p's x and points p at the result (its x at xd, its xq and xs at theirs).
  void Quantize(Problem& p) {
    xq.resize(p.M * p.K);
    xs.resize(p.M * p.K / kQ8Block);
    xd.resize(p.M * p.K);
    TheIsa().quantize_rows(p.x, p.M, p.K, xq.data(), xs.data(), xd.data());
    p.x = xd.data();
    p.xq = xq.data();
    p.xs = xs.data();
  }
};

XLA_FFI_Error* MatmulF32Impl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  static const char* const kNames[] = {"x", "w"};
  if (XLA_FFI_Error* e = CheckBuffers(frame, kMatmulF32Target, {XLA_FFI_DataType_F32, XLA_FFI_DataType_F32}, kNames)) {
    return e;
  }
  bool bad = false;
  int64_t transposed = IntAttribute(frame, "w_transposed", 0, &bad);
  if (bad || (transposed != 0 && transposed != 1)) {
    return Invalid(frame, kMatmulF32Target, "attribute 'w_transposed' must be an integer 0 (w is [K,N]) or 1 (w is [N,K])");
  }
  auto* x = static_cast<XLA_FFI_Buffer*>(frame->args.args[0]);
  auto* w = static_cast<XLA_FFI_Buffer*>(frame->args.args[1]);
  auto* y = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  if (w->rank != 2) return Invalid(frame, kMatmulF32Target, "w must be a matrix, got f32" + Dims(w));
  const int64_t N = transposed ? w->dims[0] : w->dims[1];
  const int64_t wk = transposed ? w->dims[1] : w->dims[0];
  int64_t M, K;
  if (XLA_FFI_Error* e = CheckRows(frame, kMatmulF32Target, x, y, N, &M, &K)) return e;
  if (wk != K) {
    return Invalid(frame, kMatmulF32Target, "x is f32" + Dims(x) + " but w is f32" + Dims(w) +
                                                (transposed ? " ([N,K])" : " ([K,N])") + ": K differs");
  }
  if (M == 0 || N == 0) return nullptr;
  if (K == 0) {
    std::memset(y->data, 0, M * N * sizeof(float));
    return nullptr;
  }
  Problem p{static_cast<const float*>(x->data), w->data, nullptr, static_cast<float*>(y->data), M, K, N};
  const Isa& isa = TheIsa();
  // The dot form writes 4 columns per tile and reads each column's weights as one run. The axpy form reads a
  // part's columns of every weight row: parts of 256 columns keep those runs 1 KiB long, which the
  // prefetcher streams (16-column parts measured 10x slower for 3072x768).
  RunSplit(frame, transposed ? isa.dot_f32 : isa.axpy_f32, p, transposed ? 4 : 256);
  return nullptr;
}

// matmul_bf16 and matmul_f16: x f32 times w [N,K] of half-width floats (`dtype`), by `kernel`.
XLA_FFI_Error* MatmulHalfWidth(XLA_FFI_CallFrame* frame, const char* target, XLA_FFI_DataType dtype, Kernel kernel) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  static const char* const kNames[] = {"x", "w"};
  if (XLA_FFI_Error* e = CheckBuffers(frame, target, {XLA_FFI_DataType_F32, dtype}, kNames)) return e;
  auto* x = static_cast<XLA_FFI_Buffer*>(frame->args.args[0]);
  auto* w = static_cast<XLA_FFI_Buffer*>(frame->args.args[1]);
  auto* y = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  if (w->rank != 2) return Invalid(frame, target, "w must be a matrix [N,K], got " + DtypeName(dtype) + Dims(w));
  const int64_t N = w->dims[0];
  int64_t M, K;
  if (XLA_FFI_Error* e = CheckRows(frame, target, x, y, N, &M, &K)) return e;
  if (w->dims[1] != K) {
    return Invalid(frame, target,
                   "x is f32" + Dims(x) + " but w is " + DtypeName(dtype) + Dims(w) + " ([N,K]): K differs");
  }
  if (M == 0 || N == 0) return nullptr;
  if (K == 0) {
    std::memset(y->data, 0, M * N * sizeof(float));
    return nullptr;
  }
  Problem p{static_cast<const float*>(x->data), w->data, nullptr, static_cast<float*>(y->data), M, K, N};
  RunSplit(frame, kernel, p, 4);
  return nullptr;
}

XLA_FFI_Error* MatmulBf16Impl(XLA_FFI_CallFrame* frame) {
  return MatmulHalfWidth(frame, kMatmulBf16Target, XLA_FFI_DataType_BF16, TheIsa().dot_bf16);
}

XLA_FFI_Error* MatmulF16Impl(XLA_FFI_CallFrame* frame) {
  return MatmulHalfWidth(frame, kMatmulF16Target, XLA_FFI_DataType_F16, TheIsa().dot_f16);
}

XLA_FFI_Error* MatmulQ8Impl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  static const char* const kNames[] = {"x", "q", "scales"};
  if (XLA_FFI_Error* e = CheckBuffers(frame, kMatmulQ8Target,
                                      {XLA_FFI_DataType_F32, XLA_FFI_DataType_S8, XLA_FFI_DataType_F32}, kNames)) {
    return e;
  }
  bool bad = false;
  const int64_t activations = IntAttribute(frame, "activations", 0, &bad);
  if (bad || (activations != 0 && activations != 1)) {
    return Invalid(frame, kMatmulQ8Target, "attribute 'activations' must be an integer 0 (x multiplied as f32) or 1 "
                                           "(x quantised to int8 by blocks of 32, as llama.cpp's Q8_0 products)");
  }
  auto* x = static_cast<XLA_FFI_Buffer*>(frame->args.args[0]);
  auto* q = static_cast<XLA_FFI_Buffer*>(frame->args.args[1]);
  auto* s = static_cast<XLA_FFI_Buffer*>(frame->args.args[2]);
  auto* y = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  if (q->rank != 2) return Invalid(frame, kMatmulQ8Target, "q must be a matrix [N,K], got s8" + Dims(q));
  const int64_t N = q->dims[0];
  int64_t M, K;
  if (XLA_FFI_Error* e = CheckRows(frame, kMatmulQ8Target, x, y, N, &M, &K)) return e;
  if (q->dims[1] != K || K % kQ8Block != 0) {
    return Invalid(frame, kMatmulQ8Target, "x is f32" + Dims(x) + " and q is s8" + Dims(q) +
                                               ": expected q [N,K] with K the same and a multiple of 32");
  }
  if (s->rank != 2 || s->dims[0] != N || s->dims[1] != K / kQ8Block) {
    return Invalid(frame, kMatmulQ8Target, "scales is f32" + Dims(s) + ", expected f32[" + std::to_string(N) + "," +
                                               std::to_string(K / kQ8Block) + "] (one per 32 inputs of each output)");
  }
  if (M == 0 || N == 0) return nullptr;
  if (K == 0) {
    std::memset(y->data, 0, M * N * sizeof(float));
    return nullptr;
  }
  Problem p{static_cast<const float*>(x->data), q->data, static_cast<const float*>(s->data),
            static_cast<float*>(y->data), M, K, N};
  if (activations == 1) {
    thread_local QuantizedRows quantized;
    quantized.Quantize(p);
  }
  RunSplit(frame, TheIsa().dot_q8, p, 2);
  return nullptr;
}

// A float attribute (f32 or f64 scalar); *bad is set when it is absent or not a float scalar.
float FloatAttribute(const XLA_FFI_CallFrame* frame, const char* name, bool* bad) {
  int64_t i = FindAttribute(frame, name);
  if (i < 0 || frame->attrs.types[i] != XLA_FFI_AttrType_SCALAR) {
    *bad = true;
    return 0;
  }
  auto* s = static_cast<XLA_FFI_Scalar*>(frame->attrs.attrs[i]);
  if (s->dtype == XLA_FFI_DataType_F32) return *static_cast<float*>(s->value);
  if (s->dtype == XLA_FFI_DataType_F64) return static_cast<float>(*static_cast<double*>(s->value));
  *bad = true;
  return 0;
}

// One decoding step's attention of p.B sequences (decode_attention's, and decoder_layer's). Units of work: a
// sequence's KV head with all its query heads (each key and value row read once for them), or single query
// heads when there are too few units to keep the threads busy. A small step runs on the calling thread, a
// larger one by run(units, unit) (the handler's way of spreading parts over threads).
template <typename Runner>
void Attend(const AttentionProblem& p, Runner run) {
  const int64_t B = p.B, H = p.H, KVH = p.KVH, G = H / KVH;
  int64_t work = 0;
  for (int64_t b = 0; b < B; ++b) work += (int64_t{p.positions[b]} + 1) * H * p.Dh;
  const int64_t per = B * KVH >= 2 * PoolThreads() ? std::min(G, kMaxGroup) : 1;
  const int64_t per_group = (G + per - 1) / per;
  const int64_t units = B * KVH * per_group;
  const AttentionKernel attend = TheIsa().attend;
  const std::function<void(int)> unit = [&](int i) {
    const int64_t b = i / (KVH * per_group), g = i / per_group % KVH, h0 = g * G + i % per_group * per;
    attend(p, b, h0, std::min(h0 + per, (g + 1) * G));
  };
  if (work < (int64_t{1} << 16)) {
    for (int64_t i = 0; i < units; ++i) unit(static_cast<int>(i));
  } else {
    run(static_cast<int>(units), unit);
  }
}

// The operands, result and attributes decode_attention and chunk_attention share: q f32[rows, H, Dh], the
// cache f32|f16|bf16[layers, 2, N, KVH, C, Dh], two index operands, the result f32 as q, attributes layer and
// scale. `operands` names the four in the error that counts them, `q_shape` q's dims in the error about q.
struct AttentionCall {
  const XLA_FFI_Buffer *q, *cache, *index0, *index1;
  XLA_FFI_Buffer* out;
  int64_t rows, H, Dh, layers, N, KVH, C, layer;
  int64_t item;  // bytes of one cache element
  int dtype;
  float scale;
};

XLA_FFI_Error* ReadAttentionCall(XLA_FFI_CallFrame* frame, const char* target, const char* operands,
                                 const char* q_shape, AttentionCall* call) {
  if (frame->args.size != 4 || frame->rets.size != 1 || frame->rets.types[0] != XLA_FFI_RetType_BUFFER) {
    return Invalid(frame, target, std::string("expected 4 operands (") + operands + ") and 1 result, got " +
                                      std::to_string(frame->args.size) + " and " + std::to_string(frame->rets.size));
  }
  for (int64_t i = 0; i < 4; ++i) {
    if (frame->args.types[i] != XLA_FFI_ArgType_BUFFER) return Invalid(frame, target, "operands must be buffers");
  }
  auto* q = static_cast<XLA_FFI_Buffer*>(frame->args.args[0]);
  auto* cache = static_cast<XLA_FFI_Buffer*>(frame->args.args[1]);
  auto* out = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  if (q->dtype != XLA_FFI_DataType_F32 || q->rank != 3) {
    return Invalid(frame, target, std::string("q must be f32") + q_shape + ", got " + DtypeName(q->dtype) + Dims(q));
  }
  const int64_t rows = q->dims[0], H = q->dims[1], Dh = q->dims[2];
  const int dtype = CacheDtype(cache);
  if (dtype < 0 || cache->rank != 6 || cache->dims[1] != 2 || cache->dims[5] != Dh) {
    return Invalid(frame, target, "cache must be f32, f16 or bf16 [layers,2,slots,kv_heads,positions," +
                                      std::to_string(Dh) + "] (q's head size), got " + DtypeName(cache->dtype) +
                                      Dims(cache));
  }
  const int64_t layers = cache->dims[0], N = cache->dims[2], KVH = cache->dims[3], C = cache->dims[4];
  if (KVH == 0 || H % KVH != 0) {
    return Invalid(frame, target, "q has " + std::to_string(H) + " heads, not a multiple of the cache's " +
                                      std::to_string(KVH) + " KV heads");
  }
  if (out->dtype != XLA_FFI_DataType_F32 || out->rank != 3 || out->dims[0] != rows || out->dims[1] != H ||
      out->dims[2] != Dh) {
    return Invalid(frame, target, "the result is " + DtypeName(out->dtype) + Dims(out) + ", expected f32" + Dims(q));
  }
  bool bad = false;
  const int64_t layer = IntAttribute(frame, "layer", -1, &bad);
  if (bad || layer < 0 || layer >= layers) {
    return Invalid(frame, target, "attribute 'layer' must be an integer in [0, " + std::to_string(layers) +
                                      ") (the cache's layers), got " + (bad ? "another type" : std::to_string(layer)));
  }
  const float scale = FloatAttribute(frame, "scale", &bad);
  if (bad) return Invalid(frame, target, "attribute 'scale' must be a float scalar (the scores' factor)");
  *call = AttentionCall{q, cache, static_cast<XLA_FFI_Buffer*>(frame->args.args[2]),
                        static_cast<XLA_FFI_Buffer*>(frame->args.args[3]), out, rows, H, Dh, layers, N, KVH, C, layer,
                        dtype == kKvF32 ? 4 : 2, dtype, scale};
  return nullptr;
}

XLA_FFI_Error* DecodeAttentionImpl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  const char* target = kDecodeAttentionTarget;
  AttentionCall c;
  if (XLA_FFI_Error* e = ReadAttentionCall(frame, target, "q, cache, slots, positions", "[B,H,Dh]", &c)) return e;
  if (XLA_FFI_Error* e = CheckSequences(frame, target, c.index0, c.index1, c.rows, c.N, c.C, "sequence of q")) {
    return e;
  }
  if (c.rows == 0 || c.H == 0 || c.Dh == 0) return nullptr;
  AttentionProblem p{static_cast<const float*>(c.q->data), c.cache->data, static_cast<const int32_t*>(c.index0->data),
                     static_cast<const int32_t*>(c.index1->data), static_cast<float*>(c.out->data), c.rows, c.H, c.KVH,
                     c.Dh, c.N, c.C, c.layer, c.item, c.dtype, c.scale};
  Attend(p, [&](int units, const std::function<void(int)>& unit) { RunParts(frame, units, unit); });
  return nullptr;
}

// One s32 element (a rank-0 or one-element buffer) into *value; an error naming `name` otherwise.
XLA_FFI_Error* OneInt(XLA_FFI_CallFrame* frame, const char* target, const XLA_FFI_Buffer* b, const char* name,
                      int64_t* value) {
  if (b->dtype != XLA_FFI_DataType_S32 || BufferElementCount(b) != 1) {
    return Invalid(frame, target, std::string(name) + " must be one s32, got " + DtypeName(b->dtype) + Dims(b));
  }
  *value = *static_cast<const int32_t*>(b->data);
  return nullptr;
}

// A prompt chunk's attention (chunk_attention's): units of the ISA's chunk_rows query rows of one KV head,
// the units at the chunk's end (the most keys) handed out first. A small chunk runs on the calling thread.
void ChunkAttend(const XLA_FFI_CallFrame* frame, const ChunkAttentionProblem& p) {
  const Isa& isa = TheIsa();
  const int64_t G = p.H / p.KVH, per_head = (p.C * G + isa.chunk_rows - 1) / isa.chunk_rows;
  const int64_t units = p.KVH * per_head;
  const std::function<void(int)> unit = [&](int i) {
    isa.chunk_attend(p, i % p.KVH, (per_head - 1 - i / p.KVH) * isa.chunk_rows);
  };
  if (p.C * p.H * p.Dh * (p.start + p.C) < (int64_t{1} << 16)) {
    for (int64_t i = 0; i < units; ++i) unit(static_cast<int>(i));
  } else {
    RunParts(frame, static_cast<int>(units), unit);
  }
}

XLA_FFI_Error* ChunkAttentionImpl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  const char* target = kChunkAttentionTarget;
  AttentionCall c;
  if (XLA_FFI_Error* e = ReadAttentionCall(frame, target, "q, cache, slot, start", "[C,H,Dh] (a chunk of C positions)",
                                           &c)) {
    return e;
  }
  int64_t slot = 0, start = 0;
  if (XLA_FFI_Error* e = OneInt(frame, target, c.index0, "slot", &slot)) return e;
  if (XLA_FFI_Error* e = OneInt(frame, target, c.index1, "start", &start)) return e;
  if (slot < 0 || slot >= c.N || start < 0 || start + c.rows > c.C) {
    return Invalid(frame, target, "a chunk of " + std::to_string(c.rows) + " positions from " + std::to_string(start) +
                                      " in slot " + std::to_string(slot) + "; the cache holds slots [0, " +
                                      std::to_string(c.N) + ") of positions [0, " + std::to_string(c.C) + ")");
  }
  if (c.rows == 0 || c.H == 0 || c.Dh == 0) return nullptr;
  ChunkAttentionProblem p{static_cast<const float*>(c.q->data), c.cache->data, static_cast<float*>(c.out->data),
                          c.rows, c.H, c.KVH, c.Dh, c.N, c.C, c.layer, c.item, slot, start,
                          c.dtype, c.scale};
  ChunkAttend(frame, p);
  return nullptr;
}

// ---------------------------------------------------------------- a decoder layer in one call

// IEEE half and bfloat16 bits of an f32, rounded to nearest even as XLA's convert rounds (the cache's
// keys and values when it holds f16 or bf16). Half: F. Giesen's float_to_half_fast3_rtne.
inline uint16_t FloatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o;
  if (u >= (uint32_t{127 + 16} << 23)) {
    o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN stays NaN, too large is inf
  } else if (u < (uint32_t{113} << 23)) {      // a subnormal half or zero: let the FPU round the bits off
    const uint32_t magic_bits = uint32_t{(127 - 15) + (23 - 10) + 1} << 23;
    float magic, v;
    std::memcpy(&magic, &magic_bits, 4);
    std::memcpy(&v, &u, 4);
    v += magic;
    std::memcpy(&o, &v, 4);
    o -= magic_bits;
  } else {
    const uint32_t odd = (u >> 13) & 1u;
    u += static_cast<uint32_t>(15 - 127) * (uint32_t{1} << 23) + 0xfffu + odd;  // rebias the exponent, round
    o = u >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

inline uint16_t FloatToBfloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The threads of one xla_actors.decoder_layer call: the calling XLA thread and helpers from XLA's intra-op
// pool, scheduled once per call (not once per product, as matmul_f32 must: each such hand-off waited 30-65 us
// for a pool thread to wake). The caller publishes the call's parallel phases (the products, the attention)
// one after the other and does the short serial steps between them alone; the helpers take parts of each
// phase as it is published and spin in between, until the caller marks the call done. A helper that starts
// late joins the phase then running; one that starts after the call finds it done and leaves. Each phase has
// its own counters, so a helper still leaving one phase can never take a part of the next. Owned jointly by
// the caller and its helpers (refs), as XlaPoolJob.
struct LayerTeam {
  static constexpr int kMaxPhases = 8;
  PartCounter phases[kMaxPhases];
  std::atomic<int> published{-1};  // the index of the phase published last
  std::atomic<bool> done{false};
  std::atomic<int> refs{1};
  int count = 0;     // phases published (the caller's)
  int helpers = 0;   // helper tasks scheduled

  // Runs part(i) for i in [0, parts) on the team (the caller's call); returns when all are done. Without
  // helpers (a plugin whose FFI lends no pool), on the bridge's own pool.
  void Run(int parts, const std::function<void(int)>& part) {
    if (parts <= 0) return;
    if (helpers == 0 || parts == 1 || count == kMaxPhases) {
      if (helpers == 0 && parts > 1 && PoolThreads() > 1) {
        Pool().Run(parts, part);
      } else {
        for (int i = 0; i < parts; ++i) part(i);
      }
      return;
    }
    PartCounter& phase = phases[count];
    phase.parts = parts;
    phase.part = &part;
    phase.remaining.store(parts);
    phase.next.store(0);
    published.store(count++, std::memory_order_release);
    phase.Drain();
    while (phase.remaining.load(std::memory_order_acquire) > 0) __builtin_ia32_pause();
  }

  void Release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  static void Help(void* data) {
    auto* team = static_cast<LayerTeam*>(data);
    int seen = -1;
    while (!team->done.load(std::memory_order_acquire)) {
      const int k = team->published.load(std::memory_order_acquire);
      if (k != seen) {
        seen = k;
        team->phases[k].Drain();
      } else {
        __builtin_ia32_pause();
      }
    }
    team->Release();
  }

  // Schedules up to PoolThreads() - 1 helpers on XLA's intra-op pool (none where the plugin lends none).
  void Start(const XLA_FFI_CallFrame* frame) {
    if (PoolThreads() == 1) return;
    const int wanted = static_cast<int>(std::min<int64_t>(XlaPoolThreads(frame), PoolThreads() - 1));
    for (int h = 0; h < wanted; ++h) {
      refs.fetch_add(1);
      if (ScheduleOnXlaPool(frame, &LayerTeam::Help, this)) {
        ++helpers;
      } else {
        refs.fetch_sub(1);  // this helper will never run
      }
    }
  }

  // Ends the call: helpers stop spinning; the team is freed when the last one leaves.
  void Finish() {
    done.store(true, std::memory_order_release);
    Release();
  }
};

// One weight product of a layer: w f32[N,K] (stored [N,K], the dot form), or Q8_0 q s8[N,K] with scales
// f32[N,K/32]; an optional bias f32[N].
struct LayerLinear {
  const void* w = nullptr;
  const float* scales = nullptr;
  const float* bias = nullptr;
  int64_t N = 0, K = 0;
};

// x [M,K] times a linear's weights into y [M,N], for each of the products of one phase (they read the same
// or different x), each split into parts of columns as RunSplit splits one, all of them one phase of the team.
struct LinearTask {
  const LayerLinear* linear;
  const float* x;
  float* y;
};

// What a decoder layer's products multiply by: every weight f32, every one int8 (with scales), every one bf16 or
// every one f16.
enum class LayerWeights { kF32, kQ8, kBf16, kF16 };

// With `quantize` (int8 weights with quantised activations) each distinct x is quantised once, before the parts.
void RunLinears(LayerTeam& team, LayerWeights weights, bool quantize, int64_t M,
                std::initializer_list<LinearTask> tasks) {
  const Isa& isa = TheIsa();
  const Kernel kernel = weights == LayerWeights::kQ8     ? isa.dot_q8
                        : weights == LayerWeights::kBf16 ? isa.dot_bf16
                        : weights == LayerWeights::kF16  ? isa.dot_f16
                                                         : isa.dot_f32;
  const int64_t align = weights == LayerWeights::kQ8 ? 2 : 4;
  struct Split {
    Problem p;
    int64_t per;
    int first;  // the task's first part
  };
  std::vector<Split> splits;
  thread_local std::vector<QuantizedRows> quantized;
  int parts = 0;
  for (const LinearTask& t : tasks) {
    const LayerLinear& l = *t.linear;
    Problem p{t.x, l.w, l.scales, t.y, M, l.K, l.N};
    if (quantize) {
      const size_t i = splits.size();
      size_t same = 0;  // an earlier task of the same x, whose quantised rows this one shares
      while (same < i && tasks.begin()[same].x != t.x) ++same;
      if (same < i) {
        p.x = splits[same].p.x;
        p.xq = splits[same].p.xq;
        p.xs = splits[same].p.xs;
      } else {
        if (quantized.size() <= i) quantized.resize(i + 1);
        quantized[i].Quantize(p);
      }
    }
    const int64_t per = ColumnsPerPart(p, align);
    splits.push_back({p, per, parts});
    parts += static_cast<int>((l.N + per - 1) / per);
  }
  team.Run(parts, [&](int i) {
    size_t s = splits.size() - 1;
    while (splits[s].first > i) --s;
    const Split& split = splits[s];
    const int64_t n0 = (i - split.first) * split.per, n1 = std::min(split.p.N, n0 + split.per);
    if (n0 < n1) kernel(split.p, n0, n1);
  });
}

void AddBias(float* y, const float* bias, int64_t M, int64_t N) {
  if (bias == nullptr) return;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) y[m * N + n] += bias[n];
  }
}

// Layer norm (bias set) or RMS norm (bias null) of each of M rows of x [M,D] into y.
void Norm(const float* x, float* y, const float* weight, const float* bias, float eps, int64_t M, int64_t D) {
  for (int64_t m = 0; m < M; ++m) {
    const float* r = x + m * D;
    float* o = y + m * D;
    if (bias != nullptr) {
      double mean = 0, var = 0;
      for (int64_t d = 0; d < D; ++d) mean += r[d];
      mean /= static_cast<double>(D);
      for (int64_t d = 0; d < D; ++d) var += (r[d] - mean) * (r[d] - mean);
      const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(D) + eps));
      const float mu = static_cast<float>(mean);
      for (int64_t d = 0; d < D; ++d) o[d] = (r[d] - mu) * inv * weight[d] + bias[d];
    } else {
      double squares = 0;
      for (int64_t d = 0; d < D; ++d) squares += static_cast<double>(r[d]) * r[d];
      const float inv = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(D) + eps));
      for (int64_t d = 0; d < D; ++d) o[d] = r[d] * inv * weight[d];
    }
  }
}

// Rotary positions, "rotate half" (Hugging Face's): each of `heads` heads of x [heads, Dh] at `position`.
void Rope(float* x, int64_t heads, int64_t Dh, const float* inv_freq, int32_t position) {
  const int64_t half = Dh / 2;
  for (int64_t j = 0; j < half; ++j) {
    const float angle = static_cast<float>(position) * inv_freq[j];
    const float c = std::cos(angle), s = std::sin(angle);
    for (int64_t h = 0; h < heads; ++h) {
      float* r = x + h * Dh;
      const float a = r[j], b = r[j + half];
      r[j] = a * c - b * s;
      r[j + half] = b * c + a * s;
    }
  }
}

// The decoder layer's settings (its attributes) and operands.
constexpr int kNormLayer = 0, kNormRms = 1;
constexpr int kMlpGeluTanh = 0, kMlpGeluErf = 1, kMlpSwiglu = 2;
constexpr const char kDecoderLayerTarget[] = "xla_actors.decoder_layer";

XLA_FFI_Error* DecoderLayerImpl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  const char* target = kDecoderLayerTarget;
  bool bad = false;
  const int64_t layer = IntAttribute(frame, "layer", -1, &bad);
  const int64_t norm = IntAttribute(frame, "norm", -1, &bad);
  const int64_t mlp = IntAttribute(frame, "mlp", -1, &bad);
  const int64_t rope = IntAttribute(frame, "rope", -1, &bad);
  const int64_t H = IntAttribute(frame, "heads", -1, &bad);
  const int64_t qkv_parts = IntAttribute(frame, "qkv", -1, &bad);
  const int64_t q8 = IntAttribute(frame, "q8", -1, &bad);
  const int64_t biases = IntAttribute(frame, "biases", -1, &bad);
  const int64_t activations = IntAttribute(frame, "activations", 0, &bad);
  if (bad || norm < 0 || norm > 1 || mlp < 0 || mlp > 2 || rope < 0 || rope > 1 || H < 1 ||
      (qkv_parts != 1 && qkv_parts != 3) || q8 < 0 || q8 > 1 || biases < 0 || activations < 0 || activations > q8) {
    return Invalid(frame, target,
                   "expected the integer attributes layer, norm (0 layer norm, 1 RMS norm), mlp (0 GELU tanh, 1 GELU "
                   "erf, 2 SwiGLU), rope (0 or 1), heads (>= 1), qkv (1: one q|k|v product, 3: three), q8 (0 or 1), "
                   "biases (a bit per product, >= 0) and optionally activations (1: int8 weights' products quantise "
                   "their activations as matmul_q8's; q8 1 only); one is missing or out of range");
  }
  const float scale = FloatAttribute(frame, "scale", &bad);
  const float eps = FloatAttribute(frame, "eps", &bad);
  if (bad) return Invalid(frame, target, "expected the float attributes scale (the scores' factor) and eps (the norms')");
  const int64_t linears = qkv_parts + 1 + (mlp == kMlpSwiglu ? 3 : 2);
  const int64_t expected_args = 4 + rope + 2 * (norm == kNormLayer ? 2 : 1) + linears * (q8 ? 2 : 1) +
                                __builtin_popcountll(static_cast<uint64_t>(biases));
  if (biases >= (int64_t{1} << linears) || frame->args.size != expected_args || frame->rets.size != 2) {
    return Invalid(frame, target, "expected " + std::to_string(expected_args) + " operands and 2 results for these " +
                                      "attributes (biases " + std::to_string(biases) + " over " +
                                      std::to_string(linears) + " products), got " + std::to_string(frame->args.size) +
                                      " and " + std::to_string(frame->rets.size));
  }
  for (int64_t i = 0; i < frame->args.size; ++i) {
    if (frame->args.types[i] != XLA_FFI_ArgType_BUFFER) return Invalid(frame, target, "operands must be buffers");
  }
  for (int64_t i = 0; i < 2; ++i) {
    if (frame->rets.types[i] != XLA_FFI_RetType_BUFFER) return Invalid(frame, target, "results must be buffers");
  }
  auto arg = [&](int64_t i) { return static_cast<XLA_FFI_Buffer*>(frame->args.args[i]); };
  auto* x = arg(0);
  auto* cache = arg(1);
  auto* slots = arg(2);
  auto* positions = arg(3);
  auto* out = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  auto* cache_out = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[1]);
  if (x->dtype != XLA_FFI_DataType_F32 || x->rank != 2) {
    return Invalid(frame, target, "x must be f32[B,D], got " + DtypeName(x->dtype) + Dims(x));
  }
  const int64_t B = x->dims[0], D = x->dims[1];
  const int dtype = CacheDtype(cache);
  if (dtype < 0 || cache->rank != 6 || cache->dims[1] != 2) {
    return Invalid(frame, target, "cache must be f32, f16 or bf16 [layers,2,slots,kv_heads,positions,head_dim], got " +
                                      DtypeName(cache->dtype) + Dims(cache));
  }
  if (cache_out->dtype != cache->dtype || Dims(cache_out) != Dims(cache)) {
    return Invalid(frame, target, "the second result is " + DtypeName(cache_out->dtype) + Dims(cache_out) +
                                      ", expected the cache's " + DtypeName(cache->dtype) + Dims(cache));
  }
  const int64_t layers = cache->dims[0], N = cache->dims[2], KVH = cache->dims[3], C = cache->dims[4],
                Dh = cache->dims[5];
  if (KVH == 0 || H % KVH != 0 || (rope && Dh % 2 != 0)) {
    return Invalid(frame, target, "heads " + std::to_string(H) + " must be a multiple of the cache's " +
                                      std::to_string(KVH) + " KV heads (and its head size " + std::to_string(Dh) +
                                      " even with rope)");
  }
  if (layer < 0 || layer >= layers) {
    return Invalid(frame, target, "attribute 'layer' is " + std::to_string(layer) + ", the cache has layers [0, " +
                                      std::to_string(layers) + ")");
  }
  if (out->dtype != XLA_FFI_DataType_F32 || Dims(out) != Dims(x)) {
    return Invalid(frame, target, "the first result is " + DtypeName(out->dtype) + Dims(out) + ", expected f32" + Dims(x));
  }
  if (XLA_FFI_Error* e = CheckSequences(frame, target, slots, positions, B, N, C, "row of x")) return e;
  const auto* slot = static_cast<const int32_t*>(slots->data);
  const auto* position = static_cast<const int32_t*>(positions->data);
  // The operands after the first four, in order.
  int64_t at = 4;
  auto vector = [&](const char* what, int64_t n, const float** into) -> XLA_FFI_Error* {
    auto* b = arg(at++);
    if (b->dtype != XLA_FFI_DataType_F32 || b->rank != 1 || b->dims[0] != n) {
      return Invalid(frame, target, std::string(what) + " (operand " + std::to_string(at - 1) + ") must be f32[" +
                                        std::to_string(n) + "], got " + DtypeName(b->dtype) + Dims(b));
    }
    *into = static_cast<const float*>(b->data);
    return nullptr;
  };
  int64_t linear_index = 0;
  // With q8 0 the first product's weights say f32, bf16 or f16, and every other product's must be the same.
  const int64_t first_linear = 4 + rope + (norm == kNormLayer ? 2 : 1);
  const XLA_FFI_DataType first_weights = arg(first_linear)->dtype;
  const LayerWeights weights = q8                                        ? LayerWeights::kQ8
                               : first_weights == XLA_FFI_DataType_BF16 ? LayerWeights::kBf16
                               : first_weights == XLA_FFI_DataType_F16  ? LayerWeights::kF16
                                                                        : LayerWeights::kF32;
  const XLA_FFI_DataType weight_dtype = q8 ? XLA_FFI_DataType_S8
                                        : weights == LayerWeights::kF32 ? XLA_FFI_DataType_F32
                                                                        : first_weights;
  auto linear = [&](const char* what, int64_t n, int64_t k, LayerLinear* into) -> XLA_FFI_Error* {
    const int64_t index = at++;
    auto* w = arg(index);
    const std::string shape = "[" + std::to_string(n) + "," + std::to_string(k) + "]";
    const std::string expected = q8 ? "s8" + shape
                                    : index == first_linear ? "f32" + shape + ", bf16" + shape + " or f16" + shape
                                                            : DtypeName(weight_dtype) + shape;
    if (w->dtype != weight_dtype || w->rank != 2 || w->dims[0] != n || w->dims[1] != k || (q8 && k % kQ8Block != 0)) {
      const bool mixed = !q8 && index != first_linear && w->dtype != weight_dtype;
      return Invalid(frame, target, std::string(what) + " weights (operand " + std::to_string(index) + ") must be " +
                                        expected + ", got " + DtypeName(w->dtype) + Dims(w) +
                                        (mixed ? " (every product's weights are the first's dtype)" : ""));
    }
    into->w = w->data;
    into->N = n;
    into->K = k;
    if (q8) {
      auto* s = arg(at++);
      if (s->dtype != XLA_FFI_DataType_F32 || s->rank != 2 || s->dims[0] != n || s->dims[1] != k / kQ8Block) {
        return Invalid(frame, target, std::string(what) + " scales (operand " + std::to_string(at - 1) +
                                          ") must be f32[" + std::to_string(n) + "," + std::to_string(k / kQ8Block) +
                                          "], got " + DtypeName(s->dtype) + Dims(s));
      }
      into->scales = static_cast<const float*>(s->data);
    }
    if (biases >> linear_index++ & 1) return vector((std::string(what) + " bias").c_str(), n, &into->bias);
    return nullptr;
  };
  const float* inv_freq = nullptr;
  const float *norm1_w = nullptr, *norm1_b = nullptr, *norm2_w = nullptr, *norm2_b = nullptr;
  const int64_t qdim = H * Dh, kvdim = KVH * Dh;
  LayerLinear qkv[3], o, up[2], down;
  if (rope) {
    if (XLA_FFI_Error* e = vector("inv_freq", Dh / 2, &inv_freq)) return e;
  }
  if (XLA_FFI_Error* e = vector("norm1 weight", D, &norm1_w)) return e;
  if (norm == kNormLayer) {
    if (XLA_FFI_Error* e = vector("norm1 bias", D, &norm1_b)) return e;
  }
  if (qkv_parts == 1) {
    if (XLA_FFI_Error* e = linear("q|k|v", qdim + 2 * kvdim, D, &qkv[0])) return e;
  } else {
    if (XLA_FFI_Error* e = linear("q", qdim, D, &qkv[0])) return e;
    if (XLA_FFI_Error* e = linear("k", kvdim, D, &qkv[1])) return e;
    if (XLA_FFI_Error* e = linear("v", kvdim, D, &qkv[2])) return e;
  }
  if (XLA_FFI_Error* e = linear("o", D, qdim, &o)) return e;
  if (XLA_FFI_Error* e = vector("norm2 weight", D, &norm2_w)) return e;
  if (norm == kNormLayer) {
    if (XLA_FFI_Error* e = vector("norm2 bias", D, &norm2_b)) return e;
  }
  // The MLP's hidden size: the first MLP product's N.
  auto* first_mlp = arg(at);
  const int64_t F = first_mlp->rank == 2 ? first_mlp->dims[0] : -1;
  if (mlp == kMlpSwiglu) {
    if (XLA_FFI_Error* e = linear("gate", F, D, &up[0])) return e;
    if (XLA_FFI_Error* e = linear("up", F, D, &up[1])) return e;
  } else {
    if (XLA_FFI_Error* e = linear("fc", F, D, &up[0])) return e;
  }
  if (XLA_FFI_Error* e = linear("down", D, F, &down)) return e;
  if (B == 0 || D == 0) return nullptr;

  // The cache is updated in place: the program aliases the second result to operand 1, so they are one
  // buffer; where XLA gave them two, the result gets the operand's contents first.
  const int64_t item = dtype == kKvF32 ? 4 : 2;
  if (cache_out->data != cache->data) {
    int64_t bytes = item;
    for (int64_t d = 0; d < 6; ++d) bytes *= cache->dims[d];
    std::memcpy(cache_out->data, cache->data, bytes);
  }
  void* kv = cache_out->data;

  // Scratch: h (normed x) [B,D], q [B,qdim], k, v [B,kvdim], qkv [B, qdim + 2 kvdim] (one product),
  // attention [B,qdim], o [B,D], up [2][B,F], down [B,D].
  thread_local std::vector<float> scratch;
  const int64_t need = B * (D + qdim + 2 * kvdim + (qdim + 2 * kvdim) + qdim + D + 2 * F + D);
  if (static_cast<int64_t>(scratch.size()) < need) scratch.resize(need);
  float* h = scratch.data();
  float* q = h + B * D;
  float* k = q + B * qdim;
  float* v = k + B * kvdim;
  float* fused = v + B * kvdim;
  float* attended = fused + B * (qdim + 2 * kvdim);
  float* projected = attended + B * qdim;
  float* hidden = projected + B * D;
  float* hidden2 = hidden + B * F;
  float* lowered = hidden2 + B * F;
  const float* xin = static_cast<const float*>(x->data);
  float* y = static_cast<float*>(out->data);
  const Isa& isa = TheIsa();

  auto* team = new LayerTeam;
  team->Start(frame);
  // The team is finished on every path out (the helpers spin until then).
  struct Finisher {
    LayerTeam* team;
    ~Finisher() { team->Finish(); }
  } finisher{team};

  // Attention's half: norm, q|k|v, rotary positions, this step's keys and values into the cache.
  Norm(xin, h, norm1_w, norm1_b, eps, B, D);
  if (qkv_parts == 1) {
    RunLinears(*team, weights, activations == 1, B, {{&qkv[0], h, fused}});
    AddBias(fused, qkv[0].bias, B, qdim + 2 * kvdim);
    for (int64_t b = 0; b < B; ++b) {
      const float* row = fused + b * (qdim + 2 * kvdim);
      std::memcpy(q + b * qdim, row, qdim * 4);
      std::memcpy(k + b * kvdim, row + qdim, kvdim * 4);
      std::memcpy(v + b * kvdim, row + qdim + kvdim, kvdim * 4);
    }
  } else {
    RunLinears(*team, weights, activations == 1, B, {{&qkv[0], h, q}, {&qkv[1], h, k}, {&qkv[2], h, v}});
    AddBias(q, qkv[0].bias, B, qdim);
    AddBias(k, qkv[1].bias, B, kvdim);
    AddBias(v, qkv[2].bias, B, kvdim);
  }
  for (int64_t b = 0; b < B; ++b) {
    if (rope) {
      Rope(q + b * qdim, H, Dh, inv_freq, position[b]);
      Rope(k + b * kvdim, KVH, Dh, inv_freq, position[b]);
    }
    for (int64_t which = 0; which < 2; ++which) {
      const float* src = (which == 0 ? k : v) + b * kvdim;
      for (int64_t g = 0; g < KVH; ++g) {
        const int64_t row = (((layer * 2 + which) * N + slot[b]) * KVH + g) * C + position[b];
        char* dst = static_cast<char*>(kv) + row * Dh * item;
        const float* from = src + g * Dh;
        if (dtype == kKvF32) {
          std::memcpy(dst, from, Dh * 4);
        } else {
          auto* half = reinterpret_cast<uint16_t*>(dst);
          for (int64_t d = 0; d < Dh; ++d) half[d] = dtype == kKvF16 ? FloatToHalf(from[d]) : FloatToBfloat(from[d]);
        }
      }
    }
  }
  // The attention itself, as decode_attention's, over the cache just written.
  Attend(AttentionProblem{q, kv, slot, position, attended, B, H, KVH, Dh, N, C, layer, item, dtype, scale},
         [&](int units, const std::function<void(int)>& unit) { team->Run(units, unit); });
  RunLinears(*team, weights, activations == 1, B, {{&o, attended, projected}});
  AddBias(projected, o.bias, B, D);
  for (int64_t i = 0; i < B * D; ++i) y[i] = xin[i] + projected[i];
  // The MLP's half.
  Norm(y, h, norm2_w, norm2_b, eps, B, D);
  if (mlp == kMlpSwiglu) {
    RunLinears(*team, weights, activations == 1, B, {{&up[0], h, hidden}, {&up[1], h, hidden2}});
    AddBias(hidden, up[0].bias, B, F);
    AddBias(hidden2, up[1].bias, B, F);
    isa.silu_times(hidden, hidden2, B * F);
  } else {
    RunLinears(*team, weights, activations == 1, B, {{&up[0], h, hidden}});
    AddBias(hidden, up[0].bias, B, F);
    if (mlp == kMlpGeluTanh) {
      isa.gelu_tanh(hidden, B * F);
    } else {
      for (int64_t i = 0; i < B * F; ++i) {
        hidden[i] = 0.5f * hidden[i] * (1.0f + std::erf(hidden[i] * 0.70710678118654752f));
      }
    }
  }
  RunLinears(*team, weights, activations == 1, B, {{&down, hidden, lowered}});
  AddBias(lowered, down.bias, B, D);
  for (int64_t i = 0; i < B * D; ++i) y[i] += lowered[i];
  return nullptr;
}

constexpr const char kZerosTarget[] = "xla_actors.zeros";

// Bytes of one element of the dtypes xla_actors.zeros makes, or 0 for another.
int64_t ZerosItemBytes(XLA_FFI_DataType t) {
  switch (t) {
    case XLA_FFI_DataType_S8: return 1;
    case XLA_FFI_DataType_F16:
    case XLA_FFI_DataType_BF16: return 2;
    case XLA_FFI_DataType_F32:
    case XLA_FFI_DataType_S32: return 4;
    case XLA_FFI_DataType_F64:
    case XLA_FFI_DataType_S64: return 8;
    default: return 0;
  }
}

// Zeroes [data, data + bytes): the partial pages at either end by memset, the whole pages between them by
// MADV_DONTNEED, which gives private anonymous memory (what XLA's CPU client allocates with malloc) back to the
// kernel; its next read is of the zero page, its next write maps a fresh zeroed page. Where the advice is
// refused, or the first or last of those pages does not read zero after it (memory of another kind, which the
// advice does not clear), memset does it all.
void ZeroLeavingPagesUnmapped(char* data, int64_t bytes) {
  static const int64_t page = [] {
    long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<int64_t>(size) : int64_t{4096};
  }();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + static_cast<uintptr_t>(bytes);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last <= first) {  // no whole page inside (both bounds page-aligned: otherwise a page apart or more)
    std::memset(data, 0, static_cast<size_t>(bytes));
    return;
  }
  std::memset(data, 0, first - begin);
  std::memset(reinterpret_cast<char*>(last), 0, end - last);
  if (madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0 ||
      *reinterpret_cast<const volatile int64_t*>(first) != 0 ||
      *reinterpret_cast<const volatile int64_t*>(last - sizeof(int64_t)) != 0) {
    std::memset(reinterpret_cast<char*>(first), 0, last - first);
  }
}

XLA_FFI_Error* ZerosImpl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  const char* target = kZerosTarget;
  if (frame->args.size != 0 || frame->rets.size != 1 || frame->rets.types[0] != XLA_FFI_RetType_BUFFER) {
    return Invalid(frame, target, "expected no operands and 1 buffer result, got " + std::to_string(frame->args.size) +
                                      " operands and " + std::to_string(frame->rets.size) + " results");
  }
  auto* out = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  const int64_t item = ZerosItemBytes(out->dtype);
  if (item == 0) {
    return Invalid(frame, target, "the result must be f32, f16, bf16, f64, s8, s32 or s64, got " +
                                      DtypeName(out->dtype) + Dims(out));
  }
  ZeroLeavingPagesUnmapped(static_cast<char*>(out->data), BufferElementCount(out) * item);
  return nullptr;
}

XLA_FFI_Error* ZerosHandler(XLA_FFI_CallFrame* frame) { return GuardHandler(frame, kZerosTarget, &ZerosImpl); }

XLA_FFI_Error* DecoderLayerHandler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kDecoderLayerTarget, &DecoderLayerImpl);
}

XLA_FFI_Error* DecodeAttentionHandler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kDecodeAttentionTarget, &DecodeAttentionImpl);
}

XLA_FFI_Error* ChunkAttentionHandler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kChunkAttentionTarget, &ChunkAttentionImpl);
}

XLA_FFI_Error* MatmulF32Handler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kMatmulF32Target, &MatmulF32Impl);
}

XLA_FFI_Error* MatmulBf16Handler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kMatmulBf16Target, &MatmulBf16Impl);
}

XLA_FFI_Error* MatmulF16Handler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kMatmulF16Target, &MatmulF16Impl);
}

XLA_FFI_Error* MatmulQ8Handler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kMatmulQ8Target, &MatmulQ8Impl);
}

}  // namespace

const char* MatmulKernelIsa() { return TheIsa().name; }

int MatmulKernelThreads() { return PoolThreads(); }

std::string RegisterMatmulHandlers(Plugin* plugin) {
  std::string problem = RegisterFfiHandler(plugin, kMatmulF32Target, &MatmulF32Handler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, kMatmulQ8Target, &MatmulQ8Handler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, kMatmulBf16Target, &MatmulBf16Handler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, kMatmulF16Target, &MatmulF16Handler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, kDecodeAttentionTarget, &DecodeAttentionHandler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, kChunkAttentionTarget, &ChunkAttentionHandler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, kDecoderLayerTarget, &DecoderLayerHandler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, kZerosTarget, &ZerosHandler);
  return problem;
}

}  // namespace xla_actors

extern "C" const char* XlaActors_MatmulKernelIsa(void) { return xla_actors::MatmulKernelIsa(); }

extern "C" int XlaActors_MatmulKernelThreads(void) { return xla_actors::MatmulKernelThreads(); }

extern "C" double XlaActors_ExpSum(const float* x, int64_t n, float shift, double* terms) {
  return xla_actors::TheIsa().exp_sum(x, n, shift, terms);
}
