# cmake -DTOOL=<path> -P check_not_built.cmake: fails if the in-tree fatpack tool was built although
# the project named a prebuilt one (FATPACK_EXECUTABLE).
if(EXISTS "${TOOL}")
  message(FATAL_ERROR "the in-tree fatpack tool was built (${TOOL}) although FATPACK_EXECUTABLE names a prebuilt one")
endif()
message(STATUS "not built, as expected: ${TOOL}")
