# The commands a newcomer needs: `make demo`, `make test` and `make demo-cluster`.
# `make demo` installs only what the demo needs; `make test` adds the test tools and runs
# the whole suite (what CI runs); `make test-fast` the tests not marked slow;
# `make demo-cluster` installs what the local CDC cluster needs (scripts/setup.sh cluster),
# starts it, runs the CDC demo on it and stops it (not part of CI: minutes of servers).
.PHONY: demo demo-cluster test test-fast lint bench

demo:
	bash scripts/run.sh demo

demo-cluster:
	bash scripts/demo-cluster.sh

test:
	bash scripts/run.sh test

test-fast:
	bash scripts/run.sh test-fast

lint:
	bash scripts/setup.sh test && .venv/bin/ruff check stream_sink tests bench && .venv/bin/ruff format --check stream_sink tests bench && .venv/bin/mypy

bench:
	bash scripts/setup.sh test && for b in bench/bench_*.py; do .venv/bin/python $$b; done
