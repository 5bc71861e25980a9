# The targets CI calls; each is a thin wrapper over dev.py or a standard tool.
REGISTRY ?= ghcr.io/butlers-dev
TAG ?= 0.1.0
DOCKER ?= docker
PY := .venv/bin/python

.PHONY: setup test test-operator lint crd images image-butler image-operator kind-load bench

setup:
	python3 dev.py setup

test: setup
	python3 dev.py test

test-operator: setup
	$(PY) -m pytest tests/unit/operator tests/integration/operator

lint: setup
	python3 dev.py lint

# Regenerate the Butler CRD from the pydantic model (a test fails when it is stale).
crd: setup
	$(PY) -m butlers_operator.crd

images: image-butler image-operator

image-butler:
	$(DOCKER) build -f images/butler/Dockerfile -t $(REGISTRY)/butler:$(TAG) .

image-operator:
	$(DOCKER) build -f images/operator/Dockerfile -t $(REGISTRY)/operator:$(TAG) .

kind-load: images
	kind load docker-image --name butlers $(REGISTRY)/butler:$(TAG) $(REGISTRY)/operator:$(TAG)

bench: setup
	python3 dev.py bench
