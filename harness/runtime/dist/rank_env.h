#pragma once
// Where this process sits in a multi-process run, read the torchrun way: RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT. `bench --nproc N` sets the same variables for the ranks it
// spawns, so a rank cannot tell who launched it.
#include <optional>
#include <string>

namespace harness::runtime {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // the device index this rank uses (cuda:local_rank, sim:local_rank)
  int local_world_size = 0;  // ranks on this host (LOCAL_WORLD_SIZE); 0: not said
  std::string master_addr = "127.0.0.1";
  int master_port = 0;

  bool is_leader() const { return rank == 0; }
};

// The environment's RankEnv, or nullopt when WORLD_SIZE is unset (a single-process run).
// Throws InputError naming the variable when one is set but malformed or inconsistent.
std::optional<RankEnv> rank_env_from_environment();

}  // namespace harness::runtime
