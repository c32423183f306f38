// The step's work list, seen from the kernels. Every kernel entry point the model calls opens a
// Call first. Run normally, the Call is a Kokkos profiling region named "kformer::kernel::NAME"
// (one check when no tool is loaded), so Kokkos Tools see each call and the kernels it launches
// inside it. Under a Describing scope the Call hands the sink a KernelCall (the entry, its
// family, element type, shape, bytes and FLOPs, read off the views it was given) and the entry
// returns without launching anything: the model's own code, run with views that hold no memory
// (platform/device.hpp) and a communicator that only records (comm/described_comm.hpp), then
// yields the list of what it does, in its order, for `predict` to cost.
#pragma once

#include <Kokkos_Core.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "bf16.hpp"
#include "kernel_choice.hpp"

namespace kformer::kernels {

enum class Family {
  gemm, attention, norm, activation, residual, rope, embedding, cross_entropy, convert, copy,
  optimizer,  // AdamW's update (adamw.hpp)
  reduction   // the gradient norm's sum of squares (sum_of_squares.hpp)
};

inline const char* family_name(Family f) {
  constexpr const char* names[] = {"gemm",  "attention", "norm",          "activation", "residual", "rope",
                                   "embedding", "cross_entropy", "convert", "copy", "optimizer", "reduction"};
  return names[static_cast<int>(f)];
}

// A buffer a kernel keeps from one call to the next (kept_buffer.hpp), as large as its largest
// call needs: the bytes this call needs of it. One buffer per label, over every call.
struct KeptBuffer {
  const char* label = nullptr;
  double bytes = 0;
};

// gemm shape: {m, n, k, products}: y(m,n) = x(m,k) w(n,k)^T; products, backward: 1 dx, 2 dW, 3 both.
// attention shape: {b, t, h, kv, hd, fused}.
struct KernelCall {
  Family family = Family::copy;
  bool bf16 = false;      // the main operand's element type (a GEMM's inputs, attention's qkv)
  bool backward = false;
  double bytes = 0;       // the operands read and written
  double flops = 0;       // GEMMs and attention
  std::array<std::int64_t, 6> shape{};
  int out_bytes = 0;      // a forward GEMM's output element size (4 fp32, 2 bf16); 0 elsewhere
  const char* name = "";  // the entry point, as its region names it: "matmul_forward"
  std::array<KeptBuffer, 2> kept{};  // what it keeps between calls (a GEMM's packing workspace)
};

class CallSink {
 public:
  virtual ~CallSink() = default;
  virtual void kernel(const KernelCall& call) = 0;
  // The model's phase regions (kformer::forward, kformer::head_backward, ...; ProfilingRegion).
  virtual void region(const char* /*name*/, bool /*begin*/) {}
  // A model event that is neither a kernel nor a communication call ("require": a ZeRO-3 unit is
  // about to be read).
  virtual void mark(const char* /*what*/, int /*layer*/) {}
  // A buffer kept between calls (KeptBuffer), or made once by a kernel's set-up (SumOfSquares'
  // tables), of `bytes` now.
  virtual void kept(const char* /*label*/, double /*bytes*/) {}
};

inline CallSink*& call_sink_slot() {
  static thread_local CallSink* sink = nullptr;
  return sink;
}
// The sink kernels describe their calls to, or nullptr when they run.
inline CallSink* described() { return call_sink_slot(); }

// Kernels describe their calls to `sink` instead of running, for the scope's lifetime.
class Describing {
 public:
  explicit Describing(CallSink& sink) : previous_(call_sink_slot()) { call_sink_slot() = &sink; }
  ~Describing() { call_sink_slot() = previous_; }
  Describing(const Describing&) = delete;
  Describing& operator=(const Describing&) = delete;

 private:
  CallSink* previous_;
};

// The code path descriptions follow (kernel_choice.hpp's CodePath); run normally, every kernel
// takes its own build's path whatever this says.
inline CodePath& code_path_slot() {
  static thread_local CodePath path = CodePath::this_build;
  return path;
}
// Whether the step is being described as kformer's CUDA build runs it: asked for, or this build is
// that build.
inline bool described_as_cuda() {
  if (!described()) return false;
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>::value) return true;
#endif
  return code_path_slot() == CodePath::cuda;
}

// Descriptions inside the scope follow `path`.
class DescribingAs {
 public:
  explicit DescribingAs(CodePath path) : previous_(code_path_slot()) { code_path_slot() = path; }
  ~DescribingAs() { code_path_slot() = previous_; }
  DescribingAs(const DescribingAs&) = delete;
  DescribingAs& operator=(const DescribingAs&) = delete;

 private:
  CodePath previous_;
};

// A run's timer of its kernel calls (output.kernel_times, platform/kernel_times.hpp): told when
// each entry point begins and ends, run normally, with the entry's name and family.
class CallTimer {
 public:
  virtual ~CallTimer() = default;
  virtual void begin(const char* name, Family family) = 0;
  virtual void end() = 0;
};

inline CallTimer*& call_timer_slot() {
  static thread_local CallTimer* timer = nullptr;
  return timer;
}

// A kernel entry's first line: `const Call call("name", [&] { return KernelCall{...}; });
// if (call.described()) return;`. The record is built only when it is described, or timed (for
// its family).
class Call {
 public:
  template <class Make>
  Call(const char* name, Make&& make) {
    if (CallSink* sink = call_sink_slot()) {
      KernelCall c = make();
      c.name = name;
      sink->kernel(c);
      for (const KeptBuffer& k : c.kept)
        if (k.label) sink->kept(k.label, k.bytes);
      described_ = true;
      return;
    }
    if (Kokkos::Profiling::profileLibraryLoaded()) {
      Kokkos::Profiling::pushRegion(std::string("kformer::kernel::") + name);
      pushed_ = true;
    }
    if (CallTimer* t = call_timer_slot()) {
      t->begin(name, make().family);
      timer_ = t;
    }
  }
  ~Call() {
    if (timer_) timer_->end();
    if (pushed_) Kokkos::Profiling::popRegion();
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  bool described() const { return described_; }

 private:
  bool described_ = false, pushed_ = false;
  CallTimer* timer_ = nullptr;
};

// A kernel's set-up buffers, described: true (and the sink told of `bytes` under `label`) where
// they must not be allocated because the step is being described.
inline bool describe_setup_buffer(const char* label, double bytes) {
  CallSink* sink = call_sink_slot();
  if (sink) sink->kept(label, bytes);
  return sink != nullptr;
}

// The bytes of views as allocated (an empty view adds nothing).
template <class... V>
double bytes_of(const V&... v) {
  return (0.0 + ... + (double(v.span()) * double(sizeof(typename V::value_type))));
}
template <class V>
constexpr bool holds_bf16 = std::is_same<std::remove_const_t<typename V::value_type>, bf16>::value;

// A GEMM's record: y(m,n) = x(m,k) w(n,k)^T, forward or the backward's products (1 dx, 2 dW).
inline KernelCall gemm_call(bool bf16, bool backward, std::int64_t m, std::int64_t n, std::int64_t k, int products,
                            double bytes) {
  const int count = backward ? (products & 1) + (products >> 1 & 1) : 1;
  return {Family::gemm, bf16, backward, bytes, 2.0 * double(m) * double(n) * double(k) * count,
          {m, n, k, backward ? products : 0, 0, 0}};
}

}  // namespace kformer::kernels
