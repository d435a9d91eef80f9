// The machine side: CPU capability selection, threads, memory statistics,
// backends, and the counter-based random number generators.

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string_view.h>

#include "engine/backend.h"
#include "engine/cpu_capability.h"
#include "engine/cuda_matmul.h"
#include "engine/memory_stats.h"
#include "engine/threads.h"
#include "python/src/bind.h"
#include "rng/generator.h"

namespace reprise::python {

namespace {

using nb::arg;

// ---- CPU capability and threads ----------------------------------------------

void bind_cpu(nb::module_& m) {
  nb::enum_<CpuCapability>(m, "CpuCapability",
                           "Instruction-set levels of the CPU kernels; every one gives the same "
                           "bits, at different speeds.")
      .value("scalar", CpuCapability::scalar)
      .value("avx2", CpuCapability::avx2)
      .value("avx512", CpuCapability::avx512)
      .value("avx512_bf16", CpuCapability::avx512_bf16);
  m.def("cpu_capability", &cpu_capability,
        "The capability the CPU kernels run: the best this CPU has, or a lower one named by "
        "REPRISE_CPU_CAPABILITY (read at first use).");
  m.def("supported_cpu_capabilities", &supported_cpu_capabilities,
        "The capabilities this build carries and this CPU supports, lowest first.");
  m.def(
      "set_cpu_capability",
      [](nb::handle c) {
        set_cpu_capability(
            nb::isinstance<CpuCapability>(c)
                ? nb::cast<CpuCapability>(c)
                : parse_cpu_capability(nb::cast<std::string>(c), "set_cpu_capability"));
      },
      arg("capability"), nb::sig("def set_cpu_capability(capability: CpuCapability | str) -> None"),
      "Selects the capability for later kernels ('scalar', 'avx2', 'avx512', 'avx512_bf16').");
  m.def(
      "cuda_matmul", [] { return std::string(to_string(cuda_matmul())); },
      "How CUDA products run: 'cublas' (cuBLASLt, the default) or 'fma_chain' (batch-invariant, "
      "the CPU's bits).");
  m.def(
      "set_cuda_matmul",
      [](const std::string& mode) { set_cuda_matmul(parse_cuda_matmul(mode, "set_cuda_matmul")); },
      arg("mode"), "'cublas' or 'fma_chain' for later CUDA products.");
  m.def("num_threads", &threads::num_threads, "CPU threads of reprise's pool.");
  m.def("set_num_threads", &threads::set_num_threads, arg("n"));
  m.def(
      "backend_name", [](DeviceLike d) { return backend(d.get()).name(); },
      arg("device") = Device::cpu(), "'cpu (avx512)', 'cuda:0 (built without CUDA)', ...");
}

// ---- memory ------------------------------------------------------------------

void bind_memory(nb::module_& m) {
  nb::enum_<MemoryKind>(m, "MemoryKind", "What memory holds, as MemoryStats splits it.")
      .value("temporary", MemoryKind::temporary)
      .value("parameter", MemoryKind::parameter)
      .value("gradient", MemoryKind::gradient)
      .value("optimizer_state", MemoryKind::optimizer_state)
      .value("saved_activation", MemoryKind::saved_activation);
  nb::class_<MemoryCounters>(m, "MemoryCounters")
      .def_ro("live", &MemoryCounters::live, "Bytes held now.")
      .def_ro("peak", &MemoryCounters::peak, "Most bytes held since the last reset_peak_memory.")
      .def("__repr__", [](const MemoryCounters& c) {
        return "MemoryCounters(live=" + std::to_string(c.live) +
               ", peak=" + std::to_string(c.peak) + ")";
      });
  nb::class_<MemorySnapshot>(m, "MemorySnapshot",
                             "Live and peak bytes of one device, in total and by kind.")
      .def_ro("total", &MemorySnapshot::total)
      .def(
          "__getitem__", [](const MemorySnapshot& s, MemoryKind k) { return MemoryCounters(s[k]); },
          arg("kind"))
      .def_prop_ro(
          "by_kind",
          [](const MemorySnapshot& s) {
            nb::dict out;
            for (size_t k = 0; k < kMemoryKindCount; ++k) {
              out[memory_kind_name(MemoryKind(k))] = s.by_kind[k];
            }
            return out;
          },
          "{kind name: MemoryCounters}")
      .def("__str__", &MemorySnapshot::to_string)
      .def("__repr__", &MemorySnapshot::to_string);
  m.def(
      "memory_stats", [](DeviceLike d) { return memory_stats::snapshot(d.get()); },
      arg("device") = Device::cpu(), "A snapshot of one device's counters.");
  m.def(
      "reset_peak_memory", [](DeviceLike d) { memory_stats::reset_peaks(d.get()); },
      arg("device") = Device::cpu(), "Sets every peak to the current live value.");
}

// ---- random numbers ----------------------------------------------------------

void bind_rng(nb::module_& m) {
  nb::class_<rng::Reservation>(m, "Reservation",
                               "The exact slice of a Philox stream one random op consumed.")
      .def_ro("seed", &rng::Reservation::seed)
      .def_ro("subsequence", &rng::Reservation::subsequence)
      .def_ro("offset", &rng::Reservation::offset)
      .def_ro("count", &rng::Reservation::count)
      .def_ro("stream", &rng::Reservation::stream)
      .def("__eq__", [](const rng::Reservation& a, const rng::Reservation& b) { return a == b; })
      .def("__repr__", [](const rng::Reservation& r) { return rng::to_string(r); });

  nb::class_<rng::GeneratorState::Stream>(m, "GeneratorStream")
      .def(nb::init<>())
      .def_rw("name", &rng::GeneratorState::Stream::name)
      .def_rw("offset", &rng::GeneratorState::Stream::offset,
              "Next unreserved word, a multiple of 4.");
  nb::class_<rng::GeneratorState>(m, "GeneratorState",
                                  "Everything that determines a Generator's future output.")
      .def(nb::init<>())
      .def_rw("seed", &rng::GeneratorState::seed)
      .def_rw("streams", &rng::GeneratorState::streams)
      .def("__eq__",
           [](const rng::GeneratorState& a, const rng::GeneratorState& b) { return a == b; })
      .def("to_bytes",
           [](const rng::GeneratorState& s) {
             const std::vector<uint8_t> b = s.to_bytes();
             return nb::bytes(reinterpret_cast<const char*>(b.data()), b.size());
           })
      .def_static(
          "from_bytes",
          [](nb::bytes b) {
            return rng::GeneratorState::from_bytes(reinterpret_cast<const uint8_t*>(b.c_str()),
                                                   b.size());
          },
          arg("data"));

  nb::class_<rng::Generator>(
      m, "Generator",
      "A seed and named streams of Philox4x32-10 (cuRAND's addressing). A random op reserves "
      "exactly the words it needs and records the reservation on its node, so replay reads the "
      "same words again; (seed, offset per stream) is the whole state.")
      .def(nb::init<uint64_t>(), arg("seed") = rng::Generator::kDefaultSeed)
      .def_prop_ro("seed", &rng::Generator::seed)
      .def("manual_seed", &rng::Generator::manual_seed, arg("seed"),
           "Forgets every stream and starts over under seed.")
      .def("reserve", &rng::Generator::reserve, arg("stream"), arg("words"),
           "Reserves the next words of stream (rounded up to a multiple of 4).")
      .def("offset", &rng::Generator::offset, arg("stream"),
           "The next unreserved word of stream (0 for a stream not used yet).")
      .def("state", &rng::Generator::state)
      .def("set_state", &rng::Generator::set_state, arg("state"))
      .def_static("subsequence_of", &rng::Generator::subsequence_of, arg("stream"));
  m.def("default_generator", &rng::default_generator, nb::rv_policy::reference,
        "The process-wide generator random ops use when given none.");
  m.def(
      "manual_seed", [](uint64_t seed) { rng::default_generator().manual_seed(seed); }, arg("seed"),
      "Reseeds the default generator.");
}

}  // namespace

void bind_runtime(nb::module_& m) {
  bind_cpu(m);
  bind_memory(m);
  bind_rng(m);
}

}  // namespace reprise::python
