// The flamegraph page's data side (host/profile/flamegraph.h): a profile made
// with ProfileBuilder, as record writes it, turned into what the page draws.
#include "profile/flamegraph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "profile/frame_type.h"
#include "profile/profile_builder.h"

namespace omniprof {
namespace {

constexpr int64_t kPeriodNs = 10'000'000;

// The names of node's stack, root first.
std::vector<std::string> stack_names(const FlamegraphData& data, uint32_t node) {
  std::vector<std::string> names;
  for (; node != 0; node = data.node_parent[node]) names.push_back(data.functions[data.node_function[node]].name);
  std::reverse(names.begin(), names.end());
  return names;
}

const FlamegraphFunction* find_function(const FlamegraphData& data, const std::string& name) {
  for (const auto& f : data.functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

class FlamegraphTest : public ::testing::Test {
 protected:
  FlamegraphTest() : builder_(kPeriodNs, 1'700'000'000'000'000'000) {
    app_ = builder_.add_mapping({0x400000, 0x500000, 0, "/usr/bin/app", "", true});
    kernel_ = builder_.add_mapping({0xffffffff81000000, 0xffffffff82000000, 0, std::string(kKernelMappingName), "", true});
    lib_ = builder_.add_mapping({0x7f0000000000, 0x7f0000100000, 0x2000, "/lib/libstripped.so", "", false});
  }

  uint64_t native(const std::string& name, uint64_t address, int64_t line = 0) {
    return builder_.add_location(app_, address, {{name, "", "app.c", line}});
  }
  uint64_t plugin_frame(const std::string& type, const std::string& name, const std::string& file, int64_t line) {
    return builder_.add_location(0, 0, {{name, typed_system_name(type, name), file, line}});
  }
  SampleLabels labels(int64_t tid, const std::string& comm = "app", const std::string& thread = "worker") {
    return {.pid = 42, .tid = tid, .comm = comm, .thread_name = thread};
  }
  FlamegraphData data() {
    auto result = flamegraph_data(builder_.build());
    EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().message);
    return result.ok() ? std::move(*result) : FlamegraphData{};
  }

  ProfileBuilder builder_;
  uint64_t app_, kernel_, lib_;
};

TEST_F(FlamegraphTest, NamesTypesAndLinesAreThoseOfTheProfile) {
  uint64_t main_frame = native("main", 0x401000, 10);
  uint64_t module = plugin_frame("python", "<module>", "/srv/job.py", 3);
  uint64_t block = plugin_frame("ruby", "block (2 levels) in <class:Worker>", "/srv/worker.rb", 7);
  uint64_t jit = plugin_frame("jit", "JS:*hot", "", 0);
  uint64_t syscall = builder_.add_location(kernel_, 0xffffffff81001000, {{"do_syscall_64", "", "", 0}});
  uint64_t unnamed = builder_.add_location(lib_, 0x7f0000000123, {});
  builder_.add_sample({syscall, unnamed, jit, block, module, main_frame}, 5, labels(1));
  FlamegraphData d = data();

  ASSERT_EQ(d.samples.size(), 1u);
  EXPECT_EQ(stack_names(d, d.samples[0].node),
            (std::vector<std::string>{"main", "<module>", "block (2 levels) in <class:Worker>", "JS:*hot",
                                      "libstripped.so+0x2123", "do_syscall_64"}));
  std::map<std::string, std::string> types;
  for (const auto& f : d.functions) types[f.name] = f.type;
  EXPECT_EQ(types["main"], "native");
  EXPECT_EQ(types["<module>"], "python");
  EXPECT_EQ(types["block (2 levels) in <class:Worker>"], "ruby");
  EXPECT_EQ(types["JS:*hot"], "jit");
  EXPECT_EQ(types["do_syscall_64"], "kernel");
  EXPECT_EQ(types["libstripped.so+0x2123"], "native");
  const FlamegraphFunction* module_function = find_function(d, "<module>");
  ASSERT_NE(module_function, nullptr);
  EXPECT_EQ(module_function->file, "/srv/job.py");
  EXPECT_EQ(module_function->lines, (std::vector<std::pair<int64_t, int64_t>>{{3, 5}}));
  EXPECT_EQ(d.total, 5);
  EXPECT_EQ(d.sample_type, "samples/count");
}

TEST_F(FlamegraphTest, InlinedLinesBecomeFramesInnermostLeafmost) {
  uint64_t main_frame = native("main", 0x401000);
  // One address, two lines: `inlined` was inlined into `outer`.
  uint64_t both = builder_.add_location(app_, 0x401100, {{"inlined", "", "a.h", 4}, {"outer", "", "a.c", 20}});
  builder_.add_sample({both, main_frame}, 1, labels(1));
  FlamegraphData d = data();
  ASSERT_EQ(d.samples.size(), 1u);
  EXPECT_EQ(stack_names(d, d.samples[0].node), (std::vector<std::string>{"main", "outer", "inlined"}));
}

TEST_F(FlamegraphTest, ThreadIdsAreDroppedAndIdenticalStacksMerged) {
  uint64_t main_frame = native("main", 0x401000);
  uint64_t work = native("work", 0x402000);
  builder_.add_sample({work, main_frame}, 3, labels(101));
  builder_.add_sample({work, main_frame}, 4, labels(102));
  builder_.add_sample({work, main_frame}, 2, labels(103, "other"));
  SampleLabels gil = labels(104);
  gil.extra_key = "python_gil";
  gil.extra_value = "held";
  builder_.add_sample({work, main_frame}, 1, gil);
  FlamegraphData d = data();

  EXPECT_EQ(d.pprof_samples, 4);
  ASSERT_EQ(d.samples.size(), 3u) << "101 and 102 differ only by tid";
  std::map<FlamegraphData::LabelSet, int64_t> by_labels;
  for (const auto& s : d.samples) {
    EXPECT_EQ(stack_names(d, s.node), (std::vector<std::string>{"main", "work"}));
    by_labels[d.label_sets.at(s.label_set)] += s.value;
  }
  using LabelSet = FlamegraphData::LabelSet;
  EXPECT_EQ((by_labels[LabelSet{{"comm", "app"}, {"pid", "42"}, {"thread_name", "worker"}}]), 7);
  EXPECT_EQ((by_labels[LabelSet{{"comm", "other"}, {"pid", "42"}, {"thread_name", "worker"}}]), 2);
  EXPECT_EQ((by_labels[LabelSet{{"comm", "app"}, {"pid", "42"}, {"python_gil", "held"}, {"thread_name", "worker"}}]),
            1);
  for (const auto& set : d.label_sets) {
    for (const auto& [key, value] : set) EXPECT_NE(key, "tid");
  }
  ASSERT_FALSE(d.merged.empty());
  EXPECT_NE(d.merged[0].find("tid label of 4 pprof samples"), std::string::npos) << d.merged[0];
  EXPECT_NE(d.merged[1].find("4 pprof samples merged into 3 distinct stacks"), std::string::npos) << d.merged[1];
}

TEST_F(FlamegraphTest, FunctionNodesMergeLinesAndAreInPreorderByName) {
  uint64_t main_frame = native("main", 0x401000);
  // main calls `zeta` from two lines, and `alpha`; zeta calls `leaf`.
  uint64_t zeta_a = builder_.add_location(app_, 0x403000, {{"zeta", "", "app.c", 30}});
  uint64_t zeta_b = builder_.add_location(app_, 0x403010, {{"zeta", "", "app.c", 31}});
  uint64_t alpha = native("alpha", 0x404000, 40);
  uint64_t leaf = native("leaf", 0x405000, 50);
  builder_.add_sample({leaf, zeta_a, main_frame}, 6, labels(1));
  builder_.add_sample({leaf, zeta_b, main_frame}, 2, labels(1));
  builder_.add_sample({alpha, main_frame}, 1, labels(1));
  FlamegraphData d = data();

  // Nodes: root, main, alpha, zeta (both lines), leaf: preorder, siblings
  // by name.
  std::vector<std::string> preorder;
  for (uint32_t n = 0; n < d.node_function.size(); ++n) preorder.push_back(d.functions[d.node_function[n]].name);
  EXPECT_EQ(preorder, (std::vector<std::string>{"all", "main", "alpha", "zeta", "leaf"}));
  EXPECT_EQ(d.node_end, (std::vector<uint32_t>{5, 5, 3, 5, 5}));
  EXPECT_EQ(d.node_parent, (std::vector<uint32_t>{0, 0, 1, 1, 3}));
  // zeta's lines, most samples first.
  const FlamegraphFunction* zeta = find_function(d, "zeta");
  ASSERT_NE(zeta, nullptr);
  EXPECT_EQ(zeta->lines, (std::vector<std::pair<int64_t, int64_t>>{{30, 6}, {31, 2}}));
  // The samples: leaf (8, from both lines of zeta), alpha (1).
  ASSERT_EQ(d.samples.size(), 2u);
  EXPECT_EQ(stack_names(d, d.samples[0].node), (std::vector<std::string>{"main", "alpha"}));
  EXPECT_EQ(d.samples[0].value, 1);
  EXPECT_EQ(stack_names(d, d.samples[1].node), (std::vector<std::string>{"main", "zeta", "leaf"}));
  EXPECT_EQ(d.samples[1].value, 8);
}

TEST_F(FlamegraphTest, PastTheNodeBudgetSmallSubtreesAreMergedUnderTheirCaller) {
  uint64_t main_frame = native("main", 0x401000);
  uint64_t hot = native("hot", 0x402000);
  builder_.add_sample({hot, main_frame}, 100, labels(1));
  // 20 rare callees of main, 1 sample each, one with a callee of its own.
  for (int i = 0; i < 20; ++i) {
    uint64_t rare = native("rare" + std::to_string(i), 0x403000 + 0x10 * i);
    if (i == 0) {
      builder_.add_sample({native("deeper", 0x404000), rare, main_frame}, 1, labels(1, "other"));
    } else {
      builder_.add_sample({rare, main_frame}, 1, labels(1));
    }
  }
  auto result = flamegraph_data(builder_.build(), 8);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const FlamegraphData& d = *result;
  EXPECT_EQ(d.nodes_before_merge, 24u);  // root, main, hot, 20 rare, deeper
  EXPECT_LE(d.node_parent.size(), 8u);
  std::vector<std::string> preorder;
  for (uint32_t n = 0; n < d.node_function.size(); ++n) preorder.push_back(d.functions[d.node_function[n]].name);
  EXPECT_EQ(preorder, (std::vector<std::string>{"all", "main", "hot", "[merged: subtrees of 1 samples or fewer]"}));
  EXPECT_EQ(d.functions[d.node_function[3]].type, "merged");
  // Every sample kept: 100 in hot, 20 in the merged node (two label sets).
  int64_t merged_total = 0, total = 0;
  for (const auto& s : d.samples) {
    total += s.value;
    if (s.node == 3) merged_total += s.value;
  }
  EXPECT_EQ(total, 120);
  EXPECT_EQ(merged_total, 20);
  EXPECT_EQ(d.samples.size(), 3u) << "hot, merged with comm app, merged with comm other";
  std::string merged;
  for (const auto& line : d.merged) merged += line + "\n";
  EXPECT_NE(merged.find("24 stack nodes are more than the page's 8: each subtree of 1 samples or fewer is one "
                        "\"[merged]\" frame under its caller, 4 nodes left"),
            std::string::npos)
      << merged;
}

TEST_F(FlamegraphTest, NamesThatCloseScriptElementsAreEscapedInThePage) {
  const std::string hostile = "</script><script>alert(1)</script>&<!--";
  uint64_t main_frame = native("main", 0x401000);
  uint64_t weird = plugin_frame("python", hostile, "/srv/</SCRIPT>.py", 1);
  uint64_t separator = plugin_frame("python", "line\xe2\x80\xa8sep", "", 0);
  builder_.add_sample({weird, main_frame}, 2, labels(1, "</script>"));
  builder_.add_sample({separator, main_frame}, 1, labels(1));
  FlamegraphData d = data();
  ASSERT_NE(find_function(d, hostile), nullptr);
  EXPECT_EQ(find_function(d, hostile)->type, "python");

  std::string json = flamegraph_json(d);
  EXPECT_EQ(json.find('<'), std::string::npos) << json;
  EXPECT_NE(json.find(R"("\u003c/script\u003e\u003cscript\u003ealert(1)\u003c/script\u003e\u0026\u003c!--")"),
            std::string::npos);
  EXPECT_NE(json.find(R"("line\u2028sep")"), std::string::npos);

  std::string page = flamegraph_page(d, "a<b>&\"c\".pb.gz");
  // The page's own three: the error hook, the data, the script.
  std::string lower = page;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  EXPECT_EQ(count_of(lower, "</script"), 3u);
  EXPECT_EQ(count_of(page, "a&lt;b&gt;&amp;&quot;c&quot;.pb.gz"), 2u) << "title and heading";
  EXPECT_EQ(page.find("OMNIPROF_FLAMEGRAPH_"), std::string::npos) << "a marker left unfilled";
  EXPECT_EQ(page.find("http://"), std::string::npos) << "nothing fetched";
  EXPECT_EQ(page.find("https://"), std::string::npos) << "nothing fetched";
}

TEST_F(FlamegraphTest, InvalidUtf8IsReplacedAndCounted) {
  uint64_t main_frame = native("main", 0x401000);
  uint64_t bad = native("bad\xff\xc0name", 0x402000);
  builder_.add_sample({bad, main_frame}, 1, labels(1));
  std::string json = flamegraph_json(data());
  EXPECT_NE(json.find(R"("bad\ufffd\ufffdname")"), std::string::npos) << json;
  EXPECT_NE(json.find("2 bytes of invalid UTF-8"), std::string::npos) << json;
}

TEST(FlamegraphDataTest, BadProfilesGiveErrorsNamingWhat) {
  perftools::profiles::Profile empty;
  empty.add_string_table("");
  auto no_types = flamegraph_data(empty);
  ASSERT_FALSE(no_types.ok());
  EXPECT_NE(no_types.error().message.find("no sample type"), std::string::npos);

  ProfileBuilder builder(kPeriodNs, 0);
  uint64_t loc = builder.add_location(0, 0x1000, {{"f", "", "", 0}});
  builder.add_sample({loc}, 1, {.pid = 1, .tid = 1});
  auto profile = builder.build();
  profile.mutable_sample(0)->set_location_id(0, 999);
  auto missing = flamegraph_data(profile);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("sample 0 refers to location 999"), std::string::npos)
      << missing.error().message;

  profile = builder.build();
  profile.mutable_sample(0)->add_value(5);
  auto values = flamegraph_data(profile);
  ASSERT_FALSE(values.ok());
  EXPECT_NE(values.error().message.find("sample 0 has 3 values for 2 sample types"), std::string::npos)
      << values.error().message;
}

TEST(FlamegraphDataTest, ZeroAndNegativeValuesAreLeftOutAndSaid) {
  ProfileBuilder builder(kPeriodNs, 0);
  uint64_t loc = builder.add_location(0, 0x1000, {{"f", "", "", 0}});
  builder.add_sample({loc}, 3, {.pid = 1, .tid = 1});
  builder.add_sample({loc}, 1, {.pid = 2, .tid = 1});
  builder.add_sample({loc}, 1, {.pid = 3, .tid = 1});
  auto profile = builder.build();
  // samples/count is the value the page weighs by.
  profile.mutable_sample(1)->set_value(0, 0);
  profile.mutable_sample(2)->set_value(0, -4);
  auto d = flamegraph_data(profile);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->total, 3);
  ASSERT_EQ(d->samples.size(), 1u);
  std::string merged;
  for (const auto& line : d->merged) merged += line + "\n";
  EXPECT_NE(merged.find("1 pprof samples with value 0 left out"), std::string::npos) << merged;
  EXPECT_NE(merged.find("1 pprof samples with a negative value left out"), std::string::npos) << merged;
}

}  // namespace
}  // namespace omniprof
