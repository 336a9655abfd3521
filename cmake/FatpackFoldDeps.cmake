# Copies the members of static archives (LZ4, zstd, xxHash) into object files whose global symbols
# are hidden, for cmake/FatpackStaticDeps.cmake. Run at build time:
#   cmake -DAR=ar -DNM=nm -DLINKER=ld -DCC=cc -DOUT_DIR=dir -DARCHIVES=name=path|... -P FatpackFoldDeps.cmake
# For each member m of archive <name>, writes OUT_DIR/<name>-<m>: m linked (`ld -r`) with an object
# that only declares every global symbol m defines `.hidden`. ELF gives a symbol the most constraining
# visibility of all its definitions and references, so the output defines the same symbols, GLOBAL
# but HIDDEN: the runtime's objects still link to them, and no executable or shared library that links
# the runtime can export them (whatever its own link options). The code itself is unchanged.
cmake_minimum_required(VERSION 3.25)
foreach(v AR NM LINKER CC OUT_DIR ARCHIVES)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "FatpackFoldDeps.cmake: ${v} is not set")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${OUT_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd}: ${rc}\n${out}${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

file(MAKE_DIRECTORY ${OUT_DIR})
string(REPLACE "|" ";" ARCHIVES "${ARCHIVES}")
foreach(item IN LISTS ARCHIVES)
  string(REGEX MATCH "^([^=]+)=(.+)$" _ "${item}")
  set(name ${CMAKE_MATCH_1})
  set(archive ${CMAKE_MATCH_2})
  set(tmp ${OUT_DIR}/tmp-${name})
  file(REMOVE_RECURSE ${tmp})
  file(MAKE_DIRECTORY ${tmp})
  run(${AR} t ${archive})
  string(REGEX REPLACE "\n$" "" members "${run_out}")
  string(REPLACE "\n" ";" members "${members}")
  execute_process(COMMAND ${AR} x ${archive} WORKING_DIRECTORY ${tmp} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${AR} x ${archive}: ${rc}")
  endif()
  foreach(m IN LISTS members)
    # -P: "name type value size"; -g --defined-only: the globals (and weak ones) the member defines.
    run(${NM} -g --defined-only -P ${tmp}/${m})
    string(REPLACE "\n" ";" lines "${run_out}")
    set(asm "")
    foreach(line IN LISTS lines)
      if(line MATCHES "^([^ ]+) [A-Za-z] ")
        string(APPEND asm "  .hidden ${CMAKE_MATCH_1}\n")
      endif()
    endforeach()
    if(asm STREQUAL "")
      file(COPY_FILE ${tmp}/${m} ${OUT_DIR}/${name}-${m})
      continue()
    endif()
    # The note keeps the stack non-executable (an object without it makes ld assume an executable one).
    file(WRITE ${tmp}/${m}.hidden.s "${asm}  .section .note.GNU-stack,\"\",@progbits\n")
    run(${CC} -c ${tmp}/${m}.hidden.s -o ${tmp}/${m}.hidden.o)
    run(${LINKER} -r ${tmp}/${m} ${tmp}/${m}.hidden.o -o ${OUT_DIR}/${name}-${m})
  endforeach()
  file(REMOVE_RECURSE ${tmp})
endforeach()
