#include "integrity/fetch.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <thread>

#include "core/error.h"
#include "integrity/sha256.h"

namespace vlrt {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  return buf;
}

int64_t file_size_or(const std::string& path, int64_t missing) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? missing : int64_t(n);
}

// Progress on the log: a redrawn bar on a terminal, a line every few seconds otherwise.
class Progress {
 public:
  Progress(std::ostream* log, bool bar) : log_(log), bar_(bar) {}
  void update(int64_t done, int64_t total) {
    if (!log_) return;
    auto now = Clock::now();
    auto since = std::chrono::duration<double>(now - last_).count();
    if (since < (bar_ ? 0.1 : 5.0)) return;
    double rate = done > last_done_ && since > 0 ? double(done - last_done_) / since : 0;
    last_ = now;
    last_done_ = done;
    std::string amount = mib(double(done)) + (total > 0 ? " / " + mib(double(total)) : "");
    if (!bar_) {
      *log_ << "fetch: " << amount << (total > 0 ? cat(" (", done * 100 / total, "%)") : "") << "\n";
      return;
    }
    const int width = 30;
    int filled = total > 0 ? int(std::min<int64_t>(width, done * width / total)) : 0;
    *log_ << "\r[" << std::string(size_t(filled), '#') << std::string(size_t(width - filled), ' ') << "] "
          << (total > 0 ? cat(done * 100 / total, "% ") : "") << amount << "  " << mib(rate) << "/s   "
          << std::flush;
    drawn_ = true;
  }
  void finish() {
    if (log_ && drawn_) *log_ << "\n";
    drawn_ = false;
  }

 private:
  std::ostream* log_;
  bool bar_;
  bool drawn_ = false;
  Clock::time_point last_ = Clock::now();
  int64_t last_done_ = 0;
};

enum class Outcome { complete, transient, permanent, range_unsatisfiable };

struct Attempt {
  Outcome outcome = Outcome::complete;
  std::string error;
};

// One HTTP request appending to `part` from its current size.
struct Transfer {
  Transfer(const FetchOptions& o, const std::string& p, int64_t off, Progress& pr)
      : opt(o), part(p), offset(off), progress(pr) {}
  const FetchOptions& opt;
  const std::string& part;
  int64_t offset;
  Progress& progress;
  CURL* curl = nullptr;
  FILE* file = nullptr;
  int64_t content_range_start = -1;
  std::string abort_reason;

  static size_t on_header(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    std::string line(data, size * n);
    // Each response of a redirect chain starts with a status line.
    if (line.rfind("HTTP/", 0) == 0) t->content_range_start = -1;
    std::string lower = line;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (lower.rfind("content-range: bytes ", 0) == 0) t->content_range_start = std::atoll(line.c_str() + 21);
    return size * n;
  }

  static size_t on_body(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200 && code != 206) return size * n;  // an error page: not file content
    if (!t->file) {
      // 200 to a Range request means the server sends the whole file again.
      bool append = t->offset > 0 && code == 206;
      if (code == 206 && t->content_range_start != t->offset) {
        t->abort_reason = cat("the server resumed at byte ", t->content_range_start, ", not ", t->offset);
        return 0;
      }
      t->file = std::fopen(t->part.c_str(), append ? "ab" : "wb");
      if (!t->file) {
        t->abort_reason = cat(t->part, ": cannot open for writing");
        return 0;
      }
      if (!append) t->offset = 0;
    }
    if (std::fwrite(data, size, n, t->file) == n) return size * n;
    t->abort_reason = cat(t->part, ": write failed (is the disk full?)");
    return 0;
  }

  static int on_progress(void* self, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(self);
    int64_t total = t->opt.size >= 0 ? t->opt.size : dltotal > 0 ? t->offset + dltotal : -1;
    t->progress.update(t->offset + dlnow, total);
    return 0;
  }

  Attempt run() {
    curl = curl_easy_init();
    if (!curl) return {Outcome::permanent, "libcurl: cannot create a transfer"};
    char errbuf[CURL_ERROR_SIZE] = "";
    std::string range = cat(offset, "-");
    curl_easy_setopt(curl, CURLOPT_URL, opt.url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "vlrt/0.1");
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, long(opt.connect_timeout_s));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, long(opt.stall_timeout_s));
    if (offset > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, this);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, this);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(curl);
    if (file) {
      // On disk before the rename that publishes it, so a crash cannot leave a verified name on lost bytes.
      bool written = std::fflush(file) == 0 && fsync(fileno(file)) == 0;
      written = std::fclose(file) == 0 && written;
      if (!written && abort_reason.empty()) abort_reason = cat(part, ": write failed (is the disk full?)");
    }
    if (!abort_reason.empty()) return {Outcome::permanent, abort_reason};
    if (rc != CURLE_OK) {
      std::string msg = cat(errbuf[0] ? errbuf : curl_easy_strerror(rc), " (curl error ", int(rc), ")");
      switch (rc) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
          return {Outcome::transient, msg};
        default:
          return {Outcome::permanent, msg};
      }
    }
    if (code == 416) return {Outcome::range_unsatisfiable, "HTTP 416"};
    if (code == 200 || code == 206) return {};
    bool transient = code >= 500 || code == 408 || code == 429;
    return {transient ? Outcome::transient : Outcome::permanent, cat("the server answered HTTP ", code)};
  }
};

void check_options(const FetchOptions& o) {
  if (!is_sha256_hex(o.sha256)) fail("--sha256 must be 64 hex digits, got '", o.sha256, "'");
  if (o.url.rfind("http://", 0) != 0 && o.url.rfind("https://", 0) != 0)
    fail("'", o.url, "': only http:// and https:// URLs can be fetched");
  if (o.out.empty()) fail("give the destination file with --out FILE");
  if (fs::is_directory(o.out)) fail(o.out, ": is a directory; --out names the file to write");
  fs::path dir = fs::path(o.out).parent_path();
  if (!dir.empty() && !fs::is_directory(dir))
    fail(dir.string(), ": no such folder (for --out ", o.out, "); create it first");
}

// Requests until the server has sent everything or the retries are spent.
int download(const FetchOptions& o, const std::string& part, Progress& progress) {
  int requests = 0;
  for (int retry = 0;; retry++) {
    int64_t offset = file_size_or(part, 0);
    if (o.size >= 0 && offset >= o.size) return requests;
    if (offset > 0 && o.log) *o.log << "fetch: resuming at byte " << offset << "\n";
    Transfer t{o, part, offset, progress};
    Attempt a = t.run();
    requests++;
    progress.finish();
    if (a.outcome == Outcome::complete && o.size >= 0 && file_size_or(part, 0) < o.size)
      a = {Outcome::transient,
           cat("the server closed the connection at byte ", file_size_or(part, 0), " of ", o.size)};
    // 416 to a Range request: there is nothing left to send; the hash decides.
    if (a.outcome == Outcome::complete || a.outcome == Outcome::range_unsatisfiable) return requests;
    std::string kept = file_size_or(part, 0) > 0 ? cat("; the partial download is kept in ", part,
                                                       ": run the same command again to resume")
                                                 : "";
    if (a.outcome == Outcome::permanent) fail(o.url, ": ", a.error, kept);
    if (retry >= o.retries) fail(o.url, ": gave up after ", requests, " requests: ", a.error, kept);
    int delay = int(std::min<int64_t>(int64_t(o.backoff_ms) << std::min(retry, 16), 60000));
    if (o.log)
      *o.log << "fetch: " << a.error << "; retrying in " << delay << " ms (" << (retry + 1) << " of "
             << o.retries << ")\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
}

}  // namespace

FetchResult fetch(const FetchOptions& options) {
  FetchOptions o = options;
  check_options(o);
  for (char& c : o.sha256) c = char(std::tolower(static_cast<unsigned char>(c)));
  std::string expected = cat("sha256 ", o.sha256, o.size >= 0 ? cat(", ", o.size, " bytes") : "");
  FetchResult r;

  std::error_code ec;
  if (fs::exists(o.out, ec)) {
    int64_t have = file_size_or(o.out, -1);
    std::string found = o.size >= 0 && have != o.size ? cat(have, " bytes") : "sha256 " + sha256_file(o.out);
    if (found == "sha256 " + o.sha256) {
      r.already_present = true;
      r.bytes = have;
      return r;
    }
    fail(o.out, " already exists and does not match (expected ", expected, ", found ", found,
         "); vlrt does not replace a file it did not download: move or delete it, or choose another --out");
  }

  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global != CURLE_OK) fail("libcurl: initialisation failed (", curl_easy_strerror(global), ")");

  const std::string part = o.out + ".part";
  r.resumed_from = file_size_or(part, 0);
  // A .part longer than the file is not a prefix of it.
  if (o.size >= 0 && r.resumed_from > o.size) {
    fs::remove(part);
    r.resumed_from = 0;
  }
  Progress progress(o.log, o.bar);
  for (bool restarted = false;; restarted = true) {
    r.requests += download(o, part, progress);
    if (!fs::exists(part)) std::ofstream(part, std::ios::binary);  // an empty file sends no body
    int64_t got = file_size_or(part, 0);
    std::string hash = sha256_file(part);
    if ((o.size < 0 || got == o.size) && hash == o.sha256) {
      fs::rename(part, o.out, ec);
      if (ec) fail("cannot rename ", part, " to ", o.out, ": ", ec.message());
      r.bytes = got;
      return r;
    }
    fs::remove(part);
    // The bytes kept from an earlier run may belong to another version of the file.
    if (r.resumed_from > 0 && !restarted) {
      if (o.log)
        *o.log << "fetch: mismatch after resuming an earlier partial download; starting again from byte 0\n";
      r.resumed_from = 0;
      continue;
    }
    fail(o.url, ": the download does not match (expected ", expected, ", found sha256 ", hash, ", ", got,
         " bytes); removed ", part, " and did not create ", o.out,
         ". Check the URL and the checksum; a mirror may serve another version");
  }
}

}  // namespace vlrt
