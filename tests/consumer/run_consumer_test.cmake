# ctest driver: install the harness from BUILD_DIR into a private prefix, build the consumer
# project against it, run its scenario and check the JSON it writes.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
# A sanitized harness (scripts/sanitize.sh) needs its consumer linked with the same runtime.
set(sanitize_args)
if(SANITIZERS)
  set(sanitize_args "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZERS}"
                    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZERS}")
endif()
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DLIBTORCH_ROOT=${LIBTORCH_ROOT}"
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache ${sanitize_args})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer_bench" --scenario consumer_item --device sim -q
    --out "${WORK_DIR}/report.json")
file(READ "${WORK_DIR}/report.json" report)
string(JSON d2h GET "${report}" scenarios 0 variants 0 per_step d2h.count)
string(JSON syncs GET "${report}" scenarios 0 variants 0 per_step sync.count)
if(NOT d2h EQUAL 1 OR NOT syncs EQUAL 1)
  message(FATAL_ERROR "consumer scenario: expected 1 D2H and 1 sync per step, got ${d2h} and ${syncs}")
endif()
message(STATUS "consumer scenario ran against the installed package: ${d2h} D2H, ${syncs} sync per step")
