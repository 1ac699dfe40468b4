// vlrt fetch against a loopback server: resume, retry, reject wrong bytes, keep user files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_util.h"
#include "core/error.h"
#include "integrity/fetch.h"
#include "integrity_util.h"
#include "io/files.h"
#include "loopback_server.h"

namespace vlrt {

namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

class Fetch : public ::testing::Test {
 protected:
  FetchOptions options(const std::string& path, const std::string& out_name = "model.bin") {
    FetchOptions o;
    o.url = server.url(path);
    o.sha256 = test::sha256_of(server.content());
    o.out = dir + "/" + out_name;
    o.backoff_ms = 10;
    o.stall_timeout_s = 5;
    o.log = &log;
    return o;
  }
  std::string error_of(const FetchOptions& o) {
    try {
      fetch(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  test::LoopbackServer server;
  std::string dir =
      test::temp_dir(cat("fetch_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
  std::ostringstream log;
};

}  // namespace

TEST_F(Fetch, DownloadsAndVerifies) {
  FetchOptions o = options("/file");
  o.size = int64_t(server.content().size());
  FetchResult r = fetch(o);
  EXPECT_FALSE(r.already_present);
  EXPECT_EQ(r.requests, 1);
  EXPECT_EQ(read_file(o.out), server.content());
  EXPECT_FALSE(fs::exists(o.out + ".part"));
}

TEST_F(Fetch, InterruptedTransferResumesWithRange) {
  FetchOptions o = options("/drop");  // size unknown: the drop is detected from Content-Length
  FetchResult r = fetch(o);
  EXPECT_EQ(r.requests, 2);
  EXPECT_EQ(read_file(o.out), server.content());
  EXPECT_FALSE(fs::exists(o.out + ".part"));
  size_t half = server.content().size() / 2;
  EXPECT_EQ(server.ranges(), (std::vector<std::string>{"", cat("bytes=", half, "-")}));
  EXPECT_NE(log.str().find(cat("resuming at byte ", half)), std::string::npos) << log.str();
}

TEST_F(Fetch, ResumesAPartFromAnEarlierRun) {
  FetchOptions o = options("/file");
  write_bytes(o.out + ".part", server.content().substr(0, 1000));
  FetchResult r = fetch(o);
  EXPECT_EQ(r.resumed_from, 1000);
  EXPECT_EQ(read_file(o.out), server.content());
  EXPECT_EQ(server.ranges(), std::vector<std::string>{"bytes=1000-"});
}

TEST_F(Fetch, StalePartOfAnotherFileStartsOver) {
  FetchOptions o = options("/file");
  write_bytes(o.out + ".part", std::string(1000, 'x'));
  FetchResult r = fetch(o);
  EXPECT_EQ(r.requests, 2);
  EXPECT_EQ(read_file(o.out), server.content());
  EXPECT_EQ(server.ranges(), (std::vector<std::string>{"bytes=1000-", ""}));
}

TEST_F(Fetch, WrongBytesAreRejectedAndNoFileAppears) {
  FetchOptions o = options("/wrong");
  std::string err = error_of(o);
  EXPECT_NE(err.find(cat("expected sha256 ", o.sha256, ", found sha256 ", test::sha256_of(server.wrong()),
                         ", ", server.wrong().size(), " bytes")),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(o.out));
  EXPECT_FALSE(fs::exists(o.out + ".part"));
}

TEST_F(Fetch, WrongSizeIsRejected) {
  FetchOptions o = options("/file");
  o.size = int64_t(server.content().size()) - 1;
  std::string err = error_of(o);
  EXPECT_NE(err.find(cat("expected sha256 ", o.sha256, ", ", o.size, " bytes, found sha256 ", o.sha256, ", ",
                         server.content().size(), " bytes")),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(o.out));
}

TEST_F(Fetch, CompleteFileIsNotDownloadedAgain) {
  FetchOptions o = options("/file");
  write_bytes(o.out, server.content());
  FetchResult r = fetch(o);
  EXPECT_TRUE(r.already_present);
  EXPECT_EQ(server.requests(), 0u);
}

TEST_F(Fetch, DifferentExistingFileIsNeverReplaced) {
  FetchOptions o = options("/file");
  write_bytes(o.out, "the user's own file");
  std::string err = error_of(o);
  EXPECT_NE(err.find("already exists and does not match"), std::string::npos) << err;
  EXPECT_EQ(read_file(o.out), "the user's own file");
  EXPECT_EQ(server.requests(), 0u);
}

TEST_F(Fetch, ServerErrorsAreRetriedWithBoundedCount) {
  FetchOptions o = options("/flaky");
  EXPECT_EQ(fetch(o).requests, 2);
  EXPECT_NE(log.str().find("HTTP 503; retrying in 10 ms (1 of 5)"), std::string::npos) << log.str();

  FetchOptions busy = options("/busy", "busy.bin");
  busy.retries = 2;
  std::string err = error_of(busy);
  EXPECT_NE(err.find("gave up after 3 requests: the server answered HTTP 503"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(busy.out));
}

TEST_F(Fetch, NotFoundIsNotRetried) {
  FetchOptions o = options("/nothing-here");
  std::string err = error_of(o);
  EXPECT_NE(err.find("the server answered HTTP 404"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(o.out + ".part"));
}

TEST_F(Fetch, BadArgumentsAreNamed) {
  FetchOptions o = options("/file");
  o.sha256 = "abc";
  EXPECT_NE(error_of(o).find("--sha256 must be 64 hex digits"), std::string::npos);
  o = options("/file");
  o.url = "ftp://127.0.0.1/x";
  EXPECT_NE(error_of(o).find("only http:// and https://"), std::string::npos);
}

}  // namespace vlrt
