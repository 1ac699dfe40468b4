#include <gtest/gtest.h>

#include "text/unicode.h"

namespace vlrt::text {

TEST(Unicode, InvalidUtf8IsFound) {
  EXPECT_EQ(invalid_utf8_at("person . caf\xc3\xa9 ."), std::string::npos);
  EXPECT_EQ(invalid_utf8_at("ab\xff"), 2u);
  EXPECT_EQ(invalid_utf8_at("a\xc3"), 1u);             // cut short
  EXPECT_EQ(invalid_utf8_at("\xc0\xaf"), 0u);          // overlong
  EXPECT_EQ(invalid_utf8_at("\xed\xa0\x80"), 0u);      // surrogate
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
}

}  // namespace vlrt::text
