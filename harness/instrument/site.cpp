#include "harness/instrument/site.h"

#include <atomic>

namespace harness {
namespace {

thread_local const CodeSite* t_innermost = nullptr;
std::atomic<SiteResolver> g_resolver{nullptr};

// __FILE__ is absolute, or relative to the source tree's top directory where the build maps the
// tree's path away (-fmacro-prefix-map, so that a unit's text is the same in every clone and ccache
// finds it): keep the path from the top directory either way, so that two machines' reports name
// the same file.
std::string from_source_top(const char* file) {
  const std::string path = std::string("/") + file;  // "/" first: a relative path's top counts too
  std::string::size_type top_at = std::string::npos;  // the innermost top directory in the path
  for (const char* top : {"/harness/", "/scenarios/", "/bench/", "/tests/", "/python/"}) {
    const auto at = path.rfind(top);
    if (at != std::string::npos && (top_at == std::string::npos || at > top_at)) top_at = at;
  }
  if (top_at != std::string::npos) return path.substr(top_at + 1);
  return path.substr(path.rfind('/') + 1);
}

}  // namespace

CodeSite::CodeSite(const char* file, int line, const char* function)
    : where(from_source_top(file) + ":" + std::to_string(line) + " in " + function) {}

SiteScope::SiteScope(const CodeSite& site) noexcept : previous_(t_innermost) {
  t_innermost = &site;
}

SiteScope::~SiteScope() { t_innermost = previous_; }

void set_site_resolver(SiteResolver resolver) noexcept { g_resolver.store(resolver); }

bool site_may_be_known() noexcept {
  return t_innermost != nullptr || g_resolver.load(std::memory_order_relaxed) != nullptr;
}

Site current_site() {
  Site site;
  if (const SiteResolver resolve = g_resolver.load(std::memory_order_relaxed)) {
    if (resolve(site) && !site.empty()) return site;
    site = {};
  }
  if (t_innermost != nullptr) site.frame = t_innermost->where;
  return site;
}

}  // namespace harness
