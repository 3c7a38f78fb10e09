// PyResult<T>: what the python plugin's user space returns for an operation
// that can fail for a reason the caller recovers from (a process that went
// away, a garbage pointer, a file that is not what it claims). The plugin
// includes only sdk/ and bpf/, so it cannot use host/common/result.h; this is
// the same shape (ok(), value(), error().message) so a later move of Result
// into the SDK is a rename.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace omniprof::python {

struct PyError {
  std::string message;
};

template <typename T>
class [[nodiscard]] PyResult {
 public:
  PyResult(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  PyResult(PyError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const PyError& error() const { return std::get<PyError>(v_); }

 private:
  std::variant<T, PyError> v_;
};

inline PyError py_error(std::string message) { return PyError{std::move(message)}; }

}  // namespace omniprof::python
