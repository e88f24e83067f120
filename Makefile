# mj_manipulator_ros: one-command environment, tests and demo. See README.md.
ROS ?= kilted
# one venv per distro: .venv for the default (kilted), .venv-<distro> otherwise
VENV ?= $(if $(filter kilted,$(ROS)),.venv,.venv-$(ROS))
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# pytest-xdist workers for the tests that share the machine (tools/run_tests.sh); 0: one process.
# One more than the cores (at most 4): the tests wait on real-time motion more than they compute
# (about 40 % of their wall time is CPU). Measured 2026-12-06 on 2 cores, fresh clone, 7d4435b:
# 2 workers 631 s idle / 703 s beside one busy loop; 3 workers 488 s idle / 517 s beside one
# busy loop (setup already made; about 35 s more without), 903 passed in each. (An earlier
# finding that a third worker made real-time tests late came from runs that had stray busy
# loops beside them; test/conftest.py gives each worker of a session its own DDS domain from a
# block of 4.)
WORKERS ?= $(shell n=$$(nproc); n=$$(( n + 1 )); echo $$(( n > 4 ? 4 : n )))

.PHONY: setup test demo bench rehearse rehearse-twin rehearse-faults clean

# Fast when nothing changed: tools/setup_env.sh compares a fingerprint of its inputs.
setup:
	@ROS=$(ROS) VENV=$(VENV) bash tools/setup_env.sh

test: setup
	WORKERS=$(WORKERS) bash tools/run_tests.sh $(PY) $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/mj-manipulator-ros demo

bench: setup
	$(PY) bench/run_all.py

# the staged bring-up, stages 0-6, as hil/stages.yaml ships it, rehearsed against the simulated
# OpenArm pair (about 4 min; make test runs it with fewer repetitions of stages 1 and 2)
rehearse: setup
	$(VENV)/bin/mj-manipulator-ros hil --config config/sim_openarm.yaml --sim --yes --through 6 --results hil/results

# the staged bring-up, stages 0-6, rehearsed against the actuator-twin co-simulation (5-10 min)
rehearse-twin: setup
	$(VENV)/bin/mj-manipulator-ros hil --config config/sim_openarm_twin.yaml --sim --yes --through 6 --results hil/results

# Every miswiring and stream fault, per arm, through hil --sim stages 0-2 (about 20 min), then
# ten healthy rehearsals: each fault named at its stage, no false detection (bench/rehearse_faults.py).
rehearse-faults: setup
	@mkdir -p hil/results
	$(VENV)/bin/python bench/rehearse_faults.py --out hil/results/fault_matrix.json
	$(VENV)/bin/python bench/rehearse_faults.py --healthy 10 --out hil/results/healthy_rehearsals.json

clean:
	rm -rf .venv .venv-* build .pytest_cache demo_report.json demo_sequential_worst.png demo_scene.xml demo_bags
