#include "harness/runtime/dist/rank_env.h"

#include <cstdlib>
#include <string>

#include "harness/errors.h"

namespace harness::runtime {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

int parse_int(const char* name, const std::string& text, int min, int max) {
  size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < min || value > max) {
    throw InputError(std::string("environment variable ") + name + "='" + text +
                     "' is not an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "]");
  }
  return static_cast<int>(value);
}

int required_int(const char* name, int min, int max) {
  const auto v = env(name);
  if (!v) throw InputError(std::string("WORLD_SIZE is set but ") + name + " is not");
  return parse_int(name, *v, min, max);
}

}  // namespace

std::optional<RankEnv> rank_env_from_environment() {
  const auto world = env("WORLD_SIZE");
  if (!world) {
    // A half-set torchrun environment is a mistake, not a run without ranks.
    for (const char* name : {"RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) {
      if (const auto v = env(name)) {
        throw InputError(std::string(name) + "=" + *v +
                         " is set but WORLD_SIZE is not: set RANK, WORLD_SIZE, MASTER_ADDR and "
                         "MASTER_PORT together (torchrun does), or none of them");
      }
    }
    return std::nullopt;
  }
  RankEnv e;
  e.world_size = parse_int("WORLD_SIZE", *world, 1, 4096);
  e.rank = required_int("RANK", 0, e.world_size - 1);
  const auto local = env("LOCAL_RANK");
  e.local_rank = local ? parse_int("LOCAL_RANK", *local, 0, 4095) : e.rank;
  if (const auto local_world = env("LOCAL_WORLD_SIZE")) {
    const int n = parse_int("LOCAL_WORLD_SIZE", *local_world, 1, e.world_size);
    if (e.local_rank >= n) {
      throw InputError("LOCAL_RANK=" + std::to_string(e.local_rank) +
                       " is not below LOCAL_WORLD_SIZE=" + std::to_string(n));
    }
    e.local_world_size = n;
  }
  if (const auto addr = env("MASTER_ADDR")) {
    if (addr->empty()) throw InputError("environment variable MASTER_ADDR is empty");
    e.master_addr = *addr;
  } else if (e.world_size > 1) {
    throw InputError("WORLD_SIZE is set but MASTER_ADDR is not");
  }
  if (e.world_size > 1) e.master_port = required_int("MASTER_PORT", 1, 65535);
  return e;
}

}  // namespace harness::runtime
