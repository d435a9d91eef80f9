// Fuzzes io/json: any input either raises a reprise::Error or parses to a
// value that dump() writes back, compact and indented, as text that parses
// to the same value and dumps to the same text.
#include "io/json.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"

using namespace reprise;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json::Value value;
  try {
    value = json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error&) {
    return 0;
  }
  for (int indent : {-1, 2}) {
    const std::string text = json::dump(value, indent);
    const json::Value again = json::parse(text);
    if (!(again == value) || json::dump(again, indent) != text) __builtin_trap();
  }
  return 0;
}
