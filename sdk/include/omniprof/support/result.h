// Result<T>: the return type of every operation that can fail for a reason the
// caller can recover from (bad input, a process that went away, a full map).
// Fatal errors (a broken invariant, no BPF at all) are exceptions caught in main.
// In the SDK's helper library (header-only part) so that plugins use the same
// type as the host. Never crosses the C plugin boundary.
#ifndef OMNIPROF_RESULT_HPP
#define OMNIPROF_RESULT_HPP

#include <string>
#include <utility>
#include <variant>

namespace omniprof {

struct Error {
  std::string message;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}        // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<Error>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Result<void> ok() { return Result<void>(); }

}  // namespace omniprof

#endif  // OMNIPROF_RESULT_HPP
