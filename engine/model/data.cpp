// data.cpp — see data.h.
#include "model/data.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>

#include "core/apportion.h"
#include "core/paths.h"

namespace sal::model {
namespace {

constexpr size_t kMaxTextFileBytes = size_t(2) << 30;  // each text file of a directory (a file is mapped)

// The text files of a directory (corpus_files, is_text), concatenated.
Result<std::string> read_directory(const std::string& dir, std::string& described) {
  auto files = corpus_files(dir);
  if (!files) return files.error();
  std::string all;
  int texts = 0;
  for (const auto& p : *files) {
    auto text = read_file(p, kMaxTextFileBytes);
    if (!text || !is_text(*text)) continue;
    all += *text;
    ++texts;
  }
  described = dir + " (" + std::to_string(texts) + " text files)";
  return all;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

}  // namespace

bool is_text(const std::string& data) { return data.find('\0') == std::string::npos; }

Result<std::vector<std::string>> corpus_files(const std::string& path) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return fail(path, " does not exist");
  if (!S_ISDIR(st.st_mode)) return std::vector<std::string>{path};
  DIR* d = opendir(path.c_str());
  if (!d) return fail("cannot open directory ", path);
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<std::string> files;
  for (const auto& n : names) {
    std::string p = path + "/" + n;
    if (n[0] != '.' && lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) files.push_back(std::move(p));
  }
  return files;
}

Corpus Corpus::from_tokens(std::vector<uint32_t> tokens, std::string description) {
  Corpus c;
  c.size_ = tokens.size();
  c.owned_ = std::move(tokens);
  c.description_ = std::move(description);
  return c;
}

std::vector<uint32_t> Corpus::copy_tokens(size_t first, size_t count) const {
  const size_t end = first >= size_ ? first : first + std::min(count, size_ - first);
  std::vector<uint32_t> out;
  out.reserve(end - first);
  for (size_t i = first; i < end; ++i) out.push_back(token(i));
  return out;
}

std::optional<size_t> Corpus::first_outside(uint32_t vocab) const {
  if (width_ == 0) {
    for (size_t i = 0; i < size_; ++i)
      if (owned_[i] >= vocab) return i;
    return std::nullopt;
  }
  const unsigned char* p = file_->data();
  if (width_ == 1) {  // bytes: only a vocabulary under 256 can be exceeded
    for (size_t i = 0; vocab < 256 && i < size_; ++i)
      if (p[i] >= vocab) return i;
    return std::nullopt;
  }
  for (size_t i = 0; i < size_; ++i)  // one pass over the file, in order (the page cache reads ahead)
    if (token(i) >= vocab) return i;
  return std::nullopt;
}

Result<Corpus> Corpus::load(const std::string& path, const std::string& format, int vocab, int seq_len) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) {
    std::string hint = path.rfind("/usr/share/games/fortunes", 0) == 0 ? " (Debian's fortunes package: apt-get install fortunes)" : "";
    return fail("data.path ", path, " does not exist", hint);
  }
  Corpus c;
  size_t bytes = 0;
  if (S_ISDIR(st.st_mode)) {
    if (format != "bytes") return fail("data.path ", path, " is a directory: only data.format = \"bytes\" reads directories");
    std::string described;
    auto r = read_directory(path, described);
    if (!r) return r.error();
    bytes = r->size();
    c = from_tokens(std::vector<uint32_t>(r->begin(), r->end()), described);
    for (uint32_t& t : c.owned_) t &= 0xff;
  } else {
    auto file = MappedFile::open(path);
    if (!file) return Error("data.path: " + file.error().message());
    c.width_ = format == "uint16" ? 2 : format == "uint32" ? 4 : 1;
    bytes = (*file)->size();
    if (bytes % c.width_)
      return fail("data.path ", path, ": a ", format, " token file holds ", c.width_, " bytes per id, and its size (",
                  bytes, " bytes) is not a multiple of ", c.width_);
    c.file_ = std::move(*file);
    c.size_ = bytes / c.width_;
    c.description_ = path;
  }
  if (auto at = c.first_outside(uint32_t(vocab)))
    return fail("data.path ", path, ": token ", c.token(*at), " at ", *at, " is outside model.vocab = ", vocab);
  if (c.size() < size_t(seq_len) + 1)
    return fail("data.path ", path, ": ", c.size(), " tokens, fewer than model.seq_len + 1 = ", seq_len + 1);
  c.description_ += ", " + std::to_string(bytes) + " bytes";
  return c;
}

Batch make_batch(const Corpus& c, uint64_t seed, uint64_t step, int first, int count, int seq_len) {
  Batch b;
  b.sequences = count;
  b.seq_len = seq_len;
  b.step = step;
  b.first = first;
  b.inputs.resize(size_t(count) * seq_len);
  b.targets.resize(b.inputs.size());
  uint64_t span = c.train_size() - uint64_t(seq_len);  // offsets 0..span-1 leave room for the target
  for (int s = 0; s < count; ++s) {
    uint64_t off = mix(mix(mix(seed, step), uint64_t(first + s)), 0x5a4d) % span;
    for (int t = 0; t < seq_len; ++t) {
      b.inputs[size_t(s) * seq_len + t] = c.token(off + t);
      b.targets[size_t(s) * seq_len + t] = c.token(off + t + 1);
    }
  }
  return b;
}

Status Corpus::hold_out(double fraction, int seq_len) {
  train_end_ = 0;
  if (fraction <= 0) return {};
  const size_t held = size_t(double(size_) * fraction + 0.5);
  if (held < size_t(seq_len) + 1 || size_ - held < size_t(seq_len) + 1)
    return fail("data.validation = ", fraction, " holds out ", held, " of ", size_, " tokens: both the ",
                "training and the validation part need model.seq_len + 1 = ", seq_len + 1, " tokens or more");
  train_end_ = size_ - held;
  return {};
}

Batch make_validation_batch(const Corpus& c, uint64_t seed, int first, int count, int seq_len) {
  Batch b;
  b.sequences = count;
  b.seq_len = seq_len;
  b.first = first;
  if (c.validation_size() <= size_t(seq_len)) return b.sequences = 0, b;
  b.inputs.resize(size_t(count) * seq_len);
  b.targets.resize(b.inputs.size());
  const uint64_t start = c.train_size(), span = c.validation_size() - uint64_t(seq_len);
  for (int s = 0; s < count; ++s) {
    uint64_t off = start + mix(mix(seed, uint64_t(first + s)), 0x76616c) % span;
    for (int t = 0; t < seq_len; ++t) {
      b.inputs[size_t(s) * seq_len + t] = c.token(off + t);
      b.targets[size_t(s) * seq_len + t] = c.token(off + t + 1);
    }
  }
  return b;
}

std::pair<int, int> batch_share(int global, const std::vector<uint32_t>& shares, int ranks, int rank) {
  if (shares.size() != size_t(ranks)) return batch_share(global, ranks, rank);
  auto [first, count] = contiguous_share(uint64_t(global), std::vector<uint64_t>(shares.begin(), shares.end()), size_t(rank));
  return {int(first), int(count)};
}

std::pair<int, int> batch_share(int global, int ranks, int rank) {
  int base = global / ranks, extra = global % ranks;
  int first = rank * base + std::min(rank, extra);
  return {first, base + (rank < extra ? 1 : 0)};
}

}  // namespace sal::model
