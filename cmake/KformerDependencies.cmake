# Finds what kformer builds on. Kokkos is required; MPI, BLAS and NCCL are optional and each
# sets its KFORMER_ENABLE_* option and an imported target the libraries link.

# find_package prefers the Kokkos_DIR cached by an earlier configure to Kokkos_ROOT, so a build
# directory configured again with another Kokkos_ROOT (Kokkos_ROOT=... scripts/test.sh) would
# quietly keep the old Kokkos: forget Kokkos_DIR when Kokkos_ROOT changed.
if(DEFINED KFORMER_KOKKOS_ROOT_USED AND NOT "${Kokkos_ROOT}" STREQUAL "${KFORMER_KOKKOS_ROOT_USED}")
  unset(Kokkos_DIR CACHE)
endif()
set(KFORMER_KOKKOS_ROOT_USED "${Kokkos_ROOT}" CACHE INTERNAL "Kokkos_ROOT of the last configure")
# Asking for 3.4 accepts 3.4.x (SameMajorVersion) and a standalone 4.x (AnyNewerVersion).
find_package(Kokkos 3.4 REQUIRED)
# Debian's binary Kokkos points its target at a missing include directory: repair it.
get_target_property(_kk_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
if(_kk_inc AND Kokkos_INCLUDE_DIRS)
  foreach(_d IN LISTS _kk_inc)
    if(NOT _d MATCHES "\\$<" AND NOT EXISTS "${_d}")
      set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${Kokkos_INCLUDE_DIRS}")
      break()
    endif()
  endforeach()
endif()
kokkos_check(DEVICES CUDA RETURN_VALUE KFORMER_KOKKOS_HAS_CUDA)
kokkos_check(DEVICES OPENMP RETURN_VALUE KFORMER_KOKKOS_HAS_OPENMP)
kokkos_check(DEVICES SERIAL RETURN_VALUE KFORMER_KOKKOS_HAS_SERIAL)
set(KFORMER_KOKKOS_DEVICES "")
foreach(_dev SERIAL OPENMP CUDA)
  if(KFORMER_KOKKOS_HAS_${_dev})
    list(APPEND KFORMER_KOKKOS_DEVICES ${_dev})
  endif()
endforeach()
string(REPLACE ";" "," KFORMER_KOKKOS_DEVICES "${KFORMER_KOKKOS_DEVICES}")

# --- MPI: ON when found, unless the user says otherwise --------------------------------------
find_package(MPI COMPONENTS CXX QUIET)
option(KFORMER_ENABLE_MPI "Build the MPI communicator backend" ${MPI_CXX_FOUND})
if(KFORMER_ENABLE_MPI AND NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "KFORMER_ENABLE_MPI=ON but no MPI was found: load an MPI module or set MPI_HOME")
endif()

# --- CUDA libraries (cuBLAS, NCCL) only make sense with Kokkos' CUDA backend ------------------
if(KFORMER_KOKKOS_HAS_CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
option(KFORMER_ENABLE_NCCL "Build the NCCL communicator backend (needs Kokkos with CUDA)" ${KFORMER_KOKKOS_HAS_CUDA})
if(KFORMER_ENABLE_NCCL)
  if(NOT KFORMER_KOKKOS_HAS_CUDA)
    message(FATAL_ERROR "KFORMER_ENABLE_NCCL=ON needs a Kokkos built with CUDA (this Kokkos has ${KFORMER_KOKKOS_DEVICES}); "
                        "use the 'cuda' preset or -DKFORMER_ENABLE_NCCL=OFF")
  endif()
  if(NOT KFORMER_ENABLE_MPI)
    message(FATAL_ERROR "KFORMER_ENABLE_NCCL=ON needs MPI to broadcast the NCCL unique id: enable MPI")
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "KFORMER_ENABLE_NCCL=ON but nccl.h/libnccl were not found: set NCCL_ROOT")
  endif()
  add_library(kformer::nccl INTERFACE IMPORTED)
  target_include_directories(kformer::nccl INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(kformer::nccl INTERFACE ${NCCL_LIBRARY})
endif()

# --- cuDNN's flash attention (kernels.attention=vendor): cuDNN 9 and the header-only cudnn-frontend
# (scripts/setup.sh --cuda unpacks it into .deps/). Found-or-not: without either the build goes on
# and kernels.attention=vendor says what is missing.
option(KFORMER_ENABLE_CUDNN "cuDNN attention (kernels.attention=vendor) where cuDNN 9 and cudnn-frontend are found"
       ${KFORMER_KOKKOS_HAS_CUDA})
set(KFORMER_CUDNN_FRONTEND_INCLUDE "${CMAKE_SOURCE_DIR}/.deps/cudnn-frontend-1.23.0/include"
    CACHE PATH "include/ of cudnn-frontend (holds cudnn_frontend.h)")
set(KFORMER_HAVE_CUDNN OFF)
if(KFORMER_ENABLE_CUDNN AND NOT KFORMER_KOKKOS_HAS_CUDA)
  message(STATUS "KFORMER_ENABLE_CUDNN: this Kokkos has no CUDA (${KFORMER_KOKKOS_DEVICES}): no cuDNN attention")
elseif(KFORMER_ENABLE_CUDNN)
  find_path(CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  set(KFORMER_CUDNN_VERSION "")
  if(CUDNN_INCLUDE_DIR)
    file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_v REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
    string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*CUDNN_MINOR ([0-9]+).*CUDNN_PATCHLEVEL ([0-9]+).*" "\\1.\\2.\\3"
           KFORMER_CUDNN_VERSION "${_cudnn_v}")
  endif()
  if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
    message(STATUS "cuDNN not found (cudnn_version.h, libcudnn; set CUDNN_ROOT): kernels.attention=vendor not built")
  elseif(KFORMER_CUDNN_VERSION VERSION_LESS 9)
    message(STATUS "cuDNN ${KFORMER_CUDNN_VERSION} in ${CUDNN_INCLUDE_DIR} is older than 9: "
                   "kernels.attention=vendor not built")
  elseif(NOT EXISTS "${KFORMER_CUDNN_FRONTEND_INCLUDE}/cudnn_frontend.h")
    message(STATUS "cudnn-frontend not found in ${KFORMER_CUDNN_FRONTEND_INCLUDE} (scripts/setup.sh --cuda unpacks it; "
                   "or set KFORMER_CUDNN_FRONTEND_INCLUDE): kernels.attention=vendor not built")
  else()
    add_library(kformer::cudnn INTERFACE IMPORTED)
    target_include_directories(kformer::cudnn INTERFACE ${KFORMER_CUDNN_FRONTEND_INCLUDE} ${CUDNN_INCLUDE_DIR})
    # libcudnn and the NVRTC the frontend calls are opened at run time (dlopen: the frontend's
    # dynamic loading), not linked: a machine without them runs every other kernel.
    target_link_libraries(kformer::cudnn INTERFACE ${CMAKE_DL_LIBS})
    set(KFORMER_HAVE_CUDNN ON)
    message(STATUS "cuDNN ${KFORMER_CUDNN_VERSION} (${CUDNN_LIBRARY}) with cudnn-frontend in "
                   "${KFORMER_CUDNN_FRONTEND_INCLUDE}")
  endif()
endif()

# --- Vendor GEMM: cuBLAS under CUDA, CBLAS (OpenBLAS by default) on the host ------------------
set(KFORMER_BLAS_KIND none)
set(KFORMER_HAVE_CBLAS OFF)
set(KFORMER_HAVE_CUBLAS OFF)
if(KFORMER_ENABLE_BLAS)
  add_library(kformer::blas INTERFACE IMPORTED)
  if(KFORMER_KOKKOS_HAS_CUDA)
    target_link_libraries(kformer::blas INTERFACE CUDA::cublas CUDA::cublasLt)
    set(KFORMER_HAVE_CUBLAS ON)
    set(KFORMER_BLAS_KIND cuBLAS)
  endif()
  # The host BLAS serves the host backends (and the reference in tests) in every build.
  if(NOT DEFINED BLA_VENDOR)
    set(BLA_VENDOR OpenBLAS)
  endif()
  find_package(BLAS QUIET)
  if(NOT BLAS_FOUND AND BLA_VENDOR STREQUAL "OpenBLAS")
    unset(BLA_VENDOR)
    find_package(BLAS QUIET)
  endif()
  # With Kokkos' OpenMP backend, an OpenBLAS built on the same OpenMP runtime shares its thread
  # pool; the pthread build (Debian's default alternative) spins its own threads against Kokkos'
  # (measured: GPT-2-124M step 2.5-3.2 s with pthread, 1.8-2.0 s with openmp, 2 threads).
  set(KFORMER_BLAS_LIBRARY "")
  if(KFORMER_KOKKOS_HAS_OPENMP AND BLAS_FOUND AND "${BLAS_LIBRARIES}" MATCHES "openblas")
    find_library(KFORMER_OPENBLAS_OPENMP openblas PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp
                 NO_DEFAULT_PATH)
    find_path(KFORMER_OPENBLAS_OPENMP_INCLUDE cblas.h PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp
              NO_DEFAULT_PATH)
    if(KFORMER_OPENBLAS_OPENMP AND KFORMER_OPENBLAS_OPENMP_INCLUDE)
      set(KFORMER_BLAS_LIBRARY ${KFORMER_OPENBLAS_OPENMP})
      set(CBLAS_INCLUDE_DIR ${KFORMER_OPENBLAS_OPENMP_INCLUDE} CACHE PATH "cblas.h" FORCE)
    endif()
  endif()
  find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas include/openblas)
  if(BLAS_FOUND AND CBLAS_INCLUDE_DIR)
    if(KFORMER_BLAS_LIBRARY)
      target_link_libraries(kformer::blas INTERFACE ${KFORMER_BLAS_LIBRARY})
    else()
      target_link_libraries(kformer::blas INTERFACE BLAS::BLAS)
    endif()
    target_include_directories(kformer::blas INTERFACE ${CBLAS_INCLUDE_DIR})
    set(KFORMER_HAVE_CBLAS ON)
    if(KFORMER_BLAS_KIND STREQUAL "none" AND KFORMER_BLAS_LIBRARY)
      set(KFORMER_BLAS_KIND "CBLAS (OpenBLAS, OpenMP threads)")
    elseif(KFORMER_BLAS_KIND STREQUAL "none")
      set(KFORMER_BLAS_KIND CBLAS)
    else()
      set(KFORMER_BLAS_KIND "${KFORMER_BLAS_KIND}+CBLAS")
    endif()
  elseif(NOT KFORMER_HAVE_CUBLAS)
    message(FATAL_ERROR "KFORMER_ENABLE_BLAS=ON but no CBLAS (library + cblas.h) was found: "
                        "install libopenblas-dev, set BLA_VENDOR, or -DKFORMER_ENABLE_BLAS=OFF")
  endif()
endif()

# --- bf16 vendor GEMM on the host: oneDNN's matmul (Debian's libdnnl-dev; OpenBLAS 0.3.21 has no
# sbgemm). Optional: without it kernels.gemm=vendor runs bf16 as cblas_sgemm on widened copies.
# Off by default under CUDA, where the GPU's bf16 GEMM is cublasGemmEx.
set(_kformer_dnnl_default ON)
if(KFORMER_KOKKOS_HAS_CUDA)
  set(_kformer_dnnl_default OFF)
endif()
option(KFORMER_ENABLE_DNNL "bf16 vendor GEMM on the host through oneDNN (libdnnl-dev), where found" ${_kformer_dnnl_default})
set(KFORMER_HAVE_DNNL OFF)
if(KFORMER_ENABLE_DNNL)
  find_package(dnnl CONFIG QUIET)
  if(TARGET DNNL::dnnl)
    set(KFORMER_HAVE_DNNL ON)
  else()
    message(STATUS "oneDNN not found (apt-get install libdnnl-dev): the host bf16 vendor GEMM widens to fp32 "
                   "and calls cblas_sgemm")
  endif()
endif()

# --- Third-party libraries from Debian (or the site) -----------------------------------------
find_package(yaml-cpp REQUIRED)
if(TARGET yaml-cpp::yaml-cpp)
  set(KFORMER_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(KFORMER_YAML_TARGET yaml-cpp)   # Debian 12's yaml-cpp 0.7 exports the plain name
endif()
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
