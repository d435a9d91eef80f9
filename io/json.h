#pragma once
// A small, strict JSON value type with a parser and a writer (RFC 8259).
//
// Used for safetensors headers, Hugging Face config.json files and training
// metadata. Strict means: no comments, no trailing commas, no duplicate
// object keys, no leading zeros, no NaN/Infinity, strings must be valid
// UTF-8 without raw control characters, and nothing but whitespace may follow
// the value. Integral numbers that fit in int64 are kept exactly; every other
// number is a double. Objects keep their members in document order.
//
// Errors are reprise::Error with the 1-based line and column, the byte
// offset, and what the parser expected there.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace reprise::json {

class Value;
using Array = std::vector<Value>;
// Members in document (or insertion) order. Keys are unique when the object
// comes from parse(); set() keeps them unique.
using Object = std::vector<std::pair<std::string, Value>>;

enum class Kind : uint8_t { null, boolean, integer, real, string, array, object };
const char* kind_name(Kind k);

class Value {
 public:
  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int v) : v_(int64_t(v)) {}
  Value(int64_t v) : v_(v) {}
  Value(double v) : v_(v) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  Kind kind() const { return Kind(v_.index()); }
  bool is_null() const { return kind() == Kind::null; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_number() const { return kind() == Kind::integer || kind() == Kind::real; }
  bool is_string() const { return kind() == Kind::string; }
  bool is_array() const { return kind() == Kind::array; }
  bool is_object() const { return kind() == Kind::object; }

  // Typed access; each raises an Error naming the expected and actual kind.
  bool as_bool() const;
  int64_t as_int() const;    // integers only (1.0 is a real, not an integer)
  double as_double() const;  // integers or reals
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& as_array();
  Object& as_object();

  // Object members. find() returns nullptr when the key is absent; at()
  // raises an Error naming the key; set() replaces or appends.
  const Value* find(std::string_view key) const;
  const Value& at(std::string_view key) const;
  void set(std::string key, Value value);

  friend bool operator==(const Value& a, const Value& b) { return a.v_ == b.v_; }

 private:
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> v_;
};

struct ParseOptions {
  int max_depth = 128;  // nesting of arrays and objects; deeper input is an Error
  // Values in the whole document (each number, string, literal, array and
  // object counts one; object keys do not); more is an Error. A value takes
  // 40 bytes or more in memory however short its text ("0," is two bytes),
  // so without this bound a 100 MB document could take 2.7 GB; with it,
  // parsing takes at most about 300 MB beyond the strings' own bytes.
  size_t max_values = size_t(1) << 21;
};

// Parses exactly one JSON value surrounded by optional whitespace.
Value parse(std::string_view text, ParseOptions options = {});

// Writes `value` as JSON. indent < 0: compact, no whitespace at all;
// indent >= 0: one member per line, indented by that many spaces per level.
// Reals are written in the shortest form that reads back to the same double,
// with a ".0" when they would otherwise read back as integers. Non-finite
// reals and strings that are not valid UTF-8 raise an Error.
std::string dump(const Value& value, int indent = -1);

}  // namespace reprise::json
