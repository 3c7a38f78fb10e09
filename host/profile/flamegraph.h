// The flamegraph page: one self-contained HTML file (`omniprof flamegraph`,
// `omniprof record --flamegraph`) drawn from a pprof profile.
//
// This file turns a pprof Profile into the page's data; the page itself
// (markup, style, script) is host/profile/flamegraph_page.{html,js}, embedded
// into the binary at build time (host/CMakeLists.txt), so the installed
// binary needs no data file and the page fetches nothing.
//
// The page's script is written for omniprof, not vendored: the page must draw
// 100k distinct stacks from data shaped for that (a prefix tree the script
// re-weighs per label filter in one pass over typed arrays), show omniprof's
// frame types and labels, and be testable in headless Chromium through the
// DOM it writes. Debian 12 packages no flamegraph library (neither
// flamegraph.pl nor d3-flame-graph); npm's d3-flame-graph draws one SVG
// element per frame (slow long before 100k stacks) and would bring d3 to
// vendor and keep in step. A few hundred lines of canvas code, reviewed
// here, do the job.
//
// What the data keeps and merges (the page says so, from `merged`):
// - Samples are keyed by stack and labels; the `tid` label is dropped (a
//   thread's name stays in `thread_name`), so one thread's samples merge with
//   its siblings' of the same stack: that is what keeps a whole-machine
//   profile of a thread pool small.
// - A location with inlined calls becomes one frame per line, innermost
//   leafmost, as pprof shows them.
// - A frame is a function (name, file, type) wherever its line: a function
//   called from several lines of its caller is one box; each function keeps
//   its lines with their samples over the whole profile (the tooltip).
// - Stacks share prefixes (a tree of nodes, node = parent + function). Past
//   kFlamegraphMaxNodes nodes, the nodes holding the fewest samples are
//   merged: every subtree under the budget's threshold becomes one
//   "[merged: ...]" node (type "merged") under its caller, so totals stay
//   exact and the page stays quick (at 1400 px such a frame is far narrower
//   than a pixel until zoomed in).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "omniprof/support/result.h"
#include "profile/profile.pb.h"

namespace omniprof {

// The most stack nodes a page holds (see above).
inline constexpr size_t kFlamegraphMaxNodes = 150'000;

// A function as the page shows it: name, file and type (frame_type_of:
// "kernel", "native", or a plugin's "python", "ruby", "jit", ...; "merged"
// for the merged node, "" for the root). A location without lines is named
// FILE+0xOFFSET after its mapping (or 0xADDRESS without one).
struct FlamegraphFunction {
  std::string name;
  std::string file;
  std::string type;
  // (line, samples through a frame of this function at that line), most
  // samples first; line 0: unknown.
  std::vector<std::pair<int64_t, int64_t>> lines;
};

struct FlamegraphData {
  std::string sample_type;  // "samples/count": the value the page weighs by
  int64_t total = 0;        // sum of that value over the samples kept

  // functions[0] is the root ("all"); functions[1], when nodes were
  // merged, the merged node's.
  std::vector<FlamegraphFunction> functions;

  // Stack nodes in preorder, siblings by function name (then file, type;
  // the merged node last): node i's subtree is [i, node_end[i]), node 0 is
  // the root, every other node's parent has a smaller index.
  std::vector<uint32_t> node_parent;
  std::vector<uint32_t> node_end;
  std::vector<uint32_t> node_function;

  // A set of labels, sorted by key then value (numbers written in decimal).
  using LabelSet = std::vector<std::pair<std::string, std::string>>;
  std::vector<LabelSet> label_sets;

  struct Sample {
    uint32_t node = 0;  // the leaf frame's node (0: a sample without frames)
    uint32_t label_set = 0;
    int64_t value = 0;
  };
  // One per distinct (node, labels), ordered by node then label set.
  std::vector<Sample> samples;

  int64_t pprof_samples = 0;  // Profile.sample entries read
  size_t nodes_before_merge = 0;
  // What was merged, dropped or rewritten, one sentence each (shown on the
  // page): the tid label, small subtrees, samples without value, ...
  std::vector<std::string> merged;
};

// The page's data from a profile. An error names what is wrong: no sample
// type, a sample whose value count differs from the sample types, a
// location or function id the profile does not hold.
// max_nodes: the node budget (tests use a small one).
Result<FlamegraphData> flamegraph_data(const perftools::profiles::Profile& profile,
                                       size_t max_nodes = kFlamegraphMaxNodes);

// `data` as the JSON the page reads, safe inside <script type=
// "application/json">: every '<', '>' and '&' is written \u003c, \u003e,
// \u0026, so no name (say `</script>`) can end the element; U+2028/2029 are
// escaped; invalid UTF-8 becomes U+FFFD and is counted in `merged`.
std::string flamegraph_json(const FlamegraphData& data);

// The whole page: the embedded template with `title` (HTML-escaped) and the
// data filled in.
std::string flamegraph_page(const FlamegraphData& data, const std::string& title);

// flamegraph_data + flamegraph_page, written atomically to `path` (an error
// names the path).
Result<void> write_flamegraph_page(const perftools::profiles::Profile& profile, const std::string& title,
                                   const std::string& path);

}  // namespace omniprof
