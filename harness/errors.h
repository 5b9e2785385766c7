#pragma once
// The three error tiers of the harness (see STYLE.md, "Three error tiers and fixed exit codes").
//  - A broken invariant is an internal assert (HARNESS_ASSERT / TORCH_INTERNAL_ASSERT).
//  - Bad user input (flag, scenario name, gate file, report file, checkpoint) throws InputError;
//    bench's single top-level catch prints it and exits with ExitCode::BadInput.
//  - One failing scenario variant is recorded as failed in its result; the run goes on and bench
//    exits with ExitCode::ScenarioFailed at the end.
#include <stdexcept>
#include <string>

namespace harness {

enum class ExitCode : int {
  Ok = 0,              // every gate passed (or no gate was given)
  GateFailed = 1,      // at least one gate rule failed
  BadInput = 2,        // unknown scenario or flag, malformed gate/report file, unreadable checkpoint
  ScenarioFailed = 3,  // a scenario variant (or a rank) failed to run
};

// Bad input from the user: the message names the problem (and the file or flag it came from).
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace harness
