# The two commands a newcomer needs: `make demo` and `make test`.
.PHONY: demo test lint bench

demo:
	bash scripts/run.sh demo

test:
	bash scripts/run.sh test

lint:
	bash scripts/setup.sh && .venv/bin/ruff check stream_sink tests bench && .venv/bin/mypy

bench:
	bash scripts/setup.sh && for b in bench/bench_*.py; do .venv/bin/python $$b; done
