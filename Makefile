# Every target goes through dev.py (which creates .venv and installs the project)
# or a standard tool; CI runs `.ci/run`, which is `python3 dev.py test`.
PY ?= python3
VENV_PY := .venv/bin/python
REGISTRY ?= ghcr.io/butlers-dev
TAG ?= 0.1.0

.PHONY: setup up test unit integration e2e e2e-operator e2e-kind test-operator lint format crd bench \
	images image-butler image-operator push test-images kind-load

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

# Both images (legacy builder, no provenance; a slim Debian base made with debootstrap as
# root, else the public Python image): see images/build.py. `make images push` pushes too.
images: setup
	$(VENV_PY) -m images.build --registry $(REGISTRY) --tag $(TAG)

image-butler: setup
	$(VENV_PY) -m images.build --registry $(REGISTRY) --tag $(TAG) butler

image-operator: setup
	$(VENV_PY) -m images.build --registry $(REGISTRY) --tag $(TAG) operator

push: setup
	$(VENV_PY) -m images.build --registry $(REGISTRY) --tag $(TAG) --push

test-images:
	$(PY) dev.py test tests/images --images

kind-load: images
	kind load docker-image --name butlers $(REGISTRY)/butler:$(TAG) $(REGISTRY)/operator:$(TAG)
