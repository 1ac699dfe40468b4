#!/usr/bin/env python3
"""Trains the small byte-level BPE tokenizer of the tiny VLM exports and the demo VLM, with
Qwen2's normalizer (NFC), pre-tokenizer (its split regex, then byte-level), decoder and
special tokens, and writes it as transformers writes Qwen2's (tokenizer.json and
tokenizer_config.json) to tests/fixtures/vlm/tokenizer/.

The training text is made here, so the result is the same on every machine: the questions
and answers of the generated scenes (tools/scenes.py's colours and shapes), English
sentences from a fixed word list, numbers, and a few CJK and emoji strings so that those
are split into byte-level pieces the vocab knows.

    python3 tools/make_vlm_tokenizer.py   # needs tokenizers and transformers 4.46 (Qwen2-VL)
"""
import argparse
import os
import random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

import scenes

# Qwen2's pre-tokenizer split, as in its tokenizer.json.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2-VL's special tokens, in its order; they follow the learned vocab.
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
           "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
           "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
# Qwen2-VL-Instruct's chat template (the reference model's; transformers' source does not hold it).
QWEN2_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ("the a an is are was there in on of to and or with what how many which where who image picture "
         "photo object objects shape shapes colour color left right top bottom middle center one two three "
         "four five six seven eight nine ten zero yes no not none some any describe answer question please "
         "you I it this that these those can see show find count tell me about system user assistant helpful "
         "small large big tiny near far above below next between inside outside background scene red blue "
         "green yellow purple orange white black grey pink brown").split()
EXTRA = ["你好，世界", "图片里有什么？", "こんにちは", "한국어", "😀👍🏽", "café naïve", "Ωμέγα", "—…", "\t\r\n"]


def corpus(seed=0, sentences=20000):
    rng = random.Random(seed)
    colours, shapes = list(scenes.COLOURS), scenes.SHAPES
    for _ in range(sentences):
        c, s, n = rng.choice(colours), rng.choice(shapes), rng.randint(0, 12)
        yield rng.choice([f"What is in the image? A {c} {s}.", f"Is there a {c} {s}? Yes.",
                          f"Is there a {c} {s}? No.", f"How many {s}s? {n}.", f"How many {c} objects? {n}",
                          f"There are {n} {s}s and a {c} {s}."])
        yield " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))).capitalize() + rng.choice(".?!,")
        yield str(rng.randint(0, 10 ** rng.randint(1, 8)))
    for text in EXTRA:
        for _ in range(20):
            yield text


def train(vocab_size):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    return tok


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "vlm", "tokenizer"))
    ap.add_argument("--vocab-size", type=int, default=1000, help="at most this many learned tokens (special tokens follow)")
    a = ap.parse_args()
    from transformers import Qwen2TokenizerFast

    tok = train(a.vocab_size)
    tok.add_special_tokens(SPECIAL)  # in Qwen2-VL's order, after the learned vocab
    fast = Qwen2TokenizerFast(tokenizer_object=tok, unk_token=None, bos_token=None, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>", additional_special_tokens=SPECIAL[1:])
    os.makedirs(a.out, exist_ok=True)
    fast.save_pretrained(a.out)
    for name in os.listdir(a.out):
        if name not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(a.out, name))
    ids = {t: fast.convert_tokens_to_ids(t) for t in SPECIAL}
    print(f"wrote {a.out}: {len(fast)} tokens; special ids {min(ids.values())}..{max(ids.values())}")
    print("round trip:", fast.decode(fast("Is there a red star? 你好 😀")["input_ids"]))


if __name__ == "__main__":
    main()
