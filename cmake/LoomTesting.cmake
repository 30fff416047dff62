# loom_add_test(NAME name SOURCES a.cpp... LIBS targets... LABELS unit|mpi|gui|gpu [TIMEOUT s])
# Builds one Qt Test executable and registers it with CTest under its labels.
# Tests link module targets; they never compile another module's sources.
function(loom_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ENVIRONMENT" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE Qt6::Test ${T_LIBS})
  set_target_properties(${T_NAME} PROPERTIES AUTOMOC ON)
  target_compile_definitions(${T_NAME} PRIVATE LOOM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                               LOOM_BINARY_DIR="${PROJECT_BINARY_DIR}")
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # Open MPI keeps a session directory under /tmp/ompi.HOST.UID shared by every job; two
  # tests launching and ending jobs at once (ctest -j2) raced on creating and removing it
  # ("A call to mkdir was unable to create the desired directory"). Each test gets its
  # own base, short enough for the PMIx sockets inside it.
  set(mpi_env "")
  if("mpi" IN_LIST T_LABELS OR "cluster" IN_LIST T_LABELS)
    set(mpi_env "OMPI_MCA_orte_tmpdir_base=/tmp/loom-ompi-${T_NAME}")
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "QT_QPA_PLATFORM=offscreen;${mpi_env};${T_ENVIRONMENT}")
endfunction()
