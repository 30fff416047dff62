# Finds Loom's dependencies and records, for the configure report, what was found and
# what was left out. Required: nlohmann_json, BLAS (CBLAS), SQLite3, ZLIB, Qt6 Core+Test.
# Optional: Qt6 Widgets + QCustomPlot (workbench), MPI (multi-rank runs), CUDA, NCCL.
set(LOOM_FOUND_REPORT "")
macro(loom_report name found detail)
  if(${found})
    string(APPEND LOOM_FOUND_REPORT "  [found]     ${name}: ${detail}\n")
  else()
    string(APPEND LOOM_FOUND_REPORT "  [left out]  ${name}: ${detail}\n")
  endif()
endmacro()

find_package(nlohmann_json 3.10 REQUIRED)
loom_report("nlohmann_json" TRUE "${nlohmann_json_VERSION}")

find_package(Threads REQUIRED)

# OpenBLAS ships cblas.h; prefer it (the reference BLAS is ~10x slower).
set(BLA_VENDOR OpenBLAS)
find_package(BLAS)
if(NOT BLAS_FOUND)
  unset(BLA_VENDOR)
  find_package(BLAS REQUIRED)
endif()
find_path(LOOM_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas REQUIRED)
add_library(loom_blas INTERFACE)
target_link_libraries(loom_blas INTERFACE ${BLAS_LIBRARIES})
target_include_directories(loom_blas INTERFACE ${LOOM_CBLAS_INCLUDE_DIR})
loom_report("BLAS" TRUE "${BLAS_LIBRARIES}")

find_package(SQLite3 REQUIRED)
loom_report("SQLite3" TRUE "${SQLite3_VERSION}")
find_package(ZLIB REQUIRED)
loom_report("zlib" TRUE "${ZLIB_VERSION_STRING}")

find_package(Qt6 6.2 REQUIRED COMPONENTS Core Test)
find_package(Qt6 6.2 QUIET COMPONENTS Widgets Gui PrintSupport)
set(LOOM_HAVE_WIDGETS ${Qt6Widgets_FOUND})
loom_report("Qt6 Core/Test" TRUE "${Qt6_VERSION}")
loom_report("Qt6 Widgets" LOOM_HAVE_WIDGETS "workbench GUI")
find_package(Qt6 6.2 QUIET COMPONENTS Svg)
set(LOOM_HAVE_SVG ${Qt6Svg_FOUND})
loom_report("Qt6 Svg" LOOM_HAVE_SVG "charts saved as SVG")
find_package(QCustomPlotQt6 QUIET)
set(LOOM_HAVE_QCUSTOMPLOT ${QCustomPlotQt6_FOUND})
loom_report("QCustomPlot (Qt6)" LOOM_HAVE_QCUSTOMPLOT "charts and timeline")

find_package(MPI QUIET COMPONENTS C)
set(LOOM_HAVE_MPI ${MPI_C_FOUND})
loom_report("MPI" LOOM_HAVE_MPI "${MPIEXEC_EXECUTABLE}")

set(LOOM_HAVE_CUDA OFF)
if(LOOM_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(LOOM_HAVE_CUDA ON)
  endif()
endif()
loom_report("CUDA toolkit" LOOM_HAVE_CUDA "${CUDAToolkit_VERSION} (optional; CUDA kernels)")

# Compiling .cu files needs nvcc to work with this host compiler: check_language tries.
# Architectures are explicit (90, Hopper, by default; -DCMAKE_CUDA_ARCHITECTURES=... to
# change), so a build never depends on what GPU the build machine has.
set(LOOM_HAVE_CUDA_COMPILER OFF)
if(LOOM_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(LOOM_HAVE_CUDA_COMPILER ON)
  endif()
endif()
loom_report("CUDA compiler" LOOM_HAVE_CUDA_COMPILER "${CMAKE_CUDA_COMPILER} for sm_${CMAKE_CUDA_ARCHITECTURES} (optional; the CUDA backend for gpu devices)")
# this_build().cuda (core): gpu devices run where the CUDA backend compiles.
if(LOOM_HAVE_CUDA_COMPILER)
  set(LOOM_BUILD_CUDA true)
else()
  set(LOOM_BUILD_CUDA false)
endif()

# NCCL has no CMake config: look for the header and library directly.
find_path(LOOM_NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include ${CUDAToolkit_INCLUDE_DIRS})
find_library(LOOM_NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 ${CUDAToolkit_LIBRARY_DIR})
if(LOOM_NCCL_INCLUDE_DIR AND LOOM_NCCL_LIBRARY AND LOOM_HAVE_CUDA)
  set(LOOM_HAVE_NCCL ON)
else()
  set(LOOM_HAVE_NCCL OFF)
endif()
loom_report("NCCL" LOOM_HAVE_NCCL "${LOOM_NCCL_LIBRARY} (optional; GPU collectives)")
# this_build().nccl (core): the NCCL communicator (launcher/comm) wraps MPI's and serves
# gpu ranks, so it is built where NCCL, the CUDA backend and MPI all are.
if(LOOM_HAVE_NCCL AND LOOM_HAVE_CUDA_COMPILER AND LOOM_HAVE_MPI)
  set(LOOM_BUILD_NCCL true)
else()
  set(LOOM_BUILD_NCCL false)
endif()

function(loom_print_dependency_report)
  message(STATUS "Loom ${PROJECT_VERSION} configuration (${CMAKE_BUILD_TYPE}):\n${LOOM_FOUND_REPORT}  tracing compiled in: ${LOOM_TRACING}")
endfunction()
