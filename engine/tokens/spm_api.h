// spm_api.h — the boundary between the engine and its sentencepiece module. libsentencepiece is
// not linked into salamander: its thread-local storage would come out of every thread's stack, and
// with OpenBLAS's 60 KiB of it the Prometheus endpoint's civetweb threads (100 KiB stacks, fixed
// when civetweb was built) overflow while they write an answer — a scrape killed the controller.
// The module (libsalamander_spm.so, built beside the binary when libsentencepiece-dev is there,
// spm_module.cpp) is loaded with dlopen the first time a tokenizer is needed (tokenizer.cpp); its
// thread-local storage is then dynamic, allocated only on the threads that tokenize.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace sal::tokens {

class LineSource;
struct TrainOptions;

// A loaded sentencepiece model, as the module implements it (tokenizer.h says what each does).
class SpmModel {
 public:
  virtual ~SpmModel() = default;
  virtual int vocab() const = 0;
  virtual Result<std::vector<uint32_t>> encode(std::string_view text) const = 0;
  virtual Result<std::string> decode(const std::vector<uint32_t>& ids) const = 0;
};

constexpr int kSpmApiVersion = 2;  // 2: TrainOptions::normalization

struct SpmApi {
  int version = kSpmApiVersion;  // a module of another version is refused
  Result<std::shared_ptr<const SpmModel>> (*from_bytes)(const std::string& model, const std::string& described);
  Result<std::string> (*train)(LineSource& lines, const TrainOptions& options);
};

constexpr const char* kSpmModule = "libsalamander_spm.so";
constexpr const char* kSpmEntry = "salamander_spm_api";

}  // namespace sal::tokens
