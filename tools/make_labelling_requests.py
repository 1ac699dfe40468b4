"""Request bodies as the labelling tools send them, for vlrt serve's labelling-tool tests
(tests/serve/test_serve_labelling.cpp). Neither tool can run here (Label Studio is a web
application, X-AnyLabeling a Qt desktop one), so the bodies are written field by field as
their client code builds them:

  xanylabeling_predict.json  X-AnyLabeling's remote-server model (predict_shapes): model, image as
                             a data URI, params with conf_threshold, iou_threshold, epsilon_factor
                             and text_prompt with its trailing '.' stripped
  label_studio_setup.json    Label Studio's POST /setup when a backend is connected: project
                             ("<id>.<timestamp>"), schema (the label config XML), hostname,
                             access_token, model_version, extra_params
  label_studio_predict.json  Label Studio's POST /predict: tasks (id, data.image, meta, ...),
                             project, label_config, params (login, password, context)

The image is the placeholder "{DEMO_PNG_DATA_URI}"; the tests put assets/demo.png there as a
data URI (the fixtures stay small). The prompt and labels are assets/demo.json's.
Run with `python3 tools/make_labelling_requests.py`.
"""
import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "serve", "labelling")
IMAGE = "{DEMO_PNG_DATA_URI}"


def write(name, body):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(body, f, indent=1)
        f.write("\n")


def label_config(labels):
    lines = ['<View>', '  <Image name="image" value="$image" zoom="true"/>',
             '  <RectangleLabels name="label" toName="image">']
    lines += ['    <Label value="%s" background="#%06x"/>' % (l.title(), (i * 0x3f5a17) % 0xffffff)
              for i, l in enumerate(labels)]
    lines += ['  </RectangleLabels>', '</View>']
    return "\n".join(lines)


def main():
    os.makedirs(OUT, exist_ok=True)
    demo = json.load(open(os.path.join(ROOT, "assets", "demo.json")))
    labels = [p.strip() for p in demo["prompt"].split(".") if p.strip()]
    write("xanylabeling_predict.json", {
        "model": "demo",
        "image": IMAGE,
        "params": {"conf_threshold": 0.3, "iou_threshold": 0.45, "epsilon_factor": 0.001,
                   "text_prompt": demo["prompt"].rstrip(".")},
    })
    config = label_config(labels)
    write("label_studio_setup.json", {
        "project": "1.1732521600", "schema": config, "hostname": "http://localhost:8080",
        "access_token": "", "model_version": "", "extra_params": "",
    })
    write("label_studio_predict.json", {
        "tasks": [{"id": 1, "data": {"image": IMAGE}, "meta": {}, "created_at": "2024-11-25T08:00:00.000000Z",
                   "updated_at": "2024-11-25T08:00:00.000000Z", "is_labeled": False, "overlap": 1,
                   "inner_id": 1, "total_annotations": 0, "cancelled_annotations": 0,
                   "total_predictions": 0, "comment_count": 0, "unresolved_comment_count": 0,
                   "last_comment_updated_at": None, "project": 1, "updated_by": None,
                   "file_upload": None, "comment_authors": [], "annotations": [], "predictions": []}],
        "project": "1.1732521600",
        "label_config": config,
        "params": {"login": None, "password": None, "context": None},
    })


if __name__ == "__main__":
    main()
