#include "harness/runtime/checkpoint/checkpoint.h"

#include <ATen/core/Dict.h>
#include <caffe2/serialize/versions.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <iterator>
#include <unistd.h>

#include "harness/errors.h"
#include "harness/report/io/atomic_write.h"
#include "harness/instrument/site.h"

namespace harness::runtime {
namespace {

using Dict = c10::Dict<c10::IValue, c10::IValue>;

Dict new_dict(const c10::TypePtr& key) { return Dict(key, c10::AnyType::get()); }

c10::IValue optimizer_to_ivalue(const OptimizerStateDict& sd) {
  Dict state = new_dict(c10::IntType::get());
  for (const auto& [index, entries] : sd.state) {
    Dict per_param = new_dict(c10::StringType::get());
    HARNESS_SITE();
    for (const auto& [key, tensor] : entries) per_param.insert(key, tensor.to(at::kCPU));
    state.insert(index, per_param);
  }
  c10::List<c10::IValue> groups(c10::AnyType::get());
  for (const auto& group : sd.param_groups) {
    Dict g = new_dict(c10::StringType::get());
    for (const auto& [key, value] : group.options) {
      HARNESS_SITE();
      g.insert(key, value.isTensor() ? c10::IValue(value.toTensor().to(at::kCPU)) : value);
    }
    g.insert("params", c10::List<int64_t>(group.params));
    groups.push_back(g);
  }
  Dict out = new_dict(c10::StringType::get());
  out.insert("state", state);
  out.insert("param_groups", groups);
  return out;
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw InputError("checkpoint '" + path + "' is corrupt or not a harness checkpoint: " + what);
}

// A tensor read from a file, checked before anything reads its data: dense, with a view that lies
// inside its storage (a crafted file can pair any sizes and strides with any storage).
at::Tensor checked_tensor(const c10::IValue& v, const std::string& path, const char* where) {
  const at::Tensor t = v.toTensor();
  if (!t.defined() || t.layout() != at::kStrided || !t.has_storage()) {
    corrupt(path, std::string("a tensor in ") + where + " is not a dense tensor");
  }
  int64_t last = t.storage_offset();  // the furthest element the view reaches
  if (last < 0) corrupt(path, std::string("a tensor in ") + where + " has a negative offset");
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return t;  // empty: reads nothing
    if (t.stride(d) < 0 || t.stride(d) > (int64_t{1} << 40) || t.size(d) > (int64_t{1} << 40)) {
      corrupt(path, std::string("a tensor in ") + where + " has an impossible size or stride");
    }
    last += (t.size(d) - 1) * t.stride(d);
  }
  const auto item = static_cast<int64_t>(t.element_size());
  if ((last + 1) * item > static_cast<int64_t>(t.storage().nbytes())) {
    corrupt(path, std::string("a tensor in ") + where + " reaches past its storage");
  }
  return t;
}

c10::IValue get(const Dict& d, const char* key, const std::string& path) {
  auto it = d.find(key);
  if (it == d.end()) corrupt(path, std::string("missing key '") + key + "'");
  return it->value();
}

OptimizerStateDict optimizer_from_ivalue(const c10::IValue& v, const std::string& path) {
  if (!v.isGenericDict()) corrupt(path, "optimizer state is not a dict");
  const Dict d = v.toGenericDict();
  OptimizerStateDict sd;
  c10::IValue state = get(d, "state", path);
  if (!state.isGenericDict()) corrupt(path, "optimizer 'state' is not a dict");
  for (const auto& entry : state.toGenericDict()) {
    if (!entry.key().isInt() || !entry.value().isGenericDict()) {
      corrupt(path, "optimizer 'state' entries must map parameter indices to dicts");
    }
    auto& per_param = sd.state[entry.key().toInt()];
    for (const auto& kv : entry.value().toGenericDict()) {
      if (!kv.key().isString() || !kv.value().isTensor()) {
        corrupt(path, "optimizer state of a parameter must map names to tensors");
      }
      per_param[kv.key().toStringRef()] = checked_tensor(kv.value(), path, "optimizer state");
    }
  }
  c10::IValue groups = get(d, "param_groups", path);
  if (!groups.isList()) corrupt(path, "optimizer 'param_groups' is not a list");
  for (const c10::IValue& g : groups.toListRef()) {
    if (!g.isGenericDict()) corrupt(path, "a parameter group is not a dict");
    OptimizerStateDict::Group group;
    for (const auto& kv : g.toGenericDict()) {
      if (!kv.key().isString()) corrupt(path, "a parameter group has a non-string key");
      if (kv.key().toStringRef() == "params") {
        if (!kv.value().isIntList()) corrupt(path, "a parameter group's 'params' is not a list");
        group.params = kv.value().toIntVector();
      } else {
        group.options[kv.key().toStringRef()] = kv.value();
      }
    }
    sd.param_groups.push_back(std::move(group));
  }
  return sd;
}

// The zip layout LibTorch's reader trusts, checked first. pickle_load hands the bytes to miniz
// through a reader that does not check its bounds, so a crafted central directory or local header
// makes it read past the buffer (found by fuzz/checkpoint.cpp; tests/fuzz/checkpoint/regression-*).
// Every record miniz reads must lie inside the bytes: the end-of-central-directory record, the zip64
// locator and end record when present (LibTorch always writes them), each central directory entry,
// and each entry's local header and data. Entries must be stored, as LibTorch writes them.
class ZipLayout {
 public:
  ZipLayout(const std::vector<char>& bytes, const std::string& source)
      : b_(bytes), source_(source) {}

  void check() const {
    const size_t n = b_.size();
    if (n < 22) bad("too short for a zip archive");
    // The end record: the last signature whose comment reaches exactly the end of the bytes.
    size_t eocd = n;
    const size_t lowest = n - 22 > 65535 ? n - 22 - 65535 : 0;
    for (size_t at = n - 22 + 1; at-- > lowest;) {
      if (u(at, 4) == 0x06054b50 && at + 22 + u(at + 20, 2) == n) {
        eocd = at;
        break;
      }
    }
    if (eocd == n) bad("no end-of-central-directory record");
    if (u(eocd + 4, 2) != 0 || u(eocd + 6, 2) != 0) bad("a multi-disk archive");
    uint64_t entries = u(eocd + 10, 2);
    uint64_t cd_size = u(eocd + 12, 4);
    uint64_t cd_offset = u(eocd + 16, 4);
    if (u(eocd + 8, 2) != entries) bad("inconsistent entry counts");
    uint64_t cd_limit = eocd;  // the central directory ends before this
    if (eocd >= 20 && u(eocd - 20, 4) == 0x07064b50) {  // zip64 locator, then its end record
      const uint64_t locator = eocd - 20;
      if (u(locator + 4, 4) != 0 || u(locator + 16, 4) != 1) bad("a multi-disk zip64 archive");
      const uint64_t z = u(locator + 8, 8);
      if (z > locator || locator - z < 56 || u(z, 4) != 0x06064b50) {
        bad("the zip64 end record is missing or out of place");
      }
      const uint64_t record = u(z + 4, 8);
      if (record < 44 || record > locator - z - 12) bad("the zip64 end record has a wrong size");
      if (u(z + 16, 4) != 0 || u(z + 20, 4) != 0) bad("a multi-disk zip64 archive");
      const uint64_t entries64 = u(z + 32, 8);
      if (u(z + 24, 8) != entries64 || (entries != 0xFFFF && entries != entries64)) {
        bad("inconsistent entry counts");
      }
      const uint64_t size64 = u(z + 40, 8);
      const uint64_t offset64 = u(z + 48, 8);
      if ((cd_size != 0xFFFFFFFF && cd_size != size64) ||
          (cd_offset != 0xFFFFFFFF && cd_offset != offset64)) {
        bad("the zip64 end record disagrees with the end record");
      }
      entries = entries64;
      cd_size = size64;
      cd_offset = offset64;
      cd_limit = z;
    } else if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
      bad("zip64 markers without a zip64 end record");
    }
    if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) {
      bad("the central directory lies outside the archive");
    }
    if (entries > cd_size / 46) bad("more entries than the central directory holds");
    uint64_t at = cd_offset;
    const uint64_t cd_end = cd_offset + cd_size;
    std::vector<Entry> found;
    for (uint64_t i = 0; i < entries; ++i) found.push_back(check_entry(at, cd_offset, cd_end));
    check_records(found);
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    corrupt(source_, "not a well-formed checkpoint archive (" + what + ")");
  }

  // The little-endian unsigned integer of `width` bytes at `at`, inside the bytes.
  uint64_t u(uint64_t at, unsigned width) const {
    if (at > b_.size() || width > b_.size() - at) bad("a record runs past the end");
    uint64_t v = 0;
    for (unsigned i = width; i-- > 0;) v = v << 8 | static_cast<unsigned char>(b_[at + i]);
    return v;
  }

  struct Entry {
    std::string name;
    uint64_t data = 0;  // offset of its bytes
    uint64_t size = 0;
    uint32_t crc = 0;
  };

  // What LibTorch's reader checks after it has set miniz up, checked here first: a failure there
  // throws from PyTorchStreamReader's constructor, whose destructor then never frees miniz's state
  // (a leak fuzz_checkpoint found; tests/fuzz/checkpoint/regression-*). Every entry's CRC, the
  // archive folder (the first name's part before '/'), and a version record it supports.
  void check_records(const std::vector<Entry>& entries) const {
    if (entries.empty()) bad("no entries");
    for (const Entry& e : entries) {
      if (crc32(e.data, e.size) != e.crc) bad("the CRC of '" + e.name + "' does not match");
    }
    const size_t slash = entries.front().name.find('/');
    if (slash == std::string::npos) bad("its first entry is not in a folder");
    const std::string folder = entries.front().name.substr(0, slash + 1);
    const Entry* version = nullptr;
    for (const Entry& e : entries) {
      if (e.name == folder + ".data/version") version = &e;
    }
    for (const Entry& e : entries) {
      if (version == nullptr && e.name == folder + "version") version = &e;
    }
    if (version == nullptr) bad("no version record");
    uint64_t v = 0;
    size_t digits = 0;
    for (; digits < version->size && digits < 18; ++digits) {
      const char c = b_[version->data + digits];
      if (c < '0' || c > '9') break;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (digits == 0 || v < caffe2::serialize::kMinSupportedFileFormatVersion ||
        v > caffe2::serialize::kMaxSupportedFileFormatVersion) {
      bad("a version LibTorch does not read");
    }
  }

  // CRC-32 (zip's polynomial) of `size` bytes at `at`.
  uint32_t crc32(uint64_t at, uint64_t size) const {
    static const auto table = [] {
      std::array<uint32_t, 256> t{};
      for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
      }
      return t;
    }();
    uint32_t c = 0xFFFFFFFFu;
    for (uint64_t i = 0; i < size; ++i) {
      c = table[(c ^ static_cast<unsigned char>(b_[at + i])) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
  }

  // One central directory entry at `at` (advanced past it), its local header and its data.
  Entry check_entry(uint64_t& at, uint64_t cd_offset, uint64_t cd_end) const {
    if (cd_end - at < 46 || u(at, 4) != 0x02014b50) bad("a damaged central directory entry");
    if (u(at + 10, 2) != 0) bad("a compressed entry (LibTorch stores them)");
    if (u(at + 34, 2) != 0) bad("a multi-disk archive");
    uint64_t compressed = u(at + 20, 4);
    uint64_t size = u(at + 24, 4);
    uint64_t local = u(at + 42, 4);
    const uint64_t name = u(at + 28, 2);
    const uint64_t extra = u(at + 30, 2);
    const uint64_t comment = u(at + 32, 2);
    const uint64_t length = 46 + name + extra + comment;
    if (length > cd_end - at) bad("a central directory entry runs past the directory");
    if (compressed == 0xFFFFFFFF || size == 0xFFFFFFFF || local == 0xFFFFFFFF) {
      // The zip64 extra field (id 1) holds, in this order, each of them that is 0xFFFFFFFF.
      bool found = false;
      for (uint64_t e = at + 46 + name, end = e + extra; end - e >= 4;) {
        const uint64_t id = u(e, 2);
        const uint64_t len = u(e + 2, 2);
        if (len > end - e - 4) bad("an extra field runs past its entry");
        if (id == 1) {
          uint64_t f = e + 4;
          for (uint64_t* field : {&size, &compressed, &local}) {
            if (*field != 0xFFFFFFFF) continue;
            if (f + 8 > e + 4 + len) bad("a short zip64 extra field");
            *field = u(f, 8);
            f += 8;
          }
          found = true;
          break;
        }
        e += 4 + len;
      }
      if (!found) bad("zip64 markers without a zip64 extra field");
    }
    if (compressed != size) bad("a stored entry whose sizes differ");
    if (local > cd_offset || cd_offset - local < 30 || u(local, 4) != 0x04034b50) {
      bad("a local header is missing or out of place");
    }
    const uint64_t data = local + 30 + u(local + 26, 2) + u(local + 28, 2);
    if (data > cd_offset || compressed > cd_offset - data) bad("an entry's data lies outside it");
    Entry entry;
    entry.name.assign(b_.data() + at + 46, name);
    entry.data = data;
    entry.size = size;
    entry.crc = static_cast<uint32_t>(u(at + 16, 4));
    at += length;
    return entry;
  }

  const std::vector<char>& b_;
  const std::string& source_;
};

// torch::jit::pickle_load, with a failure reported as a corrupt `source`.
c10::IValue unpickle_or_corrupt(const std::vector<char>& bytes, const std::string& source) {
  ZipLayout(bytes, source).check();
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    corrupt(source, std::string("cannot unpickle (") + e.what() + ")");
  }
}

}  // namespace

void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  Dict model = new_dict(c10::StringType::get());
  HARNESS_SITE();
  for (const auto& [name, tensor] : checkpoint.model) model.insert(name, tensor.to(at::kCPU));
  c10::List<c10::IValue> optimizers(c10::AnyType::get());
  optimizers.push_back(optimizer_to_ivalue(checkpoint.optimizer));
  Dict root = new_dict(c10::StringType::get());
  root.insert("format", std::string(kCheckpointFormat));
  root.insert("global_step", checkpoint.global_step);
  root.insert("state_dict", model);
  root.insert("optimizer_states", optimizers);
  Dict metrics = new_dict(c10::StringType::get());
  HARNESS_SITE();
  for (const auto& [name, tensor] : checkpoint.metrics) metrics.insert(name, tensor.to(at::kCPU));
  root.insert("metrics", metrics);

  const std::vector<char> bytes = torch::jit::pickle_save(root);
  write_file_atomically(path, std::string_view(bytes.data(), bytes.size()), "checkpoint");
}

void create_checkpoint_directory(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (!ec) return;
  // A component that is a file makes mkdir say "File exists" when it appeared after
  // create_directories saw it missing, and "Not a directory" otherwise: name the file either way.
  std::string reason = ec.message();
  for (std::filesystem::path part = path; part.has_relative_path(); part = part.parent_path()) {
    std::error_code status_error;
    const auto status = std::filesystem::status(part, status_error);
    if (std::filesystem::exists(status) && !std::filesystem::is_directory(status)) {
      reason = std::make_error_code(std::errc::not_a_directory).message() + ": " + part.string();
      break;
    }
  }
  throw std::runtime_error("cannot create the checkpoint directory " + path + ": " + reason);
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read checkpoint '" + path + "': " + std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError("cannot read checkpoint '" + path + "': read error");
  return checkpoint_from_bytes(bytes, path);
}

Checkpoint checkpoint_from_bytes(const std::vector<char>& bytes, const std::string& path) {
  const c10::IValue root = unpickle_or_corrupt(bytes, path);
  if (!root.isGenericDict()) corrupt(path, "top level is not a dict");
  const Dict d = root.toGenericDict();
  c10::IValue format = get(d, "format", path);
  if (!format.isString() || format.toStringRef() != kCheckpointFormat) {
    corrupt(path, std::string("format is not '") + kCheckpointFormat + "'");
  }
  Checkpoint ckpt;
  c10::IValue step = get(d, "global_step", path);
  if (!step.isInt() || step.toInt() < 0) corrupt(path, "'global_step' is not a step number");
  ckpt.global_step = step.toInt();
  c10::IValue model = get(d, "state_dict", path);
  if (!model.isGenericDict()) corrupt(path, "'state_dict' is not a dict");
  for (const auto& kv : model.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) {
      corrupt(path, "'state_dict' must map names to tensors");
    }
    ckpt.model.emplace_back(kv.key().toStringRef(),
                            checked_tensor(kv.value(), path, "'state_dict'"));
  }
  c10::IValue optimizers = get(d, "optimizer_states", path);
  if (!optimizers.isList() || optimizers.toListRef().size() != 1) {
    corrupt(path, "'optimizer_states' must hold exactly one optimizer");
  }
  ckpt.optimizer = optimizer_from_ivalue(optimizers.toListRef()[0], path);
  auto metrics = d.find("metrics");
  if (metrics != d.end()) {
    if (!metrics->value().isGenericDict()) corrupt(path, "'metrics' is not a dict");
    for (const auto& kv : metrics->value().toGenericDict()) {
      if (!kv.key().isString() || !kv.value().isTensor()) {
        corrupt(path, "'metrics' must map names to tensors");
      }
      ckpt.metrics.emplace_back(kv.key().toStringRef(),
                                checked_tensor(kv.value(), path, "'metrics'"));
    }
  }
  return ckpt;
}

namespace {
const char* const kLocations = "locations";
const std::string kStateBytes = "optimizer state bytes";
}  // namespace

std::vector<char> pickle_optimizer_state(const OptimizerStateDict& state) {
  Dict locations = new_dict(c10::IntType::get());
  for (const auto& [index, entries] : state.state) {
    Dict per_param = new_dict(c10::StringType::get());
    for (const auto& [key, tensor] : entries) per_param.insert(key, tensor.device().str());
    locations.insert(index, per_param);
  }
  Dict root = new_dict(c10::StringType::get());
  root.insert("optimizer", optimizer_to_ivalue(state));
  root.insert(kLocations, locations);
  return torch::jit::pickle_save(root);
}

OptimizerStateDict unpickle_optimizer_state(const std::vector<char>& bytes,
                                            const std::optional<c10::Device>& map_location) {
  const c10::IValue root = unpickle_or_corrupt(bytes, kStateBytes);
  if (!root.isGenericDict()) corrupt(kStateBytes, "top level is not a dict");
  const Dict d = root.toGenericDict();
  OptimizerStateDict sd = optimizer_from_ivalue(get(d, "optimizer", kStateBytes), kStateBytes);
  const c10::IValue locations = get(d, kLocations, kStateBytes);
  if (!locations.isGenericDict()) corrupt(kStateBytes, "'locations' is not a dict");
  const Dict where = locations.toGenericDict();
  for (auto& [index, entries] : sd.state) {
    auto per_param = where.find(index);
    if (per_param == where.end() || !per_param->value().isGenericDict()) {
      corrupt(kStateBytes, "no location for parameter " + std::to_string(index));
    }
    const Dict keys = per_param->value().toGenericDict();
    for (auto& [key, tensor] : entries) {
      auto loc = keys.find(key);
      if (loc == keys.end() || !loc->value().isString()) {
        corrupt(kStateBytes, "no location for state '" + key + "'");
      }
      const c10::Device device = map_location ? *map_location
                                              : c10::Device(loc->value().toStringRef());
      HARNESS_SITE();
      if (!device.is_cpu()) tensor = tensor.to(device);
    }
  }
  return sd;
}

}  // namespace harness::runtime
