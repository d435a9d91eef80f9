#include "engine/grad_mode.h"

namespace reprise {
namespace {
thread_local bool grad_enabled = true;
}

bool GradMode::enabled() { return grad_enabled; }
void GradMode::set_enabled(bool on) { grad_enabled = on; }

}  // namespace reprise
