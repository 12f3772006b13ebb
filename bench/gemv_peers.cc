// The kernel libraries' half of bench/run.sh kernels (issue 37, "kernels at the memory limit"): y = x[M,K] . W
// with W resident, for the shapes KernelsBench times (K x N: 768x2304, 3072x768, 768x50257), at M = 1 and 8
// rows, with the two maintained kernel libraries the issue names beside our own kernels:
//
//   ggml_f32    ggml (the llama.cpp that bench/run.sh llamacpp builds), ggml_mul_mat with an F32 W
//   ggml_q8     the same with a Q8_0 W (ggml_quantize_chunk); ggml quantises x to Q8_0 itself and runs int8 x int8
//               dot products, as llama.cpp decodes a Q8_0 file
//   onednn_f32  oneDNN's matmul primitive, f32 x f32, W reordered once into the primitive's preferred layout
//   onednn_s8   oneDNN's matmul primitive with s8 weights and f32 activations (weights decompression, f32 scales
//               per block of 32 along K as Q8_0), when the library offers it on this CPU; otherwise an INFO line
//               with its refusal
//
// Built by bench/run.sh (never committed as a binary) with -DGEMV_PEERS_GGML and/or -DGEMV_PEERS_ONEDNN, as the
// libraries were found; a variant whose library is missing is simply absent. Output, one line per shape, rows and
// variant, in KernelsBench's format (bytes = the weight bytes one call reads; us = microseconds per call; each
// round's figure is the median of its runs, and min / median / max are over the rounds):
//
//   GEMV shape=768x2304 rows=1 variant=ggml_f32 bytes=.. us_min=.. us_median=.. us_max=.. gbps_median=.. gbps_best=..
//
// Arguments: rounds (default 3), runs per round (default 40), threads (default 2). The variants take turns within
// each round, so load from other work on a shared machine falls on all alike. Every variant's y is checked against
// a double-precision reference before anything is timed; a wrong y stops the program (exit 1).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#ifdef GEMV_PEERS_GGML
#include "ggml-cpu.h"
#include "ggml.h"
#endif
#ifdef GEMV_PEERS_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace {

constexpr int kBlock = 32;  // Q8_0's block along K, as our matmul_q8 and ggml's Q8_0

struct Shape {
  int64_t k, n;
  bool transposed;  // W stored [N,K] (the tied head, as wte), else [K,N]; KernelsBench's layouts
};

// One timed variant: run() computes y for the current rows; bytes is what one call reads of W.
struct Variant {
  std::string name;
  int64_t bytes;
  std::function<void()> run;
  std::function<const float*()> y;
  double tolerance;  // max |y - reference| allowed, relative to max |reference|
  bool quantized;    // checked against the dequantised W's reference
};

// Per shape: W in f32 as [N,K] (row n holds W[:,n]), its Q8_0-style quantisation (our own, per block of 32 along
// K, f32 scales) and the rows of x.
struct Problem {
  Shape shape;
  std::vector<float> w_nk;  // [N,K]
  std::vector<float> w_kn;  // [K,N], only for the layer shapes
  std::vector<int8_t> q_nk; // [N,K]
  std::vector<float> scales_nk;  // [N,K/32]
  std::vector<float> x;     // [8,K]
};

double Now() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Problem MakeProblem(const Shape& s, std::mt19937& rng) {
  Problem p;
  p.shape = s;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.w_nk.resize(s.n * s.k);
  for (float& v : p.w_nk) v = normal(rng) * 0.02f;
  if (!s.transposed) {
    p.w_kn.resize(s.k * s.n);
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t k = 0; k < s.k; ++k) p.w_kn[k * s.n + n] = p.w_nk[n * s.k + k];
  }
  p.q_nk.resize(s.n * s.k);
  p.scales_nk.resize(s.n * (s.k / kBlock));
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t b = 0; b < s.k / kBlock; ++b) {
      const float* w = &p.w_nk[n * s.k + b * kBlock];
      float amax = 0;
      for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(w[i]));
      float scale = amax / 127.0f;
      p.scales_nk[n * (s.k / kBlock) + b] = scale;
      for (int i = 0; i < kBlock; ++i)
        p.q_nk[n * s.k + b * kBlock + i] = static_cast<int8_t>(scale ? std::lround(w[i] / scale) : 0);
    }
  }
  p.x.resize(8 * s.k);
  for (float& v : p.x) v = normal(rng);
  return p;
}

// y[m,n] in double, from W (quantized = false) or from the dequantised Q8 W.
std::vector<double> Reference(const Problem& p, int rows, bool quantized) {
  const int64_t K = p.shape.k, N = p.shape.n;
  std::vector<double> y(rows * N);
  for (int64_t n = 0; n < N; ++n) {
    for (int m = 0; m < rows; ++m) {
      double acc = 0;
      const float* x = &p.x[m * K];
      for (int64_t k = 0; k < K; ++k) {
        double w = quantized ? double(p.q_nk[n * K + k]) * p.scales_nk[n * (K / kBlock) + k / kBlock]
                             : double(p.w_nk[n * K + k]);
        acc += w * x[k];
      }
      y[m * N + n] = acc;
    }
  }
  return y;
}

// Checks a variant's y against the first rows of ref (8 rows); prints its error as an INFO line; false when beyond
// its tolerance.
bool Check(const Variant& v, const Problem& p, int rows, const std::vector<double>& ref) {
  v.run();
  const float* y = v.y();
  double max_ref = 0, max_err = 0;
  for (int64_t i = 0; i < rows * p.shape.n; ++i) {
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    max_err = std::max(max_err, std::fabs(ref[i] - y[i]));
  }
  bool ok = max_err <= v.tolerance * max_ref;
  std::printf("INFO check shape=%lldx%lld rows=%d variant=%s max_abs_err=%.3g max_abs_y=%.3g against=%s %s\n",
              (long long)p.shape.k, (long long)p.shape.n, rows, v.name.c_str(), max_err, max_ref,
              v.quantized ? "dequantised_q8_w" : "f32_w", ok ? "ok" : "WRONG");
  return ok;
}

#ifdef GEMV_PEERS_GGML
// ggml through its public graph API: one context per shape holding W (F32 and Q8_0) and the rows; one graph per
// (type, rows), planned once (its work buffer, where ggml puts x quantised to Q8_0, allocated once); only
// ggml_graph_compute is timed.
struct GgmlShape {
  ggml_context* ctx = nullptr;
  ggml_tensor* w_f32 = nullptr;
  ggml_tensor* w_q8 = nullptr;
  ggml_tensor* x[2] = {nullptr, nullptr};  // 1 row, 8 rows
  ~GgmlShape() {
    if (ctx) ggml_free(ctx);
  }
};

struct GgmlGraph {
  ggml_cgraph* graph;
  ggml_tensor* y;
  ggml_cplan plan;
  std::vector<uint8_t> work;
};

void AddGgml(std::vector<Variant>& out, std::vector<std::shared_ptr<void>>& keep, const Problem& p, int rows,
             int threads, std::shared_ptr<GgmlShape>& shape_ctx) {
  const int64_t K = p.shape.k, N = p.shape.n;
  if (!shape_ctx) {
    shape_ctx = std::make_shared<GgmlShape>();
    size_t size = 4 * K * N + ggml_row_size(GGML_TYPE_Q8_0, K) * N + 4 * K * 9 + 4 * N * 9 * 4 +
                  64 * ggml_tensor_overhead() + 8 * ggml_graph_overhead() + (1 << 20);
    ggml_init_params params = {size, nullptr, false};
    shape_ctx->ctx = ggml_init(params);
    // ggml's matrix is [ne1 rows of ne0]: W as ne0 = K, ne1 = N is W stored [N,K], ggml's (and GGUF's) only layout.
    shape_ctx->w_f32 = ggml_new_tensor_2d(shape_ctx->ctx, GGML_TYPE_F32, K, N);
    std::memcpy(shape_ctx->w_f32->data, p.w_nk.data(), 4 * K * N);
    shape_ctx->w_q8 = ggml_new_tensor_2d(shape_ctx->ctx, GGML_TYPE_Q8_0, K, N);
    ggml_quantize_chunk(GGML_TYPE_Q8_0, p.w_nk.data(), shape_ctx->w_q8->data, 0, N, K, nullptr);
    for (int r : {1, 8}) {
      ggml_tensor* x = ggml_new_tensor_2d(shape_ctx->ctx, GGML_TYPE_F32, K, r);
      std::memcpy(x->data, p.x.data(), 4 * K * r);
      shape_ctx->x[r == 1 ? 0 : 1] = x;
    }
  }
  ggml_tensor* x = shape_ctx->x[rows == 1 ? 0 : 1];
  for (ggml_tensor* w : {shape_ctx->w_f32, shape_ctx->w_q8}) {
    auto g = std::make_shared<GgmlGraph>();
    g->y = ggml_mul_mat(shape_ctx->ctx, w, x);  // y: ne0 = N, ne1 = rows, i.e. [rows,N]
    g->graph = ggml_new_graph(shape_ctx->ctx);
    ggml_build_forward_expand(g->graph, g->y);
    g->plan = ggml_graph_plan(g->graph, threads, nullptr);
    g->work.resize(g->plan.work_size);
    g->plan.work_data = g->work.data();
    keep.push_back(g);
    keep.push_back(shape_ctx);
    bool q8 = w->type == GGML_TYPE_Q8_0;
    GgmlGraph* gp = g.get();
    out.push_back(Variant{q8 ? "ggml_q8" : "ggml_f32",
                          q8 ? (int64_t)ggml_row_size(GGML_TYPE_Q8_0, K) * N : 4 * K * N,
                          [gp] {
                            if (ggml_graph_compute(gp->graph, &gp->plan) != GGML_STATUS_SUCCESS) {
                              std::fprintf(stderr, "ggml_graph_compute failed\n");
                              std::exit(1);
                            }
                          },
                          [gp] { return static_cast<const float*>(gp->y->data); },
                          // Q8_0 x as well as W: int8 rounding on both sides, ~1% of |y|'s largest.
                          q8 ? 0.03 : 1e-4, false});
  }
}
#endif

#ifdef GEMV_PEERS_ONEDNN
// oneDNN's matmul primitive: created once per shape and rows with the weights' layout left to the primitive
// (format_tag::any), W reordered into it once (W is resident, so its packing is paid once, as a serving runtime
// would); only execute + wait is timed.
struct OnednnCall {
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
  dnnl::memory y;
};

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& Stream() {
  static dnnl::stream stream(Engine());
  return stream;
}

// W's user memory: [K,N] logically, stored as KernelsBench stores it ([N,K] for the head).
dnnl::memory UserWeights(const Problem& p, dnnl::memory::data_type type, void* data) {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc d({p.shape.k, p.shape.n}, type, p.shape.transposed ? tag::ba : tag::ab);
  return dnnl::memory(d, Engine(), data);
}

dnnl::memory Packed(dnnl::memory user, const dnnl::memory::desc& want) {
  if (user.get_desc() == want) return user;
  dnnl::memory packed(want, Engine());
  dnnl::reorder(user, packed).execute(Stream(), user, packed);
  Stream().wait();
  return packed;
}

void AddOnednn(std::vector<Variant>& out, std::vector<std::shared_ptr<void>>& keep, Problem& p, int rows) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const int64_t K = p.shape.k, N = p.shape.n;
  dnnl::memory::desc src({rows, K}, dt::f32, tag::ab);
  dnnl::memory::desc dst({rows, N}, dt::f32, tag::ab);
  auto x = dnnl::memory(src, Engine(), p.x.data());
  {
    auto call = std::make_shared<OnednnCall>();
    dnnl::matmul::primitive_desc pd(Engine(), src, dnnl::memory::desc({K, N}, dt::f32, tag::any), dst);
    std::vector<float>& w = p.shape.transposed ? p.w_nk : p.w_kn;
    dnnl::memory weights = Packed(UserWeights(p, dt::f32, w.data()), pd.weights_desc());
    call->prim = dnnl::matmul(pd);
    call->y = dnnl::memory(pd.dst_desc(), Engine());
    call->args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, call->y}};
    std::printf("INFO onednn shape=%lldx%lld rows=%d variant=onednn_f32 impl=%s weights_reordered=%s\n",
                (long long)K, (long long)N, rows, pd.impl_info_str(),
                weights.get_desc() == UserWeights(p, dt::f32, w.data()).get_desc() ? "no" : "yes");
    keep.push_back(call);
    OnednnCall* c = call.get();
    out.push_back(Variant{"onednn_f32", 4 * K * N,
                          [c] {
                            c->prim.execute(Stream(), c->args);
                            Stream().wait();
                          },
                          [c] { return static_cast<const float*>(c->y.get_data_handle()); }, 1e-4, false});
  }
  // s8 weights, f32 activations: scales per (block of 32 along K, column n), f32; computed in f32 (fpmath strict,
  // applied to integral weights). The scales' memory is [K/32, N] dense, so ours ([N, K/32]) is transposed once.
  try {
    auto call = std::make_shared<OnednnCall>();
    dnnl::primitive_attr attr;
    attr.set_fpmath_mode(dnnl::fpmath_mode::strict, true);
    attr.set_scales(DNNL_ARG_WEIGHTS, (1 << 0) | (1 << 1), {kBlock, 1}, dt::f32);
    dnnl::matmul::primitive_desc pd;
    bool any = true;
    try {
      pd = dnnl::matmul::primitive_desc(Engine(), src, dnnl::memory::desc({K, N}, dt::s8, tag::any), dst, attr);
    } catch (const dnnl::error&) {
      any = false;  // some implementations take decompressed weights only in a plain layout
      pd = dnnl::matmul::primitive_desc(
          Engine(), src, dnnl::memory::desc({K, N}, dt::s8, p.shape.transposed ? tag::ba : tag::ab), dst, attr);
    }
    std::vector<int8_t> q_kn;
    void* q = p.q_nk.data();
    if (!p.shape.transposed) {
      q_kn.resize(K * N);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) q_kn[k * N + n] = p.q_nk[n * K + k];
      q = q_kn.data();
    }
    dnnl::memory weights = Packed(UserWeights(p, dt::s8, q), pd.weights_desc());
    dnnl::memory scales(dnnl::memory::desc({(K / kBlock) * N}, dt::f32, tag::a), Engine());
    float* s = static_cast<float*>(scales.get_data_handle());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < K / kBlock; ++b) s[b * N + n] = p.scales_nk[n * (K / kBlock) + b];
    call->prim = dnnl::matmul(pd);
    call->y = dnnl::memory(pd.dst_desc(), Engine());
    call->args = {{DNNL_ARG_SRC, x},
                  {DNNL_ARG_WEIGHTS, weights},
                  {DNNL_ARG_DST, call->y},
                  {DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, scales}};
    std::printf("INFO onednn shape=%lldx%lld rows=%d variant=onednn_s8 impl=%s weights_layout=%s "
                "(s8 weights, f32 activations, f32 scales per 32 along K)\n",
                (long long)K, (long long)N, rows, pd.impl_info_str(), any ? "primitive's choice" : "plain");
    keep.push_back(call);
    OnednnCall* c = call.get();
    out.push_back(Variant{"onednn_s8", K * N + 4 * N * (K / kBlock),
                          [c] {
                            c->prim.execute(Stream(), c->args);
                            Stream().wait();
                          },
                          [c] { return static_cast<const float*>(c->y.get_data_handle()); }, 1e-4, true});
  } catch (const dnnl::error& e) {
    std::printf("INFO onednn shape=%lldx%lld rows=%d variant=onednn_s8 refused: %s (status %d)\n", (long long)K,
                (long long)N, rows, e.what(), static_cast<int>(e.status));
  }
}

// The per-call floor: the median of 200 executes + waits of a 1x32 . 32x32 matmul, whose arithmetic is nothing.
// With the PyPI wheel's SYCL runtime every call is a submission to a SYCL queue; this says what that costs.
double OnednnCallFloorUs() {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a({1, 32}, dt::f32, tag::ab), w({32, 32}, dt::f32, tag::ab), c({1, 32}, dt::f32, tag::ab);
  dnnl::matmul::primitive_desc pd(Engine(), a, w, c);
  dnnl::matmul prim(pd);
  dnnl::memory am(a, Engine()), wm(w, Engine()), cm(c, Engine());
  std::memset(am.get_data_handle(), 0, 4 * 32);
  std::memset(wm.get_data_handle(), 0, 4 * 32 * 32);
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, cm}};
  std::vector<double> times;
  for (int i = -10; i < 200; ++i) {
    double start = Now();
    prim.execute(Stream(), args);
    Stream().wait();
    if (i >= 0) times.push_back(Now() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  int runs = argc > 2 ? std::atoi(argv[2]) : 40;
  int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  if (rounds < 1 || runs < 1 || threads < 1) {
    std::fprintf(stderr, "usage: gemv_peers [ROUNDS>=1 [RUNS>=1 [THREADS>=1]]], got %s %s %s\n",
                 argc > 1 ? argv[1] : "-", argc > 2 ? argv[2] : "-", argc > 3 ? argv[3] : "-");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
#ifdef GEMV_PEERS_GGML
  ggml_cpu_init();
  // Plain tensors are llama.cpp's own path on x86: ggml-cpu repacks Q8_0 only on ARM and RISC-V (repack.cpp), and an
  // F32 W goes to llamafile's sgemm inside ggml_mul_mat either way.
  std::printf("INFO ggml threads=%d (ggml_graph_plan/ggml_graph_compute, plain tensors, W stored [N,K]); ggml_q8: "
              "ggml quantises x to Q8_0 itself and runs int8 x int8 dot products, as llama.cpp decodes Q8_0\n",
              threads);
#else
  std::printf("INFO ggml absent from this build\n");
#endif
  bool onednn_ok = true;
  (void)onednn_ok;
#ifdef GEMV_PEERS_ONEDNN
  try {
    const dnnl_version_t* v = dnnl_version();
    Engine();
    std::printf("INFO onednn version=%d.%d.%d cpu_runtime=%d isa=%d threads=the runtime's default (%s)\n", v->major,
                v->minor, v->patch, v->cpu_runtime, static_cast<int>(dnnl::get_effective_cpu_isa()),
                v->cpu_runtime == DNNL_RUNTIME_SYCL ? "SYCL CPU device over TBB, all cores" : "all cores");
    std::printf("INFO onednn call_floor_us=%.1f (median execute + wait of a 1x32 . 32x32 matmul: the runtime's "
                "per-call cost)\n", OnednnCallFloorUs());
  } catch (const dnnl::error& e) {
    std::printf("INFO onednn refused to start: %s (status %d); its variants are left out\n", e.what(),
                static_cast<int>(e.status));
    onednn_ok = false;
  }
#else
  std::printf("INFO onednn absent from this build\n");
#endif
  const Shape shapes[] = {{768, 2304, false}, {3072, 768, false}, {768, 50257, true}};
  std::mt19937 rng(1);
  bool all_ok = true;
  for (const Shape& s : shapes) {
    Problem p = MakeProblem(s, rng);
    const std::vector<double> ref = Reference(p, 8, false);
    const std::vector<double> ref_q = Reference(p, 8, true);
#ifdef GEMV_PEERS_GGML
    std::shared_ptr<GgmlShape> ggml_shape;  // W and the rows, made at the first rows, shared by both
#endif
    for (int rows : {1, 8}) {
      std::vector<Variant> variants;
      std::vector<std::shared_ptr<void>> keep;
#ifdef GEMV_PEERS_GGML
      AddGgml(variants, keep, p, rows, threads, ggml_shape);
#endif
#ifdef GEMV_PEERS_ONEDNN
      if (onednn_ok) AddOnednn(variants, keep, p, rows);
#endif
      for (const Variant& v : variants) all_ok = Check(v, p, rows, v.quantized ? ref_q : ref) && all_ok;
      if (!all_ok) break;
      std::vector<std::vector<double>> medians(variants.size());
      std::vector<double> times(runs);
      for (int r = 0; r < rounds; ++r) {
        for (size_t v = 0; v < variants.size(); ++v) {
          for (int i = -3; i < runs; ++i) {
            double start = Now();
            variants[v].run();
            if (i >= 0) times[i] = Now() - start;
          }
          std::sort(times.begin(), times.end());
          medians[v].push_back(times[runs / 2]);
        }
      }
      for (size_t v = 0; v < variants.size(); ++v) {
        std::vector<double>& m = medians[v];
        std::sort(m.begin(), m.end());
        double mid = m[rounds / 2];
        std::printf("GEMV shape=%lldx%lld rows=%d variant=%s bytes=%lld us_min=%.1f us_median=%.1f us_max=%.1f "
                    "gbps_median=%.2f gbps_best=%.2f\n",
                    (long long)s.k, (long long)s.n, rows, variants[v].name.c_str(), (long long)variants[v].bytes, m[0],
                    mid, m[rounds - 1], variants[v].bytes / mid / 1e3, variants[v].bytes / m[0] / 1e3);
      }
    }
    if (!all_ok) break;
  }
  return all_ok ? 0 : 1;
}
