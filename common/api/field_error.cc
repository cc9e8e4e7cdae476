#include "common/api/field_error.h"

#include "common/util/error.h"

namespace torus::api {
namespace {

std::string position(int line, int column) { return std::to_string(line) + ":" + std::to_string(column); }

}  // namespace

std::string FieldError::to_string() const {
  const std::string tail = path.empty() ? message : path + ": " + message;
  if (!origin.empty()) return origin + ": " + tail;
  if (line > 0) return position(line, column) + ": " + tail;
  return path.empty() ? "(document): " + message : tail;
}

std::string FieldError::to_string(std::string_view file) const {
  const std::string tail = path.empty() ? message : path + ": " + message;
  if (!origin.empty()) return origin + ": " + tail;
  if (line > 0) return std::string(file) + ":" + position(line, column) + ": " + tail;
  return std::string(file) + ": " + tail;
}

void throw_field_errors(const FieldErrors& errors, std::string_view source) {
  std::string text;
  for (const auto& e : errors) {
    if (!text.empty()) text += "\n";
    text += source.empty() ? e.to_string() : e.to_string(source);
  }
  throw InvalidArgument(text.empty() ? std::string(source) + ": invalid TrainingJob" : text);
}

}  // namespace torus::api
