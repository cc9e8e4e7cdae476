#include "common/api/field_error.h"

#include "common/util/error.h"

namespace torus::api {

std::string FieldError::to_string() const {
  if (path.empty() && line > 0) return std::to_string(line) + ":" + std::to_string(column) + ": " + message;
  return (path.empty() ? std::string("(document)") : path) + ": " + message;
}

std::string FieldError::to_string(std::string_view file) const {
  if (path.empty() && line > 0) {
    return std::string(file) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
  }
  if (path.empty()) return std::string(file) + ": " + message;
  return std::string(file) + ": " + to_string();
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
