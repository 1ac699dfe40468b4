#!/usr/bin/env python3
"""The text side of vlrt's demo detector, in Python: the demo vocab (models/demo/vocab.txt) and
GroundingDINO's text inputs exactly as `vlrt tokenize` computes them (caption normalization,
BERT uncased WordPiece, [CLS] ... [SEP], position ids restarting in each phrase, the
block-diagonal text_token_mask). numpy only; when transformers is importable the ids are
checked against its BertTokenizer, and `check` compares with `vlrt tokenize --json`.

    python3 tools/demo_text.py write-vocab            # writes models/demo/vocab.txt
    python3 tools/demo_text.py check [--vlrt build/vlrt]
"""
import argparse
import json
import os
import subprocess
import sys
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

VOCAB = os.path.join(HERE, "..", "models", "demo", "vocab.txt")
MAX_TEXT_LEN = 256

# Special tokens deliberately away from bert-base-uncased's ids (0, 100-103), so that nothing
# can rely on hard-coded ids: everything is looked up in the vocab.
_FILLER = ["the", "a", "an", "and", "of", "with", "on", "in", "at", "left", "right", "top",
           "bottom", "small", "big", "large", "tiny", "shape", "object", "thing", "dark", "light",
           "bright", "one", "two", "three", "is", "there", "where", "what", "color", "colour",
           "round", "pointed", "hex", "oval", "arrow", "moon", "cat", "dog", "person", "car"]
_PIECES = ["##s", "##es", "##ed", "##ing", "##er", "##ish", "##ly", "##y", "##agon", "##al",
           "##ple", "##mond", "##angle", "##gon"]
_PUNCT = [".", "?", ",", "!", "-", "'", ":", ";", "(", ")", "/"]
_LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")


def vocab_tokens():
    words = list(_FILLER)
    colours = [c if c != "purple" else None for c in scenes.COLOURS]
    shapes = [s if s != "diamond" else None for s in scenes.SHAPES]
    # "purple" and "diamond" are not whole words here: they split into pieces ("pur ##ple",
    # "dia ##mond"), so the demo exercises multi-piece phrases.
    words += [w for w in colours + shapes if w] + ["pur", "dia", "tri", "circ"]
    body = []
    for group in (words[:7], ["[UNK]"], words[7:15], ["[PAD]"], words[15:22], ["[CLS]", "[SEP]"],
                  _PUNCT[:1], words[22:30], ["[MASK]"], _PUNCT[1:], words[30:], _PIECES, _LETTERS):
        body += [t for t in group if t not in body]
    assert len(body) == len(set(body))
    return body


def write_vocab(path=VOCAB):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = "\n".join(vocab_tokens()) + "\n"
    with open(path, "w") as f:
        f.write(text)


def load_vocab(path=VOCAB):
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    return {t: i for i, t in enumerate(tokens)}


# ---------------------------------------------------------------- BERT uncased tokenization

def _is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _basic_tokenize(text):
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif _is_cjk(cp):
            out += [" ", ch, " "]
        else:
            out.append(ch)
    words = []
    for word in "".join(out).split():
        word = "".join(c for c in unicodedata.normalize("NFD", word.lower())
                       if unicodedata.category(c) != "Mn")
        cur = ""
        for ch in word:
            if _is_punctuation(ch):
                if cur:
                    words.append(cur)
                words.append(ch)
                cur = ""
            else:
                cur += ch
        if cur:
            words.append(cur)
    return words


def _wordpiece(word, vocab):
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            sub = word[start:end] if start == 0 else "##" + word[start:end]
            if sub in vocab:
                found = sub
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


def normalize_caption(caption):
    result = caption.lower().strip()
    return result if result.endswith(".") else result + "."


def encode(caption, vocab):
    """One caption as the model sees it (batch of one): a dict of numpy arrays without the batch
    axis plus `tokens` and `phrases` [(text, begin, end)], end exclusive, in token positions."""
    normalized = normalize_caption(caption)
    tokens = ["[CLS]"] + [p for w in _basic_tokenize(normalized) for p in _wordpiece(w, vocab)] + ["[SEP]"]
    if len(tokens) > MAX_TEXT_LEN:
        raise ValueError(f"caption is {len(tokens)} tokens, more than {MAX_TEXT_LEN}")
    ids = np.array([vocab[t] for t in tokens], dtype=np.int64)
    n = len(ids)
    specials = [vocab["[CLS]"], vocab["[SEP]"], vocab["."]] + ([vocab["?"]] if "?" in vocab else [])
    # Transcription of groundingdino's generate_masks_with_special_tokens_and_transfer_map.
    mask = np.eye(n, dtype=bool)
    position_ids = np.zeros(n, dtype=np.int64)
    phrases, previous = [], 0
    for col in np.flatnonzero(np.isin(ids, specials)):
        if col == 0 or col == n - 1:
            mask[col, col] = True
            position_ids[col] = 0
        else:
            mask[previous + 1:col + 1, previous + 1:col + 1] = True
            position_ids[previous + 1:col + 1] = np.arange(0, col - previous)
            if col > previous + 1:
                phrases.append((" ".join(tokens[previous + 1:col]).replace(" ##", ""), previous + 1, int(col)))
        previous = col
    return {"caption": normalized, "tokens": tokens, "phrases": phrases, "input_ids": ids,
            "attention_mask": np.ones(n, dtype=bool), "position_ids": position_ids,
            "token_type_ids": np.zeros(n, dtype=np.int64), "text_token_mask": mask}


def batch(encodings, vocab):
    """Pads encodings to the longest: [PAD] ids, attention false, position 0, padded tokens
    attending only to themselves (what vlrt's make_text_inputs gives for a batch)."""
    n = max(len(e["input_ids"]) for e in encodings)
    b = len(encodings)
    out = {"input_ids": np.full((b, n), vocab["[PAD]"], dtype=np.int64),
           "attention_mask": np.zeros((b, n), dtype=bool),
           "position_ids": np.zeros((b, n), dtype=np.int64),
           "token_type_ids": np.zeros((b, n), dtype=np.int64),
           "text_token_mask": np.repeat(np.eye(n, dtype=bool)[None], b, axis=0)}
    for i, e in enumerate(encodings):
        k = len(e["input_ids"])
        for key in ("input_ids", "attention_mask", "position_ids"):
            out[key][i, :k] = e[key]
        out["text_token_mask"][i, :k, :k] = e["text_token_mask"]
    return out


# ---------------------------------------------------------------- checks

CHECK_CAPTIONS = ["red circle . blue star . green ring .", "Purple Diamond", "  YELLOW heart.white cross ?",
                  "black square . orange triangle . purple star . red diamond .",
                  "a small red circle, left of the big blue square . hexagon .", "cat?dog.  car",
                  "red circles . blue crosses .", "zebra crossing . purplish rings"]


def check(vocab_path=VOCAB, vlrt=None):
    vocab = load_vocab(vocab_path)
    try:
        from transformers import BertTokenizer
        ref = BertTokenizer(vocab_path, do_lower_case=True)
    except ImportError:
        ref = None
    for c in CHECK_CAPTIONS:
        e = encode(c, vocab)
        if ref is not None:
            assert ref(e["caption"])["input_ids"] == e["input_ids"].tolist(), (c, e["tokens"])
        if vlrt and os.path.exists(vlrt):
            r = subprocess.run([vlrt, "tokenize", "--vocab", vocab_path, "--json", c],
                               capture_output=True, text=True, check=True)
            j = json.loads(r.stdout)
            assert j["caption"] == e["caption"], (j["caption"], e["caption"])
            assert j["tokens"] == e["tokens"], (j["tokens"], e["tokens"])
            for key in ("input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"):
                assert np.array_equal(np.array(j[key]), e[key].astype(np.int64)), (c, key)
            assert [(p["begin"], p["end"]) for p in j["phrases"]] == [p[1:] for p in e["phrases"]], \
                (c, j["phrases"], e["phrases"])
    print(f"text inputs: {len(CHECK_CAPTIONS)} captions match"
          + (" BertTokenizer" if ref is not None else "")
          + (" and `vlrt tokenize`" if vlrt and os.path.exists(vlrt) else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["write-vocab", "check"])
    ap.add_argument("--vocab", default=VOCAB)
    ap.add_argument("--vlrt", default=os.path.join(HERE, "..", "build", "vlrt"))
    args = ap.parse_args()
    if args.what == "write-vocab":
        write_vocab(args.vocab)
        print(f"wrote {args.vocab} ({len(vocab_tokens())} tokens)")
    else:
        check(args.vocab, args.vlrt)


if __name__ == "__main__":
    main()
