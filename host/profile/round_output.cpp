#include "profile/round_output.h"

#include <filesystem>
#include <system_error>

#include "log/logger.h"

namespace omniprof {

namespace fs = std::filesystem;

RoundOutput::RoundOutput(std::string directory, size_t max_pending)
    : directory_(std::move(directory)), max_pending_(max_pending == 0 ? 1 : max_pending) {}

std::vector<std::string> RoundOutput::write(const std::string& file_name, const ProfileBuilder& profile) {
  auto gzipped = profile.encode_gzip();
  if (!gzipped) {
    // Never writable, whatever the disk: not worth keeping.
    stats_.dropped++;
    log().error("round {}: cannot encode the profile: {}; round lost", file_name, gzipped.error().message);
  } else {
    pending_.push_back(Pending{file_name, std::move(*gzipped)});
    if (pending_.size() > max_pending_) {
      stats_.dropped++;
      log().error("round {} dropped: {} rounds already wait to be written to {} (at most {} are kept)",
                  pending_.front().file_name, max_pending_, directory_, max_pending_);
      pending_.pop_front();
    }
  }
  return flush();
}

std::vector<std::string> RoundOutput::flush() {
  std::vector<std::string> written;
  if (pending_.empty()) return written;
  std::error_code ec;
  bool existed = fs::is_directory(directory_, ec);
  if (!existed) {
    ec.clear();
    if (fs::create_directories(directory_, ec)) {
      log().warn("output directory {} had disappeared: recreated", directory_);
    }
  }
  while (!pending_.empty()) {
    const Pending& round = pending_.front();
    std::string path = (fs::path(directory_) / round.file_name).string();
    Result<void> r = ec ? Result<void>(make_error("cannot write profile " + path + ": cannot create directory " +
                                                  directory_ + ": " + ec.message()))
                        : write_file_atomically(path, round.gzipped);
    if (!r) {
      stats_.write_failures++;
      log().error("{}; {} round(s) kept in memory until {} is writable (at most {})", r.error().message,
                  pending_.size(), directory_, max_pending_);
      break;
    }
    stats_.written++;
    written.push_back(path);
    pending_.pop_front();
  }
  return written;
}

RoundOutputStats RoundOutput::stats() const {
  RoundOutputStats s = stats_;
  s.pending = pending_.size();
  return s;
}

}  // namespace omniprof
