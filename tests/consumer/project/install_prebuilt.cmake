# install_prebuilt: `cmake --install` (which runs `fatpack warm` into a prebuilt layer), then the
# installed program with FATPACK_CACHE_PREBUILT_PATH and an empty per-user cache: the PTX-only
# module must come from the layer, not from a compile.
file(REMOVE_RECURSE ${PREFIX} ${BUILD_DIR}/user-cache)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} COMMAND_ERROR_IS_FATAL ANY)
set(ENV{FATPACK_CACHE_PREBUILT_PATH} ${PREFIX}/share/consumer/prebuilt)
set(ENV{FATPACK_CACHE_PATH} ${BUILD_DIR}/user-cache)
execute_process(COMMAND ${PREFIX}/bin/app RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed app failed (${rc})")
endif()
if(NOT out MATCHES "app_math/vadd: entry compute_90[^\n]*\\(JIT, SASS reused\\)")
  message(FATAL_ERROR "app_math/vadd did not take its SASS from the prebuilt layer")
endif()
