// The traces ranks send rank 0 through the store: documents separated by "\n--8<--\n", merged as
// rank 0 does (merge_traces rejects a document that is not a harness trace).
#include <stdexcept>

#include "fuzz/fuzz_target.h"
#include "harness/instrument/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)harness::merge_traces(harness::fuzz::split_documents(harness::fuzz::as_text(data, size)));
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
