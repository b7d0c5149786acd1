// journal_file.cpp — see journal_file.h.
#include "mesh/journal_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/clock.h"
#include "core/paths.h"

namespace sal::mesh {
namespace {

constexpr size_t kMaxJournalBytes = size_t(1) << 30;

Error io_error(const std::string& what, const std::string& path) {
  return Error(what + " " + path + ": " + std::strerror(errno));
}

Status write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot write", path);
    done += size_t(n);
  }
  return {};
}

Result<int> open_for_append(const std::string& path, bool truncate) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  if (fd < 0) return io_error("cannot open", path);
  return fd;
}

// The directory entry of a renamed file is durable once its directory is synced.
void sync_dir(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

JournalFile::JournalFile(std::string path, int fd, job::JournalState state)
    : path_(std::move(path)), fd_(fd), state_(std::move(state)) {}

JournalFile::~JournalFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<JournalFile>> JournalFile::create(const std::string& path, const job::rec::Job& job) {
  auto fd = open_for_append(path, true);
  if (!fd) return fd.error();
  std::unique_ptr<JournalFile> f(new JournalFile(path, *fd, {}));
  SAL_TRY(f->append(job, true));
  return f;
}

Result<std::unique_ptr<JournalFile>> JournalFile::reopen(const std::string& path, job::JournalState state) {
  auto fd = open_for_append(path, false);
  if (!fd) return fd.error();
  std::unique_ptr<JournalFile> f(new JournalFile(path, *fd, std::move(state)));
  SAL_TRY(f->compact());  // drops a torn last line, and starts the count afresh
  return f;
}

Status JournalFile::append(const job::Record& r, bool sync) {
  state_.apply(r);
  SAL_TRY(write_line(job::encode_record(r) + "\n", sync));
  if (++since_compact_ >= kCompactEvery) return compact();
  return {};
}

Status JournalFile::write_line(const std::string& line, bool sync) {
  SAL_TRY(write_all(fd_, line, path_));
  if (sync && ::fdatasync(fd_) != 0) return io_error("cannot sync", path_);
  return {};
}

Status JournalFile::compact() {
  std::string text;
  for (const auto& r : job::compact(state_)) text += job::encode_record(r) + "\n";
  std::string tmp = path_ + ".tmp";
  auto fd = open_for_append(tmp, true);
  if (!fd) return fd.error();
  Status s = write_all(*fd, text, tmp);
  if (s && ::fsync(*fd) != 0) s = io_error("cannot sync", tmp);
  ::close(*fd);
  if (s && ::rename(tmp.c_str(), path_.c_str()) != 0) s = io_error("cannot replace", path_);
  if (!s) return s.error().with_context("compacting the journal");
  sync_dir(path_);
  auto reopened = open_for_append(path_, false);
  if (!reopened) return reopened.error();
  ::close(fd_);
  fd_ = *reopened;
  since_compact_ = 0;
  return {};
}

struct JournalSyncer::Request {
  uv_fs_t req{};
  JournalSyncer* owner = nullptr;  // null once the syncer is gone
  Done done;
  int fd = -1;
  int64_t started_ns = 0;
  std::string path;
};

JournalSyncer::~JournalSyncer() {
  if (inflight_) inflight_->owner = nullptr;
}

Status JournalSyncer::start(const JournalFile& file, Done done) {
  if (inflight_) return fail("a sync of ", file.path(), " is already in flight");
  int fd = ::dup(file.fd());
  if (fd < 0) return io_error("cannot duplicate the descriptor of", file.path());
  auto* r = new Request{{}, this, std::move(done), fd, mono_ns(), file.path()};
  r->req.data = r;
  if (int rc = uv_fs_fdatasync(loop_, &r->req, fd, &JournalSyncer::finished); rc < 0) {
    ::close(fd);
    delete r;
    return fail("cannot start a sync of ", file.path(), ": ", uv_strerror(rc));
  }
  inflight_ = r;
  return {};
}

void JournalSyncer::finished(uv_fs_t* req) {
  std::unique_ptr<Request> r(static_cast<Request*>(req->data));
  const ssize_t result = req->result;
  uv_fs_req_cleanup(req);
  ::close(r->fd);
  if (!r->owner) return;
  r->owner->inflight_ = nullptr;
  Status s = result < 0 ? Status(fail("cannot sync ", r->path, ": ", uv_strerror(int(result)))) : Status{};
  r->done(std::move(s), double(mono_ns() - r->started_ns) / 1e6);
}

Result<job::JournalState> read_journal_file(const std::string& run_dir) {
  std::string path = run_dir + "/journal.jsonl";
  int64_t t0 = mono_ns();
  auto text = read_file(path, kMaxJournalBytes);
  if (!text) return text.error().with_context("the run's journal");
  auto state = job::read_journal(*text, path);
  if (state) state->read_ms = double(mono_ns() - t0) / 1e6;
  return state;
}

}  // namespace sal::mesh
