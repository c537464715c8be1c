# ctest KernelSourcesHash.ScriptMatchesBinary: scripts/kernel_sources_hash.py
# --dir kernels must print the kernel_sources_sha256 that `tilecraft env`
# reports for the headers embedded from the same directory.
execute_process(COMMAND ${PYTHON} ${SCRIPT} --dir ${KERNELS} OUTPUT_VARIABLE script_hash
                RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kernel_sources_hash.py failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=TILECRAFT_KERNEL_DIR ${TILECRAFT} env
                OUTPUT_VARIABLE env_out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tilecraft env failed (${rc})")
endif()
string(REGEX MATCH "kernel_sources_sha256 +([0-9a-f]+)" _ "${env_out}")
set(binary_hash "${CMAKE_MATCH_1}")
if(binary_hash STREQUAL "" OR NOT script_hash STREQUAL binary_hash)
  message(FATAL_ERROR "script ${script_hash} != tilecraft env '${binary_hash}'")
endif()
message(STATUS "kernel sources ${script_hash}")
