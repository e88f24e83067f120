# mj_manipulator_ros: one-command environment, tests and demo. See README.md.
ROS ?= kilted
# one venv per distro: .venv for the default (kilted), .venv-<distro> otherwise
VENV ?= $(if $(filter kilted,$(ROS)),.venv,.venv-$(ROS))
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup test demo bench clean

# Fast when nothing changed: tools/setup_env.sh compares a fingerprint of its inputs.
setup:
	@ROS=$(ROS) VENV=$(VENV) bash tools/setup_env.sh

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/mj-manipulator-ros demo

bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf .venv .venv-* build .pytest_cache demo_report.json demo_sequential_worst.png demo_scene.xml demo_bags
