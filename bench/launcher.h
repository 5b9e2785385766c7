#pragma once
// `bench --nproc N`: starts N local ranks of this same bench command, the torchrun way (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT: a free loopback port), and watches
// them. The first rank that fails (non-zero exit or a signal) ends the run: the others are
// stopped (SIGTERM, then SIGKILL after a grace period), every child is reaped, and the message
// names the rank and what happened to it. A rank that hangs is bounded by the ranks' collective
// timeout (--timeout): its peers give up waiting for it and fail, and then it is stopped.
#include <string>
#include <vector>

#include "harness/errors.h"

namespace harness {

// Set (to "1") in the ranks bench starts when their number came from the scenarios' default world
// sizes rather than from --nproc: a one-process scenario then runs on rank 0 alone.
inline constexpr const char* kWorldFromScenariosVariable = "HARNESS_WORLD_FROM_SCENARIOS";

// `argv`: the bench command line to run in each rank (without --nproc). `world_from_scenarios`:
// sets kWorldFromScenariosVariable in each rank.
ExitCode launch_local_ranks(const std::vector<std::string>& argv, int nproc,
                            bool world_from_scenarios);

// `argv` without `--nproc N` / `--nproc=N`.
std::vector<std::string> without_nproc(const std::vector<std::string>& argv);

}  // namespace harness
