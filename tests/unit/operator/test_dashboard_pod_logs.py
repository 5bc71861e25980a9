"""The dashboard finds a butler's pod and container by what the operator renders."""

from __future__ import annotations

import yaml

from butlers.dashboard import pod_logs
from butlers_operator.reconcile import build_target
from butlers_operator.render import render_deployment
from butlers_operator.settings import OperatorSettings
from tests.conftest import ROOT


def test_the_dashboard_selects_the_labels_and_container_the_operator_renders() -> None:
    spec = yaml.safe_load((ROOT / "roster" / "health.yaml").read_text())["spec"]
    body = {"metadata": {"name": "health", "namespace": "home", "uid": "u"}, "spec": spec}
    settings = OperatorSettings()
    template = render_deployment(build_target(body, settings), settings, "x")["spec"]["template"]
    selector = {pod_logs.APP_LABEL: pod_logs.APP, pod_logs.BUTLER_LABEL: "health"}
    assert selector.items() <= template["metadata"]["labels"].items()
    assert pod_logs.CONTAINER in [c["name"] for c in template["spec"]["containers"]]
