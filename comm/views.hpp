// Kokkos::View forms of the Communicator calls: the element type picks the DType, the extents the
// count, and the View is checked to be one contiguous row-major block before its pointer reaches
// the type-erased core (a strided or padded View would silently send the wrong elements).
// Views live in the backend's memory space: host or device for self and mpi, device for nccl
// (the backend refuses others at run time). In-place forms: pass the same View twice to
// allreduce; for reduce_scatter/allgather pass this rank's slot as a subview of the big View.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "communicator.hpp"

namespace kformer::comm {

// float, double, int32_t and bfloat16 have one: other element types do not compile. comm knows no
// kernels/, so a bfloat16 is recognised by its marker: a 2-byte type with `static constexpr bool
// is_bfloat16 = true` (kernels::bf16).
template <class T, class = void>
struct is_bfloat16 : std::false_type {};
template <class T>
struct is_bfloat16<T, std::enable_if_t<T::is_bfloat16>> : std::integral_constant<bool, sizeof(T) == 2> {};

template <class T, class = void>
struct dtype_of;
template <class T>
struct dtype_of<T, std::enable_if_t<is_bfloat16<T>::value>> {
  static constexpr DType value = DType::bf16;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DType value = DType::i32;
};

namespace detail {

template <class V>
constexpr DType view_dtype() {
  using T = typename V::non_const_value_type;
  static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value ||
                    std::is_same<T, std::int32_t>::value || is_bfloat16<T>::value,
                "kformer::comm takes Views of float, double, int32_t or bfloat16");
  return dtype_of<T>::value;
}

template <class V>
void check_writable() {
  static_assert(!std::is_const<typename V::value_type>::value,
                "kformer::comm: a receive buffer must be a View of non-const elements");
}

template <class A, class B>
void check_same_type() {
  static_assert(std::is_same<typename A::non_const_value_type, typename B::non_const_value_type>::value,
                "kformer::comm: send and receive Views must have the same element type");
}

// Row-major without gaps: walking the extents from the last, each stride is the product of the
// extents after it (extents of 1 have no stride that matters).
template <class V>
void check_flat(const V& v, const char* call, const char* role) {
  bool ok = v.size() == 0 || v.span_is_contiguous();
  std::size_t expected = 1;
  for (int r = static_cast<int>(V::rank) - 1; ok && r >= 0; --r) {
    if (v.extent(r) > 1 && static_cast<std::size_t>(v.stride(r)) != expected) ok = false;
    expected *= v.extent(r);
  }
  if (!ok)
    throw std::invalid_argument(std::string("comm ") + call + ": the " + role + " View '" + v.label() +
                                "' is not one contiguous row-major block (LayoutRight, no padding, no "
                                "strided subview): deep_copy it into a contiguous LayoutRight View first");
}

inline void check_size(bool ok, const char* call, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string("comm ") + call + ": " + what);
}

inline std::string sizes(std::size_t a, std::size_t b) {
  return std::to_string(a) + " and " + std::to_string(b);
}

}  // namespace detail

// --- allreduce -------------------------------------------------------------------------------
namespace detail {
template <class S, class R>
void check_allreduce(const S& send, const R& recv) {
  check_same_type<S, R>();
  check_writable<R>();
  check_flat(send, "allreduce", "send");
  check_flat(recv, "allreduce", "recv");
  check_size(send.size() == recv.size(), "allreduce",
             "send and recv hold " + sizes(send.size(), recv.size()) + " elements: give both the same size");
}
}  // namespace detail
template <class S, class R>
void allreduce(Communicator& c, const S& send, const R& recv, ReduceOp op, CallSite at = CallSite::here()) {
  detail::check_allreduce(send, recv);
  c.allreduce(send.data(), recv.data(), send.size(), detail::view_dtype<S>(), op, at);
}
template <class S, class R>
Request iallreduce(Communicator& c, const S& send, const R& recv, ReduceOp op, CallSite at = CallSite::here()) {
  detail::check_allreduce(send, recv);
  return c.iallreduce(send.data(), recv.data(), send.size(), detail::view_dtype<S>(), op, at);
}
template <class V>
void allreduce(Communicator& c, const V& inout, ReduceOp op, CallSite at = CallSite::here()) {
  allreduce(c, inout, inout, op, at);
}
template <class V>
Request iallreduce(Communicator& c, const V& inout, ReduceOp op, CallSite at = CallSite::here()) {
  return iallreduce(c, inout, inout, op, at);
}

// --- reduce_scatter (send holds size() blocks of recv's size) and allgather (the reverse) ---
namespace detail {
template <class S, class R>
void check_blocks(const Communicator& c, const S& send, const R& recv, const char* call, bool send_whole) {
  check_same_type<S, R>();
  check_writable<R>();
  check_flat(send, call, "send");
  check_flat(recv, call, "recv");
  const std::size_t whole = send_whole ? send.size() : recv.size(), part = send_whole ? recv.size() : send.size();
  check_size(whole == part * c.size(), call,
             "send holds " + std::to_string(send.size()) + " elements, recv " + std::to_string(recv.size()) +
                 ", on " + std::to_string(c.size()) + " ranks: " +
                 (send_whole ? "send must hold recv.size() * ranks" : "recv must hold send.size() * ranks"));
}
}  // namespace detail
template <class S, class R>
void reduce_scatter(Communicator& c, const S& send, const R& recv, ReduceOp op, CallSite at = CallSite::here()) {
  detail::check_blocks(c, send, recv, "reduce_scatter", true);
  c.reduce_scatter(send.data(), recv.data(), recv.size(), detail::view_dtype<S>(), op, at);
}
template <class S, class R>
Request ireduce_scatter(Communicator& c, const S& send, const R& recv, ReduceOp op, CallSite at = CallSite::here()) {
  detail::check_blocks(c, send, recv, "reduce_scatter", true);
  return c.ireduce_scatter(send.data(), recv.data(), recv.size(), detail::view_dtype<S>(), op, at);
}
template <class S, class R>
void allgather(Communicator& c, const S& send, const R& recv, CallSite at = CallSite::here()) {
  detail::check_blocks(c, send, recv, "allgather", false);
  c.allgather(send.data(), recv.data(), send.size(), detail::view_dtype<S>(), at);
}
template <class S, class R>
Request iallgather(Communicator& c, const S& send, const R& recv, CallSite at = CallSite::here()) {
  detail::check_blocks(c, send, recv, "allgather", false);
  return c.iallgather(send.data(), recv.data(), send.size(), detail::view_dtype<S>(), at);
}

// --- broadcast -------------------------------------------------------------------------------
template <class V>
void broadcast(Communicator& c, const V& buf, int root, CallSite at = CallSite::here()) {
  detail::check_writable<V>();
  detail::check_flat(buf, "broadcast", "buffer");
  c.broadcast(buf.data(), buf.size(), detail::view_dtype<V>(), root, at);
}
template <class V>
Request ibroadcast(Communicator& c, const V& buf, int root, CallSite at = CallSite::here()) {
  detail::check_writable<V>();
  detail::check_flat(buf, "broadcast", "buffer");
  return c.ibroadcast(buf.data(), buf.size(), detail::view_dtype<V>(), root, at);
}

// --- point to point (the receive must have the sender's size); Ops for Communicator::group ----
template <class V>
Op send_op(const V& buf, int peer, CallSite at = CallSite::here()) {
  detail::check_flat(buf, "send", "send");
  return Op::send_to(buf.data(), buf.size(), detail::view_dtype<V>(), peer, at);
}
template <class V>
Op recv_op(const V& buf, int peer, CallSite at = CallSite::here()) {
  detail::check_writable<V>();
  detail::check_flat(buf, "recv", "recv");
  return Op::recv_from(buf.data(), buf.size(), detail::view_dtype<V>(), peer, at);
}
template <class V>
void send(Communicator& c, const V& buf, int peer, CallSite at = CallSite::here()) {
  const Op op = send_op(buf, peer, at);
  c.send(op.send, op.count, op.type, peer, at);
}
template <class V>
Request isend(Communicator& c, const V& buf, int peer, CallSite at = CallSite::here()) {
  const Op op = send_op(buf, peer, at);
  return c.isend(op.send, op.count, op.type, peer, at);
}
template <class V>
void recv(Communicator& c, const V& buf, int peer, CallSite at = CallSite::here()) {
  const Op op = recv_op(buf, peer, at);
  c.recv(op.recv, op.count, op.type, peer, at);
}
template <class V>
Request irecv(Communicator& c, const V& buf, int peer, CallSite at = CallSite::here()) {
  const Op op = recv_op(buf, peer, at);
  return c.irecv(op.recv, op.count, op.type, peer, at);
}

}  // namespace kformer::comm
