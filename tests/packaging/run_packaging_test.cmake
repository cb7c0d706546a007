# Installs the build tree into WORK_DIR/prefix, builds tests/packaging/app against it with
# find_package(prof), builds app.c with pkg-config flags, builds tests/packaging/tail_calls with
# the default compiler and with Clang, runs the programs and checks the call counts that
# profreport prints.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(expect text pattern)
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "expected /${pattern}/ in:\n${text}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f bin/profreport bin/profrun bin/profpack lib/libprof.so include/prof/version.h
          include/prof/trace_format.hpp lib/cmake/prof/profConfig.cmake
          lib/pkgconfig/libprof.pc lib/pkgconfig/libprof-instrument.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# 1. CMake package.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/app -B ${WORK_DIR}/app -G ${CMAKE_GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=RelWithDebInfo)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/app)
run(${CMAKE_COMMAND} -E env PROF_OUT=${WORK_DIR}/inst.trace ${WORK_DIR}/app/app_instrumented)
expect("${out}" "^285 [0-9.]+ ${WORK_DIR}/inst.trace")
run(${prefix}/bin/profreport ${WORK_DIR}/inst.trace)
expect("${out}" "11 function calls in")
expect("${out}" " 10 [^\n]*app.cpp:[0-9]+\\(square\\(int\\)\\)")
run(${CMAKE_COMMAND} -E env PROF_OUT=${WORK_DIR}/c.trace ${WORK_DIR}/app/app_c)
run(${prefix}/bin/profreport ${WORK_DIR}/c.trace)
expect("${out}" " 7 [^\n]*app.c:[0-9]+\\(twice\\)")
# prof::prof links the runtime without instrumenting: no function calls recorded.
run(${CMAKE_COMMAND} -E env PROF_OUT=${WORK_DIR}/plain.trace ${WORK_DIR}/app/app_runtime_only)
expect("${out}" "^285 [0-9.]+ ${WORK_DIR}/plain.trace")
run(${prefix}/bin/profreport ${WORK_DIR}/plain.trace)
expect("${out}" "0 function calls in")

# 2. pkg-config, plain compiler invocation.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs libprof-instrument
  OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config libprof-instrument failed")
endif()
expect("${flags}" "-finstrument-functions")
expect("${flags}" "-fno-optimize-sibling-calls")
separate_arguments(flags UNIX_COMMAND "${flags}")
run(c++ -O2 -g ${SOURCE_DIR}/tests/packaging/app/app.cpp -o ${WORK_DIR}/app_pc ${flags})
run(${prefix}/bin/profrun -q -o ${WORK_DIR}/pc.trace -- ${WORK_DIR}/app_pc)
run(${prefix}/bin/profreport ${WORK_DIR}/pc.trace)
expect("${out}" " 10 [^\n]*\\(square\\(int\\)\\)")
# The installed profpack packs it; the installed profreport reads the packed file the same.
run(${prefix}/bin/profpack -q ${WORK_DIR}/pc.trace)
run(${prefix}/bin/profreport ${WORK_DIR}/pc.trace)
expect("${out}" " 10 [^\n]*\\(square\\(int\\)\\)")

# 3. Tail calls: tests/packaging/tail_calls through the installed prof::instrument, with the
# default compiler and with Clang (which turns tail recursion into a loop unless the target's
# options keep every call a call). tests/programs/tail_calls.cpp and .c, N = 100: 101, 51 and 50
# calls.
set(compilers default)
find_program(CLANG clang)
find_program(CLANGXX clang++)
if(CLANG AND CLANGXX)
  list(APPEND compilers clang)
else()
  message(STATUS "no clang and clang++: tail calls checked with the default compiler only")
endif()
foreach(compiler IN LISTS compilers)
  set(dir ${WORK_DIR}/tail_calls_${compiler})
  set(choose)
  if(compiler STREQUAL "clang")
    set(choose -DCMAKE_C_COMPILER=${CLANG} -DCMAKE_CXX_COMPILER=${CLANGXX})
  endif()
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/tail_calls -B ${dir} -G ${CMAKE_GENERATOR}
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=RelWithDebInfo ${choose})
  run(${CMAKE_COMMAND} --build ${dir})
  foreach(program tail_calls tail_calls_c)
    run(${CMAKE_COMMAND} -E env PROF_OUT=${dir}/${program}.trace ${dir}/${program} 100)
    expect("${out}" "^5050 1\n")
    run(${prefix}/bin/profreport --format json ${dir}/${program}.trace)
    set(rows "${out}")
    if(program STREQUAL "tail_calls")
      set(names "count_down\\(long, long\\)" "is_even\\(long\\)" "is_odd\\(long\\)")
    else()
      set(names c_count_down c_is_even c_is_odd)
    endif()
    list(GET names 0 count_down)
    list(GET names 1 is_even)
    list(GET names 2 is_odd)
    expect("${rows}" "\"total_calls\": 203,")
    expect("${rows}" "\"name\": \"${count_down}\",[^\n]*\"ncalls\": 101, \"primitive_calls\": 1,")
    expect("${rows}" "\"name\": \"${is_even}\",[^\n]*\"ncalls\": 51, \"primitive_calls\": 1,")
    expect("${rows}" "\"name\": \"${is_odd}\",[^\n]*\"ncalls\": 50, \"primitive_calls\": 1,")
  endforeach()
endforeach()
message(STATUS "packaging test passed")
