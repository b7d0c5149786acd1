// load_trace.cpp — see load_trace.h.
#include "core/load_trace.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <utility>

#include "core/load_files.h"
#include "core/strings.h"

namespace sal {
namespace {

// The numbers in a name, each with the word before it (letters, lower case; one '_' or '-' between
// them skipped): "table_iter1051_rank0.log" -> (iter, 1051), (rank, 0).
std::vector<std::pair<std::string, int64_t>> numbered_words(const std::string& name) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < name.size();) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) {
      ++i;
      continue;
    }
    size_t word_end = i;
    if (word_end > 0 && (name[word_end - 1] == '_' || name[word_end - 1] == '-')) --word_end;
    size_t word_begin = word_end;
    while (word_begin > 0 && std::isalpha(static_cast<unsigned char>(name[word_begin - 1]))) --word_begin;
    int64_t value = 0;
    for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i)
      value = std::min<int64_t>(value * 10 + (name[i] - '0'), int64_t(1) << 60);
    out.emplace_back(to_lower(name.substr(word_begin, word_end - word_begin)), value);
  }
  return out;
}

// The files of a directory (regular, not hidden: an editor's or a file manager's own are no loads),
// or the one file `path` names.
Result<std::vector<std::string>> files_of(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return std::vector<std::string>{path};
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(path, ec))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path().string());
  if (ec) return fail(path, ": ", ec.message());
  if (files.empty()) return fail(path, ": no load files in the directory");
  return files;
}

std::string base_name(const std::string& file) { return std::filesystem::path(file).filename().string(); }

// Adds a rank's loads to its step's sum, the shapes checked.
Status add_rank(LoadStep& step, const std::string& file, int64_t rank, std::vector<std::vector<double>> loads) {
  for (size_t i = 0; i < step.ranks.size(); ++i)
    if (step.ranks[i] == rank)
      return fail(file, ": rank ", rank, " of step ", step.number, " again (", step.files[i], " is that rank)");
  if (!step.files.empty()) {
    const auto& sum = step.loads;
    if (loads.size() != sum.size() || loads[0].size() != sum[0].size())
      return fail(file, " has ", loads.size(), " layers of ", loads[0].size(), " experts, but ", step.files[0],
                  " (rank ", step.ranks[0], " of the same step ", step.number, ") has ", sum.size(), " of ",
                  sum[0].size(), ": the ranks of one step are summed");
    for (size_t l = 0; l < sum.size(); ++l)
      for (size_t e = 0; e < sum[l].size(); ++e) loads[l][e] += sum[l][e];
  }
  step.files.push_back(file);
  step.ranks.push_back(rank);
  step.loads = std::move(loads);
  return {};
}

}  // namespace

TraceName trace_name_of(const std::string& file_name) {
  TraceName t;
  int64_t first = -1;
  for (const auto& [word, value] : numbered_words(file_name)) {
    if (word == "rank") {
      if (t.rank < 0) t.rank = value;
    } else if (word == "iter" || word == "iteration" || word == "step") {
      if (t.step < 0) t.step = value;
    } else if (first < 0) {
      first = value;
    }
  }
  if (t.step < 0) t.step = first;
  return t;
}

Result<std::vector<LoadStep>> read_load_trace(const std::string& path) {
  auto files = files_of(path);
  if (!files) return files.error();
  struct Named {
    std::string file;
    TraceName name;
  };
  std::vector<Named> named;
  for (auto& f : *files) named.push_back({f, trace_name_of(base_name(f))});
  std::sort(named.begin(), named.end(), [](const Named& a, const Named& b) {
    if (a.name.step != b.name.step) return a.name.step < b.name.step;
    if ((a.name.rank < 0) != (b.name.rank < 0)) return a.name.rank >= 0;  // a step's ranks first
    return a.name.rank != b.name.rank ? a.name.rank < b.name.rank : a.file < b.file;
  });
  std::vector<LoadStep> steps;
  for (const auto& n : named) {
    auto loads = read_load_file(n.file);
    if (!loads) return loads.error();
    const bool same_step = n.name.rank >= 0 && !steps.empty() && !steps.back().ranks.empty() &&
                           steps.back().number == n.name.step;
    if (!same_step) steps.push_back(LoadStep{n.name.step, {}, {}, {}});
    if (n.name.rank < 0) {
      steps.back().files.push_back(n.file);
      steps.back().loads = std::move(*loads);
    } else {
      SAL_TRY(add_rank(steps.back(), n.file, n.name.rank, std::move(*loads)));
    }
  }
  return steps;
}

std::string describe_trace(const std::vector<LoadStep>& steps) {
  size_t files = 0;
  std::map<size_t, size_t> by_ranks;  // ranks a step -> steps
  for (const auto& s : steps) {
    files += s.files.size();
    ++by_ranks[s.ranks.size()];
  }
  if (files == 1) return base_name(steps[0].files[0]);
  const std::string head = std::to_string(files) + " files";
  if (by_ranks.size() == 1 && by_ranks.begin()->first == 0) return head + ", a step each";
  size_t usual = 0, most = 0;
  for (const auto& [ranks, count] : by_ranks)
    if (count > most) std::tie(usual, most) = std::pair{ranks, count};
  std::string s = head + ": " + std::to_string(steps.size()) + " steps of " + std::to_string(usual) +
                  (usual == 1 ? " rank" : " ranks");
  std::string odd;
  for (const auto& step : steps)
    if (step.ranks.size() != usual && odd.size() < 200)
      odd += (odd.empty() ? "" : ", ") + std::string("step ") + std::to_string(step.number) + ": " +
             std::to_string(step.ranks.size());
  return odd.empty() ? s : s + " (" + odd + ")";
}

}  // namespace sal
