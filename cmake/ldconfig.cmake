# ldconfig.cmake — run at the end of `make install` (install(SCRIPT)):
# refresh the dynamic loader's cache when the libraries went into a system
# prefix (/usr or /usr/local) as root, as `libtool --finish` would, so a
# program linked against libresil.so.0 runs at once.
#
# Nothing is done for any other prefix (the README says what to set then),
# for a staged install (DESTDIR: a package's own triggers run ldconfig on
# the machine it is installed on), or without root (the cache is root's).
# RESIL_LDCONFIG and RESIL_UID stand in for the program and the user id,
# so tests/package/ldconfig.sh can check every case without root.
if(DEFINED ENV{DESTDIR} AND NOT "$ENV{DESTDIR}" STREQUAL "")
  return()
endif()
if(NOT CMAKE_INSTALL_PREFIX MATCHES "^/usr(/local)?/?$")
  return()
endif()
if(NOT DEFINED RESIL_UID)
  execute_process(COMMAND id -u OUTPUT_VARIABLE RESIL_UID OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET)
endif()
if(NOT RESIL_UID STREQUAL "0")
  return()
endif()
if(NOT DEFINED RESIL_LDCONFIG)
  find_program(RESIL_LDCONFIG ldconfig PATHS /sbin /usr/sbin NO_CACHE)
endif()
if(NOT RESIL_LDCONFIG)
  message(STATUS "ldconfig not found: run it before using the libraries")
  return()
endif()
message(STATUS "Running ${RESIL_LDCONFIG}")
execute_process(COMMAND ${RESIL_LDCONFIG} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(WARNING "${RESIL_LDCONFIG} failed (${rc})")
endif()
