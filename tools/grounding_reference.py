"""GroundingDINO's reference postprocess in numpy alone: the prompt's phrases as token spans and
the detections vlrt's pipeline (src/pipelines/grounding) makes from logits and boxes. Shared by
export_groundingdino.py (PyTorch's outputs) and check_quantized_groundingdino.py (onnxruntime's).
"""
import numpy as np


def reference_phrases(tokens, caption):
    """The prompt's phrases as token spans: between special tokens ([CLS], [SEP], ".", "?"),
    separators excluded, the text as the caption writes it."""
    specials = {"[CLS]", "[SEP]", ".", "?"}
    words = [w.strip() for w in caption.replace("?", ".").split(".")]
    words = [w for w in words if w]
    spans, begin = [], None
    for i, t in enumerate(tokens):
        if t in specials:
            if begin is not None and i > begin:
                spans.append((begin, i))
            begin = i + 1
    assert len(spans) == len(words), (spans, words)
    return [{"text": w, "begin": b, "end": e} for w, (b, e) in zip(words, spans)]


def detections(logits, boxes, phrases, width, height, box_threshold, text_threshold):
    """vlrt's postprocess (src/pipelines/grounding/detector.cpp) in float64, with the margins
    by which each decision was taken (how far a score is from a threshold or from the
    runner-up) so that a comparison can tell a real disagreement from a near-tie."""
    prob = 1 / (1 + np.exp(-logits.astype(np.float64)))
    best = prob.max(-1)
    out = []
    margins = {"box_threshold": float(np.min(np.abs(best - box_threshold)))}
    label_margin = np.inf
    for q in np.nonzero(best > box_threshold)[0]:
        label, scores = None, []
        for ph in phrases:
            s = prob[q, ph["begin"]:ph["end"]].max()
            scores.append(s)
        order = np.argsort(scores)[::-1]
        if scores[order[0]] > text_threshold:
            label = phrases[order[0]]["text"]
            second = max(scores[order[1]] if len(order) > 1 else 0, text_threshold)
            label_margin = min(label_margin, scores[order[0]] - second)
        else:
            label_margin = min(label_margin, text_threshold - scores[order[0]])
        cx, cy, w, h = (boxes[q].astype(np.float64) * [width, height, width, height]).tolist()
        x1, y1 = min(max(cx - w / 2, 0), width), min(max(cy - h / 2, 0), height)
        x2, y2 = min(max(cx + w / 2, 0), width), min(max(cy + h / 2, 0), height)
        out.append({"query": int(q), "label": label or "", "score": float(best[q]), "box": [x1, y1, x2, y2]})
    out.sort(key=lambda d: -d["score"])
    margins["label"] = float(label_margin)
    return out, margins
