#include "operator/kube/field_filter.h"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <utility>

namespace torus::kube {
namespace {

using Node = FieldFilter::Node;

// A JSON reader for watch event lines that builds the DOM for what the filter keeps and only steps over what it
// leaves out. nlohmann's own lexer reads a byte at a time and records each in two buffers (the token, and its text
// for error messages), which was ~70% of a watch event's parse; this one scans strings and skipped values in runs.
// It accepts exactly RFC 8259 JSON (UTF-8 checked, \u escapes and surrogate pairs decoded) for the values it keeps,
// with nlohmann's number types (negative integers int64, others uint64, out of range or with a fraction double); a
// value it leaves out is checked for balanced brackets and closed strings only.
class Reader {
 public:
  explicit Reader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool document(json& out, const Node* filter) {
    space();
    if (!value(out, filter, 0)) return false;
    space();
    return p_ == end_;
  }

 private:
  static constexpr int kMaxDepth = 512;

  void space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool eat(char c) {
    space();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  bool value(json& out, const Node* filter, int depth) {
    if (p_ == end_ || depth > kMaxDepth) return false;
    switch (*p_) {
      case '{':
        return object(out, filter, depth);
      case '[':
        return array(out, depth);
      case '"': {
        std::string text;
        if (!string(text)) return false;
        out = std::move(text);
        return true;
      }
      case 't':
        if (!literal("true", 4)) return false;
        out = true;
        return true;
      case 'f':
        if (!literal("false", 5)) return false;
        out = false;
        return true;
      case 'n':
        if (!literal("null", 4)) return false;
        out = nullptr;
        return true;
      default:
        return number(out);
    }
  }

  bool object(json& out, const Node* filter, int depth) {
    ++p_;  // '{'
    out = json::object();
    auto& members = out.get_ref<json::object_t&>();
    space();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      space();
      std::string key;
      if (p_ == end_ || *p_ != '"' || !string(key) || !eat(':')) return false;
      space();
      const Node* child = nullptr;
      bool keep = true;
      if (filter) {
        auto it = filter->children.find(key);
        const bool listed = it != filter->children.end();
        keep = listed ? it->second.rule != Node::Rule::kDrop : filter->rule != Node::Rule::kKeepOnly;
        if (listed) child = &it->second;
      }
      if (keep) {
        if (!value(members[std::move(key)], child, depth + 1)) return false;
      } else if (!skip()) {
        return false;
      }
      space();
      if (p_ == end_) return false;
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      if (*p_++ != ',') return false;
    }
  }

  bool array(json& out, int depth) {
    ++p_;  // '['
    out = json::array();
    auto& elements = out.get_ref<json::array_t&>();
    space();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      space();
      if (!value(elements.emplace_back(), nullptr, depth + 1)) return false;
      space();
      if (p_ == end_) return false;
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      if (*p_++ != ',') return false;
    }
  }

  bool literal(const char* word, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return false;
    p_ += n;
    return true;
  }

  bool number(json& out) {
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ == end_ || !digit(*p_)) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    bool integral = true;
    if (p_ < end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (p_ == end_ || !digit(*p_)) return false;
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !digit(*p_)) return false;
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    if (integral) {
      if (*start == '-') {
        int64_t v = 0;
        if (std::from_chars(start, p_, v).ec == std::errc()) {
          out = v;
          return true;
        }
      } else {
        uint64_t v = 0;
        if (std::from_chars(start, p_, v).ec == std::errc()) {
          out = v;
          return true;
        }
      }
    }
    double v = 0;
    const auto [end, ec] = std::from_chars(start, p_, v);
    if (end != p_ || (ec != std::errc() && ec != std::errc::result_out_of_range)) return false;
    out = v;
    return true;
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  // A string, p_ at its opening quote: runs of plain bytes are appended at once.
  bool string(std::string& out) {
    ++p_;
    for (;;) {
      const char* run = p_;
      while (p_ < end_) {
        const auto c = static_cast<unsigned char>(*p_);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++p_;
      }
      out.append(run, p_);
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c >= 0x80) {
        if (!utf8_sequence(out)) return false;
      } else if (!escape(out)) {
        return false;
      }
    }
  }

  // One multi-byte UTF-8 character, checked as RFC 3629 says (no overlongs, no surrogates, at most U+10FFFF).
  bool utf8_sequence(std::string& out) {
    const auto* s = reinterpret_cast<const unsigned char*>(p_);
    const size_t left = static_cast<size_t>(end_ - p_);
    auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
      return i < left && s[i] >= lo && s[i] <= hi;
    };
    size_t n = 0;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
      n = cont(1) ? 2 : 0;
    } else if (s[0] == 0xE0) {
      n = cont(1, 0xA0) && cont(2) ? 3 : 0;
    } else if (s[0] == 0xED) {
      n = cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    } else if (s[0] >= 0xE1 && s[0] <= 0xEF) {
      n = cont(1) && cont(2) ? 3 : 0;
    } else if (s[0] == 0xF0) {
      n = cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    } else if (s[0] >= 0xF1 && s[0] <= 0xF3) {
      n = cont(1) && cont(2) && cont(3) ? 4 : 0;
    } else if (s[0] == 0xF4) {
      n = cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    }
    if (n == 0) return false;
    out.append(p_, n);
    p_ += n;
    return true;
  }

  bool hex4(unsigned& v) {
    if (end_ - p_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    return true;
  }

  bool escape(std::string& out) {
    ++p_;  // '\\'
    if (p_ == end_) return false;
    const char c = *p_++;
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out += c;
        return true;
      case 'b':
        out += '\b';
        return true;
      case 'f':
        out += '\f';
        return true;
      case 'n':
        out += '\n';
        return true;
      case 'r':
        out += '\r';
        return true;
      case 't':
        out += '\t';
        return true;
      case 'u':
        break;
      default:
        return false;
    }
    unsigned cp = 0;
    if (!hex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate alone
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      unsigned low = 0;
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
      p_ += 2;
      if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    auto byte = [&](unsigned b) { out += static_cast<char>(b); };
    if (cp < 0x80) {
      byte(cp);
    } else if (cp < 0x800) {
      byte(0xC0 | (cp >> 6));
      byte(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      byte(0xE0 | (cp >> 12));
      byte(0x80 | ((cp >> 6) & 0x3F));
      byte(0x80 | (cp & 0x3F));
    } else {
      byte(0xF0 | (cp >> 18));
      byte(0x80 | ((cp >> 12) & 0x3F));
      byte(0x80 | ((cp >> 6) & 0x3F));
      byte(0x80 | (cp & 0x3F));
    }
    return true;
  }

  // Steps over one value left out: strings closed, brackets balanced and matched, nothing built.
  bool skip() {
    std::string closers;
    for (;;) {
      space();
      if (p_ == end_) return false;
      const char c = *p_;
      if (c == '{' || c == '[') {
        if (closers.size() > kMaxDepth) return false;
        closers += c == '{' ? '}' : ']';
        ++p_;
        continue;
      }
      if (c == ',' || c == ':') {
        if (closers.empty()) return false;
        ++p_;
        continue;
      }
      if (c == '}' || c == ']') {
        if (closers.empty() || closers.back() != c) return false;
        closers.pop_back();
        ++p_;
      } else if (c == '"') {
        if (!skip_string()) return false;
      } else {  // a number or a literal: up to the next structural byte
        const char* start = p_;
        while (p_ < end_ && !std::strchr(",:]}[{\" \n\r\t", *p_)) ++p_;
        if (p_ == start) return false;
      }
      if (closers.empty()) return true;
    }
  }

  bool skip_string() {
    ++p_;
    for (;;) {
      while (p_ < end_ && *p_ != '"' && *p_ != '\\') ++p_;
      if (p_ == end_) return false;
      if (*p_ == '"') {
        ++p_;
        return true;
      }
      if (end_ - p_ < 2) return false;
      p_ += 2;  // an escape: its second byte is never the closing quote
    }
  }

  const char* p_;
  const char* end_;
};

void apply_node(json& value, const Node& node) {
  if (!value.is_object()) return;
  if (node.rule == Node::Rule::kKeepOnly) {
    for (auto it = value.begin(); it != value.end();) {
      it = node.children.count(it.key()) ? std::next(it) : value.erase(it);
    }
  }
  for (const auto& [key, child] : node.children) {
    auto it = value.find(key);
    if (it == value.end()) continue;
    if (child.rule == Node::Rule::kDrop) {
      value.erase(it);
    } else {
      apply_node(*it, child);
    }
  }
}

}  // namespace

Node& FieldFilter::node_at(std::string_view path) {
  Node* node = &root_;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    node = &node->children.try_emplace(std::string(part)).first->second;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return *node;
}

FieldFilter& FieldFilter::drop(std::string_view path) {
  Node& node = node_at(path);
  node.rule = Node::Rule::kDrop;
  node.children.clear();
  event_root_.children["object"] = root_;
  return *this;
}

FieldFilter& FieldFilter::keep_only(std::string_view path, const std::vector<std::string>& members) {
  Node& node = node_at(path);
  node.rule = Node::Rule::kKeepOnly;
  for (const auto& m : members) node.children.try_emplace(m);
  event_root_.children["object"] = root_;
  return *this;
}

void FieldFilter::apply(json& object) const { apply_node(object, root_); }

json FieldFilter::parse_event(std::string_view line) const {
  json doc;
  if (!Reader(line).document(doc, &event_root_)) return json(json::value_t::discarded);
  return doc;
}

}  // namespace torus::kube
