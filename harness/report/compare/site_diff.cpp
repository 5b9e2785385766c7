#include "harness/report/compare/site_diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "harness/report/text/format.h"

namespace harness {
namespace {

// "path:line in function" -> ("path", line, "function"); a frame without a line keeps it whole.
struct Frame {
  std::string file;
  long line = -1;
  std::string function;
};

Frame parse_frame(const std::string& frame) {
  Frame f;
  const auto in = frame.find(" in ");
  const std::string place = in == std::string::npos ? frame : frame.substr(0, in);
  f.function = in == std::string::npos ? "" : frame.substr(in + 4);
  const auto colon = place.rfind(':');
  f.file = place;
  if (colon == std::string::npos) return f;
  const std::string digits = place.substr(colon + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return f;
  f.file = place.substr(0, colon);
  f.line = std::stol(digits);
  return f;
}

std::string without_line(const std::string& frame) {
  const Frame f = parse_frame(frame);
  return f.file + " in " + f.function;
}

// What a site is, and where without its line: rows that match on this are the same code.
using Identity = std::tuple<bool, std::string, std::string, std::string, std::string,
                            std::string, std::string>;
Identity identity_of(const SiteRow& r) {
  return {r.sync,    r.event, r.phase, r.what, without_line(r.frame), without_line(r.library),
          r.allowed};
}

double per_step(int64_t count, int64_t steps) {
  return steps > 0 ? static_cast<double>(count) / static_cast<double>(steps)
                   : static_cast<double>(count);
}

SiteChange change_of(const std::vector<SiteRow>& base, const std::vector<SiteRow>& head,
                     long b, long h) {
  SiteChange c;
  const SiteRow& shown = h >= 0 ? head[h] : base[b];
  c.kind = b < 0 ? SiteChange::Added : h < 0 ? SiteChange::Removed : SiteChange::Changed;
  c.sync = shown.sync;
  c.phase = shown.phase;
  c.what = shown.what;
  c.frame = shown.frame;
  c.library = shown.library;
  c.allowed = shown.allowed;
  c.event = shown.event;
  c.base = b >= 0 ? base[b].per_step : 0;
  c.head = h >= 0 ? head[h].per_step : 0;
  if (b >= 0 && h >= 0 && base[b].frame != head[h].frame) c.moved_from = base[b].frame;
  c.base_row = b;
  c.head_row = h;
  return c;
}

// Pairs the rows of one identity: the same line first, then the rest in line order.
void pair_group(const std::vector<SiteRow>& base, const std::vector<SiteRow>& head,
                std::vector<long> b, std::vector<long> h, std::vector<SiteChange>& out) {
  for (auto hi = h.begin(); hi != h.end();) {
    auto bi = std::find_if(b.begin(), b.end(), [&](long i) {
      return base[i].frame == head[*hi].frame && base[i].library == head[*hi].library;
    });
    if (bi == b.end()) {
      ++hi;
      continue;
    }
    out.push_back(change_of(base, head, *bi, *hi));
    b.erase(bi);
    hi = h.erase(hi);
  }
  auto line_order = [](const std::vector<SiteRow>& rows) {
    return [&rows](long x, long y) {
      return parse_frame(rows[x].frame).line < parse_frame(rows[y].frame).line;
    };
  };
  std::stable_sort(b.begin(), b.end(), line_order(base));
  std::stable_sort(h.begin(), h.end(), line_order(head));
  const size_t paired = std::min(b.size(), h.size());
  for (size_t i = 0; i < paired; ++i) out.push_back(change_of(base, head, b[i], h[i]));
  for (size_t i = paired; i < h.size(); ++i) out.push_back(change_of(base, head, -1, h[i]));
  for (size_t i = paired; i < b.size(); ++i) out.push_back(change_of(base, head, b[i], -1));
}

bool same(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(a)); }

}  // namespace

const char* to_string(SiteChange::Kind kind) {
  switch (kind) {
    case SiteChange::Added: return "added";
    case SiteChange::Removed: return "removed";
    case SiteChange::Changed: break;
  }
  return "changed";
}

std::vector<SiteRow> site_rows(const VariantResult& v) {
  std::vector<SiteRow> out;
  for (const SyncSite& s : v.sync_sites) {
    out.push_back({true, s.phase, s.op + ", " + s.reason, s.frame, s.library,
                   per_step(s.count, v.measured_steps), s.allowed});
  }
  for (const CopySite& s : v.copy_sites) {
    out.push_back({false, s.phase, s.how + " " + s.kind, s.frame, s.library,
                   per_step(s.count, v.measured_steps)});
  }
  return out;
}

std::vector<SiteRow> event_rows(const VariantResult& v) {
  std::vector<SiteRow> out;
  for (const EventSite& s : v.event_sites) {
    SiteRow row{false, s.phase, s.what, s.frame, s.library, per_step(s.count, v.measured_steps)};
    row.event = s.kind;
    out.push_back(std::move(row));
  }
  return out;
}

std::string site_family(bool sync, const std::string& event) {
  if (!event.empty()) return event;
  return sync ? "sync" : "copy";
}

std::vector<SiteChange> pair_site_rows(const std::vector<SiteRow>& base,
                                       const std::vector<SiteRow>& head) {
  std::map<Identity, std::pair<std::vector<long>, std::vector<long>>> groups;
  for (size_t i = 0; i < base.size(); ++i) groups[identity_of(base[i])].first.push_back(i);
  for (size_t i = 0; i < head.size(); ++i) groups[identity_of(head[i])].second.push_back(i);
  std::vector<SiteChange> out;
  for (auto& [identity, rows] : groups) pair_group(base, head, rows.first, rows.second, out);
  return out;
}

std::vector<SiteChange> diff_variant_sites(const std::string& scenario, const VariantResult& base,
                                           const VariantResult& head) {
  std::vector<SiteChange> out;
  auto add = [&](std::vector<SiteChange> changes) {
    for (SiteChange& c : changes) {
      if (c.kind == SiteChange::Changed && same(c.base, c.head)) continue;  // moved at most
      c.scenario = scenario;
      c.variant = head.name;
      out.push_back(std::move(c));
    }
  };
  add(pair_site_rows(site_rows(base), site_rows(head)));
  add(pair_site_rows(event_rows(base), event_rows(head)));
  return out;
}

std::vector<SiteChange> diff_sites(const RunReport& base, const RunReport& head) {
  std::vector<SiteChange> out;
  for (const ScenarioResult& h : head.scenarios) {
    const ScenarioResult* b = find_scenario(base, h.name);
    if (b == nullptr) continue;
    for (const VariantResult& v : h.variants) {
      const VariantResult* bv = find_variant(*b, v.name);
      if (bv == nullptr) continue;
      for (SiteChange& c : diff_variant_sites(h.name, *bv, v)) out.push_back(std::move(c));
    }
  }
  return out;
}

std::string describe_where(const SiteRow& r) {
  return site_where(r.frame, r.library) + (r.allowed.empty() ? "" : " [allowed: " + r.allowed + "]");
}

std::string describe(const SiteChange& c) {
  const double delta = c.head - c.base;
  std::string out = (delta > 0 ? "+" : "") + format_number(delta) + " " +
                    site_family(c.sync, c.event) + "/step at " + site_where(c.frame, c.library) +
                    " (" + c.what + ") in " + c.phase;
  if (c.kind == SiteChange::Added) out += ": new";
  if (c.kind == SiteChange::Removed) out += ": gone";
  if (c.kind == SiteChange::Changed) {
    out += ": " + format_number(c.base) + " -> " + format_number(c.head);
  }
  if (!c.moved_from.empty()) out += " (was at " + c.moved_from + ")";
  if (!c.allowed.empty()) out += " [allowed: " + c.allowed + "]";
  return out;
}

}  // namespace harness
