// The byte-level BPE tokenizer (Qwen2's tokenizer.json): encode any bytes as text (added tokens,
// NFC, the pre-tokenizer's regex, the merges) and decode the ids back to the same bytes.
#include "fuzz_util.h"
#include "text/byte_level_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const vlrt::text::ByteLevelBpe bpe =
      vlrt::text::ByteLevelBpe::load(vlrt::fuzz::source_path("tests/fixtures/vlm/tokenizer/tokenizer.json"));
  std::string_view text = vlrt::fuzz::bytes_of(data, size);
  try {
    bool parse_special = size > 0 && data[0] & 1;
    std::vector<int64_t> ids = bpe.encode(text, parse_special);
    (void)bpe.decode(ids, !parse_special);
  } catch (const vlrt::Error&) {
  }
  return 0;
}
