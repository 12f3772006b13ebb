// XLA typed-FFI handlers for the LAPACK custom calls that JAX emits on CPU (jnp.linalg,
// jax.scipy.linalg, jax.lax.linalg): lapack_{s,d,c,z}{potrf,getrf,trsm,geqrf,orgqr|ungqr,gesdd,
// syevd|heevd,geev,gesvd,geqp3,gehrd,sytrd|hetrd,gtsv,ormqr|unmqr,gees}_ffi: every LAPACK target
// that jax 0.10.2's jax/_src/lax/linalg.py lowers to on CPU.
// They follow jaxlib's kernels (jaxlib/cpu/lapack_kernels.cc) in operands, results, attributes,
// workspace sizes and `info` outputs, so a JAX export runs here as it runs in JAX.
//
// LAPACK itself is not linked: Java loads bytedeco's OpenBLAS (when it first compiles a program that
// calls one of these targets) and passes its path to XlaActors_LoadLapack, which dlopen()s it and
// dlsym()s the Fortran symbols. The handlers are registered with every plugin regardless; until LAPACK
// is loaded they answer with an FFI error that names the routine and the reason.
//
// Layout: JAX's custom calls ask for column-major matrices (operand_layouts {1,2,0}), batch dims
// outermost, so each matrix of a batch is one contiguous column-major block that LAPACK reads in place.
// Every size is checked before LAPACK sees it: LAPACK's xerbla must never run, and no matrix may be
// read or written past the buffer XLA gave.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "bridge.h"
#include "xla/ffi/api/c_api.h"

namespace xla_actors {
namespace {

// bytedeco's OpenBLAS is built with 32-bit LAPACK integers (LP64; its config has no USE64BITINT).
using lapack_int = int32_t;
using c64 = std::complex<float>;
using c128 = std::complex<double>;

template <typename T>
struct RealOf {
  using type = T;
};
template <typename T>
struct RealOf<std::complex<T>> {
  using type = T;
};
template <typename T>
using Real = typename RealOf<T>::type;
template <typename T>
constexpr bool kComplex = !std::is_same_v<T, Real<T>>;

template <typename T>
constexpr XLA_FFI_DataType DtypeOf() {
  if constexpr (std::is_same_v<T, float>) return XLA_FFI_DataType_F32;
  if constexpr (std::is_same_v<T, double>) return XLA_FFI_DataType_F64;
  if constexpr (std::is_same_v<T, c64>) return XLA_FFI_DataType_C64;
  if constexpr (std::is_same_v<T, c128>) return XLA_FFI_DataType_C128;
}
template <typename T>
using ComplexOf = std::complex<Real<T>>;

// Fortran signatures, with the hidden lengths of the CHARACTER arguments appended (gfortran passes
// them as size_t; routines written in C ignore them).
template <typename T>
struct Routines {
  using R = Real<T>;
  using I = lapack_int;
  using Potrf = void(const char*, const I*, T*, const I*, I*, size_t);
  using Getrf = void(const I*, const I*, T*, const I*, I*, I*);
  using Trsm = void(const char*, const char*, const char*, const char*, const I*, const I*, const T*, const T*,
                    const I*, T*, const I*, size_t, size_t, size_t, size_t);
  using Geqrf = void(const I*, const I*, T*, const I*, T*, T*, const I*, I*);
  using Orgqr = void(const I*, const I*, const I*, T*, const I*, const T*, T*, const I*, I*);
  using GesddReal = void(const char*, const I*, const I*, T*, const I*, R*, T*, const I*, T*, const I*, T*,
                         const I*, I*, I*, size_t);
  using GesddComplex = void(const char*, const I*, const I*, T*, const I*, R*, T*, const I*, T*, const I*, T*,
                            const I*, R*, I*, I*, size_t);
  using Gesdd = std::conditional_t<kComplex<T>, GesddComplex, GesddReal>;
  using GesvdReal = void(const char*, const char*, const I*, const I*, T*, const I*, R*, T*, const I*, T*, const I*,
                         T*, const I*, I*, size_t, size_t);
  using GesvdComplex = void(const char*, const char*, const I*, const I*, T*, const I*, R*, T*, const I*, T*,
                            const I*, T*, const I*, R*, I*, size_t, size_t);
  using Gesvd = std::conditional_t<kComplex<T>, GesvdComplex, GesvdReal>;
  using Geqp3Real = void(const I*, const I*, T*, const I*, I*, T*, T*, const I*, I*);
  using Geqp3Complex = void(const I*, const I*, T*, const I*, I*, T*, T*, const I*, R*, I*);
  using Geqp3 = std::conditional_t<kComplex<T>, Geqp3Complex, Geqp3Real>;
  using Gehrd = void(const I*, const I*, const I*, T*, const I*, T*, T*, const I*, I*);
  using Sytrd = void(const char*, const I*, T*, const I*, R*, R*, T*, T*, const I*, I*, size_t);
  using Gtsv = void(const I*, const I*, T*, T*, T*, T*, const I*, I*);
  using Ormqr = void(const char*, const char*, const I*, const I*, const I*, const T*, const I*, const T*, T*,
                     const I*, T*, const I*, I*, size_t, size_t);
  // select is a LOGICAL FUNCTION, never called with sort = 'N'; bwork likewise unused then.
  using GeesReal = void(const char*, const char*, void*, const I*, T*, const I*, I*, T*, T*, T*, const I*, T*,
                        const I*, I*, I*, size_t, size_t);
  using GeesComplex = void(const char*, const char*, void*, const I*, T*, const I*, I*, T*, T*, const I*, T*,
                           const I*, R*, I*, I*, size_t, size_t);
  using Gees = std::conditional_t<kComplex<T>, GeesComplex, GeesReal>;
  using Syevd = void(const char*, const char*, const I*, T*, const I*, R*, T*, const I*, I*, const I*, I*, size_t,
                     size_t);
  using Heevd = void(const char*, const char*, const I*, T*, const I*, R*, T*, const I*, R*, const I*, I*,
                     const I*, I*, size_t, size_t);
  using Eigh = std::conditional_t<kComplex<T>, Heevd, Syevd>;
  using GeevReal = void(const char*, const char*, const I*, T*, const I*, T*, T*, T*, const I*, T*, const I*, T*,
                        const I*, I*, size_t, size_t);
  using GeevComplex = void(const char*, const char*, const I*, T*, const I*, T*, T*, const I*, T*, const I*, T*,
                           const I*, R*, I*, size_t, size_t);
  using Geev = std::conditional_t<kComplex<T>, GeevComplex, GeevReal>;

  Potrf* potrf = nullptr;
  Getrf* getrf = nullptr;
  Trsm* trsm = nullptr;
  Geqrf* geqrf = nullptr;
  Orgqr* orgqr = nullptr;  // orgqr for real types, ungqr for complex ones
  Gesdd* gesdd = nullptr;
  Eigh* eigh = nullptr;  // syevd / heevd
  Geev* geev = nullptr;
  Gesvd* gesvd = nullptr;
  Geqp3* geqp3 = nullptr;
  Gehrd* gehrd = nullptr;
  Sytrd* sytrd = nullptr;  // sytrd / hetrd
  Gtsv* gtsv = nullptr;
  Ormqr* ormqr = nullptr;  // ormqr / unmqr
  Gees* gees = nullptr;
};

struct LapackTable {
  Routines<float> s;
  Routines<double> d;
  Routines<c64> c;
  Routines<c128> z;
  std::string description;
};

template <typename T>
const Routines<T>& RoutinesOf(const LapackTable& table) {
  if constexpr (std::is_same_v<T, float>) return table.s;
  if constexpr (std::is_same_v<T, double>) return table.d;
  if constexpr (std::is_same_v<T, c64>) return table.c;
  if constexpr (std::is_same_v<T, c128>) return table.z;
}

std::mutex g_lapack_mutex;
std::atomic<const LapackTable*> g_lapack{nullptr};  // set once, never freed: handlers may be running
std::string g_lapack_problem =
    "LAPACK has not been loaded (the runtime loads OpenBLAS when it compiles a program that calls @lapack_*)";

std::string LapackProblem() {
  std::lock_guard<std::mutex> lock(g_lapack_mutex);
  return g_lapack_problem;
}

// A handler's failure: an FFI error code and a message (the handler prefixes its target name).
struct CallError {
  XLA_FFI_Error_Code code;
  std::string message;
};

[[noreturn]] void Fail(const std::string& message, XLA_FFI_Error_Code code = XLA_FFI_Error_Code_INVALID_ARGUMENT) {
  throw CallError{code, message};
}

const char* DtypeName(XLA_FFI_DataType dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_F32: return "f32";
    case XLA_FFI_DataType_F64: return "f64";
    case XLA_FFI_DataType_C64: return "c64";
    case XLA_FFI_DataType_C128: return "c128";
    case XLA_FFI_DataType_S32: return "s32";
    default: return "another type";
  }
}

std::string DimsText(const XLA_FFI_Buffer* b) {
  std::string text = "[";
  for (int64_t i = 0; i < b->rank; ++i) text += (i > 0 ? "," : "") + std::to_string(b->dims[i]);
  return text + "]";
}

int64_t ElementCount(const XLA_FFI_Buffer* b) {
  int64_t count = 1;
  for (int64_t i = 0; i < b->rank; ++i) {
    if (b->dims[i] < 0) Fail("a buffer has a negative dimension: " + DimsText(b));
    if (b->dims[i] != 0 && count > std::numeric_limits<int64_t>::max() / b->dims[i]) Fail("a buffer is too large");
    count *= b->dims[i];
  }
  return count;
}

XLA_FFI_Buffer* Checked(XLA_FFI_Buffer* b, XLA_FFI_DataType dtype, const char* what) {
  if (b->dtype != dtype) {
    Fail(std::string(what) + " must be " + DtypeName(dtype) + ", got " + DtypeName(b->dtype));
  }
  if (ElementCount(b) > 0 && b->data == nullptr) Fail(std::string(what) + " has no data");
  return b;
}

XLA_FFI_Buffer* Arg(XLA_FFI_CallFrame* frame, int64_t i, XLA_FFI_DataType dtype, const char* what) {
  if (i >= frame->args.size || frame->args.types[i] != XLA_FFI_ArgType_BUFFER) {
    Fail("expected a buffer operand #" + std::to_string(i) + " (" + what + "); the call has " +
         std::to_string(frame->args.size) + " operands");
  }
  return Checked(static_cast<XLA_FFI_Buffer*>(frame->args.args[i]), dtype, what);
}

XLA_FFI_Buffer* Ret(XLA_FFI_CallFrame* frame, int64_t i, XLA_FFI_DataType dtype, const char* what) {
  if (i >= frame->rets.size || frame->rets.types[i] != XLA_FFI_RetType_BUFFER) {
    Fail("expected a buffer result #" + std::to_string(i) + " (" + what + "); the call has " +
         std::to_string(frame->rets.size) + " results");
  }
  return Checked(static_cast<XLA_FFI_Buffer*>(frame->rets.rets[i]), dtype, what);
}

void ExpectCounts(const XLA_FFI_CallFrame* frame, int64_t args, int64_t rets) {
  if (frame->args.size != args || frame->rets.size != rets) {
    Fail("expected " + std::to_string(args) + " operands and " + std::to_string(rets) + " results, got " +
         std::to_string(frame->args.size) + " and " + std::to_string(frame->rets.size));
  }
}

// A one-character attribute (JAX writes them as ui8 scalars, e.g. uplo = 76 : ui8 for 'L').
char CharAttr(XLA_FFI_CallFrame* frame, const char* name, const char* allowed) {
  int64_t index = FindAttribute(frame, name);
  if (index < 0) Fail(std::string("missing attribute '") + name + "'");
  if (frame->attrs.types[index] != XLA_FFI_AttrType_SCALAR) Fail(std::string("attribute '") + name + "' must be a ui8 scalar");
  auto* scalar = static_cast<XLA_FFI_Scalar*>(frame->attrs.attrs[index]);
  if (scalar->dtype != XLA_FFI_DataType_U8 && scalar->dtype != XLA_FFI_DataType_S8) {
    Fail(std::string("attribute '") + name + "' must be a ui8 scalar");
  }
  char value = *static_cast<const char*>(scalar->value);
  if (value == 0 || std::strchr(allowed, value) == nullptr) {
    Fail(std::string("attribute '") + name + "' is " + std::to_string(static_cast<int>(value)) + ", expected one of '" +
         allowed + "'");
  }
  return value;
}

// An i32 attribute (gehrd's low and high).
lapack_int IntAttr(XLA_FFI_CallFrame* frame, const char* name) {
  int64_t index = FindAttribute(frame, name);
  if (index < 0) Fail(std::string("missing attribute '") + name + "'");
  auto* scalar = static_cast<XLA_FFI_Scalar*>(frame->attrs.attrs[index]);
  if (frame->attrs.types[index] != XLA_FFI_AttrType_SCALAR || scalar->dtype != XLA_FFI_DataType_S32) {
    Fail(std::string("attribute '") + name + "' must be an i32 scalar");
  }
  return *static_cast<const int32_t*>(scalar->value);
}

// A boolean attribute (ormqr's left and transpose; XLA passes MLIR's `true` as a PRED scalar).
bool BoolAttr(XLA_FFI_CallFrame* frame, const char* name) {
  int64_t index = FindAttribute(frame, name);
  if (index < 0) Fail(std::string("missing attribute '") + name + "'");
  auto* scalar = static_cast<XLA_FFI_Scalar*>(frame->attrs.attrs[index]);
  if (frame->attrs.types[index] != XLA_FFI_AttrType_SCALAR ||
      (scalar->dtype != XLA_FFI_DataType_PRED && scalar->dtype != XLA_FFI_DataType_U8 &&
       scalar->dtype != XLA_FFI_DataType_S8)) {
    Fail(std::string("attribute '") + name + "' must be a bool");
  }
  return *static_cast<const uint8_t*>(scalar->value) != 0;
}

// A batch of matrices: the last two dims are rows and columns, the others the batch.
struct Batch {
  int64_t count;
  int64_t rows;
  int64_t cols;
};

Batch SplitBatch(const XLA_FFI_Buffer* b, const char* what) {
  if (b->rank < 2) Fail(std::string(what) + " must have rank >= 2, got " + DimsText(b));
  ElementCount(b);  // checks signs and overflow
  Batch batch{1, b->dims[b->rank - 2], b->dims[b->rank - 1]};
  for (int64_t i = 0; i < b->rank - 2; ++i) batch.count *= b->dims[i];
  return batch;
}

void ExpectElements(const XLA_FFI_Buffer* b, int64_t expected, const char* what) {
  int64_t count = ElementCount(b);
  if (count != expected) {
    Fail(std::string(what) + " has " + std::to_string(count) + " elements " + DimsText(b) + ", expected " +
         std::to_string(expected));
  }
}

lapack_int ToInt(int64_t value, const char* what) {
  if (value < 0 || value > std::numeric_limits<lapack_int>::max()) {
    Fail(std::string(what) + " = " + std::to_string(value) + " does not fit LAPACK's 32-bit integers");
  }
  return static_cast<lapack_int>(value);
}

// A leading dimension: LAPACK wants at least 1 even for an empty matrix.
lapack_int Lead(int64_t rows) { return std::max<lapack_int>(1, ToInt(rows, "a leading dimension")); }

template <typename T>
void CopyIfDifferent(const XLA_FFI_Buffer* in, XLA_FFI_Buffer* out, int64_t count) {
  if (in->data != out->data && count > 0) std::memcpy(out->data, in->data, count * sizeof(T));
}

// A workspace size from a LAPACK query (lwork = -1), checked before anything is allocated.
template <typename T>
lapack_int QueriedWorkspace(const T& optimal, lapack_int info, const char* routine) {
  if (info != 0) Fail(std::string(routine) + " workspace query failed with info " + std::to_string(info), XLA_FFI_Error_Code_INTERNAL);
  double size = static_cast<double>(std::real(optimal));
  if (!(size >= 0) || size > std::numeric_limits<lapack_int>::max()) {
    Fail(std::string(routine) + " asked for a workspace of " + std::to_string(size) + " elements", XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
  }
  return std::max<lapack_int>(1, static_cast<lapack_int>(size));
}

// A size computed from a formula (jaxlib's), checked the same way.
lapack_int FormulaWorkspace(int64_t size, const char* what) {
  return std::max<lapack_int>(1, ToInt(size, what));
}

void CheckIllegalArgument(lapack_int info, const char* routine) {
  // A negative info means an argument was illegal: a bug here, not a property of the matrix.
  if (info < 0) {
    Fail(std::string(routine) + " rejected argument " + std::to_string(-info), XLA_FFI_Error_Code_INTERNAL);
  }
}

template <typename T>
std::vector<T> Scratch(int64_t count) {
  return std::vector<T>(static_cast<size_t>(std::max<int64_t>(count, 1)));
}

// ---- The kernels, one per routine, as jaxlib defines them. ----

// potrf: x -> (x_out, info); attribute uplo.
template <typename T>
void Potrf(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  ExpectCounts(frame, 1, 2);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the factor");
  auto* info = Ret(frame, 1, XLA_FFI_DataType_S32, "info");
  char uplo = CharAttr(frame, "uplo", "LU");
  Batch b = SplitBatch(x, "the matrix");
  if (b.rows != b.cols) Fail("the matrix must be square, got " + DimsText(x));
  ExpectElements(x_out, ElementCount(x), "the factor");
  ExpectElements(info, b.count, "info");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int n = ToInt(b.rows, "n");
  lapack_int lda = Lead(b.rows);
  T* a = static_cast<T*>(x_out->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  for (int64_t i = 0; i < b.count; ++i) {
    lapack_int info_v = 0;
    lapack.potrf(&uplo, &n, a + i * b.rows * b.cols, &lda, &info_v, 1);
    CheckIllegalArgument(info_v, "potrf");
    info_data[i] = info_v;
  }
}

// getrf: x -> (x_out, ipiv, info). ipiv is LAPACK's, 1-based (JAX subtracts 1).
template <typename T>
void Getrf(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  ExpectCounts(frame, 1, 3);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the LU factors");
  auto* ipiv = Ret(frame, 1, XLA_FFI_DataType_S32, "ipiv");
  auto* info = Ret(frame, 2, XLA_FFI_DataType_S32, "info");
  Batch b = SplitBatch(x, "the matrix");
  int64_t k = std::min(b.rows, b.cols);
  ExpectElements(x_out, ElementCount(x), "the LU factors");
  ExpectElements(ipiv, b.count * k, "ipiv");
  ExpectElements(info, b.count, "info");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int m = ToInt(b.rows, "m");
  lapack_int n = ToInt(b.cols, "n");
  lapack_int lda = Lead(b.rows);
  T* a = static_cast<T*>(x_out->data);
  auto* ipiv_data = static_cast<int32_t*>(ipiv->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  for (int64_t i = 0; i < b.count; ++i) {
    lapack_int info_v = 0;
    lapack.getrf(&m, &n, a + i * b.rows * b.cols, &lda, ipiv_data + i * k, &info_v);
    CheckIllegalArgument(info_v, "getrf");
    info_data[i] = info_v;
  }
}

// trsm: (a, b) -> b_out solving op(a) x = b (side L) or x op(a) = b (side R), alpha 1; attributes
// side, uplo, trans_x, diag.
template <typename T>
void Trsm(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  ExpectCounts(frame, 2, 1);
  auto* a = Arg(frame, 0, DtypeOf<T>(), "the triangular matrix");
  auto* y = Arg(frame, 1, DtypeOf<T>(), "the right-hand side");
  auto* y_out = Ret(frame, 0, DtypeOf<T>(), "the solution");
  char side = CharAttr(frame, "side", "LR");
  char uplo = CharAttr(frame, "uplo", "LU");
  char trans = CharAttr(frame, "trans_x", "NTC");
  char diag = CharAttr(frame, "diag", "NU");
  Batch b = SplitBatch(y, "the right-hand side");
  int64_t k = side == 'L' ? b.rows : b.cols;
  Batch ab = SplitBatch(a, "the triangular matrix");
  if (ab.rows != k || ab.cols != k || ab.count != b.count) {
    Fail("the triangular matrix " + DimsText(a) + " does not fit the right-hand side " + DimsText(y) + " on side " +
         std::string(1, side));
  }
  ExpectElements(y_out, ElementCount(y), "the solution");
  CopyIfDifferent<T>(y, y_out, ElementCount(y));
  lapack_int m = ToInt(b.rows, "m");
  lapack_int n = ToInt(b.cols, "n");
  lapack_int lda = Lead(k);
  lapack_int ldb = Lead(b.rows);
  const T alpha = T(1);
  const T* a_data = static_cast<const T*>(a->data);
  T* y_data = static_cast<T*>(y_out->data);
  for (int64_t i = 0; i < b.count; ++i) {
    lapack.trsm(&side, &uplo, &trans, &diag, &m, &n, &alpha, a_data + i * k * k, &lda, y_data + i * b.rows * b.cols,
                &ldb, 1, 1, 1, 1);
  }
}

// geqrf: x -> (x_out, tau).
template <typename T>
void Geqrf(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  ExpectCounts(frame, 1, 2);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the factored matrix");
  auto* tau = Ret(frame, 1, DtypeOf<T>(), "tau");
  Batch b = SplitBatch(x, "the matrix");
  int64_t k = std::min(b.rows, b.cols);
  ExpectElements(x_out, ElementCount(x), "the factored matrix");
  ExpectElements(tau, b.count * k, "tau");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int m = ToInt(b.rows, "m");
  lapack_int n = ToInt(b.cols, "n");
  lapack_int lda = Lead(b.rows);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  lapack.geqrf(&m, &n, nullptr, &lda, nullptr, &optimal, &query, &info_v);
  lapack_int lwork = QueriedWorkspace(optimal, info_v, "geqrf");
  std::vector<T> work = Scratch<T>(lwork);
  T* a = static_cast<T*>(x_out->data);
  T* tau_data = static_cast<T*>(tau->data);
  for (int64_t i = 0; i < b.count; ++i) {
    lapack.geqrf(&m, &n, a + i * b.rows * b.cols, &lda, tau_data + i * k, work.data(), &lwork, &info_v);
    CheckIllegalArgument(info_v, "geqrf");
  }
}

// orgqr / ungqr: (x, tau) -> x_out, the first n columns of Q.
template <typename T>
void Orgqr(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  ExpectCounts(frame, 2, 1);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the reflectors");
  auto* tau = Arg(frame, 1, DtypeOf<T>(), "tau");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "Q");
  Batch b = SplitBatch(x, "the reflectors");
  if (tau->rank < 1) Fail("tau must have rank >= 1, got " + DimsText(tau));
  int64_t k = tau->dims[tau->rank - 1];
  if (!(b.rows >= b.cols && b.cols >= k && k >= 0)) {
    Fail("needs rows >= columns >= reflectors, got the matrix " + DimsText(x) + " and tau " + DimsText(tau));
  }
  ExpectElements(tau, b.count * k, "tau");
  ExpectElements(x_out, ElementCount(x), "Q");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int m = ToInt(b.rows, "m");
  lapack_int n = ToInt(b.cols, "n");
  lapack_int k_v = ToInt(k, "k");
  lapack_int lda = Lead(b.rows);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  lapack.orgqr(&m, &n, &k_v, nullptr, &lda, nullptr, &optimal, &query, &info_v);
  lapack_int lwork = QueriedWorkspace(optimal, info_v, kComplex<T> ? "ungqr" : "orgqr");
  std::vector<T> work = Scratch<T>(lwork);
  T* a = static_cast<T*>(x_out->data);
  const T* tau_data = static_cast<const T*>(tau->data);
  for (int64_t i = 0; i < b.count; ++i) {
    lapack.orgqr(&m, &n, &k_v, a + i * b.rows * b.cols, &lda, tau_data + i * k, work.data(), &lwork, &info_v);
    CheckIllegalArgument(info_v, kComplex<T> ? "ungqr" : "orgqr");
  }
}

// gesdd (divide and conquer) and gesvd (QR iteration): x -> (x_out, s, u, vt, info); attribute mode:
// 'A' full U and V^H, 'S' thin, 'N' values only ('O' is refused, as jaxlib does).
template <bool kDivideAndConquer, typename T>
void Svd(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  using R = Real<T>;
  const char* routine = kDivideAndConquer ? "gesdd" : "gesvd";
  ExpectCounts(frame, 1, 5);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the overwritten matrix");
  auto* s = Ret(frame, 1, DtypeOf<R>(), "the singular values");
  auto* u = Ret(frame, 2, DtypeOf<T>(), "U");
  auto* vt = Ret(frame, 3, DtypeOf<T>(), "V^H");
  auto* info = Ret(frame, 4, XLA_FFI_DataType_S32, "info");
  char mode = CharAttr(frame, "mode", "ASNO");
  if (mode == 'O') Fail("mode 'O' is not supported (as in jaxlib)", XLA_FFI_Error_Code_UNIMPLEMENTED);
  Batch b = SplitBatch(x, "the matrix");
  int64_t k = std::min(b.rows, b.cols);
  Batch ub = SplitBatch(u, "U");
  Batch vb = SplitBatch(vt, "V^H");
  ExpectElements(x_out, ElementCount(x), "the overwritten matrix");
  ExpectElements(s, b.count * k, "the singular values");
  ExpectElements(info, b.count, "info");
  if (ub.count != b.count || vb.count != b.count) Fail("U and V^H must have the matrix's batch");
  if (mode == 'A' && (ub.rows != b.rows || ub.cols != b.rows || vb.rows != b.cols || vb.cols != b.cols)) {
    Fail("mode 'A' needs U " + std::to_string(b.rows) + "x" + std::to_string(b.rows) + " and V^H " +
         std::to_string(b.cols) + "x" + std::to_string(b.cols) + ", got " + DimsText(u) + " and " + DimsText(vt));
  }
  if (mode == 'S' && (ub.rows != b.rows || ub.cols < k || vb.rows < k || vb.cols != b.cols)) {
    Fail("mode 'S' needs U " + std::to_string(b.rows) + "x" + std::to_string(k) + " and V^H " + std::to_string(k) +
         "x" + std::to_string(b.cols) + ", got " + DimsText(u) + " and " + DimsText(vt));
  }
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int m = ToInt(b.rows, "m");
  lapack_int n = ToInt(b.cols, "n");
  lapack_int lda = Lead(b.rows);
  // jaxlib passes ldu = rows and ldvt = the rows of V^H (neither is referenced in mode 'N').
  lapack_int ldu = Lead(b.rows);
  lapack_int ldvt = Lead(vb.rows);
  // jaxlib's workspace query uses ldvt = n for 'A' and min(m, n) otherwise.
  lapack_int ldvt_query = Lead(mode == 'A' ? b.cols : k);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  if constexpr (kDivideAndConquer && kComplex<T>) {
    lapack.gesdd(&mode, &m, &n, nullptr, &lda, nullptr, nullptr, &ldu, nullptr, &ldvt_query, &optimal, &query,
                 nullptr, nullptr, &info_v, 1);
  } else if constexpr (kDivideAndConquer) {
    lapack.gesdd(&mode, &m, &n, nullptr, &lda, nullptr, nullptr, &ldu, nullptr, &ldvt_query, &optimal, &query,
                 nullptr, &info_v, 1);
  } else if constexpr (kComplex<T>) {
    lapack.gesvd(&mode, &mode, &m, &n, nullptr, &lda, nullptr, nullptr, &ldu, nullptr, &ldvt_query, &optimal, &query,
                 nullptr, &info_v, 1, 1);
  } else {
    lapack.gesvd(&mode, &mode, &m, &n, nullptr, &lda, nullptr, nullptr, &ldu, nullptr, &ldvt_query, &optimal, &query,
                 &info_v, 1, 1);
  }
  lapack_int lwork = QueriedWorkspace(optimal, info_v, routine);
  std::vector<T> work = Scratch<T>(lwork);
  std::vector<lapack_int> iwork = Scratch<lapack_int>(kDivideAndConquer ? 8 * k : 1);
  std::vector<R> rwork;
  if constexpr (kComplex<T>) {
    int64_t max_dim = std::max(b.rows, b.cols);
    int64_t rwork_size = !kDivideAndConquer ? 5 * k
                         : mode == 'N'      ? 7 * k
                                            : std::max(5 * k * k + 5 * k, 2 * max_dim * k + 2 * k * k + k);
    rwork = Scratch<R>(FormulaWorkspace(rwork_size, "the real workspace"));
  }
  T* a = static_cast<T*>(x_out->data);
  R* s_data = static_cast<R*>(s->data);
  T* u_data = static_cast<T*>(u->data);
  T* vt_data = static_cast<T*>(vt->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  int64_t u_step = ub.rows * ub.cols;
  int64_t vt_step = vb.rows * vb.cols;
  // In mode 'N' LAPACK references neither U nor V^H; give it a valid pointer all the same.
  T unused{};
  for (int64_t i = 0; i < b.count; ++i) {
    T* a_i = a + i * b.rows * b.cols;
    R* s_i = s_data + i * k;
    T* u_i = u_step > 0 ? u_data + i * u_step : &unused;
    T* vt_i = vt_step > 0 ? vt_data + i * vt_step : &unused;
    if constexpr (kDivideAndConquer && kComplex<T>) {
      lapack.gesdd(&mode, &m, &n, a_i, &lda, s_i, u_i, &ldu, vt_i, &ldvt, work.data(), &lwork, rwork.data(),
                   iwork.data(), &info_v, 1);
    } else if constexpr (kDivideAndConquer) {
      lapack.gesdd(&mode, &m, &n, a_i, &lda, s_i, u_i, &ldu, vt_i, &ldvt, work.data(), &lwork, iwork.data(), &info_v,
                   1);
    } else if constexpr (kComplex<T>) {
      lapack.gesvd(&mode, &mode, &m, &n, a_i, &lda, s_i, u_i, &ldu, vt_i, &ldvt, work.data(), &lwork, rwork.data(),
                   &info_v, 1, 1);
    } else {
      lapack.gesvd(&mode, &mode, &m, &n, a_i, &lda, s_i, u_i, &ldu, vt_i, &ldvt, work.data(), &lwork, &info_v, 1, 1);
    }
    CheckIllegalArgument(info_v, routine);
    info_data[i] = info_v;
  }
}

// geqp3: (x, jpvt) -> (x_out, jpvt_out, tau), QR with column pivoting. jpvt is 1-based both ways and
// marks columns to keep in front (JAX passes zeros).
template <typename T>
void Geqp3(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  using R = Real<T>;
  ExpectCounts(frame, 2, 3);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* jpvt = Arg(frame, 1, XLA_FFI_DataType_S32, "jpvt");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the factored matrix");
  auto* jpvt_out = Ret(frame, 1, XLA_FFI_DataType_S32, "the column permutation");
  auto* tau = Ret(frame, 2, DtypeOf<T>(), "tau");
  Batch b = SplitBatch(x, "the matrix");
  int64_t k = std::min(b.rows, b.cols);
  ExpectElements(jpvt, b.count * b.cols, "jpvt");
  ExpectElements(jpvt_out, b.count * b.cols, "the column permutation");
  ExpectElements(x_out, ElementCount(x), "the factored matrix");
  ExpectElements(tau, b.count * k, "tau");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  CopyIfDifferent<int32_t>(jpvt, jpvt_out, ElementCount(jpvt));
  lapack_int m = ToInt(b.rows, "m");
  lapack_int n = ToInt(b.cols, "n");
  lapack_int lda = Lead(b.rows);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  std::vector<R> rwork;
  if constexpr (kComplex<T>) {
    rwork = Scratch<R>(2 * b.cols);
    lapack.geqp3(&m, &n, nullptr, &lda, nullptr, nullptr, &optimal, &query, rwork.data(), &info_v);
  } else {
    lapack.geqp3(&m, &n, nullptr, &lda, nullptr, nullptr, &optimal, &query, &info_v);
  }
  lapack_int lwork = QueriedWorkspace(optimal, info_v, "geqp3");
  std::vector<T> work = Scratch<T>(lwork);
  T* a = static_cast<T*>(x_out->data);
  auto* jpvt_data = static_cast<int32_t*>(jpvt_out->data);
  T* tau_data = static_cast<T*>(tau->data);
  for (int64_t i = 0; i < b.count; ++i) {
    int32_t* p = jpvt_data + i * b.cols;
    for (int64_t j = 0; j < b.cols; ++j) {
      if (p[j] < 0 || p[j] > b.cols) Fail("jpvt holds " + std::to_string(p[j]) + ", outside 0.." + std::to_string(b.cols));
    }
    if constexpr (kComplex<T>) {
      lapack.geqp3(&m, &n, a + i * b.rows * b.cols, &lda, p, tau_data + i * k, work.data(), &lwork, rwork.data(),
                   &info_v);
    } else {
      lapack.geqp3(&m, &n, a + i * b.rows * b.cols, &lda, p, tau_data + i * k, work.data(), &lwork, &info_v);
    }
    CheckIllegalArgument(info_v, "geqp3");
  }
}

// gehrd: x -> (x_out, tau, info), reduction to upper Hessenberg form; i32 attributes low and high
// (LAPACK's ilo and ihi, 1-based).
template <typename T>
void Gehrd(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  ExpectCounts(frame, 1, 3);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the reduced matrix");
  auto* tau = Ret(frame, 1, DtypeOf<T>(), "tau");
  auto* info = Ret(frame, 2, XLA_FFI_DataType_S32, "info");
  lapack_int low = IntAttr(frame, "low");
  lapack_int high = IntAttr(frame, "high");
  Batch b = SplitBatch(x, "the matrix");
  if (b.rows != b.cols) Fail("the matrix must be square, got " + DimsText(x));
  int64_t n64 = b.cols;
  bool valid = n64 == 0 ? (low == 1 && high == 0) : (1 <= low && low <= high && high <= n64);
  if (!valid) {
    Fail("needs 1 <= low <= high <= n, got low " + std::to_string(low) + ", high " + std::to_string(high) + ", n " +
         std::to_string(n64));
  }
  int64_t tau_step = std::max<int64_t>(n64 - 1, 0);
  ExpectElements(x_out, ElementCount(x), "the reduced matrix");
  ExpectElements(tau, b.count * tau_step, "tau");
  ExpectElements(info, b.count, "info");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int n = ToInt(n64, "n");
  lapack_int lda = Lead(n64);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  lapack.gehrd(&n, &low, &high, nullptr, &lda, nullptr, &optimal, &query, &info_v);
  lapack_int lwork = QueriedWorkspace(optimal, info_v, "gehrd");
  std::vector<T> work = Scratch<T>(lwork);
  std::vector<T> tau_scratch = Scratch<T>(1);  // n == 0: LAPACK wants a pointer, XLA's buffer is empty
  T* a = static_cast<T*>(x_out->data);
  T* tau_data = static_cast<T*>(tau->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  for (int64_t i = 0; i < b.count; ++i) {
    T* tau_i = tau_step > 0 ? tau_data + i * tau_step : tau_scratch.data();
    lapack.gehrd(&n, &low, &high, a + i * n64 * n64, &lda, tau_i, work.data(), &lwork, &info_v);
    CheckIllegalArgument(info_v, "gehrd");
    info_data[i] = info_v;
  }
}

// sytrd / hetrd: x -> (x_out, d, e, tau, info), reduction to real symmetric tridiagonal form;
// attribute uplo.
template <typename T>
void Sytrd(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  using R = Real<T>;
  const char* routine = kComplex<T> ? "hetrd" : "sytrd";
  ExpectCounts(frame, 1, 5);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the reduced matrix");
  auto* d = Ret(frame, 1, DtypeOf<R>(), "the diagonal");
  auto* e = Ret(frame, 2, DtypeOf<R>(), "the off-diagonal");
  auto* tau = Ret(frame, 3, DtypeOf<T>(), "tau");
  auto* info = Ret(frame, 4, XLA_FFI_DataType_S32, "info");
  char uplo = CharAttr(frame, "uplo", "LU");
  Batch b = SplitBatch(x, "the matrix");
  if (b.rows != b.cols) Fail("the matrix must be square, got " + DimsText(x));
  int64_t n64 = b.cols;
  int64_t off_step = std::max<int64_t>(n64 - 1, 0);
  ExpectElements(x_out, ElementCount(x), "the reduced matrix");
  ExpectElements(d, b.count * n64, "the diagonal");
  ExpectElements(e, b.count * off_step, "the off-diagonal");
  ExpectElements(tau, b.count * off_step, "tau");
  ExpectElements(info, b.count, "info");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int n = ToInt(n64, "n");
  lapack_int lda = Lead(n64);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  lapack.sytrd(&uplo, &n, nullptr, &lda, nullptr, nullptr, nullptr, &optimal, &query, &info_v, 1);
  lapack_int lwork = QueriedWorkspace(optimal, info_v, routine);
  std::vector<T> work = Scratch<T>(lwork);
  std::vector<R> e_scratch = Scratch<R>(1);  // n <= 1: XLA's buffers for e and tau are empty
  std::vector<T> tau_scratch = Scratch<T>(1);
  T* a = static_cast<T*>(x_out->data);
  R* d_data = static_cast<R*>(d->data);
  R* e_data = static_cast<R*>(e->data);
  T* tau_data = static_cast<T*>(tau->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  R d_scratch{};
  for (int64_t i = 0; i < b.count; ++i) {
    R* d_i = n64 > 0 ? d_data + i * n64 : &d_scratch;
    R* e_i = off_step > 0 ? e_data + i * off_step : e_scratch.data();
    T* tau_i = off_step > 0 ? tau_data + i * off_step : tau_scratch.data();
    lapack.sytrd(&uplo, &n, a + i * n64 * n64, &lda, d_i, e_i, tau_i, work.data(), &lwork, &info_v, 1);
    CheckIllegalArgument(info_v, routine);
    info_data[i] = info_v;
  }
}

// gtsv: (dl, d, du, b) -> (dl_out, d_out, du_out, b_out, info), a tridiagonal solve. JAX's dl has a
// leading element and du a trailing one that LAPACK does not use (dl is passed from its second
// element, as jaxlib does).
template <typename T>
void Gtsv(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  ExpectCounts(frame, 4, 5);
  auto* dl = Arg(frame, 0, DtypeOf<T>(), "the lower diagonal");
  auto* d = Arg(frame, 1, DtypeOf<T>(), "the diagonal");
  auto* du = Arg(frame, 2, DtypeOf<T>(), "the upper diagonal");
  auto* rhs = Arg(frame, 3, DtypeOf<T>(), "the right-hand side");
  auto* dl_out = Ret(frame, 0, DtypeOf<T>(), "the lower diagonal result");
  auto* d_out = Ret(frame, 1, DtypeOf<T>(), "the diagonal result");
  auto* du_out = Ret(frame, 2, DtypeOf<T>(), "the upper diagonal result");
  auto* x_out = Ret(frame, 3, DtypeOf<T>(), "the solution");
  auto* info = Ret(frame, 4, XLA_FFI_DataType_S32, "info");
  Batch b = SplitBatch(rhs, "the right-hand side");
  for (auto* diag : {dl, d, du, dl_out, d_out, du_out}) ExpectElements(diag, b.count * b.rows, "a diagonal");
  ExpectElements(x_out, ElementCount(rhs), "the solution");
  ExpectElements(info, b.count, "info");
  CopyIfDifferent<T>(dl, dl_out, ElementCount(dl));
  CopyIfDifferent<T>(d, d_out, ElementCount(d));
  CopyIfDifferent<T>(du, du_out, ElementCount(du));
  CopyIfDifferent<T>(rhs, x_out, ElementCount(rhs));
  lapack_int n = ToInt(b.rows, "n");
  lapack_int nrhs = ToInt(b.cols, "nrhs");
  lapack_int ldb = Lead(b.rows);
  T* dl_data = static_cast<T*>(dl_out->data);
  T* d_data = static_cast<T*>(d_out->data);
  T* du_data = static_cast<T*>(du_out->data);
  T* x_data = static_cast<T*>(x_out->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  for (int64_t i = 0; i < b.count; ++i) {
    info_data[i] = 0;
    if (b.rows == 0) continue;  // nothing to solve, and dl + 1 would point past the batch's diagonal
    lapack_int info_v = 0;
    lapack.gtsv(&n, &nrhs, dl_data + i * b.rows + 1, d_data + i * b.rows, du_data + i * b.rows,
                x_data + i * b.rows * b.cols, &ldb, &info_v);
    CheckIllegalArgument(info_v, "gtsv");
    info_data[i] = info_v;
  }
}

// ormqr / unmqr: (a, tau, c) -> c_out = op(Q) c (left) or c op(Q) (right), Q from geqrf's reflectors;
// bool attributes left and transpose (conjugate transpose for complex types).
template <typename T>
void Ormqr(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  const char* routine = kComplex<T> ? "unmqr" : "ormqr";
  ExpectCounts(frame, 3, 1);
  auto* a = Arg(frame, 0, DtypeOf<T>(), "the reflectors");
  auto* tau = Arg(frame, 1, DtypeOf<T>(), "tau");
  auto* c = Arg(frame, 2, DtypeOf<T>(), "the matrix");
  auto* c_out = Ret(frame, 0, DtypeOf<T>(), "the product");
  bool left = BoolAttr(frame, "left");
  bool transpose = BoolAttr(frame, "transpose");
  char side = left ? 'L' : 'R';
  char trans = transpose ? (kComplex<T> ? 'C' : 'T') : 'N';
  Batch cb = SplitBatch(c, "the matrix");
  Batch ab = SplitBatch(a, "the reflectors");
  if (tau->rank < 1) Fail("tau must have rank >= 1, got " + DimsText(tau));
  int64_t k = tau->dims[tau->rank - 1];
  int64_t q_order = left ? cb.rows : cb.cols;
  if (ab.count != cb.count || ab.rows != q_order || ab.cols < k || k > q_order) {
    Fail("the reflectors " + DimsText(a) + " and tau " + DimsText(tau) + " do not fit the matrix " + DimsText(c) +
         (left ? " on the left" : " on the right"));
  }
  ExpectElements(tau, cb.count * k, "tau");
  ExpectElements(c_out, ElementCount(c), "the product");
  CopyIfDifferent<T>(c, c_out, ElementCount(c));
  lapack_int m = ToInt(cb.rows, "m");
  lapack_int n = ToInt(cb.cols, "n");
  lapack_int k_v = ToInt(k, "k");
  lapack_int lda = Lead(ab.rows);
  lapack_int ldc = Lead(cb.rows);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  lapack.ormqr(&side, &trans, &m, &n, &k_v, nullptr, &lda, nullptr, nullptr, &ldc, &optimal, &query, &info_v, 1, 1);
  lapack_int lwork = QueriedWorkspace(optimal, info_v, routine);
  std::vector<T> work = Scratch<T>(lwork);
  const T* a_data = static_cast<const T*>(a->data);
  const T* tau_data = static_cast<const T*>(tau->data);
  T* c_data = static_cast<T*>(c_out->data);
  for (int64_t i = 0; i < cb.count; ++i) {
    lapack.ormqr(&side, &trans, &m, &n, &k_v, a_data + i * ab.rows * ab.cols, &lda, tau_data + i * k,
                 c_data + i * cb.rows * cb.cols, &ldc, work.data(), &lwork, &info_v, 1, 1);
    CheckIllegalArgument(info_v, routine);
  }
}

// gees: real x -> (x_out = T, vs, wr, wi, sdim, info), complex x -> (x_out, vs, w, sdim, info), the
// Schur decomposition; attributes mode ('V' or 'N' for the Schur vectors) and sort (only 'N', as in
// jaxlib, which passes no selection function).
template <typename T>
void Gees(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  using R = Real<T>;
  constexpr int64_t kValueResults = kComplex<T> ? 1 : 2;
  ExpectCounts(frame, 1, 4 + kValueResults);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the Schur form");
  auto* vs = Ret(frame, 1, DtypeOf<T>(), "the Schur vectors");
  auto* w_re = Ret(frame, 2, DtypeOf<T>(), kComplex<T> ? "the eigenvalues" : "the eigenvalues' real parts");
  XLA_FFI_Buffer* w_im = kComplex<T> ? nullptr : Ret(frame, 3, DtypeOf<T>(), "the eigenvalues' imaginary parts");
  auto* sdim = Ret(frame, 2 + kValueResults, XLA_FFI_DataType_S32, "sdim");
  auto* info = Ret(frame, 3 + kValueResults, XLA_FFI_DataType_S32, "info");
  char mode = CharAttr(frame, "mode", "NV");
  char sort = CharAttr(frame, "sort", "NS");
  if (sort != 'N') Fail("sorting eigenvalues is not supported (as in jaxlib)", XLA_FFI_Error_Code_UNIMPLEMENTED);
  Batch b = SplitBatch(x, "the matrix");
  if (b.rows != b.cols) Fail("the matrix must be square, got " + DimsText(x));
  int64_t n64 = b.cols;
  int64_t size = n64 * n64;
  ExpectElements(x_out, ElementCount(x), "the Schur form");
  ExpectElements(vs, b.count * size, "the Schur vectors");
  ExpectElements(w_re, b.count * n64, "the eigenvalues");
  if (w_im != nullptr) ExpectElements(w_im, b.count * n64, "the eigenvalues' imaginary parts");
  ExpectElements(sdim, b.count, "sdim");
  ExpectElements(info, b.count, "info");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  lapack_int n = ToInt(n64, "n");
  lapack_int ld = Lead(n64);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  lapack_int sdim_v = 0;
  std::vector<R> rwork;
  if constexpr (kComplex<T>) {
    rwork = Scratch<R>(n64);
    lapack.gees(&mode, &sort, nullptr, &n, nullptr, &ld, &sdim_v, nullptr, nullptr, &ld, &optimal, &query,
                rwork.data(), nullptr, &info_v, 1, 1);
  } else {
    lapack.gees(&mode, &sort, nullptr, &n, nullptr, &ld, &sdim_v, nullptr, nullptr, nullptr, &ld, &optimal, &query,
                nullptr, &info_v, 1, 1);
  }
  lapack_int lwork = QueriedWorkspace(optimal, info_v, "gees");
  std::vector<T> work = Scratch<T>(lwork);
  T unused{};
  T* a = static_cast<T*>(x_out->data);
  T* vs_data = static_cast<T*>(vs->data);
  T* w_re_data = static_cast<T*>(w_re->data);
  auto* sdim_data = static_cast<int32_t*>(sdim->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  for (int64_t i = 0; i < b.count; ++i) {
    T* a_i = a + i * size;
    T* vs_i = size > 0 ? vs_data + i * size : &unused;
    if constexpr (kComplex<T>) {
      lapack.gees(&mode, &sort, nullptr, &n, a_i, &ld, &sdim_v, w_re_data + i * n64, vs_i, &ld, work.data(), &lwork,
                  rwork.data(), nullptr, &info_v, 1, 1);
    } else {
      T* w_im_data = static_cast<T*>(w_im->data);
      lapack.gees(&mode, &sort, nullptr, &n, a_i, &ld, &sdim_v, w_re_data + i * n64, w_im_data + i * n64, vs_i, &ld,
                  work.data(), &lwork, nullptr, &info_v, 1, 1);
    }
    CheckIllegalArgument(info_v, "gees");
    sdim_data[i] = sdim_v;
    info_data[i] = info_v;
  }
}

// syevd / heevd: x -> (x_out = eigenvectors, w, info); attributes uplo and mode ('V' or 'N').
// Workspace sizes are jaxlib's fixed formulas (the documented minimums), not queries.
template <typename T>
void Eigh(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  using R = Real<T>;
  ExpectCounts(frame, 1, 3);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* x_out = Ret(frame, 0, DtypeOf<T>(), "the eigenvectors");
  auto* w = Ret(frame, 1, DtypeOf<R>(), "the eigenvalues");
  auto* info = Ret(frame, 2, XLA_FFI_DataType_S32, "info");
  char uplo = CharAttr(frame, "uplo", "LU");
  char mode = CharAttr(frame, "mode", "NV");
  Batch b = SplitBatch(x, "the matrix");
  if (b.rows != b.cols) Fail("the matrix must be square, got " + DimsText(x));
  ExpectElements(x_out, ElementCount(x), "the eigenvectors");
  ExpectElements(w, b.count * b.cols, "the eigenvalues");
  ExpectElements(info, b.count, "info");
  CopyIfDifferent<T>(x, x_out, ElementCount(x));
  int64_t n64 = b.cols;
  lapack_int n = ToInt(n64, "n");
  lapack_int lda = Lead(n64);
  bool vectors = mode == 'V';
  lapack_int liwork = FormulaWorkspace(vectors ? 3 + 5 * n64 : 1, "the integer workspace");
  std::vector<lapack_int> iwork = Scratch<lapack_int>(liwork);
  T* a = static_cast<T*>(x_out->data);
  R* w_data = static_cast<R*>(w->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  if constexpr (kComplex<T>) {
    lapack_int lwork = FormulaWorkspace(vectors ? 2 * n64 + n64 * n64 : n64 + 1, "the workspace");
    lapack_int lrwork = FormulaWorkspace(vectors ? 1 + 5 * n64 + 2 * n64 * n64 : n64, "the real workspace");
    std::vector<T> work = Scratch<T>(lwork);
    std::vector<R> rwork = Scratch<R>(lrwork);
    for (int64_t i = 0; i < b.count; ++i) {
      lapack_int info_v = 0;
      lapack.eigh(&mode, &uplo, &n, a + i * n64 * n64, &lda, w_data + i * n64, work.data(), &lwork, rwork.data(),
                  &lrwork, iwork.data(), &liwork, &info_v, 1, 1);
      CheckIllegalArgument(info_v, "heevd");
      info_data[i] = info_v;
    }
  } else {
    lapack_int lwork = FormulaWorkspace(vectors ? 1 + 6 * n64 + 2 * n64 * n64 : 2 * n64 + 1, "the workspace");
    std::vector<T> work = Scratch<T>(lwork);
    for (int64_t i = 0; i < b.count; ++i) {
      lapack_int info_v = 0;
      lapack.eigh(&mode, &uplo, &n, a + i * n64 * n64, &lda, w_data + i * n64, work.data(), &lwork, iwork.data(),
                  &liwork, &info_v, 1, 1);
      CheckIllegalArgument(info_v, "syevd");
      info_data[i] = info_v;
    }
  }
}

template <typename T>
bool AllFinite(const T* data, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (kComplex<T>) {
      if (!std::isfinite(data[i].real()) || !std::isfinite(data[i].imag())) return false;
    } else {
      if (!std::isfinite(data[i])) return false;
    }
  }
  return true;
}

// A real geev's eigenvectors come packed: a complex pair (w_j, conj(w_j)) keeps its vector's real part
// in column j and its imaginary part in column j + 1. JAX wants them as complex columns.
template <typename R>
void UnpackEigenvectors(int64_t n, const R* eigvals_imag, const R* packed, std::complex<R>* out) {
  for (int64_t j = 0; j < n;) {
    if (eigvals_imag[j] == 0 || std::isnan(eigvals_imag[j]) || j + 1 == n) {
      for (int64_t i = 0; i < n; ++i) out[j * n + i] = {packed[j * n + i], 0};
      ++j;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        R re = packed[j * n + i];
        R im = packed[(j + 1) * n + i];
        out[j * n + i] = {re, im};
        out[(j + 1) * n + i] = {re, -im};
      }
      j += 2;
    }
  }
}

// geev: real x -> (wr, wi, vl, vr, info), complex x -> (w, vl, vr, info); vl and vr are complex;
// attributes compute_left and compute_right ('V' or 'N'). A matrix with a non-finite entry is not
// passed to LAPACK: its info is -4, as in jaxlib.
template <typename T>
void Geev(XLA_FFI_CallFrame* frame, const Routines<T>& lapack) {
  using R = Real<T>;
  using C = ComplexOf<T>;
  constexpr int64_t kValueResults = kComplex<T> ? 1 : 2;
  ExpectCounts(frame, 1, kValueResults + 3);
  auto* x = Arg(frame, 0, DtypeOf<T>(), "the matrix");
  auto* w_re = Ret(frame, 0, DtypeOf<T>(), kComplex<T> ? "the eigenvalues" : "the eigenvalues' real parts");
  XLA_FFI_Buffer* w_im = kComplex<T> ? nullptr : Ret(frame, 1, DtypeOf<T>(), "the eigenvalues' imaginary parts");
  auto* vl = Ret(frame, kValueResults, DtypeOf<C>(), "the left eigenvectors");
  auto* vr = Ret(frame, kValueResults + 1, DtypeOf<C>(), "the right eigenvectors");
  auto* info = Ret(frame, kValueResults + 2, XLA_FFI_DataType_S32, "info");
  char jobvl = CharAttr(frame, "compute_left", "NV");
  char jobvr = CharAttr(frame, "compute_right", "NV");
  Batch b = SplitBatch(x, "the matrix");
  if (b.rows != b.cols) Fail("the matrix must be square, got " + DimsText(x));
  int64_t n64 = b.cols;
  int64_t size = n64 * n64;
  ExpectElements(w_re, b.count * n64, "the eigenvalues");
  if (w_im != nullptr) ExpectElements(w_im, b.count * n64, "the eigenvalues' imaginary parts");
  ExpectElements(vl, b.count * size, "the left eigenvectors");
  ExpectElements(vr, b.count * size, "the right eigenvectors");
  ExpectElements(info, b.count, "info");
  lapack_int n = ToInt(n64, "n");
  lapack_int ld = Lead(n64);
  T optimal{};
  lapack_int query = -1;
  lapack_int info_v = 0;
  std::vector<R> rwork;
  if constexpr (kComplex<T>) {
    rwork = Scratch<R>(2 * n64);
    lapack.geev(&jobvl, &jobvr, &n, nullptr, &ld, nullptr, nullptr, &ld, nullptr, &ld, &optimal, &query, rwork.data(),
                &info_v, 1, 1);
  } else {
    lapack.geev(&jobvl, &jobvr, &n, nullptr, &ld, nullptr, nullptr, nullptr, &ld, nullptr, &ld, &optimal, &query,
                &info_v, 1, 1);
  }
  lapack_int lwork = QueriedWorkspace(optimal, info_v, "geev");
  std::vector<T> work = Scratch<T>(lwork);
  std::vector<T> a = Scratch<T>(size);  // geev destroys its input, which XLA does not alias to a result
  const T* x_data = static_cast<const T*>(x->data);
  auto* info_data = static_cast<int32_t*>(info->data);
  C* vl_data = static_cast<C*>(vl->data);
  C* vr_data = static_cast<C*>(vr->data);
  if (b.count * size > 0) {
    std::fill(vl_data, vl_data + b.count * size, C{});
    std::fill(vr_data, vr_data + b.count * size, C{});
  }
  std::vector<T> packed_left, packed_right;
  if constexpr (!kComplex<T>) {
    packed_left = Scratch<T>(size);
    packed_right = Scratch<T>(size);
  }
  for (int64_t i = 0; i < b.count; ++i) {
    std::copy_n(x_data + i * size, size, a.data());
    if (!AllFinite(a.data(), size)) {
      info_data[i] = -4;
      continue;
    }
    if constexpr (kComplex<T>) {
      T* w_i = static_cast<T*>(w_re->data) + i * n64;
      lapack.geev(&jobvl, &jobvr, &n, a.data(), &ld, w_i, vl_data + i * size, &ld, vr_data + i * size, &ld,
                  work.data(), &lwork, rwork.data(), &info_v, 1, 1);
      CheckIllegalArgument(info_v, "geev");
    } else {
      T* wr_i = static_cast<T*>(w_re->data) + i * n64;
      T* wi_i = static_cast<T*>(w_im->data) + i * n64;
      lapack.geev(&jobvl, &jobvr, &n, a.data(), &ld, wr_i, wi_i, packed_left.data(), &ld, packed_right.data(), &ld,
                  work.data(), &lwork, &info_v, 1, 1);
      CheckIllegalArgument(info_v, "geev");
      if (info_v == 0) {
        if (jobvl == 'V') UnpackEigenvectors(n64, wi_i, packed_left.data(), vl_data + i * size);
        if (jobvr == 'V') UnpackEigenvectors(n64, wi_i, packed_right.data(), vr_data + i * size);
      }
    }
    info_data[i] = info_v;
  }
}

// ---- Registration: one handler per (routine, type), named as jaxlib names it. ----

enum class Routine { kPotrf, kGetrf, kTrsm, kGeqrf, kOrgqr, kGesdd, kEigh, kGeev, kGesvd, kGeqp3, kGehrd, kSytrd, kGtsv, kOrmqr, kGees };

template <typename T>
char TypeLetter() {
  if constexpr (std::is_same_v<T, float>) return 's';
  if constexpr (std::is_same_v<T, double>) return 'd';
  if constexpr (std::is_same_v<T, c64>) return 'c';
  if constexpr (std::is_same_v<T, c128>) return 'z';
}

template <typename T>
const char* RoutineName(Routine r) {
  switch (r) {
    case Routine::kPotrf: return "potrf";
    case Routine::kGetrf: return "getrf";
    case Routine::kTrsm: return "trsm";
    case Routine::kGeqrf: return "geqrf";
    case Routine::kOrgqr: return kComplex<T> ? "ungqr" : "orgqr";
    case Routine::kGesdd: return "gesdd";
    case Routine::kEigh: return kComplex<T> ? "heevd" : "syevd";
    case Routine::kGeev: return "geev";
    case Routine::kGesvd: return "gesvd";
    case Routine::kGeqp3: return "geqp3";
    case Routine::kGehrd: return "gehrd";
    case Routine::kSytrd: return kComplex<T> ? "hetrd" : "sytrd";
    case Routine::kGtsv: return "gtsv";
    case Routine::kOrmqr: return kComplex<T> ? "unmqr" : "ormqr";
    case Routine::kGees: return "gees";
  }
  return "?";
}

// The LAPACK symbol (e.g. "spotrf_") and the custom-call target (e.g. "lapack_spotrf_ffi").
template <typename T>
std::string SymbolName(Routine r) {
  return std::string(1, TypeLetter<T>()) + RoutineName<T>(r) + "_";
}
template <typename T>
std::string TargetName(Routine r) {
  return "lapack_" + std::string(1, TypeLetter<T>()) + RoutineName<T>(r) + "_ffi";
}

template <Routine kRoutine, typename T>
XLA_FFI_Error* LapackHandlerImpl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  static const std::string target = TargetName<T>(kRoutine);
  const LapackTable* table = g_lapack.load(std::memory_order_acquire);
  if (table == nullptr) {
    return MakeFfiError(frame->api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                        target + ": LAPACK is not available: " + LapackProblem());
  }
  const Routines<T>& lapack = RoutinesOf<T>(*table);
  try {
    switch (kRoutine) {
      case Routine::kPotrf: Potrf<T>(frame, lapack); break;
      case Routine::kGetrf: Getrf<T>(frame, lapack); break;
      case Routine::kTrsm: Trsm<T>(frame, lapack); break;
      case Routine::kGeqrf: Geqrf<T>(frame, lapack); break;
      case Routine::kOrgqr: Orgqr<T>(frame, lapack); break;
      case Routine::kGesdd: Svd<true, T>(frame, lapack); break;
      case Routine::kEigh: Eigh<T>(frame, lapack); break;
      case Routine::kGeev: Geev<T>(frame, lapack); break;
      case Routine::kGesvd: Svd<false, T>(frame, lapack); break;
      case Routine::kGeqp3: Geqp3<T>(frame, lapack); break;
      case Routine::kGehrd: Gehrd<T>(frame, lapack); break;
      case Routine::kSytrd: Sytrd<T>(frame, lapack); break;
      case Routine::kGtsv: Gtsv<T>(frame, lapack); break;
      case Routine::kOrmqr: Ormqr<T>(frame, lapack); break;
      case Routine::kGees: Gees<T>(frame, lapack); break;
    }
  } catch (const CallError& e) {
    return MakeFfiError(frame->api, e.code, target + ": " + e.message);
  }
  return nullptr;
}

template <Routine kRoutine, typename T>
XLA_FFI_Error* LapackHandler(XLA_FFI_CallFrame* frame) {
  static const std::string target = TargetName<T>(kRoutine);
  return GuardHandler(frame, target.c_str(), &LapackHandlerImpl<kRoutine, T>);
}

struct HandlerEntry {
  std::string target;
  XLA_FFI_Handler* handler;
};

template <typename T>
void AddHandlers(std::vector<HandlerEntry>& out) {
  out.push_back({TargetName<T>(Routine::kPotrf), &LapackHandler<Routine::kPotrf, T>});
  out.push_back({TargetName<T>(Routine::kGetrf), &LapackHandler<Routine::kGetrf, T>});
  out.push_back({TargetName<T>(Routine::kTrsm), &LapackHandler<Routine::kTrsm, T>});
  out.push_back({TargetName<T>(Routine::kGeqrf), &LapackHandler<Routine::kGeqrf, T>});
  out.push_back({TargetName<T>(Routine::kOrgqr), &LapackHandler<Routine::kOrgqr, T>});
  out.push_back({TargetName<T>(Routine::kGesdd), &LapackHandler<Routine::kGesdd, T>});
  out.push_back({TargetName<T>(Routine::kEigh), &LapackHandler<Routine::kEigh, T>});
  out.push_back({TargetName<T>(Routine::kGeev), &LapackHandler<Routine::kGeev, T>});
  out.push_back({TargetName<T>(Routine::kGesvd), &LapackHandler<Routine::kGesvd, T>});
  out.push_back({TargetName<T>(Routine::kGeqp3), &LapackHandler<Routine::kGeqp3, T>});
  out.push_back({TargetName<T>(Routine::kGehrd), &LapackHandler<Routine::kGehrd, T>});
  out.push_back({TargetName<T>(Routine::kSytrd), &LapackHandler<Routine::kSytrd, T>});
  out.push_back({TargetName<T>(Routine::kGtsv), &LapackHandler<Routine::kGtsv, T>});
  out.push_back({TargetName<T>(Routine::kOrmqr), &LapackHandler<Routine::kOrmqr, T>});
  out.push_back({TargetName<T>(Routine::kGees), &LapackHandler<Routine::kGees, T>});
}

const std::vector<HandlerEntry>& AllHandlers() {
  static const std::vector<HandlerEntry> handlers = [] {
    std::vector<HandlerEntry> out;
    AddHandlers<float>(out);
    AddHandlers<double>(out);
    AddHandlers<c64>(out);
    AddHandlers<c128>(out);
    return out;
  }();
  return handlers;
}

template <typename T, typename Fn>
void Resolve(void* library, Routine r, Fn*& slot, std::string& missing) {
  std::string name = SymbolName<T>(r);
  slot = reinterpret_cast<Fn*>(dlsym(library, name.c_str()));
  if (slot == nullptr) missing += (missing.empty() ? "" : ", ") + name;
}

template <typename T>
void ResolveAll(void* library, Routines<T>& routines, std::string& missing) {
  Resolve<T>(library, Routine::kPotrf, routines.potrf, missing);
  Resolve<T>(library, Routine::kGetrf, routines.getrf, missing);
  Resolve<T>(library, Routine::kTrsm, routines.trsm, missing);
  Resolve<T>(library, Routine::kGeqrf, routines.geqrf, missing);
  Resolve<T>(library, Routine::kOrgqr, routines.orgqr, missing);
  Resolve<T>(library, Routine::kGesdd, routines.gesdd, missing);
  Resolve<T>(library, Routine::kEigh, routines.eigh, missing);
  Resolve<T>(library, Routine::kGeev, routines.geev, missing);
  Resolve<T>(library, Routine::kGesvd, routines.gesvd, missing);
  Resolve<T>(library, Routine::kGeqp3, routines.geqp3, missing);
  Resolve<T>(library, Routine::kGehrd, routines.gehrd, missing);
  Resolve<T>(library, Routine::kSytrd, routines.sytrd, missing);
  Resolve<T>(library, Routine::kGtsv, routines.gtsv, missing);
  Resolve<T>(library, Routine::kOrmqr, routines.ormqr, missing);
  Resolve<T>(library, Routine::kGees, routines.gees, missing);
}

}  // namespace

std::string RegisterLapackHandlers(Plugin* plugin) {
  for (const HandlerEntry& entry : AllHandlers()) {
    std::string problem = RegisterFfiHandler(plugin, entry.target.c_str(), entry.handler);
    if (!problem.empty()) return problem;
  }
  return std::string();
}

}  // namespace xla_actors

using xla_actors::g_lapack;
using xla_actors::g_lapack_mutex;
using xla_actors::g_lapack_problem;

extern "C" int XlaActors_LoadLapack(const char* path, char* message, size_t message_size) {
  try {
    std::lock_guard<std::mutex> lock(g_lapack_mutex);
    if (const xla_actors::LapackTable* loaded = g_lapack.load()) {
      xla_actors::WriteError(message, message_size, loaded->description);
      return 1;
    }
    if (path == nullptr || path[0] == 0) {
      xla_actors::WriteError(message, message_size, "no LAPACK library path given");
      return 0;
    }
    // RTLD_LOCAL keeps its symbols out of the global namespace (the plugin has its own copies of
    // some runtime libraries); never closed, because handlers may run at any time.
    void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* reason = dlerror();
      g_lapack_problem = std::string("dlopen(") + path + ") failed: " + (reason != nullptr ? reason : "unknown reason");
      xla_actors::WriteError(message, message_size, g_lapack_problem);
      return 0;
    }
    auto table = std::make_unique<xla_actors::LapackTable>();
    std::string missing;
    xla_actors::ResolveAll(library, table->s, missing);
    xla_actors::ResolveAll(library, table->d, missing);
    xla_actors::ResolveAll(library, table->c, missing);
    xla_actors::ResolveAll(library, table->z, missing);
    if (!missing.empty()) {
      g_lapack_problem = std::string(path) + " lacks the LAPACK symbols " + missing;
      xla_actors::WriteError(message, message_size, g_lapack_problem);
      return 0;
    }
    using GetConfig = const char*();
    auto* get_config = reinterpret_cast<GetConfig*>(dlsym(library, "openblas_get_config"));
    const char* config = get_config != nullptr ? get_config() : nullptr;
    table->description = std::string(config != nullptr ? config : "LAPACK") + " from " + path;
    xla_actors::WriteError(message, message_size, table->description);
    g_lapack.store(table.release(), std::memory_order_release);
    return 1;
  } catch (const std::exception& e) {
    xla_actors::WriteError(message, message_size, std::string("loading LAPACK failed: ") + e.what());
    return 0;
  } catch (...) {
    xla_actors::WriteError(message, message_size, "loading LAPACK failed with an unknown C++ exception");
    return 0;
  }
}

extern "C" void XlaActors_SetLapackUnavailable(const char* reason) {
  try {
    std::lock_guard<std::mutex> lock(g_lapack_mutex);
    if (g_lapack.load() == nullptr && reason != nullptr && reason[0] != 0) g_lapack_problem = reason;
  } catch (...) {
    // Keeping the previous reason is all that can be done.
  }
}
