// reprise.io: safetensors files (validated on read, written atomically) and
// Hugging Face / SentencePiece tokenizers.

#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>

#include <map>
#include <utility>

#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "python/src/bind.h"

namespace reprise::python {

namespace {

using nb::arg;

// A safetensors file's header entries and tensors, and whole files read and
// written at once.
void bind_safetensors(nb::module_& m) {
  nb::class_<io::TensorInfo>(m, "TensorInfo", "One entry of a safetensors header.")
      .def_ro("name", &io::TensorInfo::name)
      .def_ro("dtype_name", &io::TensorInfo::dtype_name, "The format's name: 'F32', 'BF16', ...")
      .def_ro("dtype", &io::TensorInfo::dtype, "reprise's dtype; None for U8, F8_E4M3, ...")
      .def_prop_ro("shape", [](const io::TensorInfo& i) { return nb::tuple(nb::cast(i.shape)); })
      .def_ro("begin", &io::TensorInfo::begin)
      .def_ro("end", &io::TensorInfo::end);

  nb::class_<io::SafetensorsFile>(m, "SafetensorsFile",
                                  "An open, validated safetensors file; tensors are read one by "
                                  "one (file[name]).")
      .def_prop_ro("path", &io::SafetensorsFile::path)
      .def("keys", &io::SafetensorsFile::names, "Tensor names in header order.")
      .def_prop_ro("metadata", &io::SafetensorsFile::metadata)
      .def("__contains__", &io::SafetensorsFile::contains, arg("name"))
      .def("__len__", [](const io::SafetensorsFile& f) { return f.names().size(); })
      .def("info", &io::SafetensorsFile::info, arg("name"), nb::rv_policy::reference_internal)
      .def("get", &io::SafetensorsFile::get, arg("name"), nb::call_guard<nb::gil_scoped_release>(),
           "A new CPU tensor with the stored bytes.")
      .def("__getitem__", &io::SafetensorsFile::get, arg("name"),
           nb::call_guard<nb::gil_scoped_release>());
  m.def("read_safetensors", &io::read_safetensors, arg("path"),
        "Opens path and validates its header (sizes, JSON, dtypes, shapes, offsets).");
  m.def(
      "load_safetensors",
      [](const std::string& path) {
        const io::SafetensorsFile file = io::read_safetensors(path);
        std::vector<Tensor> tensors;
        {
          nb::gil_scoped_release released;
          for (const std::string& name : file.names()) tensors.push_back(file.get(name));
        }
        nb::dict out;
        for (size_t i = 0; i < tensors.size(); ++i) out[file.names()[i].c_str()] = tensors[i];
        return out;
      },
      arg("path"), "Every tensor of the file: {name: tensor}, in file order.");
  m.def(
      "save_safetensors",
      [](const std::string& path, nb::dict tensors,
         const std::map<std::string, std::string>& metadata) {
        std::vector<std::pair<std::string, Tensor>> list;
        for (auto [name, t] : tensors)
          list.emplace_back(nb::cast<std::string>(name), nb::cast<Tensor>(t));
        nb::gil_scoped_release released;
        io::write_safetensors(path, list, metadata);
      },
      arg("path"), arg("tensors"), arg("metadata") = std::map<std::string, std::string>{},
      "Writes {name: tensor} (CPU tensors, in dict order) with string metadata, atomically "
      "(temporary file, fsync, rename).");
}

void bind_tokenizer(nb::module_& m) {
  nb::class_<io::Tokenizer>(m, "Tokenizer",
                            "Text to ids and back as the model's own tokenizer does (a "
                            "tokenizer.json BPE or a SentencePiece BPE model).")
      .def(
          "encode",
          [](const io::Tokenizer& t, nb::handle text, bool add_special) {
            std::string s;
            if (nb::isinstance<nb::bytes>(text)) {
              nb::bytes b = nb::borrow<nb::bytes>(text);
              s.assign(b.c_str(), b.size());
            } else {
              s = nb::cast<std::string>(text);
            }
            nb::gil_scoped_release released;
            return t.encode(s, add_special);
          },
          arg("text"), arg("add_special") = true,
          "Ids of text (str, or bytes); add_special adds BOS and such, as HF's "
          "add_special_tokens=True.")
      .def(
          "decode",
          [](const io::Tokenizer& t, const std::vector<int64_t>& ids) {
            const std::string bytes = t.decode(ids);
            return nb::steal<nb::str>(
                PyUnicode_DecodeUTF8(bytes.data(), Py_ssize_t(bytes.size()), "replace"));
          },
          arg("ids"), "The text of ids; bytes that are not UTF-8 become U+FFFD, as in HF.")
      .def(
          "decode_bytes",
          [](const io::Tokenizer& t, const std::vector<int64_t>& ids) {
            const std::string bytes = t.decode(ids);
            return nb::bytes(bytes.data(), bytes.size());
          },
          arg("ids"), "The exact bytes of ids (byte-level tokenizers give back any input).")
      .def_prop_ro("vocab_size", &io::Tokenizer::vocab_size)
      .def_prop_ro("bos_id", &io::Tokenizer::bos_id)
      .def_prop_ro("eos_id", &io::Tokenizer::eos_id)
      .def("token_id", &io::Tokenizer::token_id, arg("token"))
      .def("describe", &io::Tokenizer::describe)
      .def("__repr__",
           [](const io::Tokenizer& t) { return "<reprise.io.Tokenizer " + t.describe() + ">"; });
  m.def("load_tokenizer", &io::load_tokenizer, arg("path"),
        "A tokenizer.json, a tokenizer.model, or a folder holding either.");
}

}  // namespace

void bind_io(nb::module_& m) {
  bind_safetensors(m);
  bind_tokenizer(m);
}

}  // namespace reprise::python
