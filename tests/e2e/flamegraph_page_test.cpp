// The flamegraph page (`omniprof record --flamegraph`, `omniprof flamegraph`)
// as a person opens it: loaded in headless Chromium (Debian's `chromium`),
// read back through the DOM the page writes (--dump-dom), and photographed
// (--screenshot, kept in the test's output directory under the build tree).
//
// One ctest entry, FlamegraphPageTest.chromium, labelled host_only: the
// kernel matrix's guests have no Chromium (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "e2e_support.h"
#include "profile/frame_type.h"
#include "profile/profile_builder.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kChromium = "/usr/bin/chromium";

#define OMNIPROF_REQUIRE_CHROMIUM()                                                              \
  do {                                                                                           \
    if (!fs::exists(kChromium)) {                                                                \
      if (::omniprof::e2e::in_ci()) FAIL() << kChromium << " missing in CI (scripts/install-deps.sh)"; \
      GTEST_SKIP() << kChromium << " missing (apt install chromium)";                           \
    }                                                                                            \
  } while (0)

// build/tests/flamegraph-page/TEST: kept after the run, printed.
std::string output_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(OMNIPROF_BUILD_DIR) / "tests" / "flamegraph-page" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::cout << "output directory: " << dir.string() << std::endl;
  return dir.string();
}

struct PageLoad {
  std::string dom;
  std::string log;  // Chromium's stderr (--enable-logging=stderr)
};

// Chromium, headless, on `html` (with `fragment`, e.g. "search=leaf"): the
// DOM after the page's script ran, and a screenshot into `screenshot`.
PageLoad load_page(const std::string& dir, const std::string& html, const std::string& fragment,
                   const std::string& screenshot) {
  std::string url = "file://" + html + (fragment.empty() ? "" : "#" + fragment);
  // A browser profile of its own (no other Chromium shares it), thrown away.
  std::string user_data = temp_dir("chromium");
  auto chromium = [&](const std::string& action) {
    std::vector<std::string> argv = {kChromium, "--headless", "--no-sandbox", "--disable-gpu",
                                     "--enable-logging=stderr", "--v=0", "--no-first-run",
                                     "--user-data-dir=" + user_data, "--window-size=1400,900",
                                     "--virtual-time-budget=20000", action, url};
    return run_command(argv);
  };
  auto dumped = chromium("--dump-dom");
  EXPECT_EQ(dumped.exit_code, 0) << dumped.err;
  auto shot = chromium("--screenshot=" + screenshot);
  EXPECT_EQ(shot.exit_code, 0) << shot.err;
  EXPECT_TRUE(fs::exists(screenshot) && fs::file_size(screenshot) > 10000) << screenshot << "\n" << shot.err;
  fs::remove_all(user_data);
  // Beside the screenshot: what the page wrote, and what Chromium logged.
  std::string stem = (fs::path(dir) / fs::path(screenshot).stem()).string();
  std::ofstream(stem + ".dom.html") << dumped.out;
  std::ofstream(stem + ".chromium.log") << dumped.err << shot.err;
  return {dumped.out, dumped.err + shot.err};
}

std::string html_unescape(std::string s) {
  for (auto [entity, text] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"},
                              {"&nbsp;", "\xc2\xa0"}, {"&amp;", "&"}}) {
    for (size_t at = s.find(entity); at != std::string::npos; at = s.find(entity, at + 1)) {
      s.replace(at, std::string_view(entity).size(), text);
    }
  }
  return s;
}

// A frame the page lists as drawn (#drawn-frames).
struct DrawnFrame {
  std::string name, type;
  double samples = 0;
  bool match = false;
};

std::vector<DrawnFrame> drawn_frames(const std::string& dom) {
  std::vector<DrawnFrame> frames;
  size_t begin = dom.find("<ol id=\"drawn-frames\"");
  size_t end = dom.find("</ol>", begin);
  if (begin == std::string::npos || end == std::string::npos) return frames;
  std::string list = dom.substr(begin, end - begin);
  std::regex item(R"re(<li ([^>]*)>([^<]*)</li>)re");
  for (std::sregex_iterator it(list.begin(), list.end(), item), last; it != last; ++it) {
    std::string attributes = (*it)[1];
    DrawnFrame frame{html_unescape((*it)[2]), "", 0, false};
    std::smatch m;
    if (std::regex_search(attributes, m, std::regex(R"re(data-type="([^"]*)")re"))) frame.type = m[1];
    if (std::regex_search(attributes, m, std::regex(R"re(data-samples="([0-9.]+)")re"))) {
      frame.samples = std::stod(m[1]);
    }
    frame.match = attributes.find("data-match=\"true\"") != std::string::npos;
    frames.push_back(frame);
  }
  return frames;
}

const DrawnFrame* find_drawn(const std::vector<DrawnFrame>& frames, const std::string& name) {
  auto it = std::find_if(frames.begin(), frames.end(), [&](const DrawnFrame& f) { return f.name == name; });
  return it == frames.end() ? nullptr : &*it;
}

// The text of the element with `id`, unescaped ("" if absent).
std::string element_text(const std::string& dom, const std::string& id) {
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex("id=\"" + id + "\"[^>]*>([^<]*)<"))) return "";
  return html_unescape(m[1]);
}

std::string element_attribute(const std::string& dom, const std::string& id, const std::string& attribute) {
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex("<[^>]*id=\"" + id + "\"[^>]*>"))) return "";
  std::string tag = m[0];
  if (!std::regex_search(tag, m, std::regex(attribute + "=\"([^\"]*)\""))) return "";
  return m[1];
}

// The page ran without an error: its script finished (body data-rendered),
// its error list is empty, and Chromium logged nothing from the console.
void expect_no_page_errors(const PageLoad& page) {
  EXPECT_NE(page.dom.find("data-rendered=\"true\""), std::string::npos) << "the page's script did not finish";
  EXPECT_NE(page.dom.find("<ul id=\"errors\" hidden=\"\"></ul>"), std::string::npos)
      << "the page reported errors: " << page.dom.substr(page.dom.find("id=\"errors\""), 2000);
  std::regex console(R"(CONSOLE[^\n]*|Uncaught[^\n]*)");
  for (std::sregex_iterator it(page.log.begin(), page.log.end(), console), last; it != last; ++it) {
    ADD_FAILURE() << "console: " << it->str();
  }
}

TEST(FlamegraphPageTest, RecordedWorkloadShowsItsHotFunctionAndSearchHighlightsIt) {
  OMNIPROF_REQUIRE_CHROMIUM();
  OMNIPROF_REQUIRE_BPF();
  std::string dir = output_dir();
  BackgroundProcess chain({workload("chain"), "120"});
  std::string profile = dir + "/chain.pb.gz", page = dir + "/chain.html";
  auto recorded = run_command({OMNIPROF_BINARY, "record", "-d", "4", "-p", std::to_string(chain.pid()), "-o",
                               profile, "--flamegraph", page});
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_NE(recorded.out.find("wrote " + page), std::string::npos) << recorded.out;

  // `omniprof flamegraph` of the saved profile writes the same page.
  std::string again = dir + "/chain-again.html";
  auto converted = run_command({OMNIPROF_BINARY, "flamegraph", profile, "-o", again});
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  std::ifstream a(page), b(again);
  std::string page_text((std::istreambuf_iterator<char>(a)), {}), again_text((std::istreambuf_iterator<char>(b)), {});
  EXPECT_TRUE(page_text == again_text) << "record --flamegraph and flamegraph PROFILE differ";

  auto loaded = load_page(dir, page, "search=leaf", dir + "/screenshot.png");
  expect_no_page_errors(loaded);
  auto frames = drawn_frames(loaded.dom);
  ASSERT_FALSE(frames.empty()) << loaded.dom.substr(0, 4000);
  const DrawnFrame* leaf = find_drawn(frames, "leaf");
  ASSERT_NE(leaf, nullptr) << "leaf not drawn; drawn: " << frames.front().name << " ...";
  EXPECT_EQ(leaf->type, "native");
  EXPECT_TRUE(leaf->match) << "leaf drawn but not highlighted";
  const DrawnFrame* root = find_drawn(frames, "all");
  ASSERT_NE(root, nullptr);
  // 4 s at 99 Hz of a process always on a CPU, fewer on a busy machine.
  EXPECT_GT(root->samples, 40);
  // Nearly every sample of chain is in leaf (-p: only chain's samples).
  EXPECT_GE(leaf->samples * 10, root->samples * 8) << leaf->samples << " of " << root->samples;
  for (const char* caller : {"main", "stage_a", "stage_b", "stage_c"}) {
    EXPECT_NE(find_drawn(frames, caller), nullptr) << caller << " not drawn";
  }
  std::string status = element_text(loaded.dom, "search-status");
  EXPECT_TRUE(std::regex_search(status, std::regex(R"(search "leaf": 1 match, [0-9.]+% of samples)"))) << status;
  double share = std::stod(element_attribute(loaded.dom, "search-status", "data-share"));
  EXPECT_GE(share, 80) << status;
  std::cout << "search status: " << status << "\n"
            << "render: " << element_text(loaded.dom, "render-time") << std::endl;
}

TEST(FlamegraphPageTest, NamesShowExactlyAndLabelsFilter) {
  OMNIPROF_REQUIRE_CHROMIUM();
  std::string dir = output_dir();
  // Names as Python and Ruby name frames, and one that would end the page's
  // <script> element if it were written unescaped.
  const std::string hostile = "</script><script>document.title='injected'</script>";
  ProfileBuilder builder(10'000'000, 0);
  auto frame = [&](const std::string& type, const std::string& name) {
    return builder.add_location(0, 0, {{name, typed_system_name(type, name), "/srv/app", 3}});
  };
  uint64_t module = frame("python", "<module>");
  uint64_t block = frame("ruby", "block (2 levels) in <class:Worker>");
  uint64_t weird = frame("python", hostile);
  builder.add_sample({block, module}, 6, {.pid = 10, .tid = 11, .comm = "first", .thread_name = "main"});
  builder.add_sample({weird, module}, 3, {.pid = 20, .tid = 21, .comm = "</script>", .thread_name = "t"});
  builder.add_sample({module}, 1, {.pid = 20, .tid = 22, .comm = "</script>", .thread_name = "t"});
  std::string profile = dir + "/names.pb.gz", page = dir + "/names.html";
  ASSERT_TRUE(builder.write_gzip(profile).ok());
  auto converted = run_command({OMNIPROF_BINARY, "flamegraph", profile, "-o", page});
  ASSERT_EQ(converted.exit_code, 0) << converted.err;

  auto loaded = load_page(dir, page, "search=%3Cclass%3AWorker%3E", dir + "/names.png");
  expect_no_page_errors(loaded);
  EXPECT_NE(loaded.dom.find("<title>names.pb.gz: omniprof flamegraph</title>"), std::string::npos)
      << "a name ran as script";
  auto frames = drawn_frames(loaded.dom);
  for (const auto& [name, type, samples] : {std::tuple{"<module>", "python", 10}, {hostile.c_str(), "python", 3},
                                           {"block (2 levels) in <class:Worker>", "ruby", 6}}) {
    const DrawnFrame* f = find_drawn(frames, name);
    ASSERT_NE(f, nullptr) << name << " not drawn as written";
    EXPECT_EQ(f->type, type);
    EXPECT_EQ(f->samples, samples) << name;
  }
  EXPECT_EQ(element_text(loaded.dom, "search-status"), "search \"<class:Worker>\": 1 match, 60.0% of samples");

  // A label filter from the URL: only comm "</script>" (4 of 10 samples).
  auto filtered = load_page(dir, page, "comm=%3C%2Fscript%3E", dir + "/names-filtered.png");
  expect_no_page_errors(filtered);
  EXPECT_NE(element_text(filtered.dom, "view-status").find("4 of 10 samples; filter comm=</script>"), std::string::npos)
      << element_text(filtered.dom, "view-status");
  auto filtered_frames = drawn_frames(filtered.dom);
  EXPECT_EQ(find_drawn(filtered_frames, "block (2 levels) in <class:Worker>"), nullptr);
  ASSERT_NE(find_drawn(filtered_frames, hostile), nullptr);
}

TEST(FlamegraphPageTest, BadInputGivesOneLineNamingTheFile) {
  std::string dir = output_dir();
  std::string not_a_profile = dir + "/not-a-profile.pb.gz";
  std::ofstream(not_a_profile) << "not a profile";
  auto result = run_command({OMNIPROF_BINARY, "flamegraph", not_a_profile, "-o", dir + "/out.html"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find(not_a_profile), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir + "/out.html"));

  // record refuses an unwritable page before it samples (no BPF loaded).
  auto record = run_command({OMNIPROF_BINARY, "record", "-d", "1", "-o", dir + "/p.pb.gz", "--flamegraph",
                             dir + "/missing/page.html"});
  EXPECT_EQ(record.exit_code, 2) << record.err;
  EXPECT_EQ(std::count(record.err.begin(), record.err.end(), '\n'), 1) << record.err;
  EXPECT_NE(record.err.find("--flamegraph: cannot write " + dir + "/missing/page.html: directory " + dir +
                            "/missing does not exist"),
            std::string::npos)
      << record.err;
  EXPECT_FALSE(fs::exists(dir + "/p.pb.gz"));
}

}  // namespace
}  // namespace omniprof::e2e
