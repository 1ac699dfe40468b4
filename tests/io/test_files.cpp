#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "core/error.h"
#include "io/files.h"

namespace vlrt {

namespace fs = std::filesystem;

TEST(Files, WriteAtomicallyReplacesTheFileAndLeavesNoTemporary) {
  std::string dir = test::temp_dir("files");
  std::string path = dir + "/out.bin";
  write_file_atomically(path, "old contents");
  write_file_atomically(path, {"new", std::string_view("\0 ", 2), "parts"});
  EXPECT_EQ(read_file(path), std::string("new\0 parts", 10));
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "out.bin");
}

TEST(Files, WriteCreatesMissingFolders) {
  std::string path = test::temp_dir("files_missing") + "/no/such/folder/out.bin";
  write_file_atomically(path, "x");
  EXPECT_EQ(read_file(path), "x");
}

TEST(Files, WriteWhereAFileBlocksTheFolderFailsNamingThePath) {
  std::string dir = test::temp_dir("files_blocked");
  write_file_atomically(dir + "/plain", "a file, not a folder");
  std::string path = dir + "/plain/out.bin";
  try {
    write_file_atomically(path, "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(Files, ReadFailsNamingThePath) {
  std::string dir = test::temp_dir("files_read");
  EXPECT_THROW(read_file(dir + "/missing"), Error);
  EXPECT_THROW(read_file(dir), Error);
}

}  // namespace vlrt
