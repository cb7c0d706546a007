# Installation: tools, the runtime, public headers, a CMake package (prof::prof,
# prof::instrument) and pkg-config files (libprof, libprof-instrument).
include(CMakePackageConfigHelpers)

set(PROF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/prof)

install(TARGETS profmem LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS prof prof_instrument EXPORT profTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(PROF_BUILD_TOOLS)
  install(TARGETS profreport profrun profpack RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/libprof/include/prof
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/prof/version.h
              ${PROJECT_SOURCE_DIR}/libprof/format/prof/trace_format.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/prof)

install(EXPORT profTargets NAMESPACE prof:: DESTINATION ${PROF_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/profConfig.cmake.in
  ${PROJECT_BINARY_DIR}/profConfig.cmake INSTALL_DESTINATION ${PROF_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/profConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/profConfig.cmake ${PROJECT_BINARY_DIR}/profConfigVersion.cmake
  DESTINATION ${PROF_CMAKE_DIR})

# pkg-config: `pkg-config --cflags --libs libprof-instrument` gives everything a GCC build needs.
# The prefix is found relative to the .pc file itself, so `cmake --install --prefix P` works
# for any P chosen at install time.
file(RELATIVE_PATH PROF_PC_UP /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" PROF_PC_UP "${PROF_PC_UP}")
if(PROF_INSTRUMENT_EXCLUDE_FILES)
  set(PROF_PC_EXCLUDE_FLAG "-finstrument-functions-exclude-file-list=${PROF_INSTRUMENT_EXCLUDE_FILES}")
endif()
foreach(pc libprof libprof-instrument)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
