// vlrt tokenize --vocab V "CAPTION": the caption as GroundingDINO will see it.
// vlrt tokenize --tokenizer tokenizer.json "TEXT": a byte-level BPE tokenizer's ids (Qwen2-VL).
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "pipelines/grounding/text_inputs.h"
#include "text/byte_level_bpe.h"

namespace vlrt {

namespace {

struct TokenizeArgs {
  std::string vocab;
  std::string tokenizer;
  std::string caption;
  bool decode = false;
  int64_t max_length = grounding::kDefaultMaxTextLength;
  bool json = false;
};

template <class T>
std::vector<int64_t> values(const Tensor& t) {
  return std::vector<int64_t>(t.data<T>(), t.data<T>() + t.numel());
}

std::vector<std::vector<int64_t>> mask_rows(const Tensor& mask) {
  int64_t len = mask.dim(-1);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t r = 0; r < len; r++)
    rows.emplace_back(mask.data<bool>() + r * len, mask.data<bool>() + (r + 1) * len);
  return rows;
}

void print_row(const char* name, const std::vector<int64_t>& v) {
  std::cout << name;
  for (int64_t x : v) std::cout << " " << x;
  std::cout << "\n";
}

void tokenize_bpe(const TokenizeArgs& a) {
  auto tokenizer = text::ByteLevelBpe::load(a.tokenizer);
  std::vector<int64_t> ids = tokenizer.encode(a.caption);
  if (a.json) {
    nlohmann::ordered_json j = {{"input_ids", ids}};
    if (a.decode) j["decode"] = tokenizer.decode(ids);
    std::cout << j.dump() << "\n";
    return;
  }
  print_row("input_ids:", ids);
  if (a.decode) std::cout << "decode: " << tokenizer.decode(ids) << "\n";
}

void tokenize(const TokenizeArgs& a) {
  if (!a.tokenizer.empty()) return tokenize_bpe(a);
  auto tokenizer = text::BertTokenizer::load(a.vocab);
  grounding::EncodedCaption e = grounding::encode_caption(tokenizer, a.caption, a.max_length);
  grounding::TextInputs t = grounding::make_text_inputs(tokenizer, {e});
  if (!e.warning.empty()) std::cerr << "warning: " << e.warning << "\n";

  if (a.json) {
    nlohmann::ordered_json phrases = nlohmann::ordered_json::array();
    for (const auto& p : e.phrases) phrases.push_back({{"text", p.text}, {"begin", p.begin}, {"end", p.end}});
    nlohmann::ordered_json j = {{"caption", e.caption},
                                {"tokens", e.tokens},
                                {"input_ids", e.input_ids},
                                {"attention_mask", values<bool>(t.attention_mask)},
                                {"position_ids", values<int64_t>(t.position_ids)},
                                {"token_type_ids", values<int64_t>(t.token_type_ids)},
                                {"text_token_mask", mask_rows(t.text_token_mask)},
                                {"phrases", phrases}};
    std::cout << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << "caption: " << e.caption << "\n";
  std::cout << "tokens (" << e.tokens.size() << "):";
  for (const auto& tok : e.tokens) std::cout << " " << tok;
  std::cout << "\n";
  print_row("input_ids:", e.input_ids);
  print_row("attention_mask:", values<bool>(t.attention_mask));
  print_row("position_ids:", values<int64_t>(t.position_ids));
  print_row("token_type_ids:", values<int64_t>(t.token_type_ids));
  std::cout << "text_token_mask:\n";
  for (const auto& row : mask_rows(t.text_token_mask)) {
    std::cout << "  ";
    for (int64_t x : row) std::cout << x;
    std::cout << "\n";
  }
  std::cout << "phrases:\n";
  for (const auto& p : e.phrases) std::cout << "  [" << p.begin << "," << p.end << ") " << p.text << "\n";
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tokenize",
      "Show a caption normalized and tokenized as GroundingDINO sees it: tokens, ids, masks, phrases; or a "
      "text's ids from a byte-level BPE tokenizer.json (Qwen2-VL)");
  static TokenizeArgs a;
  cmd->add_option("caption", a.caption, "the prompt, e.g. \"person . bicycle .\"")->required();
  auto* vocab = cmd->add_option("--vocab", a.vocab, "BERT vocab.txt (one token per line)");
  auto* bpe = cmd->add_option("--tokenizer", a.tokenizer,
                              "HuggingFace tokenizer.json of a byte-level BPE (Qwen2-VL); special tokens in the "
                              "text are matched");
  vocab->excludes(bpe);
  cmd->add_flag("--decode", a.decode, "with --tokenizer: also print the ids decoded back to text");
  cmd->add_option("--max-length", a.max_length,
                  "maximum tokens with [CLS] and [SEP]; whole phrases past it are dropped")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(3), int64_t(1) << 20));
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->callback([] {
    if (a.vocab.empty() && a.tokenizer.empty()) throw CLI::RequiredError("--vocab or --tokenizer");
    tokenize(a);
  });
}

}  // namespace vlrt
