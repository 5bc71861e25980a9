# Every target goes through dev.py, which creates .venv and installs the project.
PY ?= python3

.PHONY: setup up test unit integration e2e lint format bench images

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
lint:
	$(PY) dev.py lint
format:
	$(PY) dev.py run ruff format .
bench:
	$(PY) dev.py bench
