# kformer_add_test(NAME n SOURCES s... [LIBS l...] [LABELS x...] [RANKS 1 2 4] [ENV K=V...])
#
# Builds one GoogleTest executable (bin/test_<n>) with kformer's test main (MPI + Kokkos set up
# once per process). Without RANKS it runs as one process, labelled `unit`. With RANKS it runs
# under mpiexec once per count (test names <n>_np<N>), labelled `mpi`, oversubscribed so that 4
# ranks fit on a 2-core machine, one OpenMP thread per rank.
set(KFORMER_MPIEXEC_EXTRA "")
if(KFORMER_ENABLE_MPI)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpiexec_version ERROR_QUIET)
  if(_mpiexec_version MATCHES "Open MPI|OpenRTE")
    list(APPEND KFORMER_MPIEXEC_EXTRA --oversubscribe)
    execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_uid STREQUAL "0")
      list(APPEND KFORMER_MPIEXEC_EXTRA --allow-run-as-root)
    endif()
  endif()
endif()

function(kformer_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS;RANKS;ENV" ${ARGN})
  set(exe test_${T_NAME})
  add_executable(${exe} ${T_SOURCES})
  target_link_libraries(${exe} PRIVATE kformer_test_main ${T_LIBS})
  if(NOT T_RANKS)
    add_test(NAME ${T_NAME} COMMAND ${exe})
    set_tests_properties(${T_NAME} PROPERTIES LABELS "unit;${T_LABELS}" ENVIRONMENT "${T_ENV}")
    return()
  endif()
  foreach(n IN LISTS T_RANKS)
    if(NOT KFORMER_ENABLE_MPI AND NOT n EQUAL 1)
      continue()
    endif()
    set(name ${T_NAME}_np${n})
    if(KFORMER_ENABLE_MPI)
      add_test(NAME ${name} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n}
               ${KFORMER_MPIEXEC_EXTRA} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${exe}> ${MPIEXEC_POSTFLAGS})
    else()
      add_test(NAME ${name} COMMAND ${exe})
    endif()
    set_tests_properties(${name} PROPERTIES LABELS "mpi;${T_LABELS}"
                         ENVIRONMENT "OMP_NUM_THREADS=1;OMP_PROC_BIND=false;${T_ENV}")
    if(n GREATER 1)  # one rank: the whole machine, as kformer_test_defaults gives
      set_tests_properties(${name} PROPERTIES PROCESSORS ${n})
    endif()
  endforeach()
endfunction()

# kformer_strict_tests(): every test of the calling directory runs under NCCL's rules (comm.strict,
# comm/strict_comm.hpp), so the host backends refuse what a GPU job would fail on. kformer and the
# test main take comm.strict's default from KFORMER_COMM_STRICT; a test that needs the loose rules
# says comm.strict=false itself. Called last in each tests/ directory.
function(kformer_strict_tests)
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _tests)
    set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT KFORMER_COMM_STRICT=true)
  endforeach()
endfunction()

# kformer_test_defaults(): what every test of the calling directory gets. Open MPI starts without
# probing what a one-node test cannot use: hwloc's GL, OpenCL, PCI and XML plugins (each process
# would load X11, OpenCL and ICU) and the point-to-point components other than ob1 over self and
# vader (shared memory), which are the ones Open MPI selects on one node anyway; a third of the CPU
# time of each 4-rank launch (1.12 s -> 0.79 s for `mpirun -n 4 kformer --version`). Other MPIs
# and kformer itself do not read these variables. And under `ctest -j2` (scripts/test.sh) a test
# that did not say how many cores it takes takes both of a 2-core machine (PROCESSORS 2: it runs
# alone, like the multi-rank tests, whose PROCESSORS ctest caps at 2); only the tests declared with
# kformer_one_core_tests share the machine. Each test keeps Open MPI's session directories in a
# folder of its own (orte_tmpdir_base, which Open MPI creates): under `ctest -j2` a test's mpiexec
# and its neighbour's singleton would otherwise share /tmp's ompi.HOST.UID, which the first to end
# removes under the other ("orte_session_dir failed", seen in a fresh-clone run). Called last in
# each tests/ directory.
function(kformer_test_defaults)
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _tests)
    set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT
                 HWLOC_PLUGINS_BLACKLIST=hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml OMPI_MCA_pml=ob1
                 OMPI_MCA_btl=self,vader OMPI_MCA_orte_tmpdir_base=${CMAKE_BINARY_DIR}/ompi-session/${_t})
    get_test_property(${_t} PROCESSORS _cores)
    if(NOT _cores)
      set_tests_properties(${_t} PROPERTIES PROCESSORS 2)
    endif()
  endforeach()
endfunction()

# kformer_one_core_tests(name...): tests that may run beside another one under `ctest -j2`: one
# process of one thread (OMP_NUM_THREADS=1 is added), and nothing timed, so that a neighbour can
# slow them down but not change what they check.
function(kformer_one_core_tests)
  foreach(_t IN LISTS ARGN)
    set_tests_properties(${_t} PROPERTIES PROCESSORS 1)
    set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT OMP_NUM_THREADS=1)
  endforeach()
endfunction()
