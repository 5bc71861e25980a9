# Every target goes through dev.py (which creates .venv and installs the project)
# or a standard tool; CI runs `.ci/run`, which is `python3 dev.py test`.
PY ?= python3
VENV_PY := .venv/bin/python
REGISTRY ?= ghcr.io/butlers-dev
TAG ?= 0.1.0
DOCKER ?= docker

.PHONY: setup up test unit integration e2e e2e-operator e2e-kind test-operator lint format crd bench \
	images image-butler image-operator kind-load

setup:
	$(PY) dev.py setup
up:
	$(PY) dev.py up
test:
	$(PY) dev.py test
unit:
	$(PY) dev.py test tests/unit
integration:
	$(PY) dev.py test tests/integration
e2e:
	$(PY) dev.py test tests/e2e
e2e-operator:
	$(PY) dev.py test tests/e2e --backend operator
e2e-kind:
	$(PY) dev.py test tests/e2e --backend kind
test-operator: setup
	$(VENV_PY) -m pytest tests/unit/operator tests/integration/operator
lint:
	$(PY) dev.py lint
format:
	$(PY) dev.py run ruff format .
bench:
	$(PY) dev.py bench

# Regenerate the Butler CRD from the pydantic model (a test fails when it is stale).
crd: setup
	$(VENV_PY) -m butlers_operator.crd

images: image-butler image-operator

image-butler:
	$(DOCKER) build -f images/butler/Dockerfile -t $(REGISTRY)/butler:$(TAG) .

image-operator:
	$(DOCKER) build -f images/operator/Dockerfile -t $(REGISTRY)/operator:$(TAG) .

kind-load: images
	kind load docker-image --name butlers $(REGISTRY)/butler:$(TAG) $(REGISTRY)/operator:$(TAG)
