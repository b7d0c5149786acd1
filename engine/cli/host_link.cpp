// host_link.cpp — see host_link.h.
#include "cli/host_link.h"

#include "core/strings.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sal::cli {

constexpr size_t kMaxLine = 256;

std::string encode_host_request(const HostRequest& r) {
  switch (r.kind) {
    case HostRequest::Kind::add: return "add " + std::to_string(r.value);
    case HostRequest::Kind::restart: return "restart " + std::to_string(r.value);
    case HostRequest::Kind::cut: return "cut " + r.node + " " + std::to_string(r.value);
  }
  return "";
}

namespace {

Result<int64_t> request_number(const std::string& line, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || text.empty() || *end || v < 0) return fail("host request '", line, "': expected a non-negative integer");
  return int64_t(v);
}

}  // namespace

Result<HostRequest> decode_host_request(const std::string& line) {
  auto w = split(line, ' ');
  HostRequest r;
  if (w[0] == "add") r.kind = HostRequest::Kind::add;
  else if (w[0] == "restart") r.kind = HostRequest::Kind::restart;
  else if (w[0] == "cut") r.kind = HostRequest::Kind::cut;
  else return fail("host request '", line, "': expected 'add N', 'restart MS' or 'cut NODE MS'");
  size_t want = r.kind == HostRequest::Kind::cut ? 3 : 2;
  if (w.size() < want) return fail("host request '", line, "': ", want == 3 ? "a node or a number" : "a number", " is missing");
  if (w.size() > want) return fail("host request '", line, "': too many words");
  if (want == 3) r.node = w[1];
  auto v = request_number(line, w.back());
  if (!v) return v.error();
  r.value = *v;
  return r;
}

Status send_host_request(int fd, const HostRequest& r) {
  std::string line = encode_host_request(r) + "\n";
  ssize_t n;
  do n = ::write(fd, line.data(), line.size());
  while (n < 0 && errno == EINTR);
  if (n != ssize_t(line.size())) return fail("the link to the host (fd ", fd, "): ", n < 0 ? std::strerror(errno) : "short write");
  return {};
}

HostListener::~HostListener() {
  if (!pipe_) return;
  pipe_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(pipe_), [](uv_handle_t* h) { delete reinterpret_cast<uv_pipe_t*>(h); });
}

Status HostListener::start(int fd) {
  pipe_ = new uv_pipe_t{};
  uv_pipe_init(loop_, pipe_, 0);
  pipe_->data = this;
  if (int rc = uv_pipe_open(pipe_, fd); rc != 0) return fail("host link: ", uv_strerror(rc));
  auto alloc = [](uv_handle_t*, size_t, uv_buf_t* b) {
    static char buf[1024];
    *b = uv_buf_init(buf, sizeof buf);
  };
  if (int rc = uv_read_start(reinterpret_cast<uv_stream_t*>(pipe_), alloc, on_read); rc != 0)
    return fail("host link: ", uv_strerror(rc));
  return {};
}

void HostListener::on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* self = static_cast<HostListener*>(s->data);
  if (!self || n <= 0) return;  // EOF: every controller has closed its end; a new one reopens it
  self->take(buf->base, size_t(n));
}

void HostListener::take(const char* data, size_t n) {
  pending_.append(data, n);
  size_t nl;
  while ((nl = pending_.find('\n')) != std::string::npos) {
    std::string line = pending_.substr(0, nl);
    pending_.erase(0, nl + 1);
    on_request_(decode_host_request(line));
  }
  if (pending_.size() > kMaxLine) {
    on_request_(fail("host request longer than ", kMaxLine, " bytes"));
    pending_.clear();
  }
}

}  // namespace sal::cli
