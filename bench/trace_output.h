#pragma once
// RunTrace: the run's --trace. A TraceRecorder connected, for its lifetime, to the phases, the
// instrument and the measured steps, and how it is written (--trace-format):
//   chrome: every rank hands its document to rank 0, which writes them merged into one file;
//   kineto: every rank writes its own file into the --trace directory (kineto_trace_file()).
// Ranks share rank 0's time origin, so that their timelines line up in either shape.
#include <optional>
#include <string>

#include "bench/run.h"
#include "harness/instrument/instrument.h"
#include "harness/report/model/result.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/dist/rank_env.h"

namespace harness {

class RunTrace {
 public:
  // Checks --trace and --trace-format before anything runs (throws InputError); for kineto,
  // creates the directory.
  static void check_destination(const BenchOptions& o);

  RunTrace(const BenchOptions& o, Instrument& instrument, const runtime::DeviceSelection& device,
           const std::optional<runtime::RankEnv>& rank_env, runtime::Communicator* comm);
  ~RunTrace();
  RunTrace(const RunTrace&) = delete;
  RunTrace& operator=(const RunTrace&) = delete;

  TraceRecorder& recorder() { return recorder_; }
  // Stops recording and writes this process's part (chrome: rank 0 the merged file, the other
  // ranks hand theirs to it). Once; later calls do nothing.
  void finish(const Provenance& p, runtime::Communicator* comm, bool leader);

 private:
  void detach() noexcept;

  std::string out_;
  bool kineto_;
  int rank_;
  Instrument& instrument_;
  TraceRecorder recorder_;
  bool attached_ = false;
  bool finished_ = false;
};

}  // namespace harness
