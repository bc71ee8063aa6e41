# Included from the top Makefile, which defines VENV, PY, STAMP and `develop`.
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: bench bench-quick bench-http bench-websocket bench-client bench-mcp bench-lsp bench-accept bench-threads \
	bench-instructions bench-published

$(BENCH_STAMP): bench/requirements.txt $(STAMP)
	$(PY) -m pip install --quiet -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench: develop $(BENCH_STAMP) ## rpcwire against its peers: table, bench/results.json, bench/results.png (~12 min)
	$(PY) bench/run.py $(BENCH_ARGS)

bench-quick: develop $(BENCH_STAMP) ## A smoke run of the benchmark (a tenth of the messages, one repeat)
	$(PY) bench/run.py --quick --repeats 1 $(BENCH_ARGS)

bench-http: develop $(BENCH_STAMP) ## HTTP: the clients against httpx, requests, aiohttp; the apps against their peers (uvicorn, granian, gunicorn, in process); WebSocket against POST (~12 min)
	$(PY) bench/http_bench.py $(BENCH_HTTP_ARGS)

bench-websocket: develop $(BENCH_STAMP) ## The same calls over WebSocket and HTTP POST against one ASGIApp under uvicorn (~3 min)
	$(PY) bench/websocket_bench.py $(BENCH_WEBSOCKET_ARGS)

bench-client: develop $(BENCH_STAMP) ## The clients side by side over pipes, HTTP and MCP (~4 min)
	$(PY) bench/client_bench.py $(BENCH_CLIENT_ARGS)

bench-mcp: develop $(BENCH_STAMP) ## MCP: an MCPServer on the SDK's transport vs rpcwire.mcp's; MCPServer vs rpcwire.mcp_tools, stdio and HTTP (~5 min)
	$(PY) bench/mcp_bench.py $(BENCH_MCP_ARGS)
	$(PY) bench/mcp_tools_bench.py $(BENCH_MCP_TOOLS_ARGS)

bench-accept: develop $(BENCH_STAMP) ## A POST with MCP's Accept header against one with application/json, in process and under uvicorn (~3 min)
	$(PY) bench/accept_bench.py $(BENCH_ACCEPT_ARGS)

bench-lsp: develop $(BENCH_STAMP) ## python-lsp-jsonrpc's Endpoint over its own streams and over rpcwire.lsp's (~2 min)
	$(PY) bench/lsp_bench.py $(BENCH_LSP_ARGS)

# Root, as make test-free-threaded: the two interpreters (3.14t and the GIL build of the same source) in the sid
# chroot, each with its wheel; build/bench-threads/ holds each run's JSON, both together (results.json) and the table
# (results.md). BENCH_THREADS_ARGS="--quick" for a smoke run.
bench-threads: ## As root: CPU-bound handlers at max_concurrency 1, 2, N on CPython 3.14t and on its GIL build, side by side
	packaging/free-threaded.sh bench $(BENCH_THREADS_ARGS)

# valgrind (callgrind) counts each workload's instructions a message for this tree's build and, with
# BASELINE=<rev>, for that revision built in $TMPDIR/rpcwire-instructions (/tmp by default) (kept: a second run builds nothing).
# BENCH_INSTRUCTIONS_ARGS="--only stream,batch --peers" for a few workloads and the orjson transport.
bench-instructions: develop $(BENCH_STAMP) ## Instructions a message of every workload (callgrind), BASELINE=<rev> beside it (~10-30 min)
	$(PY) bench/instructions.py $(if $(BASELINE),--baseline $(BASELINE)) $(BENCH_INSTRUCTIONS_ARGS)

# Every table published in README.md, docs/performance.md and bench/README.md measured again on this build, in turn;
# bench/published.md gets each table with the date, the commit, the interpreter and the load average beside it.
# BENCH_PUBLISHED_ARGS="--quick" for a smoke run, "--only http,lsp" for some tables, "--all" for the callgrind counts too.
bench-published: develop $(BENCH_STAMP) ## Every published table again, with date, commit, interpreter and load (~30 min)
	$(PY) bench/republish.py $(BENCH_PUBLISHED_ARGS)
