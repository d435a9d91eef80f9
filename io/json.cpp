#include "io/json.h"

#include <charconv>
#include <cmath>
#include <set>
#include <system_error>

#include "base/error.h"
#include "io/unicode.h"

namespace reprise::json {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::null:
      return "null";
    case Kind::boolean:
      return "boolean";
    case Kind::integer:
      return "integer";
    case Kind::real:
      return "real number";
    case Kind::string:
      return "string";
    case Kind::array:
      return "array";
    case Kind::object:
      return "object";
  }
  return "?";
}

// ---- Value access ----

namespace {
[[noreturn]] void wrong_kind(const char* expected, Kind got) {
  REPRISE_FAIL("json: expected ", expected, ", got ", kind_name(got));
}
}  // namespace

bool Value::as_bool() const {
  if (!is_bool()) wrong_kind("a boolean", kind());
  return std::get<bool>(v_);
}

int64_t Value::as_int() const {
  if (!is_int()) wrong_kind("an integer", kind());
  return std::get<int64_t>(v_);
}

double Value::as_double() const {
  if (is_int()) return double(std::get<int64_t>(v_));
  if (kind() != Kind::real) wrong_kind("a number", kind());
  return std::get<double>(v_);
}

const std::string& Value::as_string() const {
  if (!is_string()) wrong_kind("a string", kind());
  return std::get<std::string>(v_);
}

const Array& Value::as_array() const {
  if (!is_array()) wrong_kind("an array", kind());
  return std::get<Array>(v_);
}

const Object& Value::as_object() const {
  if (!is_object()) wrong_kind("an object", kind());
  return std::get<Object>(v_);
}

Array& Value::as_array() {
  if (!is_array()) wrong_kind("an array", kind());
  return std::get<Array>(v_);
}

Object& Value::as_object() {
  if (!is_object()) wrong_kind("an object", kind());
  return std::get<Object>(v_);
}

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : as_object()) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  const Value* v = find(key);
  REPRISE_CHECK(v != nullptr, "json: object has no member \"", key, "\"");
  return *v;
}

void Value::set(std::string key, Value value) {
  Object& members = as_object();
  for (auto& [k, v] : members) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  members.emplace_back(std::move(key), std::move(value));
}

// ---- UTF-8 ----

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is
// invalid (overlong forms, UTF-16 surrogates and code points past U+10FFFF
// are invalid, as RFC 3629 says).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const io::unicode::Decoded d = io::unicode::decode_utf8(s, i);
  return d.cp == io::unicode::kInvalidByte ? 0 : d.length;
}

// ---- Parser ----

class Parser {
 public:
  Parser(std::string_view text, ParseOptions options) : s_(text), options_(options) {}

  Value parse_document() {
    skip_whitespace();
    Value v = parse_value(0);
    skip_whitespace();
    if (pos_ != s_.size()) fail("end of input after the value");
    return v;
  }

 private:
  // Throws an Error that says where (line, column, byte) and what was
  // expected, and shows the character found there.
  [[noreturn]] void fail(std::string_view expected) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string found;
    if (pos_ >= s_.size()) {
      found = "end of input";
    } else {
      uint8_t c = uint8_t(s_[pos_]);
      if (c >= 0x20 && c < 0x7F) {
        found = detail::concat('\'', char(c), '\'');
      } else {
        static const char* hex = "0123456789abcdef";
        found = std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
      }
    }
    REPRISE_FAIL("json: at line ", line, ", column ", column, " (byte ", pos_, "): expected ",
                 expected, ", found ", found);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_whitespace() {
    while (!at_end()) {
      char c = s_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  void expect_literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail(detail::concat('\'', word, '\''));
    pos_ += word.size();
  }

  Value parse_value(int depth) {
    if (++values_ > options_.max_values) {
      fail("no more than " + std::to_string(options_.max_values) + " values in the document");
    }
    switch (peek()) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"':
        return Value(parse_string());
      case 't':
        expect_literal("true");
        return Value(true);
      case 'f':
        expect_literal("false");
        return Value(false);
      case 'n':
        expect_literal("null");
        return Value(nullptr);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail("a value (object, array, string, number, true, false or null)");
    }
  }

  void check_depth(int depth) {
    if (depth > options_.max_depth) {
      fail("nesting no deeper than " + std::to_string(options_.max_depth) + " levels");
    }
  }

  Value parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Object members;
    std::set<std::string> keys;
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return Value(std::move(members));
    }
    while (true) {
      skip_whitespace();
      if (peek() != '"') fail("a string key");
      size_t key_pos = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) {
        pos_ = key_pos;
        fail("a key not seen before in this object (duplicate key \"" + key + "\")");
      }
      skip_whitespace();
      if (peek() != ':') fail("':' after an object key");
      ++pos_;
      skip_whitespace();
      Value v = parse_value(depth);
      members.emplace_back(std::move(key), std::move(v));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Value(std::move(members));
      }
      fail("',' or '}' after an object member");
    }
  }

  Value parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Array items;
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return Value(std::move(items));
    }
    while (true) {
      skip_whitespace();
      items.push_back(parse_value(depth));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Value(std::move(items));
      }
      fail("',' or ']' after an array element");
    }
  }

  uint32_t parse_hex4() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = uint32_t(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = uint32_t(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = uint32_t(c - 'A' + 10);
      } else {
        fail("four hex digits after \\u");
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      // Printable ASCII other than '"' and '\\', most of any string, is
      // copied a run at a time instead of a character at a time.
      const size_t run = pos_;
      while (!at_end() && is_plain(uint8_t(s_[pos_]))) ++pos_;
      out.append(s_.substr(run, pos_ - run));
      if (at_end()) fail("'\"' closing the string");
      uint8_t c = uint8_t(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("an escape (\\n, \\t, \\u00XX, ...) instead of a raw control character");
      if (c == '\\') {
        ++pos_;
        char e = peek();
        ++pos_;
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u':
            parse_unicode_escape(out);
            break;
          default:
            --pos_;
            fail("an escape character (one of \" \\ / b f n r t u)");
        }
        continue;
      }
      size_t len = utf8_sequence_length(s_, pos_);
      if (len == 0) fail("valid UTF-8 in the string");
      out.append(s_.substr(pos_, len));
      pos_ += len;
    }
  }

  // After "\u": one code unit, or a surrogate pair written as two escapes.
  void parse_unicode_escape(std::string& out) {
    size_t start = pos_ - 2;
    uint32_t cp = parse_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      pos_ = start;
      fail("a high surrogate (\\uD800-\\uDBFF) before a low surrogate");
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (s_.substr(pos_, 2) != "\\u") fail("\\u and a low surrogate after a high surrogate");
      pos_ += 2;
      size_t low_pos = pos_;
      uint32_t low = parse_hex4();
      if (low < 0xDC00 || low > 0xDFFF) {
        pos_ = low_pos;
        fail("a low surrogate (DC00-DFFF) after a high surrogate");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    io::unicode::append_utf8(out, cp);
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_plain(uint8_t c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

  // The power of ten of the first nonzero digit of a well-formed number
  // ("123e5" -> 7, "0.001" -> -3); tells overflow from underflow.
  static int64_t decimal_exponent(std::string_view num) {
    size_t e = num.find_first_of("eE");
    int64_t exponent = 0;
    if (e != std::string_view::npos) {
      std::string_view digits = num.substr(e + 1);
      if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), exponent);
      // Past +-2^62 every exponent means the same here; clamping there keeps
      // the digit counts added below from overflowing (an exponent written
      // with leading zeros may read as INT64_MAX itself).
      if (ec != std::errc() || exponent > INT64_MAX / 2 || exponent < INT64_MIN / 2) {
        exponent = digits[0] == '-' ? INT64_MIN / 2 : INT64_MAX / 2;
      }
      num = num.substr(0, e);
    }
    if (!num.empty() && num[0] == '-') num.remove_prefix(1);
    size_t dot = num.find('.');
    std::string_view int_part = num.substr(0, dot);
    std::string_view frac =
        dot == std::string_view::npos ? std::string_view() : num.substr(dot + 1);
    size_t k = int_part.find_first_not_of('0');
    if (k != std::string_view::npos) return exponent + int64_t(int_part.size() - 1 - k);
    size_t j = frac.find_first_not_of('0');
    if (j == std::string_view::npos) return INT64_MIN / 2;  // zero never overflows
    return exponent - int64_t(j + 1);
  }

  Value parse_number() {
    size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (is_digit(peek())) fail("'.', 'e' or the end of the number after a leading 0");
    } else if (is_digit(peek())) {
      while (is_digit(peek())) ++pos_;
    } else {
      fail("a digit");
    }
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (!is_digit(peek())) fail("a digit after the decimal point");
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) fail("a digit in the exponent");
      while (is_digit(peek())) ++pos_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(first, last, v);
      if (ec == std::errc() && end == last) return Value(v);
      // Out of int64 range: fall through to a double, as other parsers do.
    }
    double d = 0;
    auto [end, ec] = std::from_chars(first, last, d);
    if (ec == std::errc::result_out_of_range) {
      // Too small in magnitude reads as a signed zero, as strtod does; too
      // large has no double.
      pos_ = start;
      if (decimal_exponent(std::string_view(first, size_t(last - first))) >= 0) {
        fail("a number within the range of a double");
      }
      pos_ = size_t(last - s_.data());
      return Value(*first == '-' ? -0.0 : 0.0);
    }
    if (ec != std::errc() || end != last) {
      pos_ = start;
      fail("a number");
    }
    return Value(d);
  }

  std::string_view s_;
  ParseOptions options_;
  size_t pos_ = 0;
  size_t values_ = 0;  // parsed so far, for max_values
};

// ---- Writer ----

void dump_string(std::string& out, const std::string& s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    uint8_t c = uint8_t(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          size_t len = utf8_sequence_length(s, i);
          REPRISE_CHECK(len != 0, "json::dump: string is not valid UTF-8 at byte ", i);
          out.append(s, i, len);
          i += len;
          continue;
        }
    }
    ++i;
  }
  out += '"';
}

void dump_real(std::string& out, double d) {
  REPRISE_CHECK(std::isfinite(d), "json::dump: ", d, " cannot be written as JSON");
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  std::string_view text(buf, size_t(end - buf));
  out += text;
  // Keep it a real on the way back: "1" would read back as an integer.
  if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

void newline(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out += '\n';
  out.append(size_t(indent) * size_t(level), ' ');
}

void dump_value(std::string& out, const Value& v, int indent, int level) {
  switch (v.kind()) {
    case Kind::null:
      out += "null";
      return;
    case Kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Kind::integer:
      out += std::to_string(v.as_int());
      return;
    case Kind::real:
      dump_real(out, v.as_double());
      return;
    case Kind::string:
      dump_string(out, v.as_string());
      return;
    case Kind::array: {
      const Array& items = v.as_array();
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, level + 1);
        dump_value(out, items[i], indent, level + 1);
      }
      if (!items.empty()) newline(out, indent, level);
      out += ']';
      return;
    }
    case Kind::object: {
      const Object& members = v.as_object();
      out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, level + 1);
        dump_string(out, members[i].first);
        out += indent < 0 ? ":" : ": ";
        dump_value(out, members[i].second, indent, level + 1);
      }
      if (!members.empty()) newline(out, indent, level);
      out += '}';
      return;
    }
  }
}

}  // namespace

Value parse(std::string_view text, ParseOptions options) {
  return Parser(text, options).parse_document();
}

std::string dump(const Value& value, int indent) {
  std::string out;
  dump_value(out, value, indent, 0);
  return out;
}

}  // namespace reprise::json
