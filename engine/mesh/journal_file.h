// journal_file.h — the controller's journal on disk, <run>/journal.jsonl (the records are
// job/journal.h's). Records are appended as the job goes; a record that must be durable — a
// commit, a rewind, a plan put in force, the end — is fsynced before the controller does anything
// else. Every kCompactEvery records the file is rewritten as the records of its state (to a
// temporary file, fsynced, renamed over the old one, the directory fsynced), so it stays bounded.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "job/journal.h"

namespace sal::mesh {

class JournalFile {
 public:
  static constexpr size_t kCompactEvery = 10000;

  // A new journal (an existing file is replaced), starting with the job's record.
  static Result<std::unique_ptr<JournalFile>> create(const std::string& path, const job::rec::Job& job);
  // The journal of a resumed job: appended to, its state as read.
  static Result<std::unique_ptr<JournalFile>> reopen(const std::string& path, job::JournalState state);
  ~JournalFile();
  JournalFile(const JournalFile&) = delete;
  JournalFile& operator=(const JournalFile&) = delete;

  Status append(const job::Record& r, bool sync);
  const job::JournalState& state() const { return state_; }
  const std::string& path() const { return path_; }

 private:
  JournalFile(std::string path, int fd, job::JournalState state);
  Status write_line(const std::string& line, bool sync);
  Status compact();

  std::string path_;
  int fd_ = -1;
  job::JournalState state_;
  size_t since_compact_ = 0;
};

// Reads <run_dir>/journal.jsonl: what `salamander controller --resume RUN_DIR` resumes from.
Result<job::JournalState> read_journal_file(const std::string& run_dir);

}  // namespace sal::mesh
