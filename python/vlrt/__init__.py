"""vlrt from Python: run ONNX models and detect objects named by a text prompt.

    import vlrt
    session = vlrt.InferenceSession("model.onnx")          # shaped like onnxruntime's
    probs, = session.run(None, {"image": image})           # NumPy in, NumPy out
    detections = vlrt.Detector().predict("photo.png", prompt="person . bicycle .")

Errors from vlrt are raised as vlrt.Error (a RuntimeError) with vlrt's message.
"""

import os
import warnings
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from ._vlrt import Error, InferenceSession, NodeArg, _Detector

__all__ = ["Error", "InferenceSession", "NodeArg", "Detector", "Detections", "demo_model_path"]


def demo_model_path() -> str:
    """The demo detector shipped with vlrt (models/demo/model.onnx)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "demo", "model.onnx")
    if not os.path.exists(path):
        raise Error(f"the demo model is not at {path}; pass model='MODEL.onnx'")
    return path


@dataclass
class Detections:
    """One image's detections: boxes in the image's pixels (x1, y1, x2, y2), each box's
    score, the index of its class (in `classes` when given, else in the prompt's phrases;
    -1 when no phrase passed the text threshold) and its name; the prompt and its phrases as
    the model read them (lower-cased); the image's width and height."""

    xyxy: np.ndarray  # float32 [N, 4]
    confidence: np.ndarray  # float32 [N]
    class_id: np.ndarray  # int64 [N]
    class_name: List[str] = field(default_factory=list)
    prompt: str = ""
    phrases: List[str] = field(default_factory=list)
    width: int = 0
    height: int = 0

    def __len__(self) -> int:
        return len(self.class_name)

    def to_supervision(self):
        """The same detections as supervision.Detections (class names in data["class_name"])."""
        try:
            import supervision
        except ImportError as e:
            raise ImportError("Detections.to_supervision() needs the supervision package: pip install supervision") from e
        return supervision.Detections(
            xyxy=self.xyxy,
            confidence=self.confidence,
            class_id=self.class_id,
            data={"class_name": np.array(self.class_name, dtype=str)},
        )


def _caption(prompt: Optional[str], classes: Optional[List[str]]) -> str:
    if (prompt is None) == (classes is None):
        raise ValueError("give either prompt='person . bicycle .' or classes=['person', 'bicycle']")
    if prompt is not None:
        return prompt
    for c in classes:
        if not isinstance(c, str) or not c.strip() or "." in c:
            raise ValueError(f"class {c!r}: each class must be a non-empty string without '.'")
    return " . ".join(c.strip() for c in classes) + " ."


class Detector:
    """Text-prompted detection with a GroundingDINO-contract model (default: the shipped demo
    model), the same pipeline as `vlrt detect`. Python threads may share one Detector."""

    def __init__(self, model: Optional[str] = None, vocab: Optional[str] = None, devices=("cpu",), threads: int = 0):
        self._detector = _Detector(os.fspath(model) if model is not None else demo_model_path(),
                                   os.fspath(vocab) if vocab is not None else "", list(devices), threads)

    def predict(self, image, prompt: Optional[str] = None, classes: Optional[List[str]] = None,
                box_threshold: Optional[float] = None, text_threshold: Optional[float] = None,
                bgr: bool = False) -> Detections:
        """`image`: a path, an HxWx3 uint8 NumPy array (RGB; bgr=True for OpenCV's BGR) or a
        PIL image. Thresholds not given take the model's."""
        caption = _caption(prompt, classes)
        if isinstance(image, (str, os.PathLike)):
            if bgr:
                raise ValueError("bgr=True applies to arrays; a file is decoded as RGB")
            result = self._detector.predict_path(os.fspath(image), caption, box_threshold, text_threshold)
        else:
            result = self._detector.predict_rgb(_rgb_array(image, bgr), caption, box_threshold, text_threshold)
        xyxy, confidence, class_id, labels, phrases, warning, width, height = result
        if warning:
            warnings.warn(warning, stacklevel=2)
        if classes is not None:
            names = [classes[i] if i >= 0 else "" for i in class_id]
        else:
            names = list(labels)
        return Detections(xyxy, confidence, class_id, names, caption, list(phrases), width, height)

    def close(self) -> None:
        """Frees the model; any later call raises vlrt.Error."""
        self._detector.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _rgb_array(image, bgr: bool) -> np.ndarray:
    if not isinstance(image, np.ndarray):
        try:
            from PIL import Image
        except ImportError:
            Image = None
        if Image is None or not isinstance(image, Image.Image):
            raise TypeError(f"image: expected a path, a NumPy array or a PIL image, got {type(image).__name__}")
        if bgr:
            raise ValueError("bgr=True applies to arrays; a PIL image is converted to RGB")
        image = np.asarray(image.convert("RGB"))
    if bgr and image.ndim == 3 and image.shape[2] == 3:
        image = image[:, :, ::-1]
    return image
