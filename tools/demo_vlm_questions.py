"""The demo VLM's scenes, questions and canonical answers, shared by tools/train_demo_vlm.py and
tools/eval_demo_vlm.py (numpy only).

Scenes are tools/scenes.py's with 1-3 objects at least MIN_OBJECT pixels high, drawn at one of
SIZES (each within the 224 x 224 pixel budget, so the image processor does not resize them).
Questions and their answers:

    What is in the image?     "A red star, a blue circle and a green heart."  (left to right)
    Is there a <colour> <shape>?   "Yes." / "No."  (balanced; half the absent ones share a
                                   colour or a shape with an object in the scene)
    How many <shape>s?        "0." ... "3."
    How many objects?         "1." ... "3."
"""
import numpy as np

import scenes

SIZES = [(224, 224), (196, 224), (224, 196), (196, 252), (252, 196)]
MIN_OBJECT = 36
MAX_OBJECTS = 3
KINDS = ["what", "is_there", "how_many_shape", "how_many_objects"]


def plural(shape):
    return shape + ("es" if shape.endswith("s") else "s")


def make_scene(seed, index):
    """(image, objects) with objects as (colour, shape, box) sorted left to right."""
    rng = np.random.default_rng([seed, index, 1])
    size = SIZES[rng.integers(len(SIZES))]
    img, ann = scenes.make_scene(seed, index, size=size, n_objects=int(rng.integers(1, MAX_OBJECTS + 1)),
                                 min_object=MIN_OBJECT)
    objects = [tuple(o["label"].split(" ")) + (o["box"],) for o in ann["objects"]]
    objects.sort(key=lambda o: (o[2][0] + o[2][2], o[2][1] + o[2][3]))
    return img, objects


def describe(objects):
    parts = [f"a {c} {s}" for c, s, _ in objects]
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return text[0].upper() + text[1:] + "."


def question(rng, objects, kind):
    """(prompt, canonical answer) of one kind about a scene."""
    labels = {(c, s) for c, s, _ in objects}
    if kind == "what":
        return "What is in the image?", describe(objects)
    if kind == "is_there":
        if rng.random() < 0.5:
            c, s = sorted(labels)[rng.integers(len(labels))]
            return f"Is there a {c} {s}?", "Yes."
        everything = [(c, s) for c in scenes.COLOURS for s in scenes.SHAPES if (c, s) not in labels]
        hard = [(c, s) for c, s in everything if any(c == pc or s == ps for pc, ps in labels)]
        pool = hard if hard and rng.random() < 0.5 else everything
        c, s = pool[rng.integers(len(pool))]
        return f"Is there a {c} {s}?", "No."
    if kind == "how_many_shape":
        present = sorted({s for _, s, _ in objects})
        shape = present[rng.integers(len(present))] if rng.random() < 0.75 else \
            scenes.SHAPES[rng.integers(len(scenes.SHAPES))]
        return f"How many {plural(shape)}?", f"{sum(s == shape for _, s, _ in objects)}."
    if kind == "how_many_objects":
        return "How many objects?", f"{len(objects)}."
    raise ValueError(f"unknown question kind {kind!r}; one of {KINDS}")
