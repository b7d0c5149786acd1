// result.h — errors as values. `Error` carries a human-readable message that grows context as it
// travels up ("job file scripts/jobs/x.lua: mesh.heartbeat_ms: expected integer >= 10, got 5").
// `Result<T>` is either a T or an Error; `Status` is `Result<void>`. Exceptions are reserved for
// programming errors and for foreign libraries that throw (caught at the boundary, turned into Errors).
#pragma once

#include <optional>
#include <type_traits>
#include <string>
#include <utility>
#include <variant>

namespace sal {

class Error {
 public:
  Error() = default;
  explicit Error(std::string message, int code = 0) : message_(std::move(message)), code_(code) {}

  const std::string& message() const { return message_; }
  // An optional machine-readable code (e.g. a wire ErrorCode); 0 when none.
  int code() const { return code_; }

  // Prefixes the message with what was being done: "loading policy: " + message.
  Error& context(const std::string& what) {
    message_ = what + ": " + message_;
    return *this;
  }
  Error with_context(const std::string& what) const {
    Error copy = *this;
    copy.context(what);
    return copy;
  }

 private:
  std::string message_;
  int code_ = 0;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }
  Error& error() { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }
  Error& error() { return *error_; }

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

inline Status ok_status() { return Status{}; }

// Builds an Error from pieces: fail("expected ", n, " got ", m) — only for strings and numbers.
template <class... Parts>
Error fail(const Parts&... parts) {
  std::string s;
  auto add = [&s](const auto& p) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(p)>>) {
      s += std::to_string(p);
    } else {
      s += p;
    }
  };
  (add(parts), ...);
  return Error(std::move(s));
}

}  // namespace sal

// Propagates an error from an expression returning Status/Result, adding no context.
#define SAL_TRY(expr)                                  \
  do {                                                 \
    auto sal_try_result_ = (expr);                     \
    if (!sal_try_result_.ok()) return sal_try_result_.error(); \
  } while (0)
