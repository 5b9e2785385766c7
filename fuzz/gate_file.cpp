// Gate files (--gate): JSON text to GateFile, then evaluated on an empty report.
#include "fuzz/fuzz_target.h"
#include "harness/errors.h"
#include "harness/report/gates/gate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace harness;
  try {
    const GateFile gate = parse_gate_text(fuzz::as_text(data, size), "fuzz.json");
    (void)evaluate_gate(gate, RunReport{}, nullptr);
  } catch (const InputError&) {
  }
  return 0;
}
