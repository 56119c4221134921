// nn::save / nn::load: named tensors in the safetensors format. The layout
// (github.com/huggingface/safetensors): an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {string: string}} padded
// with spaces to a multiple of 8, then the tensors' bytes, row-major, little-endian.
#include <kiln/error.h>
#include <kiln/nn.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace kiln::nn {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const char* op, const std::string& path, const std::string& what) {
  throw Error(std::string("[") + op + "] " + path + ": " + what);
}

const char* safetensors_dtype(DType t) {
  switch (t) {
  case DType::f64:
    return "F64";
  case DType::f32:
    return "F32";
  case DType::f16:
    return "F16";
  case DType::bf16:
    return "BF16";
  case DType::i64:
    return "I64";
  case DType::i32:
    return "I32";
  case DType::boolean:
    return "BOOL";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& s) {
  for (DType t :
       {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::boolean})
    if (s == safetensors_dtype(t)) return t;
  return std::nullopt;
}

template <class T> void append_as(const Tensor& t, std::string& out) {
  const std::vector<T> v = t.to_vector<T>();
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// The tensor's elements in row-major order, as bytes of its own dtype.
void append_bytes(const Tensor& t, std::string& out) {
  switch (t.dtype()) {
  case DType::f64:
    return append_as<double>(t, out);
  case DType::f32:
    return append_as<float>(t, out);
  case DType::f16:
    return append_as<half>(t, out);
  case DType::bf16:
    return append_as<bfloat16>(t, out);
  case DType::i64:
    return append_as<int64_t>(t, out);
  case DType::i32:
    return append_as<int32_t>(t, out);
  case DType::boolean:
    return append_as<uint8_t>(t, out);
  }
}

void write_file(const std::string& path, const std::string& header, const std::string& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("save", tmp, std::strerror(errno));
    uint64_t n = header.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    f.write(reinterpret_cast<const char*>(len), 8);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.flush();
    if (!f) fail("save", tmp, "write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("save", path, std::strerror(errno));
}

} // namespace

void save(const std::string& path, const ParamList& params,
          const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const NamedParam& p : params) {
    if (!p.tensor || !p.tensor->defined()) fail("save", path, "'" + p.name + "' is undefined");
    if (header.contains(p.name)) fail("save", path, "the name '" + p.name + "' is used twice");
    const size_t begin = data.size();
    append_bytes(*p.tensor, data);
    std::vector<int64_t> shape(p.tensor->shape().begin(), p.tensor->shape().end());
    header[p.name] = {{"dtype", safetensors_dtype(p.tensor->dtype())},
                      {"shape", shape},
                      {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file(path, text, data);
}

namespace {

struct Entry {
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("load", path, std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Entry parse_entry(const std::string& path, const std::string& name, const json& e,
                  uint64_t data_size) try {
  auto bad = [&](const std::string& why) { fail("load", path, "tensor '" + name + "': " + why); };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    bad("needs dtype, shape and data_offsets");
  auto dtype = parse_dtype(e["dtype"].get<std::string>());
  if (!dtype) bad("unsupported dtype " + e["dtype"].dump());
  Entry out{*dtype, {}, 0, 0};
  for (const json& d : e["shape"]) out.shape.push_back(d.get<int64_t>());
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2) bad("data_offsets must be [begin, end]");
  out.begin = off[0].get<uint64_t>();
  out.end = off[1].get<uint64_t>();
  const uint64_t want = static_cast<uint64_t>(out.shape.numel()) * itemsize(out.dtype);
  if (out.begin > out.end || out.end > data_size || out.end - out.begin != want)
    bad("data_offsets [" + std::to_string(out.begin) + ", " + std::to_string(out.end) +
        "] do not hold " + std::to_string(want) + " bytes within the " + std::to_string(data_size) +
        "-byte data");
  return out;
} catch (const json::exception& x) { // a field of the wrong JSON type
  fail("load", path, "tensor '" + name + "': " + x.what());
}

} // namespace

std::map<std::string, std::string> load(const std::string& path, const ParamList& params) {
  const std::string file = read_file(path);
  if (file.size() < 8) fail("load", path, "too short for a safetensors file");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(file[i])) << (8 * i);
  if (n > file.size() - 8)
    fail("load", path, "the header length " + std::to_string(n) + " runs past the end of the file");
  json header = json::parse(file.begin() + 8, file.begin() + 8 + static_cast<int64_t>(n), nullptr,
                            /*allow_exceptions=*/false);
  if (!header.is_object()) fail("load", path, "the header is not a JSON object");
  const char* data = file.data() + 8 + n;
  const uint64_t data_size = file.size() - 8 - n;
  std::vector<std::pair<Tensor*, Tensor>> loaded; // applied only when every tensor is good
  for (const NamedParam& p : params) {
    if (!header.contains(p.name)) fail("load", path, "has no tensor named '" + p.name + "'");
    Entry e = parse_entry(path, p.name, header[p.name], data_size);
    if (e.shape != p.tensor->shape() || e.dtype != p.tensor->dtype())
      fail("load", path,
           "tensor '" + p.name + "' is " + dtype_name(e.dtype) + " " + e.shape.str() +
               ", the parameter " + dtype_name(p.tensor->dtype()) + " " + p.tensor->shape().str());
    Tensor t = from_data(data + e.begin, e.dtype, e.shape, p.tensor->device());
    if (p.tensor->requires_grad()) t.requires_grad_();
    loaded.emplace_back(p.tensor, std::move(t));
  }
  for (auto& [slot, t] : loaded) *slot = std::move(t);
  std::map<std::string, std::string> meta;
  if (header.contains("__metadata__"))
    for (auto& [k, v] : header["__metadata__"].items())
      meta[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return meta;
}

} // namespace kiln::nn
