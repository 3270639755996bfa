# Run PROGRAM and require its standard output to equal the file EXPECTED,
# byte for byte: an example whose output drifts from the one its docs show
# fails here. Usage: cmake -DPROGRAM=... -DEXPECTED=... -P compare_output.cmake
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}")
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "${PROGRAM} printed:\n${out}\nexpected (${EXPECTED}):\n${expected}")
endif()
