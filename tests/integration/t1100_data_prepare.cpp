// t1100_data_prepare.cpp — bring your own data (issue 39), as a user meets it: the real `salamander
// data prepare --train-vocab 500` on the repository's docs/ writes uint16 ids below the vocabulary,
// an index whose every document decodes back to its file, and a description that says so; then a
// short real training run (`salamander run`, data.format = "uint16", data.tokenizer set) on those
// ids has a finite loss that falls, and `salamander sample` writes text through the run's tokenizer;
// a second prepare of the same input writes the same tokenizer and ids.
// The same model brought with --model re-encodes a file as uint32 blocks; bad input is refused,
// naming the file or option and the rule. Skipped (77) in a build without libsentencepiece.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/paths.h"
#include "model/data.h"
#include "support/mesh_harness.h"
#include "support/run_files.h"
#include "tokens/token_file.h"
#include "tokens/tokenizer.h"

using namespace sal;
using namespace sal::test;

namespace {

const std::string kDocs = std::string(SAL_SOURCE_DIR) + "/docs";

// Runs `salamander ARGS...`, returns (exit code, output).
std::pair<int, std::string> salamander(const std::vector<std::string>& args, const std::string& log,
                                       int timeout_ms = 120000) {
  std::vector<std::string> all{bin()};
  all.insert(all.end(), args.begin(), args.end());
  Proc p = spawn(all, log);
  int rc = p.wait(timeout_ms);
  return {rc, p.output()};
}

// The text files data prepare reads in docs/ (the bytes corpus's rule), in order.
std::vector<std::string> docs_files() {
  std::vector<std::string> out;
  auto files = model::corpus_files(kDocs);
  REQUIRE(files.ok());
  for (const auto& f : *files) {
    auto text = read_file(f, size_t(1) << 30);
    if (text && model::is_text(*text) && !text->empty()) out.push_back(f);
  }
  return out;
}

// A job of a tiny model on the prepared ids.
std::string write_job(const std::string& dir, const std::string& data, int vocab) {
  std::string path = dir + "/tokens.lua";
  std::ofstream(path) << "return {\n  name = 'tokens',\n"
                      << "  model = { layers = 1, d_model = 32, heads = 2, experts = 4, top_k = 2, seq_len = 32, vocab = "
                      << vocab << " },\n  " << data << "\n"
                      << "  train = { batch = 8, lr = 1e-2, warmup = 5 },\n}\n";
  return path;
}

double mean(const std::vector<double>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + long(from), v.begin() + long(to), 0.0) / double(to - from);
}

}  // namespace

TEST_CASE("t1100-data-prepare: docs/ tokenised with a trained vocabulary of 500, every document decodes to its file, and a real run on the ids learns") {
  const std::string dir = temp_dir("data-prepare");
  const std::string out = dir + "/docs.u16";
  auto [rc, text] = salamander({"data", "prepare", kDocs, "--train-vocab", "500", "--out", out}, dir + "/prepare.out");
  INFO(text);
  REQUIRE(rc == 0);
  CHECK(text.find("wrote " + out + ": ") != std::string::npos);
  CHECK(text.find("format = 'uint16'") != std::string::npos);

  auto info = tokens::read_description(out + ".json");
  REQUIRE_MESSAGE(info.ok(), info.error().message());
  CHECK(info->dtype == "uint16");
  CHECK(info->vocab == 500);
  CHECK(info->trained);
  CHECK(info->tokenizer == out + ".model");
  CHECK(info->document_rule == "file");
  const auto files = docs_files();
  REQUIRE(files.size() > 10);
  REQUIRE(info->files.size() == files.size());
  CHECK(info->documents == files.size());
  CHECK(std::filesystem::file_size(out) == 2 * info->token_count);

  // every id below the vocabulary: the job's own loader says so
  auto corpus = model::Corpus::load(out, "uint16", 500, 32);
  REQUIRE_MESSAGE(corpus.ok(), corpus.error().message());
  const auto ids = corpus->copy_tokens();
  REQUIRE(ids.size() == info->token_count);
  CHECK(*std::max_element(ids.begin(), ids.end()) < 500u);
  // the index: a start per document, rising, the last the count; each document decodes to its file
  auto idx = tokens::read_index(out + ".idx");
  REQUIRE(idx.ok());
  REQUIRE(idx->size() == files.size() + 1);
  CHECK(idx->back() == ids.size());
  auto tok = tokens::Tokenizer::load(out + ".model");
  REQUIRE(tok.ok());
  CHECK(tok->vocab() == 500);
  for (size_t d = 0; d < files.size(); ++d) {
    CAPTURE(files[d]);
    CHECK(info->files[d].path == files[d]);
    CHECK(info->files[d].first_document == d);
    REQUIRE((*idx)[d] < (*idx)[d + 1]);
    auto doc = tok->decode({ids.begin() + long((*idx)[d]), ids.begin() + long((*idx)[d + 1])});
    REQUIRE(doc.ok());
    CHECK(*doc == file_text(files[d]));
  }
  // a vocabulary learned from English: far fewer tokens than bytes
  CHECK(double(ids.size()) < 0.75 * double(info->bytes));  // measured: 0.60
  // the same input and seed train the same tokenizer and write the same ids
  REQUIRE(salamander({"data", "prepare", kDocs, "--train-vocab", "500", "--out", dir + "/again.u16"}, dir + "/again.out")
              .first == 0);
  CHECK(file_text(dir + "/again.u16.model") == file_text(out + ".model"));
  CHECK(file_text(dir + "/again.u16") == file_text(out));

  // a short real run on the ids: a finite loss that falls from about ln 500
  const std::string job = write_job(dir, "data = { path = 'docs.u16', format = 'uint16', tokenizer = 'docs.u16.model' },", 500);
  auto summary = run_json({bin(), "run", job, "--steps", "40", "--nodes", "2", "--json", "--out", dir + "/run"},
                          dir + "/run.out", 120000);
  auto losses = metrics_column(dir + "/run", "loss");
  REQUIRE(losses.size() == 40);
  for (double l : losses) CHECK(std::isfinite(l));
  MESSAGE("loss " << losses.front() << " -> " << losses.back());
  CHECK(losses.front() > 5.5);  // ln 500 = 6.21: an untrained model
  CHECK(losses.front() < 7.0);
  CHECK(mean(losses, 35, 40) < mean(losses, 0, 5) - 0.8);

  // sample reads and writes text through the job's tokenizer (the run's journal names it)
  auto [src, sample] = salamander({"sample", "--checkpoint", dir + "/run", "--prompt", "The model ", "--bytes", "30",
                                   "--score", kDocs + "/models.md"},
                                  dir + "/sample.out", 60000);
  INFO(sample);
  REQUIRE(src == 0);
  CHECK(sample.find("loss on " + kDocs + "/models.md: ") != std::string::npos);
  CHECK(sample.find(" nats/token") != std::string::npos);
  CHECK(sample.find("The model ") != std::string::npos);
  // a checkpoint away from its run has no journal to name the tokenizer: refused with the advice,
  // then sampled with --tokenizer, the same text as through the journal
  std::filesystem::copy(dir + "/run/checkpoint", dir + "/alone");
  auto [arc, alone] = salamander({"sample", "--checkpoint", dir + "/alone", "--prompt", "The model ", "--bytes", "30"},
                                 dir + "/alone.out", 60000);
  CHECK(arc == 1);
  CHECK(alone.find("this model reads token ids (vocab 500) and no tokenizer says how text maps to them: give "
                   "--tokenizer SPM.model") != std::string::npos);
  auto [trc, told] = salamander({"sample", "--checkpoint", dir + "/alone", "--prompt", "The model ", "--bytes", "30",
                                 "--tokenizer", out + ".model"},
                                dir + "/told.out", 60000);
  CHECK(trc == 0);
  CHECK(told == sample.substr(sample.find("The model ")));
}

TEST_CASE("t1101-data-prepare-brought: a brought model re-encodes a file as uint32 blocks that decode to the file, and bad input is refused by name") {
  const std::string dir = temp_dir("data-prepare");
  const std::string model = dir + "/base.u16.model";
  REQUIRE(salamander({"data", "prepare", kDocs + "/models.md", "--train-vocab", "400", "--out", dir + "/base.u16"},
                     dir + "/base.out")
              .first == 0);
  const std::string out = dir + "/readme.u32";
  auto [rc, text] = salamander({"data", "prepare", std::string(SAL_SOURCE_DIR) + "/README.md", "--model", model,
                                "--dtype", "uint32", "--documents", "blank-lines", "--out", out},
                               dir + "/brought.out");
  INFO(text);
  REQUIRE(rc == 0);
  auto info = tokens::read_description(out + ".json");
  REQUIRE(info.ok());
  CHECK(info->dtype == "uint32");
  CHECK_FALSE(info->trained);
  CHECK(info->tokenizer == model);
  CHECK(info->document_rule == "blank-lines");
  CHECK(info->documents > 10);
  CHECK(std::filesystem::file_size(out) == 4 * info->token_count);
  CHECK_FALSE(std::filesystem::exists(out + ".model"));
  auto corpus = model::Corpus::load(out, "uint32", 400, 8);
  REQUIRE(corpus.ok());
  auto idx = tokens::read_index(out + ".idx");
  REQUIRE(idx.ok());
  auto tok = tokens::Tokenizer::load(model);
  REQUIRE(tok.ok());
  std::string joined;
  for (size_t d = 0; d + 1 < idx->size(); ++d) {
    auto doc = tok->decode(corpus->copy_tokens((*idx)[d], (*idx)[d + 1] - (*idx)[d]));
    REQUIRE(doc.ok());
    const size_t blank = doc->find("\n\n");  // a block's text ends at its first blank line
    if (blank != std::string::npos) CHECK(doc->find_first_not_of(" \t\r\n", blank) == std::string::npos);
    joined += *doc;
  }
  CHECK(joined == file_text(std::string(SAL_SOURCE_DIR) + "/README.md"));

  // refusals: exit 2 for the command line, 1 for the input; each names what and why
  struct Case {
    std::vector<std::string> args;
    int rc;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{kDocs + "/none.txt", "--train-vocab", "300", "--out", dir + "/x"}, 1, kDocs + "/none.txt does not exist"},
      {{kDocs, "--train-vocab", "100", "--out", dir + "/x"}, 2, "--train-vocab 100 is too small"},
      {{kDocs, "--out", dir + "/x"}, 2, "give either --model SPM.model"},
      {{kDocs, "--model", model, "--train-vocab", "300", "--out", dir + "/x"}, 2, "give either --model SPM.model"},
      {{kDocs, "--model", model}, 2, "--out FILE is required"},
      {{kDocs, "--model", model, "--dtype", "int8", "--out", dir + "/x"}, 1, "--dtype: 'int8': expected uint16 or uint32"},
      {{kDocs, "--model", kDocs + "/models.md", "--out", dir + "/x"}, 1, kDocs + "/models.md: not a sentencepiece model"},
      {{kDocs, "--model", model, "--documents", "lines", "--out", dir + "/x"}, 2, "--documents: 'lines' is not a document rule"},
      {{kDocs, "--train-vocab", "300", "--normalize", "nfd", "--out", dir + "/x"}, 2, "--normalize: 'nfd' is not a rule"},
      {{kDocs, "--model", model, "--normalize", "nfkc", "--out", dir + "/x"}, 2, "--normalize goes with --train-vocab"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"data", "prepare"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto [got, said] = salamander(args, dir + "/refused.out");
    CAPTURE(said);
    CHECK(got == c.rc);
    CHECK(said.find(c.says) != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir + "/x"));
}
