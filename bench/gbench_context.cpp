#include "bench/gbench_context.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace harness {
namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "32K" -> 32768; "1024" -> 1024.
long long parse_size(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (end != nullptr && (*end == 'K' || *end == 'k')) value *= 1024;
  if (end != nullptr && (*end == 'M' || *end == 'm')) value *= 1024 * 1024;
  return value;
}

// CPUs listed in a shared_cpu_list like "0-3,8".
int count_cpus(const std::string& list) {
  int n = 0;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      n += item.empty() ? 0 : 1;
    } else {
      n += std::atoi(item.c_str() + dash + 1) - std::atoi(item.c_str()) + 1;
    }
  }
  return n;
}

std::vector<GbenchCache> caches() {
  std::vector<GbenchCache> out;
  const fs::path dir = "/sys/devices/system/cpu/cpu0/cache";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("index", 0) == 0) names.insert(name);
  }
  for (const std::string& name : names) {
    const fs::path d = dir / name;
    GbenchCache c;
    c.type = read_line(d / "type");
    c.level = std::atoi(read_line(d / "level").c_str());
    c.size = parse_size(read_line(d / "size"));
    c.num_sharing = count_cpus(read_line(d / "shared_cpu_list"));
    if (!c.type.empty()) out.push_back(c);
  }
  return out;
}

double cpu_mhz() {
  const std::string khz = read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (!khz.empty()) return std::atof(khz.c_str()) / 1000.0;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return std::atof(line.c_str() + colon + 1);
    }
  }
  return 0;
}

}  // namespace

GbenchContext machine_gbench_context(const Provenance& p) {
  GbenchContext c;
  c.date = p.started_at;
  if (!c.date.empty() && c.date.back() == 'Z') c.date = c.date.substr(0, c.date.size() - 1) + "+00:00";
  c.host_name = p.hostname;
  c.executable = p.argv.empty() ? "bench" : p.argv.front();
  c.num_cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  c.mhz_per_cpu = cpu_mhz();
  const std::string governor =
      read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  c.cpu_scaling_enabled = !governor.empty() && governor != "performance";
  c.caches = caches();
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) == 3) c.load_avg = {load[0], load[1], load[2]};
  c.library_build_type = p.build_type == "Debug" ? "debug" : "release";
  return c;
}

}  // namespace harness
