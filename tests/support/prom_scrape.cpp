// prom_scrape.cpp — see prom_scrape.h.
#include "support/prom_scrape.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

namespace sal::test {
namespace {

const std::regex kMetricName("[a-zA-Z_:][a-zA-Z0-9_:]*");
const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");
const std::set<std::string> kTypes{"counter", "gauge", "histogram", "summary", "untyped"};

Error at(int line, const std::string& what) { return fail("line ", line, ": ", what); }

// "+Inf", "-Inf", "NaN" or a decimal number.
std::optional<double> parse_value(const std::string& s) {
  if (s == "+Inf") return HUGE_VAL;
  if (s == "-Inf") return -HUGE_VAL;
  if (s == "NaN") return NAN;
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || s == "inf" || s == "nan") return std::nullopt;
  return v;
}

// `{a="x",b="y"}` starting at text[i] (the '{'); leaves i after the '}'.
Status parse_labels(const std::string& text, size_t& i, std::map<std::string, std::string>& out) {
  ++i;
  while (i < text.size() && text[i] != '}') {
    size_t eq = text.find('=', i);
    if (eq == std::string::npos) return fail("label without '='");
    std::string name = text.substr(i, eq - i);
    if (!std::regex_match(name, kLabelName)) return fail("bad label name '", name, "'");
    if (eq + 1 >= text.size() || text[eq + 1] != '"') return fail("label ", name, ": value not quoted");
    std::string value;
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] != '\\') {
        value += text[j];
        continue;
      }
      if (++j >= text.size()) return fail("label ", name, ": escape at the end");
      if (text[j] == 'n') value += '\n';
      else if (text[j] == '\\' || text[j] == '"') value += text[j];
      else return fail("label ", name, ": bad escape \\", std::string(1, text[j]));
    }
    if (j >= text.size()) return fail("label ", name, ": unterminated value");
    if (!out.emplace(name, value).second) return fail("label ", name, " twice");
    i = j + 1;
    if (i < text.size() && text[i] == ',') ++i;
  }
  if (i >= text.size()) return fail("labels not closed with '}'");
  ++i;
  return {};
}

// The family a sample name belongs to, given the TYPE lines so far ("" if none).
std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name)) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s = suffix;
    if (name.size() <= s.size() || name.compare(name.size() - s.size(), s.size(), s) != 0) continue;
    auto base = types.find(name.substr(0, name.size() - s.size()));
    if (base != types.end() && (base->second == "histogram" || base->second == "summary")) return base->first;
  }
  return "";
}

Status parse_comment(const std::string& line, int n, PromText& out) {
  std::istringstream in(line.substr(1));
  std::string word, name;
  in >> word >> name;
  if (word != "HELP" && word != "TYPE") return {};  // a plain comment
  if (!std::regex_match(name, kMetricName)) return at(n, "# " + word + ": bad metric name '" + name + "'");
  std::string rest;
  std::getline(in, rest);
  if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
  auto& table = word == "HELP" ? out.help : out.type;
  if (table.count(name)) return at(n, "a second # " + word + " for " + name);
  if (word == "TYPE" && !kTypes.count(rest)) return at(n, "# TYPE " + name + ": unknown type '" + rest + "'");
  if (word == "TYPE" && std::any_of(out.samples.begin(), out.samples.end(),
                                    [&](const PromSample& s) { return family_of(s.name, {{name, rest}}) == name; }))
    return at(n, "# TYPE " + name + " after its samples");
  table[name] = rest;
  return {};
}

Status parse_sample(const std::string& line, int n, PromText& out) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  PromSample s;
  s.name = line.substr(0, i);
  if (!std::regex_match(s.name, kMetricName)) return at(n, "bad metric name '" + s.name + "'");
  if (i < line.size() && line[i] == '{')
    if (auto st = parse_labels(line, i, s.labels); !st) return at(n, s.name + ": " + st.error().message());
  std::istringstream rest(line.substr(i));
  std::string value, timestamp, extra;
  rest >> value >> timestamp >> extra;
  auto v = parse_value(value);
  if (!v) return at(n, s.name + ": value '" + value + "' is not a number");
  if (!timestamp.empty() && timestamp.find_first_not_of("-0123456789") != std::string::npos)
    return at(n, s.name + ": timestamp '" + timestamp + "' is not an integer");
  if (!extra.empty()) return at(n, s.name + ": text after the value and timestamp");
  if (family_of(s.name, out.type).empty()) return at(n, s.name + ": no # TYPE line before it");
  s.value = *v;
  out.samples.push_back(std::move(s));
  return {};
}

}  // namespace

std::optional<double> PromText::value(const std::string& name, const std::map<std::string, std::string>& labels) const {
  for (const auto& s : samples) {
    if (s.name != name) continue;
    bool all = std::all_of(labels.begin(), labels.end(), [&](const auto& kv) {
      auto it = s.labels.find(kv.first);
      return it != s.labels.end() && it->second == kv.second;
    });
    if (all) return s.value;
  }
  return std::nullopt;
}

Result<PromText> parse_prom_text(const std::string& text) {
  PromText out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto st = line[0] == '#' ? parse_comment(line, n, out) : parse_sample(line, n, out);
    if (!st) return st.error();
  }
  return out;
}

namespace {

struct Target {
  bool tls = false;
  std::string host, port, hostport, path;
};

Result<Target> parse_url(const std::string& url) {
  Target t;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    t.tls = true;
    rest = url.substr(8);
  } else {
    return fail(url, ": not an http:// or https:// URL");
  }
  t.hostport = rest.substr(0, rest.find('/'));
  t.path = rest.find('/') == std::string::npos ? "/" : rest.substr(rest.find('/'));
  auto colon = t.hostport.rfind(':');
  if (colon == std::string::npos) return fail(url, ": no port");
  t.host = t.hostport.substr(0, colon), t.port = t.hostport.substr(colon + 1);
  return t;
}

Result<int> connect_to(const Target& t, int timeout_ms) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (int rc = getaddrinfo(t.host.c_str(), t.port.c_str(), &hints, &ai); rc != 0) return fail(gai_strerror(rc));
  int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(ai);
    return fail("socket: ", std::strerror(errno));
  }
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (rc != 0) {
    int e = errno;
    close(fd);
    return fail("connect: ", std::strerror(e));
  }
  return fd;
}

// The body of a 200 answer, else why not.
Result<std::string> body_of(const std::string& response) {
  auto end_of_head = response.find("\r\n\r\n");
  if (end_of_head == std::string::npos) return fail("no HTTP answer (", response.size(), " bytes)");
  std::string status = response.substr(0, response.find("\r\n"));
  if (status.find(" 200 ") == std::string::npos) return fail(status);
  std::string head = response.substr(0, end_of_head);
  if (head.find("Transfer-Encoding: chunked") != std::string::npos) return fail("chunked answers are not read here");
  return response.substr(end_of_head + 4);
}

// Sends `request` and reads until the server closes, in plain text.
Result<std::string> exchange_plain(int fd, const std::string& request) {
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size())) return fail("send failed");
  std::string response;
  char buf[16384];
  ssize_t got;
  while ((got = recv(fd, buf, sizeof buf, 0)) > 0) response.append(buf, size_t(got));
  if (got < 0) return fail("receive: ", std::strerror(errno));
  return response;
}

// The same over TLS, the server's certificate checked against `ca_file` (its own, self-signed).
Result<std::string> exchange_tls(int fd, const std::string& request, const Target& t, const std::string& ca_file) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  if (!ctx || SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr) != 1)
    return fail("cannot use ", ca_file, " to check the server");
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), &SSL_free);
  SSL_set_fd(ssl.get(), fd);
  SSL_set1_host(ssl.get(), t.host.c_str());
  if (SSL_connect(ssl.get()) != 1) return fail("TLS handshake failed (", ERR_get_error(), ")");
  if (SSL_write(ssl.get(), request.data(), int(request.size())) != int(request.size())) return fail("send failed");
  std::string response;
  char buf[16384];
  int got;
  while ((got = SSL_read(ssl.get(), buf, sizeof buf)) > 0) response.append(buf, size_t(got));
  return response;
}

}  // namespace

Result<std::string> http_get(const std::string& url, int timeout_ms, const std::string& authorization,
                             const std::string& ca_file) {
  auto t = parse_url(url);
  if (!t) return t.error();
  auto fd = connect_to(*t, timeout_ms);
  if (!fd) return fd.error().with_context(url);
  std::string request = "GET " + t->path + " HTTP/1.1\r\nHost: " + t->hostport + "\r\nConnection: close\r\n" +
                        (authorization.empty() ? "" : "Authorization: " + authorization + "\r\n") + "\r\n";
  auto response = t->tls ? exchange_tls(*fd, request, *t, ca_file) : exchange_plain(*fd, request);
  close(*fd);
  if (!response) return response.error().with_context(url);
  auto body = body_of(*response);
  if (!body) return body.error().with_context(url);
  return body;
}

Result<PromText> scrape(const std::string& url, int timeout_ms, const std::string& authorization,
                        const std::string& ca_file) {
  auto body = http_get(url, timeout_ms, authorization, ca_file);
  if (!body) return body.error();
  auto text = parse_prom_text(*body);
  if (!text) return text.error().with_context(url);
  return text;
}

}  // namespace sal::test
