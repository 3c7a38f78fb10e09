// What the interpreter benchmarks (interpreter_unwind_cost,
// interpreter_overhead) need to know of each runtime: its plugin's counter
// prefix, the interpreters to try by default, and its recursion workload
// (tests/workloads/*_recursion.*: DEPTH SECONDS SPIN, prints
// "recursions_per_second N" at the end).
#pragma once

#include <string>
#include <vector>

namespace omniprof::bench {

struct InterpreterRuntime {
  std::string name;  // the plugin's runtime key and counter prefix: python, ruby
  std::string recursion_script;
  std::vector<std::string> default_interpreters;
};

inline std::vector<InterpreterRuntime> interpreter_runtimes() {
  std::vector<InterpreterRuntime> runtimes;
  InterpreterRuntime python{"python", OMNIPROF_WORKLOADS_SOURCE_DIR "/python_recursion.py", {}};
  for (const char* v : {"2.7.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"}) {
    python.default_interpreters.push_back(std::string("/root/.pyenv/versions/") + v + "/bin/python");
  }
  // Debian's sid builds (scripts/fetch-test-pythons.sh): 3.14's tagged
  // stack references and 3.15.
  for (const char* name : {"python3.14", "python3.15"}) {
    python.default_interpreters.push_back(std::string("/opt/omniprof/test-pythons/bin/") + name);
  }
  runtimes.push_back(python);
  runtimes.push_back({"ruby", OMNIPROF_WORKLOADS_SOURCE_DIR "/ruby_recursion.rb", {"/usr/bin/ruby3.1"}});
  return runtimes;
}

// The runtime named `name`; nullptr if there is none.
inline const InterpreterRuntime* find_interpreter_runtime(const std::vector<InterpreterRuntime>& runtimes,
                                                          const std::string& name) {
  for (const auto& r : runtimes) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

}  // namespace omniprof::bench
