// tokenizer.cpp — see tokenizer.h: the engine's side of the sentencepiece module (spm_api.h). The
// module is looked for beside the running binary, then in the build directory it was made in, and
// loaded once; every Tokenizer call goes to it.
#include "tokens/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>

#include "core/paths.h"

#ifndef SAL_SPM_MODULE_DIR
#define SAL_SPM_MODULE_DIR ""
#endif

namespace sal::tokens {
namespace {

struct Module {
  const SpmApi* api = nullptr;
  std::string why;  // why there is none
};

std::string binary_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, size_t(n));
  return path.substr(0, path.rfind('/'));
}

Module load_module() {
  Module m;
  for (const std::string& dir : {binary_dir(), std::string(SAL_SPM_MODULE_DIR)}) {
    if (dir.empty()) continue;
    const std::string path = dir + "/" + kSpmModule;
    if (!path_exists(path)) continue;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      m.why = dlerror();
      continue;
    }
    auto entry = reinterpret_cast<const SpmApi* (*)()>(dlsym(h, kSpmEntry));
    if (!entry || !entry() || entry()->version != kSpmApiVersion) {
      m.why = path + ": not this salamander's sentencepiece module (rebuild)";
      continue;
    }
    m.api = entry();
    return m;
  }
  if (m.why.empty())
    m.why = std::string("no ") + kSpmModule + " beside the binary: this salamander was built without libsentencepiece "
            "(install Debian's libsentencepiece-dev, as scripts/dev.sh does, and build again)";
  return m;
}

const Module& module() {
  static const Module m = load_module();
  return m;
}

}  // namespace

bool available() { return module().api != nullptr; }

Status check_available() {
  if (available()) return {};
  return fail("no tokenizer: ", module().why);
}

Result<Tokenizer> Tokenizer::from_bytes(const std::string& model, const std::string& described) {
  SAL_TRY(check_available());
  auto m = module().api->from_bytes(model, described);
  if (!m) return m.error();
  Tokenizer t;
  t.model_ = std::move(*m);
  t.source_ = described;
  return t;
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  SAL_TRY(check_available());
  auto bytes = read_file(path, size_t(1) << 30);
  if (!bytes) return bytes.error().with_context("tokenizer " + path);
  return from_bytes(*bytes, path);
}

int Tokenizer::vocab() const { return model_ ? model_->vocab() : 0; }

Result<std::vector<uint32_t>> Tokenizer::encode(std::string_view text) const {
  if (!model_) return fail("no tokenizer loaded");
  return model_->encode(text);
}

Result<std::string> Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  if (!model_) return fail("no tokenizer loaded");
  return model_->decode(ids);
}

bool known_normalization(const std::string& rule) {
  return rule == "identity" || rule == "nfkc" || rule == "nmt_nfkc" || rule == "nfkc_cf";
}

Result<std::string> train_model(LineSource& lines, const TrainOptions& o) {
  if (!known_normalization(o.normalization))
    return fail("normalization: '", o.normalization, "' is not a rule (identity, nfkc, nmt_nfkc, nfkc_cf)");
  SAL_TRY(check_available());
  return module().api->train(lines, o);
}

}  // namespace sal::tokens
