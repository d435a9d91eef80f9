#include "engine/device.h"

namespace reprise {

std::string to_string(Device d) {
  if (d.is_cpu()) return "cpu";
  return "cuda:" + std::to_string(d.index());
}

}  // namespace reprise
