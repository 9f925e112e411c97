# The two commands a newcomer needs: `make demo` and `make test`.
# `make demo` installs only what the demo needs; `make test` adds the test tools.
.PHONY: demo demo-cluster test lint bench

demo:
	bash scripts/run.sh demo

demo-cluster:
	bash scripts/demo-cluster.sh

test:
	bash scripts/run.sh test

lint:
	bash scripts/setup.sh test && .venv/bin/ruff check stream_sink tests bench && .venv/bin/ruff format --check stream_sink tests bench && .venv/bin/mypy

bench:
	bash scripts/setup.sh test && for b in bench/bench_*.py; do .venv/bin/python $$b; done
