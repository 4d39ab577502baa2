// Typed errors. Every message starts with "[op]" so a user can grep the source for the failing op.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace alpha {

// Base of every error Alpha throws on purpose; the CLI maps these to clean non-zero exits.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShapeError : public Error { using Error::Error; };   // incompatible shapes
class DTypeError : public Error { using Error::Error; };   // wrong element type
class IndexError : public Error { using Error::Error; };   // index out of range (tokens, dims)
class ValueError : public Error { using Error::Error; };   // bad scalar argument (p, eps, ...)

// ALPHA_CHECK(cond, ErrorType, "[op] fmt", args...): throw ErrorType with a formatted message.
#define ALPHA_CHECK(cond, Err, ...)                                 \
  do {                                                             \
    if (!(cond)) throw ::alpha::Err(::fmt::format(__VA_ARGS__));  \
  } while (0)

}  // namespace alpha
