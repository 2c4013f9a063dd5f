# The Python module strux._dist and the MPI tests of the distributed operators (after the
# library's own Python module and tests: nanobind and testing are set up there).
if(STRUX_HAVE_MPI)
  if(STRUX_BUILD_PYTHON)
    nanobind_add_module(_dist NB_STATIC src/dist/python/module.cpp)
    target_include_directories(_dist PRIVATE src python/src)
    target_link_libraries(_dist PRIVATE strux_dist)
    if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
      target_link_options(_dist PRIVATE -Wl,--exclude-libs,ALL)
    endif()
    if(STRUX_NCCL_RPATH)
      set_target_properties(_dist PROPERTIES BUILD_RPATH "${STRUX_NCCL_RPATH}" INSTALL_RPATH "${STRUX_NCCL_RPATH}")
    endif()
    if(SKBUILD)
      install(TARGETS _dist LIBRARY DESTINATION strux)
    else()
      set_target_properties(_dist PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_SOURCE_DIR}/python/strux)
    endif()
  endif()

  # The MPI test program needs no GoogleTest: STRUX_BUILD_MPI_TESTS builds it alone (GPU machines).
  option(STRUX_BUILD_MPI_TESTS "Build the MPI test program of the distributed operators" ${STRUX_BUILD_TESTS})
  if(STRUX_BUILD_MPI_TESTS)
    enable_testing()
    add_executable(strux_dist_tests tests/mpi/test_dist_toeplitz.cpp)
    target_include_directories(strux_dist_tests PRIVATE src)
    target_link_libraries(strux_dist_tests PRIVATE strux_dist)
    if(STRUX_NCCL_RPATH)
      set_target_properties(strux_dist_tests PROPERTIES BUILD_RPATH "${STRUX_NCCL_RPATH}")
    endif()
    add_executable(strux_dist_bench tests/mpi/bench_dist_toeplitz.cpp)
    target_link_libraries(strux_dist_bench PRIVATE strux_dist)
    if(STRUX_NCCL_RPATH)
      set_target_properties(strux_dist_bench PROPERTIES BUILD_RPATH "${STRUX_NCCL_RPATH}")
    endif()
    add_test(NAME dist_bench_np2
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe --allow-run-as-root
                     --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 $<TARGET_FILE:strux_dist_bench> 9 7 6 --rhs 2 --reps 2 --compare)
    set_tests_properties(dist_bench_np2 PROPERTIES TIMEOUT 120 PROCESSORS 2 PASS_REGULAR_EXPRESSION "\"rmatvec\"")
    # Root (CI) and 2 cores: mpirun needs --allow-run-as-root and --oversubscribe for 4 ranks; no
    # single-copy (CMA) transfers, which need ptrace rights that containers may withhold.
    foreach(_np 1 2 4)
      add_test(NAME dist_toeplitz_np${_np}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_np} --oversubscribe --allow-run-as-root
                       --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 $<TARGET_FILE:strux_dist_tests>)
      set_tests_properties(dist_toeplitz_np${_np} PROPERTIES TIMEOUT 120 PROCESSORS ${_np})
    endforeach()
  endif()
endif()
