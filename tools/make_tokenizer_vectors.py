#!/usr/bin/env python3
"""Writes tests/fixtures/grounding/tokenizer_vectors.json: GroundingDINO's text inputs for a
corpus of tricky captions, computed the reference way, for vlrt's tokenizer tests.

- caption normalization: groundingdino.util.inference.preprocess_caption;
- tokens and ids: transformers' BertTokenizer on tests/fixtures/grounding/vocab.txt;
- text_token_mask, position_ids and phrase spans: a transcription of groundingdino's
  generate_masks_with_special_tokens_and_transfer_map (models/GroundingDINO/bertwarper.py);
- truncation (vlrt's own rule, the reference has none that keeps [SEP]): whole phrases are
  dropped from the end until [CLS] ... [SEP] fits in max_length.

    /usr/bin/python3 tools/make_tokenizer_vectors.py   (needs numpy and transformers==4.38.2)
"""
import json
import os
import random

import numpy as np
import transformers
from transformers import BertTokenizer

HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "grounding")
VOCAB = os.path.join(FIXTURES, "vocab.txt")
OUT = os.path.join(FIXTURES, "tokenizer_vectors.json")


def preprocess_caption(caption):
    result = caption.lower().strip()
    if result.endswith("."):
        return result
    return result + "."


def reference_masks(input_ids, special_tokens):
    """The reference's loop over the special tokens of the whole batch in row-major order.
    Every token attends to itself; a special token in the first or last column stays alone
    (position 0); any other closes the block (previous special, col], which becomes fully
    connected with position ids 0, 1, ... and whose tokens before the special are one category.
    `previous` is not reset between rows, exactly as in the reference."""
    bs, n = input_ids.shape
    is_special = np.isin(input_ids, special_tokens)
    mask = np.repeat(np.eye(n, dtype=bool)[None], bs, axis=0)
    position_ids = np.zeros((bs, n), dtype=np.int64)
    categories = [[] for _ in range(bs)]
    previous = 0
    for row, col in np.argwhere(is_special):
        if col == 0 or col == n - 1:
            mask[row, col, col] = True
            position_ids[row, col] = 0
        else:
            mask[row, previous + 1:col + 1, previous + 1:col + 1] = True
            position_ids[row, previous + 1:col + 1] = np.arange(0, col - previous)
            category = np.zeros(n, dtype=bool)
            category[previous + 1:col] = True
            categories[row].append(category)
        previous = col
    return mask, position_ids, categories


def mask_runs(mask2d):
    """Each row as [begin, end, begin, end, ...] of its runs of ones (lossless, and small)."""
    rows = []
    for row in mask2d:
        runs, j, n = [], 0, len(row)
        while j < n:
            if row[j]:
                k = j
                while k < n and row[k]:
                    k += 1
                runs += [j, k]
                j = k
            else:
                j += 1
        rows.append(runs)
    return rows


class Reference:
    def __init__(self):
        self.tok = BertTokenizer(VOCAB, do_lower_case=True)
        ids = self.tok.convert_tokens_to_ids(["[CLS]", "[SEP]", ".", "?"])
        self.specials = ids
        self.separators = ids[2:]

    def phrases(self, body):
        spans, start = [], 0
        for i, t in enumerate(body):
            if t in self.separators:
                if i > start:
                    spans.append((start, i))
                start = i + 1
        return spans

    def encode(self, caption, max_length):
        normalized = preprocess_caption(caption)
        ids = self.tok(normalized)["input_ids"]
        body = ids[1:-1]
        spans = self.phrases(body)
        case = {"caption": caption, "max_length": max_length, "normalized": normalized}
        if not spans:
            return dict(case, error="empty caption")
        keep, dropped = len(body), 0
        if len(body) + 2 > max_length:
            keep = max([i + 1 for i in range(max_length - 2) if body[i] in self.separators], default=0)
            if spans[0][1] >= keep:
                return dict(case, error="does not fit")
            dropped = sum(1 for s in spans if s[1] >= keep)
        ids = [ids[0]] + body[:keep] + [ids[-1]]
        mask, position_ids, categories = reference_masks(np.array([ids]), self.specials)
        phrases = []
        for c in categories[0]:
            where = np.flatnonzero(c)
            if len(where):
                phrases.append([int(where[0]), int(where[-1]) + 1])
        assert phrases == [[b + 1, e + 1] for b, e in spans if e < keep]
        return dict(case, tokens=self.tok.convert_ids_to_tokens(ids), input_ids=ids,
                    attention_mask=[1] * len(ids), position_ids=position_ids[0].tolist(),
                    token_type_ids=[0] * len(ids), text_token_mask=mask_runs(mask[0]),
                    phrases=phrases, dropped=dropped)

    def batch(self, cases):
        n = max(len(c["input_ids"]) for c in cases)
        pad = self.tok.pad_token_id
        ids = np.array([c["input_ids"] + [pad] * (n - len(c["input_ids"])) for c in cases])
        attention = [[1] * len(c["input_ids"]) + [0] * (n - len(c["input_ids"])) for c in cases]
        if all(c["dropped"] == 0 for c in cases):
            hf = self.tok([c["normalized"] for c in cases], padding="longest")
            assert hf["input_ids"] == ids.tolist() and hf["attention_mask"] == attention
        mask, position_ids, _ = reference_masks(ids, self.specials)
        return {"input_ids": ids.tolist(), "attention_mask": attention, "position_ids": position_ids.tolist(),
                "text_token_mask": [mask_runs(m) for m in mask]}


HANDWRITTEN = [
    "person . bicycle . car .", "person. bicycle. car.", "Person . Bicycle . Car", "a cat", "cat", "CAT",
    "  a dog  ", "\ta dog\n", "a\u00a0dog\u3000on a\u2003bench", "line one\u2028line two\u2029end",
    "traffic light . fire hydrant . stop sign .", "hot dog . teddy bear . hair drier .",
    "the dog's toy . children's book .", "red-eyed tree frog .", "t-shirt . e-mail . x-ray",
    "a cat? a dog?", "is it a cat ? or a dog ?", "what?", "who . what ? where .", "cat?dog.bird",
    "Café au lait . crème brûlée . jalapeño", "naïve façade . résumé . Über", "ZOË and CHLOË",
    "Señor Niño . piña colada", "fiancée . déjà vu . protégé . touché", "cooperate . coöperate . rôle",
    "Ærøskøbing . smørrebrød", "Straße . Fußball", "İstanbul . DİYARBAKIR", "ΟΔΟΣ . Σοφία . ΣΟΦΙΑ", "καφές",
    "ΑΣ. ΑΣ'Β . Σ . ΑΣΑ", "ΓΑΤΑ ΣΚΥΛΟΣ", "Кот . Собака . Машина . Ёлка", "дом и кот", "ДОМ",
    "猫 . 狗 . 车", "一个人在大山中", "日本の車", "中国人 . 日本人", "한국 . 한국어", "アイウ",
    "🐱 cat . 🐶 dog", "cat🐱 . dog 🐶", "🚗🚗🚗", "👨‍👩‍👧 family", "smile 😀.", "😀",
    "100 cars . 2020 . 3.5 kg . 1,000 people", "1st place . 2nd . 3rd", "$100 bill . 50% off . #1 fan",
    "room 101 . 19:00 . 12/11/2020", "x=1+2*3 . a<b>c . {json} . [brackets] . (parens)",
    "a ~ b ^ c ` d | e \\ f @ g", "“quoted” . ‘single’ . «guillemets» . —dash— . ellipsis…",
    "¿qué? ¡hola!", "a・b · c • d", "foo_bar . foo-bar . foo/bar", "...", "cat ... dog", "cat . . . dog",
    ". cat", ".cat", "cat..", "cat .", "cat. ", " . cat . ", "??", "cat ?.", "cat?.",
    "skateboard . snowboard . surfboard . keyboard", "skateboards . snowboarding . surfboarders",
    "unbelievable . reworked . preheated . overcooked", "xylophone . qwerty . zzz . quizzical",
    "supercalifragilisticexpialidocious", "a" * 100, "a" * 101, "b" * 150 + " . cat", "ab" * 60,
    "tele vision . television . computer . telecomputer", "bicycles . bikes . motorbike",
    "a [CLS] b . [SEP] . [PAD] . [UNK] . [MASK]", "[cls] . [sep]", "##s . ##ing . s##", "#hash . ##",
    "cat\x00dog", "cat\x01\x02\x03 dog", "cat\x7f . dog\x1f", "cat\u200bdog . zero\u200dwidth . bi\u200edi",
    "soft\u00adhyphen", "cat\ufffddog", "cat\ue000dog . private", "cat\U000e0001tag", "cat\u0378dog",
    "cat\r\ndog\rbird", "cat\x0bdog\x0cbird\x1cfish\x85end", "ＦＵＬＬ ｗｉｄｔｈ . １２３",
    "𝐛𝐨𝐥𝐝 math", "ﬁ ligature . ﬀ", "Ⅻ roman . ① circled", "Å angstrom . K kelvin . Ω ohm",
    "e\u0301 combining . a\u0308\u0301 . n\u0303", "\u0301\u0302 marks only . x", "Z\u0351\u0352algo",
    "Dž . ǅ . ǈ", "ǰ . ẞ", "ⓐⓑⓒ", "ŉ . ΐ . ΰ", "\u1e9e big sharp s", "\u0149 apostrophe n",
    "\uf900 compat . \U0002f800 compat", "丽 . \u8c48", "\U00020000 ext b . \U0002a700 ext c",
    "ひらがな . カタカナ . ｶﾀｶﾅ", "Ελληνικά . Ἀθῆναι", "Ѐ . Ѝ . ї . ў . Ґ", "مرحبا . שלום", "नमस्ते . ক্ষ",
    "ไทย . ລາວ", "Ⴀ georgian . ა", "\u13a0 cherokee . \uab70", "ꙮ", "ᴀʙᴄ small caps",
    "an apple on a table next to a red cup and a wine glass .",
    "A PERSON RIDING A HORSE . A MAN HOLDING AN UMBRELLA", "MiXeD CaSe WoRdS . tHe CaT",
    "person   .   bicycle\t.\ncar", "\n\n\n", "   ", "", ".", " . . ", "\x00\x01", "?", "\u200b",
    "😀 .", "!!!", "cat .\x00", "cat.\u3000",
]

WORD_POOL = (
    "person bicycle car motorcycle airplane bus train truck boat bench bird cat dog horse sheep cow "
    "elephant bear zebra giraffe backpack umbrella handbag suitcase frisbee skis snowboard kite skateboard "
    "surfboard bottle cup fork knife spoon bowl banana apple sandwich orange broccoli carrot pizza donut cake "
    "chair couch bed toilet laptop mouse remote keyboard microwave oven toaster sink refrigerator book clock "
    "vase scissors toothbrush red green blue small large wooden metal old young man woman child tree sky "
    "water house window door café crème naïve jalapeño straße ΟΔΟΣ кот ёлка 猫 狗 한국 🐱 42 3.5 1,000 "
    "t-shirt dog's unknownword qwertyuiop xyzzy bicycles skateboarding telecomputer").split()
SEPARATORS = [" . ", ". ", " .", ".", " ? ", "? ", " , ", " ; ", " and ", "\t.\t", " .\n"]
SPACES = [" ", " ", " ", "  ", "\t", "\u00a0", "\u3000", "\u2009"]
POOLS = [
    (0x20, 0x7e), (0xa0, 0x17f), (0x180, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x1f00, 0x1fff),
    (0x400, 0x4ff), (0x4e00, 0x4e40), (0x3040, 0x30ff), (0xac00, 0xac40), (0x1100, 0x11ff), (0x1f600, 0x1f64f),
    (0x0, 0x1f), (0x7f, 0x9f), (0x2000, 0x206f), (0xfe00, 0xfeff), (0xff00, 0xffef), (0xf900, 0xf9ff),
    (0x1d400, 0x1d4ff), (0xe000, 0xe00f), (0x2f800, 0x2f8ff), (0x0590, 0x06ff), (0x0900, 0x09ff),
    (0x1e00, 0x1eff), (0x2100, 0x218f), (0x2460, 0x24ff), (0xe0000, 0xe007f), (0x0378, 0x037f),
]


def random_caption(rng):
    phrases = []
    for _ in range(rng.randint(1, 6)):
        words = [rng.choice(WORD_POOL) for _ in range(rng.randint(1, 4))]
        words = [w.upper() if rng.random() < 0.15 else w.capitalize() if rng.random() < 0.2 else w for w in words]
        phrases.append("".join(w + rng.choice(SPACES) for w in words).rstrip())
    text = ""
    for p in phrases:
        text += p + rng.choice(SEPARATORS)
    return rng.choice(["", " ", "\n"]) + (text if rng.random() < 0.7 else text.rstrip(" .?\n\t"))


def random_unicode(rng):
    chars = []
    for _ in range(rng.randint(3, 24)):
        lo, hi = rng.choice(POOLS)
        cp = rng.randint(lo, hi)
        if 0xd800 <= cp <= 0xdfff:
            continue
        chars.append(chr(cp))
        if rng.random() < 0.2:
            chars.append(rng.choice([" ", " . ", "?", "\u03a3", "\u0130"]))
    return "".join(chars)


def long_caption(rng, phrases):
    return " . ".join(" ".join(rng.choice(WORD_POOL) for _ in range(rng.randint(1, 3))) for _ in range(phrases))


def main():
    ref = Reference()
    rng = random.Random(20240604)
    captions = [(c, 256) for c in HANDWRITTEN]
    captions += [(random_caption(rng), 256) for _ in range(150)]
    captions += [(random_unicode(rng), 256) for _ in range(80)]
    captions += [(long_caption(rng, n), 256) for n in (80, 100, 120, 150, 200)]
    captions += [(long_caption(rng, rng.randint(3, 12)), rng.choice([6, 8, 12, 16, 24, 32])) for _ in range(40)]
    captions += [("supercalifragilisticexpialidocious skateboarders . cat", 6), ("cat . dog", 3), ("", 3)]
    cases = [ref.encode(c, m) for c, m in captions]
    assert len(cases) >= 300

    ok = [i for i, c in enumerate(cases) if "error" not in c and len(c["input_ids"]) <= 40]
    batches = []
    for _ in range(20):
        members = rng.sample(ok, rng.randint(2, 4))
        batches.append(dict(ref.batch([cases[i] for i in members]), cases=members))

    data = {
        "generator": "tools/make_tokenizer_vectors.py",
        "transformers": transformers.__version__,
        "vocab": "vocab.txt",
        "cases": cases,
        "batches": batches,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
    truncated = sum(1 for c in cases if c.get("dropped"))
    errors = sum(1 for c in cases if "error" in c)
    print(f"{OUT}: {len(cases)} cases ({truncated} truncated, {errors} errors), {len(batches)} batches, "
          f"{os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
