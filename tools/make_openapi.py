#!/usr/bin/env python3
"""Writes docs/openapi.json, the OpenAPI 3.0 description of `vlrt serve` (served at GET /openapi.json).

Run from the repository root after changing a route: python3 tools/make_openapi.py
tests/serve/test_serve_openapi.cpp checks that every route the server registers is described here.
"""
import json
import pathlib

ERROR = {"$ref": "#/components/schemas/Error"}


def body(schema, media="application/json"):
    return {"content": {media: {"schema": schema}}}


def reply(description, schema=None, media="application/json"):
    r = {"description": description}
    if schema is not None:
        r.update(body(schema, media))
    return r


def errors(*codes):
    names = {400: "bad request (the message names the field)", 404: "no such model or version",
             408: "the request did not arrive within the read timeout", 413: "body over --max-body-bytes",
             415: "unsupported Content-Type", 500: "internal error", 503: "queue full, shutting down, "
             "or too many open connections (Retry-After: 1)", 504: "no result within --timeout-ms"}
    out = {str(c): reply(names[c], ERROR) for c in codes}
    out["default"] = reply("any other error, same shape", ERROR)
    return out


def op(summary, ok, *codes, request=None, params=None, tag=None):
    o = {"summary": summary, "responses": {"200": ok, **errors(*codes)}}
    if request is not None:
        o["requestBody"] = request
    if params:
        o["parameters"] = params
    if tag:
        o["tags"] = [tag]
    return o


NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}, "description": "model name"}
VERSION = {"name": "version", "in": "path", "required": True, "schema": {"type": "string"}}
OBJ = {"type": "object"}
THRESH = {"type": "number", "minimum": 0, "maximum": 1}

detect_fields = {
    "type": "object", "required": ["image", "prompt"],
    "properties": {"image": {"type": "string", "format": "binary"}, "prompt": {"type": "string"},
                   "box_threshold": THRESH, "text_threshold": THRESH}}
detect_json = {
    "type": "object", "required": ["image", "prompt"],
    "properties": {"image": {"type": "string", "format": "byte"}, "prompt": {"type": "string"},
                   "box_threshold": THRESH, "text_threshold": THRESH}}
detect_request = {"required": True, "content": {"multipart/form-data": {"schema": detect_fields},
                                                "application/json": {"schema": detect_json}}}
detection = {"type": "object", "properties": {
    "label": {"type": "string"}, "score": {"type": "number"},
    "box": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4}}}
size = {"type": "object", "properties": {"width": {"type": "integer"}, "height": {"type": "integer"}}}
timing = {"type": "object", "properties": {k: {"type": "number"} for k in ("queue_ms", "inference_ms", "total_ms")}}
pipeline_reply = {"type": "object", "properties": {
    "detections": {"type": "array", "items": detection}, "prompt": {"type": "string"}, "image": size,
    "model_input": size, "warning": {"type": "string"}, "passes": {"type": "integer"},
    "tags": {"type": "array", "items": OBJ}, "masks": {"type": "array", "items": OBJ},
    "timing": timing, "batch_size": {"type": "integer"}}}

tensor = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "shape": {"type": "array", "items": {"type": "integer"}},
    "datatype": {"type": "string"}, "parameters": OBJ, "data": {"type": "array", "items": {}}}}
infer_request = {"type": "object", "properties": {
    "id": {"type": "string"}, "parameters": OBJ, "inputs": {"type": "array", "items": tensor},
    "outputs": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "parameters": OBJ}}}}}
infer_reply = {"type": "object", "properties": {
    "model_name": {"type": "string"}, "model_version": {"type": "string"}, "id": {"type": "string"},
    "parameters": OBJ, "outputs": {"type": "array", "items": tensor}}}
model_stats = {"type": "object", "properties": {"model_stats": {"type": "array", "items": OBJ}}}
ready = {"type": "object", "properties": {"name": {"type": "string"}, "ready": {"type": "boolean"},
                                          "error": {"type": "string"}}}

model_routes = {
    "": ("get", op("Model metadata (KServe v2)", reply("name, versions, platform, inputs, outputs", OBJ), 400, 404)),
    "/config": ("get", op("Model configuration (Triton's model_configuration)", reply("config", OBJ), 400, 404)),
    "/stats": ("get", op("The model's statistics (Triton's statistics extension)", reply("stats", model_stats),
                         400, 404)),
    "/ready": ("get", op("Model readiness", reply("ready", ready), 400, 404, 503)),
    "/infer": ("post", op("Inference (KServe v2, with the binary tensor data extension)",
                          {"description": "outputs; binary when Inference-Header-Content-Length is set",
                           "content": {"application/json": {"schema": infer_reply},
                                       "application/octet-stream": {"schema": {"type": "string",
                                                                               "format": "binary"}}}},
                          400, 404, 408, 413, 500, 503, 504,
                          request={"required": True, "content": {
                              "application/json": {"schema": infer_request},
                              "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}})),
}

paths = {
    "/v1/detect": {"post": op("Grounding detection: an image and a text prompt (the grounding pipeline's "
                              "endpoint; the tagging pipeline's is /v1/tag, the segmenting one's /v1/segment, "
                              "same fields)", reply("detections", pipeline_reply),
                              400, 408, 413, 415, 500, 503, 504, request=detect_request, tag="pipeline")},
    "/v2/health/live": {"get": op("Liveness", reply("live", {"type": "object", "properties": {
        "live": {"type": "boolean"}}}), tag="kserve")},
    "/v2/health/ready": {"get": op("Readiness: 503 while warming up or shutting down", reply("ready", ready),
                                   503, tag="kserve")},
    "/v2": {"get": op("Server metadata", reply("name, version, extensions", {"type": "object", "properties": {
        "name": {"type": "string"}, "version": {"type": "string"},
        "extensions": {"type": "array", "items": {"type": "string"}}}}), tag="kserve")},
    "/v2/models/stats": {"get": op("Statistics of every loaded model", reply("stats", model_stats),
                                   tag="kserve")},
    "/v2/repository/index": {"post": op("The repository's models and their states", reply(
        "index", {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "version": {"type": "string"}, "state": {"type": "string"},
            "reason": {"type": "string"}}}}), 400, tag="kserve")},
    "/metrics": {"get": op("Prometheus metrics (vlrt_* and Triton's nv_inference_*)",
                           reply("text exposition format", {"type": "string"}, "text/plain"), tag="metrics")},
    "/openapi.json": {"get": op("This document", reply("OpenAPI 3.0", OBJ), tag="metrics")},
    "/health": {"get": op("Label Studio ML backend: health", reply("status", OBJ), tag="labelling")},
    "/": {"get": op("Label Studio ML backend: health", reply("status", OBJ), tag="labelling")},
    "/setup": {"post": op("Label Studio ML backend: project setup", reply("model version", OBJ), 400,
                          request={"required": True, "content": {"application/json": {"schema": OBJ}}},
                          tag="labelling")},
    "/predict": {"post": op("Label Studio ML backend: predictions for tasks", reply("results", OBJ),
                            400, 404, 413, 500, 503, 504,
                            request={"required": True, "content": {"application/json": {"schema": OBJ}}},
                            tag="labelling")},
    "/v1/models": {"get": op("X-AnyLabeling's model list; for a chat model, OpenAI's model list",
                             reply("models", OBJ), tag="labelling")},
    "/v1/predict": {"post": op("X-AnyLabeling's remote server: detections for a base64 image",
                               reply("shapes", OBJ), 400, 413, 500, 503, 504,
                               request={"required": True, "content": {"application/json": {"schema": OBJ}}},
                               tag="labelling")},
    "/v1/chat/completions": {"post": op(
        "OpenAI's chat completions (served instead of the pipeline's endpoint for a VLM folder); errors are "
        "{\"error\": {\"message\", \"type\", \"code\"}}", reply("completion", OBJ), 400, 500, 503,
        request={"required": True, "content": {"application/json": {"schema": OBJ}}}, tag="chat")},
}
for suffix, (method, o) in model_routes.items():
    paths["/v2/models/{name}" + suffix] = {method: {**o, "parameters": [NAME], "tags": ["kserve"]}}
    paths["/v2/models/{name}/versions/{version}" + suffix] = {
        method: {**o, "parameters": [NAME, VERSION], "tags": ["kserve"]}}
for action in ("load", "unload"):
    paths[f"/v2/repository/models/{{name}}/{action}"] = {"post": op(
        f"{action.capitalize()} a repository model (400 without --model-repository)", reply("done", OBJ),
        400, 404, params=[NAME], tag="kserve")}

doc = {
    "openapi": "3.0.3",
    "info": {"title": "vlrt serve", "version": "0.1.0",
             "description": "A pipeline (grounding: /v1/detect) behind HTTP, the KServe v2 / Triton protocol, "
                            "Prometheus metrics and the labelling tools' protocols. Errors are JSON "
                            "{\"error\": message} (the chat route's in OpenAI's shape)."},
    "paths": paths,
    "components": {"schemas": {"Error": {"type": "object", "required": ["error"], "properties": {
        "error": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
            "message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": "integer"}}}]}}}}},
}
out = pathlib.Path(__file__).resolve().parent.parent / "docs" / "openapi.json"
out.write_text(json.dumps(doc, indent=1) + "\n")
print(f"wrote {out.relative_to(out.parent.parent)}: {len(paths)} paths")
