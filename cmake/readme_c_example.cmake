# Extracts the README's C example (the first ```c block), compiles it as C11 and links it with
# the library, so the example in the README always builds.
file(READ ${README} text)
string(FIND "${text}" "```c\n" start)
if(start EQUAL -1)
  message(FATAL_ERROR "no C example in ${README}")
endif()
math(EXPR start "${start} + 5")
string(SUBSTRING "${text}" ${start} -1 rest)
string(FIND "${rest}" "```" stop)
string(SUBSTRING "${rest}" 0 ${stop} code)
file(WRITE ${OUT_DIR}/readme_example.c "${code}")
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
execute_process(COMMAND ${CC} -std=c11 -Wall -Wextra -Werror ${flags} -I${INCLUDE} ${OUT_DIR}/readme_example.c
                        ${LIB} -Wl,-rpath,${LIBDIR} -o ${OUT_DIR}/readme_example
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the README's C example does not build:\n${out}")
endif()
message(STATUS "the README's C example builds")
