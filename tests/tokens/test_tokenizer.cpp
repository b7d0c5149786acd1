// test_tokenizer.cpp — the sentencepiece wrapper (engine/tokens/tokenizer.h) and `data prepare`'s
// pipeline (prepare.h) on real sentencepiece (skipped, 77, in a build without it): a model trained
// here decodes every text back, characters it never saw and its own space mark U+2581 included
// (byte fallback); the same lines and seed train the same model; a model file round-trips; what is
// not a model, a vocabulary too small, an id outside the pieces and a source that fails are errors
// naming what broke; prepare writes the documents of a directory by either rule, in the dtype asked
// for.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/paths.h"
#include "model/data.h"
#include "tokens/prepare.h"
#include "tokens/tokenizer.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::tokens;

namespace {

// Lines from memory; fails with `error` once `fail_after` lines are given (when set).
class VectorLines : public LineSource {
 public:
  explicit VectorLines(std::vector<std::string> lines, size_t fail_after = SIZE_MAX)
      : lines_(std::move(lines)), fail_after_(fail_after) {}
  Result<std::optional<std::string>> next() override {
    if (at_ == fail_after_) return fail("line source broke at ", at_);
    if (at_ == lines_.size()) return std::optional<std::string>();
    return std::optional<std::string>(lines_[at_++]);
  }

 private:
  std::vector<std::string> lines_;
  size_t fail_after_, at_ = 0;
};

// English lines to learn from: the README's, and a few more.
std::vector<std::string> english() {
  std::vector<std::string> lines = {"The quick brown fox jumps over the lazy dog.",
                                    "    indented code with   several   spaces and a tab\tin it"};
  std::ifstream readme(std::string(SAL_SOURCE_DIR) + "/README.md");
  for (std::string line; std::getline(readme, line);)
    if (!line.empty()) lines.push_back(line);
  REQUIRE(lines.size() > 100);
  return lines;
}

Tokenizer trained(int vocab, const std::string& type = "bpe") {
  VectorLines lines(english());
  auto model = train_model(lines, {vocab, type, 1});
  REQUIRE_MESSAGE(model.ok(), model.error().message());
  auto t = Tokenizer::from_bytes(*model, "test model");
  REQUIRE_MESSAGE(t.ok(), t.error().message());
  return std::move(*t);
}

std::string fresh_dir(const std::string& name) {
  static const std::filesystem::path root = sal::test::temp_dir("tokenizer");
  auto dir = root / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("tokenizer: a trained model decodes any UTF-8 text back, unseen characters and whitespace included") {
  for (std::string type : {"bpe", "unigram"}) {
    CAPTURE(type);
    Tokenizer t = trained(400, type);
    CHECK(t.vocab() == 400);
    const std::string text =
        "The quick brown fox.\n\n  Two  spaces,\ttabs\t\tand a trailing space \n"
        "naïve café — 東京 🦎 ünïcödé never seen in training\r\n"
        "sentencepiece's own space mark ▁ written out, ▁▁ twice, and last: ▁";
    auto ids = t.encode(text);
    REQUIRE_MESSAGE(ids.ok(), ids.error().message());
    CHECK(ids->size() > 10);
    for (uint32_t id : *ids) CHECK(id < 400u);
    auto back = t.decode(*ids);
    REQUIRE(back.ok());
    CHECK(*back == text);
    // learned pieces: the text it learned from takes far fewer ids than bytes
    std::string learned;
    for (const auto& l : english()) learned += l + "\n";
    auto common = t.encode(learned);
    REQUIRE(common.ok());
    MESSAGE(type << ": " << common->size() << " ids for " << learned.size() << " bytes");
    CHECK(double(common->size()) < 0.8 * double(learned.size()));  // bytes alone: 1.0
  }
}

TEST_CASE("tokenizer: a model trained to normalise (NFKC) decodes compatibility characters as their plain forms, identity keeps them") {
  std::vector<std::string> text = english();
  text.push_back("\xef\xac\x81ne \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 \xe2\x91\xa0");  // "ﬁne ＡＢＣ ①"
  const std::string odd = "the \xef\xac\x81rst \xef\xbc\xa1 \xe2\x91\xa1";             // "the ﬁrst Ａ ②"
  for (const std::string rule : {"nfkc", "identity"}) {
    CAPTURE(rule);
    VectorLines lines(text);
    TrainOptions o{400, "bpe", 1};
    o.normalization = rule;
    auto model = train_model(lines, o);
    REQUIRE_MESSAGE(model.ok(), model.error().message());
    auto t = Tokenizer::from_bytes(*model, "test model");
    REQUIRE(t.ok());
    auto ids = t->encode(odd);
    REQUIRE(ids.ok());
    auto back = t->decode(*ids);
    REQUIRE(back.ok());
    CHECK(*back == (rule == "nfkc" ? std::string("the first A 2") : odd));
  }
  VectorLines lines(text);
  TrainOptions bad{400, "bpe", 1};
  bad.normalization = "nfd";
  auto refused = train_model(lines, bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message() == "normalization: 'nfd' is not a rule (identity, nfkc, nmt_nfkc, nfkc_cf)");
}

TEST_CASE("tokenizer: the same lines and seed train the same model, and a model file loads as the same tokenizer") {
  VectorLines a(english()), b(english());
  auto ma = train_model(a, {400, "bpe", 7}), mb = train_model(b, {400, "bpe", 7});
  REQUIRE(ma.ok());
  REQUIRE(mb.ok());
  CHECK(*ma == *mb);
  const std::string dir = fresh_dir("model");
  REQUIRE(write_file(dir + "/m.model", *ma).ok());
  auto loaded = Tokenizer::load(dir + "/m.model");
  REQUIRE_MESSAGE(loaded.ok(), loaded.error().message());
  CHECK(loaded->vocab() == 400);
  CHECK(loaded->source() == dir + "/m.model");
  auto memory = Tokenizer::from_bytes(*ma, "memory");
  REQUIRE(memory.ok());
  CHECK(*loaded->encode("Experts are replicated.") == *memory->encode("Experts are replicated."));
}

TEST_CASE("tokenizer errors name what broke: no model, not a model, a vocabulary too small, an id outside, a failing source") {
  const std::string dir = fresh_dir("errors");
  auto missing = Tokenizer::load(dir + "/none.model");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("tokenizer " + dir + "/none.model: ") == 0);
  write(dir + "/text.model", "this is plain text, not a model\n");
  auto text = Tokenizer::load(dir + "/text.model");
  REQUIRE_FALSE(text.ok());
  CHECK(text.error().message().find(dir + "/text.model: not a sentencepiece model") == 0);

  VectorLines lines(english());
  auto small = train_model(lines, {100, "bpe", 1});
  REQUIRE_FALSE(small.ok());
  CHECK(small.error().message() == "a vocabulary of 100 is too small: byte fallback takes 256 pieces and <unk>, <s>, "
                                   "</s> three more, so at least 260");
  VectorLines broken(english(), 17);
  auto failed = train_model(broken, {400, "bpe", 1});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().message() == "line source broke at 17");

  Tokenizer t = trained(400);
  auto outside = t.decode({5, 6, 400});
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.error().message() == "test model: id 400 at 2 is outside the tokenizer's 400 pieces");
  VectorLines few(english());
  auto chars = train_model(few, {262, "bpe", 1});  // more characters than pieces left
  REQUIRE_FALSE(chars.ok());
  CHECK(chars.error().message().find("sentencepiece's trainer: Vocabulary size is smaller than required_chars. 262 vs ") == 0);
  CHECK(chars.error().message().find("give a larger vocabulary") != std::string::npos);
}

TEST_CASE("data prepare pipeline: a directory's documents by file and by blank lines, the dtype asked for, the model written beside") {
  const std::string in = fresh_dir("texts"), out = fresh_dir("out");
  std::string a, b;
  for (const auto& l : english()) a += l + "\n";
  b = "First paragraph line one.\nLine two.\n\nSecond paragraph.\n\n\nThird, with ünïcödé.\n";
  write(in + "/a.txt", a);
  write(in + "/b.txt", b);
  write(in + "/skip.bin", std::string("\0\1", 2));

  PrepareOptions o;
  o.input = in;
  o.out = out + "/all.u16";
  o.train_vocab = 400;
  int reports = 0;
  auto info = prepare(o, [&](const PrepareProgress&) { ++reports; });
  REQUIRE_MESSAGE(info.ok(), info.error().message());
  CHECK(reports > 0);
  CHECK(info->dtype == "uint16");
  CHECK(info->vocab == 400);
  CHECK(info->trained);
  CHECK(info->tokenizer == out + "/all.u16.model");
  CHECK(info->documents == 2);
  CHECK(std::filesystem::file_size(o.out) == info->token_count * 2);
  auto t = Tokenizer::load(out + "/all.u16.model");
  REQUIRE(t.ok());
  auto corpus = model::Corpus::load(o.out, "uint16", 400, 4);
  REQUIRE(corpus.ok());
  auto idx = read_index(index_path(o.out));
  REQUIRE(idx.ok());
  REQUIRE(idx->size() == 3);
  const auto ids = corpus->copy_tokens();
  CHECK(*t->decode({ids.begin(), ids.begin() + long((*idx)[1])}) == a);
  CHECK(*t->decode({ids.begin() + long((*idx)[1]), ids.end()}) == b);

  // the same model brought, blank-line documents, uint32 asked for
  PrepareOptions again;
  again.input = in + "/b.txt";
  again.out = out + "/b.u32";
  again.model = out + "/all.u16.model";
  again.dtype = "uint32";
  again.documents = DocumentRule::blank_lines;
  auto blocks = prepare(again);
  REQUIRE_MESSAGE(blocks.ok(), blocks.error().message());
  CHECK_FALSE(blocks->trained);
  CHECK(blocks->documents == 3);
  CHECK(blocks->dtype == "uint32");
  CHECK(std::filesystem::file_size(again.out) == blocks->token_count * 4);
  CHECK_FALSE(std::filesystem::exists(out + "/b.u32.model"));
  auto c32 = model::Corpus::load(again.out, "uint32", 400, 4);
  REQUIRE(c32.ok());
  auto bidx = read_index(index_path(again.out));
  REQUIRE(bidx.ok());
  std::vector<std::string> docs;
  for (size_t d = 0; d + 1 < bidx->size(); ++d)
    docs.push_back(*t->decode(c32->copy_tokens((*bidx)[d], (*bidx)[d + 1] - (*bidx)[d])));
  CHECK(docs == std::vector<std::string>{"First paragraph line one.\nLine two.\n\n", "Second paragraph.\n\n\n",
                                         "Third, with ünïcödé.\n"});
}

TEST_CASE("data prepare pipeline refuses by rule: output inside the input, both or neither tokenizer, a dtype that cannot hold it") {
  const std::string in = fresh_dir("refused");
  write(in + "/a.txt", "some text\n");
  PrepareOptions o;
  o.input = in;
  o.out = in + "/inside.u16";
  o.train_vocab = 300;
  CHECK(prepare(o).error().message() == "--out " + in + "/inside.u16 is inside the input directory " + in +
                                            ": the next run would read its outputs (the .json description) as text; "
                                            "write it elsewhere");
  o.out = fresh_dir("refused-out") + "/x";
  o.model = "m.model";
  CHECK(prepare(o).error().message().find("give either --model SPM.model") == 0);
  o.model.clear();
  o.dtype = "int8";
  CHECK(prepare(o).error().message() == "--dtype: 'int8': expected uint16 or uint32");
}
