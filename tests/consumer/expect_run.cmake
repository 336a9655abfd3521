# Runs a program and checks its exit status and output (CTest's PASS_REGULAR_EXPRESSION ignores the
# exit status, and a sample that fails must fail with the right message).
#   cmake -DCOMMAND="prog|arg" [-DEXPECT_RC=0] [-DEXPECT_REGEX=re] [-DREJECT_REGEX=re] -P expect_run.cmake
# Environment for the program comes from CTest's ENVIRONMENT property.
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()
string(REPLACE "|" ";" COMMAND "${COMMAND}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}: ${COMMAND}")
endif()
# CMake wraps its messages: match against the output with each run of white space made one space.
string(REGEX REPLACE "[ \t\r\n]+" " " flat "${out}")
foreach(re IN LISTS EXPECT_REGEX)
  if(NOT flat MATCHES "${re}")
    message(FATAL_ERROR "the output does not match '${re}'")
  endif()
endforeach()
foreach(re IN LISTS REJECT_REGEX)
  if(flat MATCHES "${re}")
    message(FATAL_ERROR "the output matches '${re}'")
  endif()
endforeach()
