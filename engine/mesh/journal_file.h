// journal_file.h — the controller's journal on disk, <run>/journal.jsonl (the records are
// job/journal.h's). Records are appended as the job goes; a record that must be durable — a
// commit, a rewind, a plan put in force, the end — is synced before the controller acts on it:
// JournalSyncer runs the sync on libuv's thread pool while the controller's loop goes on serving
// the mesh and the REPL (the driver's next actions wait for it). Every kCompactEvery records the
// file is rewritten as the records of its state (to a temporary file, fsynced, renamed over the
// old one, the directory fsynced), so it stays bounded.
#pragma once

#include <uv.h>

#include <functional>
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

  // Appends a record; with `sync`, fdatasync before returning (on the caller's thread).
  Status append(const job::Record& r, bool sync);
  const job::JournalState& state() const { return state_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  JournalFile(std::string path, int fd, job::JournalState state);
  Status write_line(const std::string& line, bool sync);
  Status compact();

  std::string path_;
  int fd_ = -1;
  job::JournalState state_;
  size_t since_compact_ = 0;
};

// One fdatasync of a journal at a time, on libuv's thread pool; `done` runs on the loop's thread
// with how long the sync took. The sync works on a duplicate of the file's descriptor, so a
// compaction (which replaces the file, itself synced) cannot close it underneath. Destroying the
// syncer with a sync in flight lets that sync finish and drops its `done`.
class JournalSyncer {
 public:
  using Done = std::function<void(Status, double ms)>;
  explicit JournalSyncer(uv_loop_t* loop) : loop_(loop) {}
  ~JournalSyncer();
  JournalSyncer(const JournalSyncer&) = delete;
  JournalSyncer& operator=(const JournalSyncer&) = delete;

  // Starts a sync of everything written to `file` so far; an error (none started) if one is in flight.
  Status start(const JournalFile& file, Done done);
  bool busy() const { return inflight_ != nullptr; }

 private:
  struct Request;
  static void finished(uv_fs_t* req);

  uv_loop_t* loop_;
  Request* inflight_ = nullptr;
};

// Reads <run_dir>/journal.jsonl: what `salamander controller --resume RUN_DIR` resumes from.
Result<job::JournalState> read_journal_file(const std::string& run_dir);

}  // namespace sal::mesh
