#include "ruby_frame_reader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "rbperf.h"
#include "ruby_test_support.h"
#include "ruby_version.h"

namespace omniprof::ruby {
namespace {

// What a workload printed about its stack.
using ExpectedFrame = test::PrintedFrame;

// How the reader names them: as CRuby 3.4's backtraces do.
const std::map<std::string, std::string>& kQualified = test::kSpinRbNames;

// A running workload (spin.rb unless a test says otherwise) and what
// reading it needs.
class LiveRuby : public ::testing::Test {
 protected:
  void SetUp() override { start("spin.rb", kQualified.size()); }

  void start(const std::string& script, std::size_t frames) {
    OMNIPROF_REQUIRE_RUBY();
    std::string error;
    auto started = test::RubyProcess::start(std::string(OMNIPROF_RUBY_TEST_DIR) + "/" + script, error);
    ASSERT_TRUE(started) << error;
    process_.emplace(std::move(*started));
    expected_ = test::printed_frames(process_->lines());
    ASSERT_EQ(expected_.size(), frames);
    auto elf = ElfFile::open(test::kLibruby);
    ASSERT_TRUE(elf) << elf.error().message;
    libruby_.emplace(std::move(*elf));
    auto bias = test::load_bias(process_->pid(), *libruby_);
    ASSERT_TRUE(bias) << test::kLibruby << " not mapped in " << process_->pid();
    bias_ = *bias;
    auto symbols = find_global_symbols(*libruby_);
    ASSERT_TRUE(symbols) << symbols.error().message;
    addresses_.global_symbols = bias_ + *symbols;
    read_ = test::process_reader(process_->pid());
  }

  uint32_t pid() const { return static_cast<uint32_t>(process_->pid()); }
  const RubyVersionOffsets& offsets() const { return test::shipped_offsets(3, 1, 2); }

  // The walk once `innermost` is the innermost frame (the script prints
  // "ready" just before it gets there).
  std::vector<RubyFrameRecord> spinning_frames(const std::string& innermost = "Foo#spin") {
    RubyFrameCache cache;
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto frames = test::walk_main_thread(read_, *libruby_, bias_, offsets());
      EXPECT_TRUE(frames) << frames.error().message;
      if (!frames) return {};
      if (!frames->empty()) {
        auto name = cache.name_frame(pid(), read_, offsets(), addresses_, frames->front());
        if (name && name->function == innermost) return *frames;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the workload never reached " << innermost;
    return {};
  }

  std::optional<test::RubyProcess> process_;
  std::vector<ExpectedFrame> expected_;
  std::optional<ElfFile> libruby_;
  uint64_t bias_ = 0;
  RubyProcessAddresses addresses_;
  ReadMemory read_;
};

TEST_F(LiveRuby, NamesFramesAsCrubyWith34sClassNames) {
  std::vector<RubyFrameRecord> frames = spinning_frames();
  ASSERT_GE(frames.size(), expected_.size());
  RubyFrameCache cache;
  for (int pass = 0; pass < 2; ++pass) {  // the second from the cache
    for (std::size_t i = 0; i < expected_.size(); ++i) {
      SCOPED_TRACE("frame " + std::to_string(i) + " (" + expected_[i].label + "), pass " + std::to_string(pass));
      auto name = cache.name_frame(pid(), read_, offsets(), addresses_, frames[i]);
      ASSERT_TRUE(name) << name.error().message;
      EXPECT_EQ(name->function, kQualified.at(expected_[i].label));
      if (frames[i].detail == RBPERF_DETAIL_CFUNC) {
        EXPECT_EQ(name->file, "");  // CRuby shows the caller's location; the caller's frame has it
        EXPECT_EQ(name->line, 0);
      } else {
        EXPECT_EQ(name->file, expected_[i].path);
        EXPECT_EQ(name->line, expected_[i].line);
      }
    }
  }
  EXPECT_EQ(frames[2].detail, RBPERF_DETAIL_CFUNC);  // Integer#times is a C function in 3.1
}

class SleepingRuby : public LiveRuby {
 protected:
  void SetUp() override { start("sleep.rb", 4); }
};

// Modules, singleton methods of a module and top-level methods: Kernel.sleep
// (a C function of Kernel's singleton class), Waiter.wait_here,
// Object#top_level.
TEST_F(SleepingRuby, NamesModulesAndTopLevelMethods) {
  std::vector<RubyFrameRecord> frames = spinning_frames("Kernel.sleep");
  ASSERT_GE(frames.size(), expected_.size());
  RubyFrameCache cache;
  for (std::size_t i = 0; i < expected_.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i) + " (" + expected_[i].label + ")");
    auto name = cache.name_frame(pid(), read_, offsets(), addresses_, frames[i]);
    ASSERT_TRUE(name) << name.error().message;
    EXPECT_EQ(name->function, expected_[i].label);
    EXPECT_EQ(name->file, expected_[i].path);
    EXPECT_EQ(name->line, expected_[i].line);
  }
}

TEST_F(LiveRuby, ATinyCacheStillNamesEveryFrame) {
  std::vector<RubyFrameRecord> frames = spinning_frames();
  ASSERT_GE(frames.size(), expected_.size());
  RubyFrameCache cache(2);
  for (int pass = 0; pass < 3; ++pass) {
    for (std::size_t i = 0; i < expected_.size(); ++i) {
      auto name = cache.name_frame(pid(), read_, offsets(), addresses_, frames[i]);
      ASSERT_TRUE(name) << name.error().message;
      EXPECT_EQ(name->function, kQualified.at(expected_[i].label));
    }
  }
}

TEST_F(LiveRuby, WithoutClassFactsFramesKeepTheirMethodNames) {
  std::vector<RubyFrameRecord> frames = spinning_frames();
  ASSERT_GE(frames.size(), expected_.size());
  RubyVersionOffsets no_classes = offsets();
  no_classes.reader.class_ext_pointer = -1;  // as for a version whose class internals are not modelled
  RubyFrameCache cache;
  for (std::size_t i = 0; i < expected_.size(); ++i) {
    auto name = cache.name_frame(pid(), read_, no_classes, addresses_, frames[i]);
    ASSERT_TRUE(name) << name.error().message;
    EXPECT_EQ(name->function, expected_[i].label);  // "block in bar", "times", "<main>"
  }
  // With no ID table a C function cannot be named: an error, not a guess;
  // an iseq frame keeps its label (3.1 finds __classpath__ by ID name).
  RubyFrameCache no_table_cache;
  RubyProcessAddresses no_table;
  auto cfunc = no_table_cache.name_frame(pid(), read_, offsets(), no_table, frames[2]);
  ASSERT_FALSE(cfunc);
  EXPECT_NE(cfunc.error().message.find("ID table"), std::string::npos) << cfunc.error().message;
  auto iseq = no_table_cache.name_frame(pid(), read_, offsets(), no_table, frames[0]);
  ASSERT_TRUE(iseq) << iseq.error().message;
  EXPECT_EQ(iseq->function, "spin");
  EXPECT_EQ(iseq->line, expected_[0].line);
}

// Reads that stop after `budget` successes, as when the process exits in
// the middle of naming a frame: every outcome is a clear error or the right
// (possibly class-less) name, never a crash or a wrong file and line.
TEST_F(LiveRuby, ReadsFailingMidWayGiveErrorsOrTheRightName) {
  std::vector<RubyFrameRecord> frames = spinning_frames();
  ASSERT_GE(frames.size(), expected_.size());
  int errors = 0;
  int names = 0;
  for (int budget = 0; budget < 120; ++budget) {
    int left = budget;
    ReadMemory failing = [&](uint64_t address, void* buffer, std::size_t length) {
      return left-- > 0 && read_(address, buffer, length);
    };
    RubyFrameCache cache;
    for (std::size_t i = 0; i < expected_.size(); ++i) {
      auto name = cache.name_frame(pid(), failing, offsets(), addresses_, frames[i]);
      if (!name) {
        ++errors;
        EXPECT_NE(name.error().message.find("pid " + std::to_string(pid())), std::string::npos) << name.error().message;
        continue;
      }
      ++names;
      const std::string& label = expected_[i].label;
      EXPECT_TRUE(name->function == kQualified.at(label) || name->function == label) << name->function;
      if (frames[i].detail != RBPERF_DETAIL_CFUNC) {
        EXPECT_EQ(name->file, expected_[i].path);
        EXPECT_EQ(name->line, expected_[i].line);
      }
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(names, 0);
}

TEST_F(LiveRuby, AnExitedProcessIsAClearError) {
  std::vector<RubyFrameRecord> frames = spinning_frames();
  ASSERT_GE(frames.size(), expected_.size());
  process_->kill_and_wait();
  RubyFrameCache cache;
  auto name = cache.name_frame(pid(), read_, offsets(), addresses_, frames[0]);
  ASSERT_FALSE(name);
  char iseq[32];
  std::snprintf(iseq, sizeof(iseq), "iseq 0x%llx", static_cast<unsigned long long>(frames[0].address));
  EXPECT_NE(name.error().message.find(iseq), std::string::npos) << name.error().message;
  EXPECT_NE(name.error().message.find("unreadable"), std::string::npos) << name.error().message;
  auto cfunc = cache.name_frame(pid(), read_, offsets(), addresses_, frames[2]);
  ASSERT_FALSE(cfunc);
  EXPECT_NE(cfunc.error().message.find("C function"), std::string::npos) << cfunc.error().message;
}

TEST(RubyFrameCache, GarbageIsAnErrorNotAnAllocation) {
  // A "process" whose memory is all 0xff bytes: every pointer and length is
  // absurd. The reader must refuse them without allocating their size.
  ReadMemory garbage = [](uint64_t, void* buffer, std::size_t length) {
    std::memset(buffer, 0xff, length);
    return true;
  };
  RubyVersionOffsets offsets;
  offsets.reader = RubyOffsetsTable::load_file(OMNIPROF_RUBY_YAML).find(3, 1)->reader;
  offsets.reader.iseq_body = 16;
  RubyFrameCache cache;
  RubyProcessAddresses addresses{0x10000};
  auto iseq = cache.name_frame(1, garbage, offsets, addresses, {0x10000, 5, 0x20000});
  ASSERT_FALSE(iseq);
  EXPECT_NE(iseq.error().message.find("iseq 0x10000"), std::string::npos) << iseq.error().message;
  auto cfunc = cache.name_frame(1, garbage, offsets, addresses, {0x10000, RBPERF_DETAIL_CFUNC, 0x10000});
  ASSERT_FALSE(cfunc);
  auto zero = cache.name_frame(1, garbage, offsets, addresses, {0, 0, 0});
  ASSERT_FALSE(zero);
}

}  // namespace
}  // namespace omniprof::ruby
