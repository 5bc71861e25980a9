"""Fixtures for the operator's unit tests: offline Kubernetes manifest validation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest

# Every Kubernetes minor version the charts and the operator promise to support.
KUBERNETES_VERSIONS = [f"1.{minor}.0" for minor in range(30, 38)]
# Kinds that the bundled schemas do not know (our own custom resources).
CUSTOM_API_VERSIONS = {"butlers.dev/v1alpha1", "monitoring.coreos.com/v1"}


def validate_manifest(manifest: dict[str, Any]) -> None:
    """Raise when `manifest` is not valid for any supported Kubernetes version (strict)."""
    if manifest["apiVersion"] in CUSTOM_API_VERSIONS:
        return
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            name = manifest.get("metadata", {}).get("name")
            raise AssertionError(
                f"{manifest['kind']}/{name} is invalid for Kubernetes {version}: {exc.message}"
            ) from None


@pytest.fixture
def k8s_validate() -> Callable[[dict[str, Any]], None]:
    return validate_manifest
