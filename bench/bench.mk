# Included from the top Makefile, which defines VENV, PY, STAMP and `develop`.
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: bench bench-quick bench-http

$(BENCH_STAMP): bench/requirements.txt $(STAMP)
	$(PY) -m pip install --quiet -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench: develop $(BENCH_STAMP) ## rpcwire against its peers: table, bench/results.json, bench/results.png (~12 min)
	$(PY) bench/run.py $(BENCH_ARGS)

bench-quick: develop $(BENCH_STAMP) ## A smoke run of the benchmark (a tenth of the messages, one repeat)
	$(PY) bench/run.py --quick --repeats 1 $(BENCH_ARGS)

bench-http: develop $(STAMP) ## rpcwire over HTTP (uvicorn, gunicorn gthread, Flask) against a constant reply (~40 s)
	$(PY) bench/http_bench.py $(BENCH_HTTP_ARGS)
