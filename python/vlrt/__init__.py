"""vlrt from Python: run ONNX models, detect objects named by a text prompt, segment them.

    import vlrt
    session = vlrt.InferenceSession("model.onnx")          # shaped like onnxruntime's
    probs, = session.run(None, {"image": image})           # NumPy in, NumPy out
    detections = vlrt.Detector().predict("photo.png", prompt="person . bicycle .")
    masks = vlrt.Segmenter("sam/").segment("photo.png", boxes=detections.xyxy)  # SAM

Errors from vlrt are raised as vlrt.Error (a RuntimeError) with vlrt's message.
"""

import os
import warnings
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from ._vlrt import Error, InferenceSession, NodeArg, _Detector, _Segmenter

__all__ = ["Error", "InferenceSession", "NodeArg", "Detector", "Detections", "Segmenter", "Masks",
           "demo_model_path"]


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

    def to_supervision(self, mask: Optional[np.ndarray] = None):
        """The same detections as supervision.Detections (class names in data["class_name"]);
        `mask`: bool [N, H, W] masks of these detections (Segmenter.segment_detections)."""
        return _supervision().Detections(
            xyxy=self.xyxy,
            mask=mask,
            confidence=self.confidence,
            class_id=self.class_id,
            data={"class_name": np.array(self.class_name, dtype=str)},
        )


def _supervision():
    try:
        import supervision
    except ImportError as e:
        raise ImportError("to_supervision() needs the supervision package: pip install supervision") from e
    return supervision


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
        """`image`: a path, encoded bytes (PNG, JPEG, ...), an HxWx3 uint8 NumPy array (RGB;
        bgr=True for OpenCV's BGR) or a PIL image. Thresholds not given take the model's."""
        caption = _caption(prompt, classes)
        result = self._detector.predict(_image_argument(image, bgr), caption, box_threshold, text_threshold)
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


@dataclass
class Masks:
    """One mask per prompt, on the whole image (as `vlrt segment` gives them): each mask's
    pixels, its predicted IoU, the box around it (x1, y1, x2, y2 with x2, y2 exclusive; zeros
    for an empty mask), which of the decoder's masks was chosen and every one's IoU."""

    mask: np.ndarray  # bool [N, H, W]
    iou: np.ndarray  # float32 [N]
    xyxy: np.ndarray  # float32 [N, 4]
    mask_index: np.ndarray  # int64 [N]
    iou_predictions: np.ndarray  # float32 [N, M]

    def __len__(self) -> int:
        return len(self.iou)

    def to_supervision(self):
        """The masks as supervision.Detections (mask, xyxy, and the IoU as confidence)."""
        return _supervision().Detections(xyxy=self.xyxy, mask=self.mask, confidence=self.iou)


class Segmenter:
    """Segment Anything with a SAM-contract model folder (encoder.onnx, decoder.onnx, sam.json),
    the same pipeline as `vlrt segment`: set_image runs the encoder once, each predict runs the
    decoder for its prompts. Python threads may share one Segmenter (calls take turns)."""

    def __init__(self, model_dir, devices=("cpu",), threads: int = 0):
        self._segmenter = _Segmenter(os.fspath(model_dir), list(devices), threads)

    def set_image(self, image, bgr: bool = False) -> None:
        """`image`: a path, encoded bytes, an HxWx3 uint8 NumPy array (RGB; bgr=True for
        OpenCV's BGR) or a PIL image. Later prompts are in its pixels."""
        self._segmenter.set_image(_image_argument(image, bgr))

    def predict(self, boxes=None, points=None, point_labels=None) -> Masks:
        """One mask per box (rows x1, y1, x2, y2), or one for the points (rows x, y) alone; the
        points join the box's prompt when there is one box. `point_labels`: 1 foreground (the
        default), 0 background, one per point."""
        labels = None if point_labels is None else np.asarray(point_labels, np.float32).reshape(-1).tolist()
        return Masks(*self._segmenter.predict(_rows(boxes), _rows(points), labels))

    def segment(self, image, boxes=None, points=None, point_labels=None, bgr: bool = False) -> Masks:
        """set_image(image), then predict(boxes, points, point_labels)."""
        self.set_image(image, bgr)
        return self.predict(boxes, points, point_labels)

    def segment_detections(self, detections, image=None, bgr: bool = False) -> np.ndarray:
        """bool [N, H, W]: a mask for each detection's box, as `vlrt detect --masks` makes them
        (a box without width or height gets an empty mask). `detections`: vlrt.Detections,
        supervision.Detections (anything with .xyxy) or an [N, 4] array; `image`, when given,
        is set first."""
        if image is not None:
            self.set_image(image, bgr)
        return self._segmenter.segment_detections(_rows(getattr(detections, "xyxy", detections)))

    def close(self) -> None:
        """Frees the models and the image; any later call raises vlrt.Error."""
        self._segmenter.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _rows(values) -> list:
    """Rows of numbers as lists (one row for a 1-D array), for the prompts' checks in vlrt."""
    array = np.asarray([] if values is None else values, np.float32)
    if array.size == 0:
        return []
    return (array.reshape(1, -1) if array.ndim == 1 else array).tolist()


def _image_argument(image, bgr: bool):
    """A path as str, bytes as they are, anything else as an RGB array."""
    if isinstance(image, (str, os.PathLike, bytes)):
        if bgr:
            raise ValueError("bgr=True applies to arrays; a file or encoded image is decoded as RGB")
        return image if isinstance(image, bytes) else os.fspath(image)
    return _rgb_array(image, bgr)


def _rgb_array(image, bgr: bool) -> np.ndarray:
    if not isinstance(image, np.ndarray):
        try:
            from PIL import Image
        except ImportError:
            Image = None
        if Image is None or not isinstance(image, Image.Image):
            raise TypeError(f"image: expected a path, encoded bytes, a NumPy array or a PIL image, "
                            f"got {type(image).__name__}")
        if bgr:
            raise ValueError("bgr=True applies to arrays; a PIL image is converted to RGB")
        image = np.asarray(image.convert("RGB"))
    if bgr and image.ndim == 3 and image.shape[2] == 3:
        image = image[:, :, ::-1]
    return image
