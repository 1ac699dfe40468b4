// The WordPiece (BERT) tokenizer on any bytes as text: cleaning, CJK splitting, lower-casing,
// accent stripping, punctuation splitting and the greedy longest-match pieces.
#include "fuzz_util.h"
#include "text/bert_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const vlrt::text::BertTokenizer tokenizer =
      vlrt::text::BertTokenizer::load(vlrt::fuzz::source_path("tests/fixtures/grounding/tiny/vocab.txt"));
  std::string_view text = vlrt::fuzz::bytes_of(data, size);
  try {
    for (const auto& piece : tokenizer.tokenize(text)) {
      if (piece.begin > piece.end || piece.end > text.size()) __builtin_trap();
    }
  } catch (const vlrt::Error&) {
  }
  return 0;
}
