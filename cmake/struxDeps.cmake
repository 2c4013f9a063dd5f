# strux's link dependencies, found the same way by the build (CMakeLists.txt) and by the
# installed package (struxConfig.cmake), and named as imported targets so that the exported
# strux::strux refers to names, not to one machine's paths:
#   OpenMP::OpenMP_CXX, strux::fftw3f, strux::fftw3, strux::blas, strux::hdf5 (when found).
# FFTW_INCLUDE_DIR and CBLAS_INCLUDE_DIR are set for the build (private to the library).
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_path(FFTW_INCLUDE_DIR fftw3.h REQUIRED)
find_library(FFTW_LIB fftw3 REQUIRED)
find_library(FFTWF_LIB fftw3f REQUIRED)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-openmp openblas REQUIRED)
find_library(BLAS_LIB NAMES openblas openblasp openblaso blas REQUIRED)
find_package(HDF5 COMPONENTS C)

foreach(_dep fftw3f:FFTWF_LIB fftw3:FFTW_LIB blas:BLAS_LIB)
  string(REPLACE ":" ";" _dep "${_dep}")
  list(GET _dep 0 _name)
  list(GET _dep 1 _var)
  if(NOT TARGET strux::${_name})
    add_library(strux::${_name} UNKNOWN IMPORTED)
    set_target_properties(strux::${_name} PROPERTIES IMPORTED_LOCATION "${${_var}}")
  endif()
endforeach()
if(HDF5_FOUND AND NOT TARGET strux::hdf5)
  add_library(strux::hdf5 INTERFACE IMPORTED)
  set_target_properties(strux::hdf5 PROPERTIES INTERFACE_LINK_LIBRARIES "${HDF5_C_LIBRARIES}")
endif()
