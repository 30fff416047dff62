# One warnings setting for every target Loom builds: libraries, executables, tests,
# benchmarks and fuzzers alike, set here once (the top level includes this before its
# first add_subdirectory, so every directory below inherits it) instead of per target,
# where targets added without the line were built with none.
#   C and C++ (GCC, Clang): -Wall -Wextra.
#   CUDA (nvcc): the same for the host compiler through -Xcompiler; nvcc's own device
#   diagnostics are on by default.
# Third-party headers (Qt, QCustomPlot, nlohmann_json, CUDA) come from imported targets,
# whose include directories CMake passes as system directories, so their warnings stay out.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra>"
                      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
endif()
