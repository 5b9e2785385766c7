#pragma once
// Where in the program an event came from: the program's own frame ("path:line in function") and,
// where the program called into a library that made the sync or copy, the library's frame
// ("torch/optim/adam.py:512 in _multi_tensor_adam"). The collector asks for it at each sync and
// at each copy that a user would move (blocking, or from pageable memory), so that reports, the
// console, the trace and `bench compare` name lines.
//
// Two sources, innermost first:
//  - a resolver the process installs (harness_sim: the calling thread's Python frames);
//  - the innermost HARNESS_SITE() scope of the calling thread (the C++ runtime's calls).
// Neither: an empty site (a thread without Python frames or scopes, or a GPU record).
#include <string>

namespace harness {

struct Site {
  std::string frame;    // the program's own frame, "path:line in function"; "" when not known
  std::string library;  // the library frame that made the call, "" when none
  // Inside a region the program marked as allowed to sync (harness_sim.allow_sync("why")): why;
  // "" outside any. Such syncs are counted as any other, and listed apart.
  std::string allowed;
  bool empty() const { return frame.empty() && library.empty() && allowed.empty(); }
};

// A place in the harness's C++ sources, made once per place by HARNESS_SITE(): `where` is
// "harness/runtime/optim/adam.cpp:146 in step", the path from the source tree's top.
struct CodeSite {
  CodeSite(const char* file, int line, const char* function);
  std::string where;
};

// While it lives, the calling thread's events are attributed to `site` (scopes nest).
class SiteScope {
 public:
  explicit SiteScope(const CodeSite& site) noexcept;
  ~SiteScope();
  SiteScope(const SiteScope&) = delete;
  SiteScope& operator=(const SiteScope&) = delete;

 private:
  const CodeSite* previous_;
};

// A process-wide resolver, tried before the scopes: returns false when it has nothing to say for
// this thread (it must not throw, and must not call into the collector).
using SiteResolver = bool (*)(Site& out);
void set_site_resolver(SiteResolver resolver) noexcept;

// Where the calling thread is now (see above).
Site current_site();
// Whether current_site() can name anything: a resolver is set or a scope is open on this thread.
// False: it gives the empty site (a hot path skips building one).
bool site_may_be_known() noexcept;

}  // namespace harness

#define HARNESS_SITE_CONCAT_(a, b) a##b
#define HARNESS_SITE_CONCAT(a, b) HARNESS_SITE_CONCAT_(a, b)
// Names this line as the site of the syncs and copies made until the end of the enclosing block.
#define HARNESS_SITE()                                                                          \
  static const ::harness::CodeSite HARNESS_SITE_CONCAT(harness_code_site_, __LINE__)(          \
      __FILE__, __LINE__, __func__);                                                            \
  const ::harness::SiteScope HARNESS_SITE_CONCAT(harness_site_scope_, __LINE__)(                \
      HARNESS_SITE_CONCAT(harness_code_site_, __LINE__))
