"""deploy/: the KServe InferenceService read by the KServe SDK (skipped without kserve) and the
Dockerfile it runs, checked against each other and against `vlrt serve --help`."""
import json
import re
import subprocess

import pytest


@pytest.fixture(scope="module")
def dockerfile(repo) -> str:
    return (repo / "deploy" / "Dockerfile").read_text()


@pytest.fixture
def inference_service(repo, monkeypatch):
    """The YAML as the SDK's V1beta1InferenceService, through the SDK's ApiClient.deserialize."""
    kserve = pytest.importorskip("kserve")
    yaml = pytest.importorskip("yaml")
    import kubernetes.client.models as k8s
    from kserve.api_client import ApiClient

    if k8s.V1Container.openapi_types["args"] != "list[str]":
        pytest.skip("this kubernetes client names types List[str], which kserve's ApiClient cannot read; "
                    "pip install 'kubernetes<34'")
    # kserve's ApiClient looks type names up in kserve.models only, which lacks the Kubernetes
    # types an InferenceService holds (V1ObjectMeta, V1Container; kserve issue 2329): lend them.
    for name in dir(k8s):
        if name.startswith("V1") and not hasattr(kserve.models, name):
            monkeypatch.setattr(kserve.models, name, getattr(k8s, name), raising=False)
    doc = yaml.safe_load((repo / "deploy" / "kserve" / "inferenceservice.yaml").read_text())

    class Response:
        data = json.dumps(doc)

    client = ApiClient()
    isvc = client.deserialize(Response(), "V1beta1InferenceService")
    assert isinstance(isvc, kserve.V1beta1InferenceService)
    # Deserialization drops fields it does not know: a misspelt one would vanish unnoticed.
    assert client.sanitize_for_serialization(isvc) == doc
    return isvc


def option_value(args, name):
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def test_the_predictor_runs_vlrt_serve_on_the_mounted_model(inference_service, vlrt_cli):
    assert (inference_service.api_version, inference_service.kind) == ("serving.kserve.io/v1beta1", "InferenceService")
    [container] = inference_service.spec.predictor.containers
    assert container.name == "kserve-container"  # where KServe mounts /mnt/models
    assert option_value(container.args, "--model") == "/mnt/models/model.onnx"
    assert option_value(container.args, "--host") == "0.0.0.0"
    assert "--insecure" in container.args  # a non-loopback host without VLRT_API_KEY
    [port] = container.ports
    assert port.container_port == 8080 and option_value(container.args, "--port") == "8080"
    assert option_value(container.args, "--threads") == container.resources.limits["cpu"]
    help_text = subprocess.run([vlrt_cli, "serve", "--help"], check=True, capture_output=True, text=True).stdout
    for option in (a for a in container.args if a.startswith("--")):
        assert re.search(rf"[ ,]{option}\b", help_text), f"vlrt serve has no {option}"
    storage = {e.name: e.value for e in container.env}["STORAGE_URI"]
    assert re.match(r"^(s3|gs|https?|pvc)://.+", storage), storage


def test_probes_ask_vlrt_health_routes(inference_service):
    [container] = inference_service.spec.predictor.containers
    assert container.liveness_probe.http_get.path == "/v2/health/live"
    assert container.readiness_probe.http_get.path == "/v2/health/ready"
    assert container.startup_probe.http_get.path == "/v2/health/ready"
    for probe in (container.liveness_probe, container.readiness_probe, container.startup_probe):
        assert probe.http_get.port == container.ports[0].container_port


def test_the_image_serves_what_the_manifest_expects(dockerfile):
    assert 'ENTRYPOINT ["vlrt", "serve"]' in dockerfile and "EXPOSE 8080" in dockerfile
    assert re.search(r'CMD \["--model", "/mnt/models/model.onnx", "--host", "0.0.0.0", "--port", "8080", "--insecure"\]', dockerfile)
    stages = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert stages == ["debian:12", "debian:12-slim"]
    assert "make deps" in dockerfile and "make program" in dockerfile  # what CI builds with
