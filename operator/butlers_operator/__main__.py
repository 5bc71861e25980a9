"""`python -m butlers_operator`: run the operator with settings from `BUTLERS_OPERATOR_*`."""

from __future__ import annotations

import logging
import sys

import kopf

from butlers_operator.handlers import build_kopf_settings, build_registry
from butlers_operator.settings import OperatorSettings


def main() -> int:
    settings = OperatorSettings.from_env()
    if not settings.cluster_wide and not settings.namespaces:
        print(
            "butlers-operator: set BUTLERS_OPERATOR_NAMESPACES (comma-separated) "
            "or BUTLERS_OPERATOR_CLUSTER_WIDE=true",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    kopf.run(
        registry=build_registry(settings),
        settings=build_kopf_settings(settings),
        standalone=True,
        clusterwide=settings.cluster_wide,
        namespaces=list(settings.namespaces),
        liveness_endpoint=settings.liveness_endpoint,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
