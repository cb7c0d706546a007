# Configures tests/packaging/subproject, which adds the source tree with add_subdirectory and
# tools and tests off, with fmt and zstd hidden (find_package(fmt) disabled, a pkg-config that
# knows no libzstd): the runtime needs neither. Builds and runs its program, then installs the
# parent: only the parent's own program is installed (PROF_INSTALL is off in a subproject).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

find_program(PKG_CONFIG pkg-config REQUIRED)
file(WRITE ${WORK_DIR}/bin/pkg-config
  "#!/bin/sh\n"
  "for a in \"$@\"; do case $a in *zstd*) exit 1;; esac; done\n"
  "exec ${PKG_CONFIG} \"$@\"\n")
file(CHMOD ${WORK_DIR}/bin/pkg-config PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/subproject -B ${WORK_DIR}/build
    -G ${CMAKE_GENERATOR} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROF_SOURCE_DIR=${SOURCE_DIR}
    -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DPKG_CONFIG_EXECUTABLE=${WORK_DIR}/bin/pkg-config
    -DCMAKE_INSTALL_PREFIX=${prefix} -DCMAKE_C_COMPILER_LAUNCHER=${LAUNCHER}
    -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
file(STRINGS ${WORK_DIR}/build/CMakeCache.txt looked REGEX "^(fmt_DIR|__pkg_config_checked_libzstd)")
if(looked)
  message(FATAL_ERROR "the runtime alone looked for fmt or zstd: ${looked}")
endif()

run(${CMAKE_COMMAND} --build ${WORK_DIR}/build --target app)
run(${CMAKE_COMMAND} -E env PROF_OUT=${WORK_DIR}/app.trace ${WORK_DIR}/build/app)
if(NOT out MATCHES "^285 [0-9.]+ ${WORK_DIR}/app.trace" OR NOT EXISTS ${WORK_DIR}/app.trace)
  message(FATAL_ERROR "the subproject's program did not write its trace:\n${out}")
endif()

run(${CMAKE_COMMAND} --install ${WORK_DIR}/build)
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
if(NOT installed STREQUAL "bin/app")
  message(FATAL_ERROR "the parent's install installed more than its program: ${installed}")
endif()
message(STATUS "subproject test passed")
