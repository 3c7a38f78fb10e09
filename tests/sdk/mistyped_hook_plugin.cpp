// A plugin class whose `gone` member is named like the process_gone hook
// but takes another parameter: set_instance_hooks must refuse it at compile
// time (tests/sdk/sdk_tests.py mistyped-hook), not leave process_gone out.
// Built with -DOMNIPROF_WELL_TYPED, the same class with the hook's signature
// compiles: what fails is the signature, nothing else.
#include <omniprof/plugin.hpp>

#include <string>

namespace {

class MistypedPlugin {
 public:
#ifdef OMNIPROF_WELL_TYPED
  void gone(int32_t pid) { last_gone_ = std::to_string(pid); }
#else
  void gone(const std::string& pid) { last_gone_ = pid; }
#endif
  void tick() {}

 private:
  std::string last_gone_;
};

omniprof_plugin make_entry() {
  omniprof_plugin entry = omniprof::sdk::make_plugin_entry();
  omniprof::sdk::set_instance_hooks<MistypedPlugin>(entry);
  return entry;
}

}  // namespace

const omniprof_plugin kEntry = make_entry();
