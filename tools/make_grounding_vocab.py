#!/usr/bin/env python3
"""Writes tests/fixtures/grounding/vocab.txt: a small synthetic BERT uncased vocab (under 3000
tokens) with bert-base-uncased's special-token ids ([PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102,
[MASK]=103), punctuation, digits, letters of several scripts, a few CJK characters, common
English words (the COCO classes among them), accent-stripped words and many "##" pieces, so
that captions split into whole words, sub-words and [UNK] as they do with the real vocab.
Deterministic: same output on every run.

    python3 tools/make_grounding_vocab.py
"""
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "grounding", "vocab.txt")

PUNCTUATION = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("¡¿«»·•–—‘’“”…€£°×§")
DIGITS = list("0123456789")
LATIN = list("abcdefghijklmnopqrstuvwxyz") + ["æ", "ø", "ð", "þ", "ı"]
GREEK = list("αβγδεζηθικλμνξοπρσςτυφχψω")
CYRILLIC = list("абвгдежзийклмнопрстуфхцчшщъыьэюя")
CJK = list("人大中国日本的一猫狗车山水火")
KANA = list("のアイウ")
HANGUL_JAMO = ["\u1100", "\u1112", "\u1161", "\u1165", "\u1169", "\u116e", "\u11ab", "\u11a8"]

COCO = """person bicycle car motorcycle airplane bus train truck boat traffic light fire hydrant stop
sign parking meter bench bird cat dog horse sheep cow elephant bear zebra giraffe backpack umbrella
handbag tie suitcase frisbee skis snowboard sports ball kite baseball bat glove skateboard surfboard
tennis racket bottle wine glass cup fork knife spoon bowl banana apple sandwich orange broccoli carrot
hot pizza donut cake chair couch potted plant bed dining table toilet tv laptop mouse remote keyboard
cell phone microwave oven toaster sink refrigerator book clock vase scissors teddy hair drier
toothbrush""".split()

WORDS = """a an the and or of in on at to for with without from by over under near next behind above
below left right top bottom front back small large big little tall short long red green blue yellow
black white gray grey brown pink purple dark light old new young wooden metal plastic glass open
closed empty full man woman men women boy girl child children baby people player crowd face hand
hands head arm leg foot feet eye eyes hat shirt jacket coat dress shoe shoes bag box door window wall
floor road street sidewalk building house tree trees grass sky cloud clouds water sea river lake
mountain snow sand beach field park city table desk shelf lamp sofa pillow blanket rug picture frame
mirror plate food fruit vegetable bread cheese meat egg rice soup coffee tea milk juice beer wine
drink ice cream chocolate cookie candy animal animals duck chicken fish mouse rabbit lion tiger
monkey deer goat pig wolf fox owl eagle flower flowers leaf leaves rock stone fence pole wire cable
screen monitor computer camera sign signs logo text number numbers letter word words one two three
four five six seven eight nine ten hundred first second third is are was be this that these those it
its there here what where which who how many much some any all each every other another very not no
yes do does did has have had can could will would should may might must shall wear wearing hold
holding sit sitting stand standing walk walking run running ride riding eat eating look looking play
playing red-eyed thing things part piece side corner edge center middle line lines color colour
shape round square circle bright shiny striped spotted dirty clean wet dry hot cold warm cool
cafe naive resume creme brulee jalapeno pinata fiance fiancee facade cliche deja vu uber senor nino
pina colada soiree entree saute protege touche noel zoe chloe cooperate role
καφες οδος σοφια γατα σκυλος кот собака машина елка дом
un re pre over under out up down in im dis non anti sub super inter trans multi tele bi tri
""".split()

PIECES = """s es ed ing er ers est ly ness ment ments tion tions sion able ible ful less y ie ies ish
ist ism ity al ial ous ive ize ise en an ian ic ical ed d r st nd rd th ball board fly light man men
house phone cycle bike car book glass ware wood fish bird cat dog berry cake corn ship port way
walk side line stone shop room bed door land water fall fire box cup pot pan top boat plane craft
scraper vision puter mit ton ter ther ing ings ling lings let lets ette kin ard ward wards wise
like hood ship dom""".split()

NUMBERS = ["00", "000", "10", "11", "12", "19", "20", "50", "100", "1000", "2020", "2024", "1st", "2nd", "3rd"]

FREQUENT = "etaoinshrdlcumpgbfy"


def build_vocab():
    """The vocab's tokens in id order (also used by export_groundingdino.py, which pads it to
    bert-base-uncased's 30522 ids)."""
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert vocab.index("[UNK]") == 100 and vocab.index("[MASK]") == 103
    seen = set(vocab)

    def add(tok):
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)

    singles = PUNCTUATION + DIGITS + LATIN + GREEK + CYRILLIC + CJK + KANA + HANGUL_JAMO
    for t in singles:
        add(t)
    for t in DIGITS + LATIN + GREEK + CYRILLIC + KANA + HANGUL_JAMO:
        add("##" + t)
    for t in NUMBERS:
        add(t)
        add("##" + t)
    for w in COCO + WORDS:
        for part in w.split("-"):
            add(part)
    for p in PIECES:
        add("##" + p)
    # Word tails make greedy longest-match splits such as "skate ##board" and "snow ##boards".
    for w in COCO + WORDS:
        if len(w) >= 6 and w.isascii() and w.isalpha():
            add("##" + w[len(w) // 2:])
    for a in FREQUENT:
        for b in FREQUENT:
            add("##" + a + b)
    return vocab


def main():
    vocab = build_vocab()
    assert len(vocab) <= 3000, len(vocab)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))
    print(f"{OUT}: {len(vocab)} tokens")


if __name__ == "__main__":
    main()
