#include "engine/device.h"

#include <charconv>

#include "base/error.h"

namespace reprise {

std::string to_string(Device d) {
  if (d.is_cpu()) return "cpu";
  return "cuda:" + std::to_string(d.index());
}

Device parse_device(const std::string& text, const std::string& what) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  constexpr std::string_view prefix = "cuda:";
  int index = -1;
  if (text.starts_with(prefix) && text.size() > prefix.size()) {
    const char* first = text.data() + prefix.size();
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(first, last, index);
    if (ec != std::errc() || end != last) index = -1;
  }
  REPRISE_CHECK(index >= 0, what, ": '", text, "' is not a device (expected cpu, cuda or cuda:N)");
  return Device::cuda(index);
}

}  // namespace reprise
