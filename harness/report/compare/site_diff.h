#pragma once
// Sites by line between two runs: which lines of the program sync or copy more or less per
// step in head than in base (sync_sites and copy_sites of schema 1.7), so that a red CI names
// the line ("+1 sync/step at train.py:42 in step (aten::_local_scalar_dense, item)").
//
// Matching a site of head to one of base, when code moves: by what it is (phase, op and reason,
// or copy kind and how), the file and function of its frame and the library frame's file and
// function first, its line second: a line that moved within its function, with the same count,
// is the same site (not a change); where a function has several sites of one kind, the ones on
// the same line pair first, then the rest in line order.
#include <cstddef>
#include <string>
#include <vector>

#include "harness/report/model/result.h"

namespace harness {

// One site of a variant (or of an expectations file), per measured step.
struct SiteRow {
  bool sync = true;  // a sync site; false: a copy site, or an event site
  std::string phase;
  std::string what;  // sync: "aten::_local_scalar_dense, item"; copy: "blocking D2H"
  std::string frame, library;
  double per_step = 0;  // count per measured step (the count where no step was measured)
  std::string allowed;  // a sync the program allowed (harness_sim.allow_sync): why
  std::string event;    // an event site (EventSite): its kind ("graph_break", ...); else ""
};
// The sync sites, then the copy sites, of a variant.
std::vector<SiteRow> site_rows(const VariantResult& variant);
// The event sites of a variant (graph breaks, recompilations, capture blockers): `what` is the
// event's.
std::vector<SiteRow> event_rows(const VariantResult& variant);
// "sync", "copy", or the event's kind.
std::string site_family(bool sync, const std::string& event);

struct SiteChange {
  enum Kind { Added, Removed, Changed };
  Kind kind = Changed;
  std::string scenario, variant;
  bool sync = true;
  std::string phase;
  std::string what;
  std::string frame;       // head's (base's for a removed site)
  std::string library;
  std::string moved_from;  // base's frame where the line moved, else ""
  std::string allowed;     // head's (base's for a removed site)
  std::string event;       // an event site's kind, else ""
  double base = 0;         // per step
  double head = 0;
  long base_row = -1;      // the rows paired (indices into the inputs of pair_site_rows); -1: none
  long head_row = -1;
};
const char* to_string(SiteChange::Kind kind);  // "added", "removed", "changed"

// Pairs the rows of base and head as above. Every pair is listed, changed or not, and every row
// left over (added, removed); `scenario` and `variant` only label the changes.
std::vector<SiteChange> pair_site_rows(const std::vector<SiteRow>& base,
                                       const std::vector<SiteRow>& head);

// The sites (sync, copy, then event sites) whose per-step count differs between the variants of the same name in base and
// head (sites of a variant only one run has are not listed: the variant is new or missing).
std::vector<SiteChange> diff_sites(const RunReport& base, const RunReport& head);
// The same for one variant of `scenario` in both runs.
std::vector<SiteChange> diff_variant_sites(const std::string& scenario, const VariantResult& base,
                                           const VariantResult& head);

// "+1 sync/step at train.py:42 in step (aten::_local_scalar_dense, item) in train.step: new".
std::string describe(const SiteChange& change);
// "train.py:42 in step (torch/...)": where a row is, as describe() names it.
std::string describe_where(const SiteRow& row);

}  // namespace harness
