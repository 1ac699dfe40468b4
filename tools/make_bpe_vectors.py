#!/usr/bin/env python3
"""Writes tests/fixtures/vlm/bpe_vectors.json: what transformers' Qwen2TokenizerFast gives on the
fixture tokenizer (tests/fixtures/vlm/tokenizer/) for a fixed set of strings, and what
Qwen2-VL's processor renders for a few chat message lists, for the C++ byte-level BPE
tokenizer and chat template to match exactly.

The strings: hand-picked cases (CJK, emoji with modifiers and ZWJ, whitespace runs, CRLF, tabs,
digit runs, contractions in mixed case, composed and decomposed accents, special tokens inside
text) and seeded random strings drawn from many Unicode blocks, so the file is the same on
every run.

    python3 tools/make_bpe_vectors.py   # needs transformers 4.46 (Qwen2-VL) and tokenizers
"""
import json
import os
import random
import unicodedata

from PIL import Image
from transformers import Qwen2TokenizerFast, Qwen2VLImageProcessor, Qwen2VLProcessor

from make_vlm_tokenizer import QWEN2_VL_CHAT_TEMPLATE

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "vlm")

HAND = [
    "", " ", "  ", "a", "Hello world", "Hello  world", "Hello world ", "Hello world   ", "   leading",
    "What is in the image? A red star.", "How many circles? 12.", "There are 1234567890 objects.",
    "3.14159 and -42, 1e10, 0x1F", "１２３ full-width digits ４５", "Ⅻ roman ⅷ numerals ½ ¾ ²³",
    "line one\nline two", "crlf\r\nnext\r\n", "\r\n\r\n", "\n\n\n", "tab\there", "\t\t\tx", "x\t\t\t",
    "trailing newline\n", "mixed \t \n \r\n  end", "a \n b", "a  \n\n  b", " \r", "\r", "x\r\ry",
    "don't", "DON'T", "I'm here, you're there, we've been, she'll go, he'd say", "IT'S", "it'S", "'s",
    "'S'LL'Re'vE'M'D'T", "'ll'LL'lL'Ll", "''s", "'sup", "O'Neill's", "rock'n'roll", "'ſ long s", "x'ſ",
    "'K 'k 'K", "'ſx", "'ſt", "A'ſB", "café", "cafe\u0301", "naïve", "nai\u0308ve", "Ångström", "A\u030angstro\u0308m",
    "\u212b Angstrom sign", "e\u0301\u0323", "e\u0323\u0301", "q\u0307\u0323", "\u1e0b\u0323", "\u0344",
    "\u0958 devanagari qa", "\u1100\u1161\u11a8", "\u1100\u1161", "한국어", "\u1112\u1161\u11ab\u1100\u116e\u11a8",
    "你好，世界", "图片里有什么？", "こんにちは世界", "カタカナ ｶﾀｶﾅ", "中文English混合123", "Ωμέγα αλφα",
    "Привет, мир!", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "ᐊᐃᐅ",
    "😀👍🏽", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "👍🏻👍🏼👍🏽👍🏾👍🏿", "🇯🇵🇫🇷", "❤️ heart", "1️⃣ keycap",
    "emoji😀inside", "😀 😀  😀", "—…", "«quotes» „low“ ‘single’", "a—b", "...!!!???", "#$%&*()[]{}",
    "a.b,c;d:e", "@user #tag", "http://example.com/path?q=1&r=2", "x=1+2*3/4", "C++ && Rust || Go",
    "<|im_start|>user\nHi<|im_end|>", "text<|endoftext|>more", "<|vision_start|><|image_pad|><|vision_end|>",
    "<|image_pad|><|image_pad|>", "a<|im_end|>b<|im_start|>c", "<|im_start|> spaced <|im_end|>",
    "<|im_start", "<|im_start|", "im_start|>", "<|unknown_token|>", "<<|im_start|>>", "<|im_end|><|im_end|>",
    "\u00a0nbsp\u00a0", "\u3000ideographic space\u3000", "\u2028line sep\u2029para", "\u0085nel",
    "\u180emongolian vowel sep", "\u200bzero width", "\u200d\u200c", "\ufeffbom", "\x1cfile sep\x1f",
    "\x00nul\x01", "\x7f\x80\x9f", "\u2003em\u2009thin", "a\u00a0\u00a0b", "x \u00a0y", "x\u00a0 y",
    "\u0301 leading mark", "\u0301\u0301\u0301", "\U0001d400\U0001d401 math bold", "\U00010000\U0010fffd",
    "\ue000 private use", "\ufffd replacement", "ﬁ ligature", "ﷺ", "㍿", "Ⓐⓑ", "x²", "H₂O",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz0123456789",
    "The quick brown fox jumps over the lazy dog.", "Is there a blue square? Yes.",
    "Describe the picture, please.", "   \n   ", " \t ", "\t \n", "a" * 200, "9" * 50, "ab" * 60,
]


def random_strings(rng, n):
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x250, 0x2FF), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
              (0x530, 0x58F), (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0x980, 0x9FF), (0xE00, 0xE7F),
              (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x1F00, 0x1FFF), (0x2000, 0x206F),
              (0x2070, 0x209F), (0x20A0, 0x20CF), (0x2100, 0x214F), (0x2150, 0x218F), (0x2190, 0x21FF),
              (0x2200, 0x22FF), (0x2460, 0x24FF), (0x2500, 0x257F), (0x2600, 0x26FF), (0x3000, 0x303F),
              (0x3040, 0x30FF), (0x3130, 0x318F), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFAFF),
              (0xFB00, 0xFB4F), (0xFE00, 0xFE0F), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x10300, 0x1032F),
              (0x1D400, 0x1D7FF), (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF)]
    pieces = [" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "'Re", "<|im_end|>", "<|image_pad|>", "\u200d", "\u0301",
              "1", "42", "hello", "Is", " the"]
    out = []
    while len(out) < n:
        chars = []
        for _ in range(rng.randint(1, 24)):
            r = rng.random()
            if r < 0.15:
                chars.append(rng.choice(pieces))
                continue
            lo, hi = rng.choice(blocks)
            c = chr(rng.randint(lo, hi))
            if unicodedata.category(c) in ("Cn", "Cs"):
                continue
            chars.append(c)
        out.append("".join(chars))
    return out


def combos(rng, n):
    """Marks in every order after letters and Hangul jamo runs: NFC's ordering and composition."""
    marks = [0x300, 0x301, 0x302, 0x303, 0x308, 0x30A, 0x30C, 0x323, 0x327, 0x328, 0x331, 0x345, 0x5B0, 0x93C, 0x3099]
    bases = "aeiouAEIOUcnszwyCNSZ\u03b1\u03b7\u03c9\u0391\u0415\u0438\u304b\u30cf "
    out = []
    for _ in range(n):
        s = ""
        for _ in range(rng.randint(1, 5)):
            s += rng.choice(bases) + "".join(chr(rng.choice(marks)) for _ in range(rng.randint(0, 3)))
        if rng.random() < 0.4:
            s += "".join(chr(rng.choice([rng.randint(0x1100, 0x1112), rng.randint(0x1161, 0x1175),
                                         rng.randint(0x11A8, 0x11C2)])) for _ in range(rng.randint(1, 5)))
        out.append(s)
    return out


def chat_cases():
    img = {"type": "image"}
    return [
        {"messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": False},
        {"messages": [{"role": "system", "content": "You answer in French."},
                      {"role": "user", "content": [img, {"type": "text", "text": "What is this?"}]}],
         "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": [img, img, {"type": "text", "text": "Compare the two pictures."}]}],
         "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "First "}, img,
                                                   {"type": "text", "text": " then "}, img]},
                      {"role": "assistant", "content": "A red star and a blue circle."},
                      {"role": "user", "content": "And the colours? 你好 😀"}],
         "add_generation_prompt": True},
        {"messages": [{"role": "assistant", "content": "I start."}, {"role": "user", "content": ""}],
         "add_generation_prompt": False},
    ]


def main():
    tok_dir = os.path.join(FIXTURES, "tokenizer")
    tok = Qwen2TokenizerFast.from_pretrained(tok_dir)
    rng = random.Random(0)
    texts = HAND + random_strings(rng, 330) + combos(rng, 80)
    cases = []
    for t in texts:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        case = {"text": t, "ids": ids, "decode": tok.decode(ids, skip_special_tokens=False)}
        plain = tok(t, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        if plain != ids:
            case["ids_specials_as_text"] = plain
        cases.append(case)

    # Id sequences that cut characters between tokens, and special tokens to skip.
    decodes = []
    vocab_size = len(tok)
    for _ in range(60):
        ids = [rng.randrange(vocab_size) for _ in range(rng.randint(1, 12))]
        decodes.append({"ids": ids, "decode": tok.decode(ids, skip_special_tokens=False),
                        "decode_skip_special": tok.decode(ids, skip_special_tokens=True)})

    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tok,
                                 chat_template=QWEN2_VL_CHAT_TEMPLATE)
    sizes = [(56, 56), (112, 84), (224, 168)]
    chats = []
    for c in chat_cases():
        text = processor.apply_chat_template(c["messages"], tokenize=False,
                                             add_generation_prompt=c["add_generation_prompt"])
        case = dict(c, text=text)
        n = text.count("<|image_pad|>")
        if n:
            images = [Image.new("RGB", sizes[i % len(sizes)], (i * 60, 90, 200)) for i in range(n)]
            out = processor(text=[text], images=images, return_tensors="np")
            case["image_grid_thw"] = out["image_grid_thw"].tolist()
            case["input_ids"] = out["input_ids"][0].tolist()
        chats.append(case)

    out = {"tokenizer": "tokenizer/tokenizer.json", "chat_template": QWEN2_VL_CHAT_TEMPLATE,
           "encode": cases, "decode": decodes, "chat": chats}
    path = os.path.join(FIXTURES, "bpe_vectors.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"wrote {path}: {len(cases)} strings, {len(decodes)} decodes, {len(chats)} chats, "
          f"{os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
