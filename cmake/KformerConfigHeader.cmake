# Generates kformer_config.hpp (version, enabled options) and kformer_version.hpp (git hash) into
# the build tree, and an interface target kformer_config that puts them on the include path.
find_package(Git QUIET)
set(KFORMER_GIT_HASH "unknown")
if(GIT_FOUND AND EXISTS ${CMAKE_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE KFORMER_GIT_HASH OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT KFORMER_GIT_HASH)
    set(KFORMER_GIT_HASH "unknown")
  endif()
endif()
foreach(_opt ENABLE_MPI ENABLE_NCCL ENABLE_BLAS HAVE_CBLAS HAVE_CUBLAS HAVE_DNNL HAVE_CUDNN)
  if(KFORMER_${_opt})
    set(KFORMER_${_opt}_01 1)
  else()
    set(KFORMER_${_opt}_01 0)
  endif()
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/cmake/kformer_config.hpp.in
               ${CMAKE_BINARY_DIR}/generated/kformer_config.hpp @ONLY)
# The hash apart: configure_file rewrites a file only when its text changes, so a commit (and the
# reconfigure a CMake edit brings) recompiles the few files that print the hash, not the kernels.
configure_file(${CMAKE_SOURCE_DIR}/cmake/kformer_version.hpp.in
               ${CMAKE_BINARY_DIR}/generated/kformer_version.hpp @ONLY)
add_library(kformer_config INTERFACE)
target_include_directories(kformer_config INTERFACE ${CMAKE_BINARY_DIR}/generated)
