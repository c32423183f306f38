// Small helpers shared by every Communicator backend.
#include "communicator.hpp"

#include <cstdint>

namespace kformer::comm {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return sizeof(float);
    case DType::f64: return sizeof(double);
    case DType::i32: return sizeof(std::int32_t);
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
  }
  return "?";
}

}  // namespace kformer::comm
