# Coverage-guided fuzzing of rpcwire's Python-free protocol crate (crates/rpcwire-protocol), with libFuzzer
# on stable Rust.
#
# Included from the top Makefile. Plain `cargo build` with the sanitizer-coverage flags `cargo fuzz`
# passes (no nightly, no cargo-fuzz); everything lands in fuzz/target.
#   make fuzz-smoke   build, replay tests/fuzz_corpus/<target>, fuzz each target FUZZ_SMOKE_SECONDS
#   make fuzz         the same for FUZZ_SECONDS each (default 10 minutes), corpus kept in fuzz/corpus,
#                     then fuzz-atheris: native against pure on whole streams (installs atheris)
# A crash stops make with libFuzzer's report; the input is in fuzz/artifacts/<target>-crash-*.
# Replay one with `fuzz/target/<host>/release/<target> FILE`.

FUZZ_DIR := fuzz
FUZZ_TARGETS := framing envelope float_repr
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 4
FUZZ_SEEDS := tests/fuzz_corpus
# Deferred (=, not :=): asked of rustc only by the fuzz targets, so other targets need no Rust.
FUZZ_HOST = $(shell rustc -vV | sed -n 's/^host: //p')
FUZZ_BIN = $(FUZZ_DIR)/target/$(FUZZ_HOST)/release
# --target keeps these flags off build scripts.
FUZZ_RUSTFLAGS := -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
	-Cllvm-args=-sanitizer-coverage-trace-compares
# -max_len, per target: inputs longer than this are cut, so each must hold what reaches the target's limits.
# framing: a header block past HEADER_LIMIT (8 KiB) with frames around it. envelope: lines past the depth
# limit of 128, and integers past Python's digit limit (4,300 digits; the envelope records the longest).
# float_repr reads 8 bytes. transport (atheris): both of the framing's and the envelope's, on either framing.
FUZZ_MAX_LEN_framing := 20480
FUZZ_MAX_LEN_envelope := 16384
FUZZ_MAX_LEN_float_repr := 4096
FUZZ_MAX_LEN_transport := 20480
FUZZ_FLAGS := -timeout=10 -rss_limit_mb=2048 -dict=$(FUZZ_DIR)/json.dict
ATHERIS := atheris==3.0.0

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-atheris fuzz-lint

fuzz-build: check-rust ## Build the fuzz targets (fuzz/target)
	cd $(FUZZ_DIR) && CARGO_TARGET_DIR=target RUSTFLAGS="$(FUZZ_RUSTFLAGS)" \
		cargo build --release --locked --quiet --target $(FUZZ_HOST)

# $(1): seconds per target
define fuzz_run
	@set -e; for entry in $(foreach target,$(FUZZ_TARGETS),$(target):$(FUZZ_MAX_LEN_$(target))); do \
		target=$${entry%%:*}; max_len=$${entry##*:}; \
		mkdir -p $(FUZZ_DIR)/corpus/$$target $(FUZZ_DIR)/artifacts $(FUZZ_SEEDS)/$$target; \
		echo "fuzz: $$target for $(1) s (inputs up to $$max_len bytes)"; \
		$(FUZZ_BIN)/$$target $(FUZZ_FLAGS) -max_len=$$max_len -max_total_time=$(1) \
			-artifact_prefix=$(FUZZ_DIR)/artifacts/$$target- $(FUZZ_DIR)/corpus/$$target $(FUZZ_SEEDS)/$$target \
			2>$(FUZZ_DIR)/artifacts/$$target.log || { tail -n 40 $(FUZZ_DIR)/artifacts/$$target.log; exit 1; }; \
		grep -E '^Done [0-9]+ runs' $(FUZZ_DIR)/artifacts/$$target.log | tail -n 1; \
	done
endef

fuzz-smoke: fuzz-build ## Replay tests/fuzz_corpus and fuzz each target for a few seconds
	$(call fuzz_run,$(FUZZ_SMOKE_SECONDS))

fuzz: fuzz-build ## Fuzz each target for FUZZ_SECONDS (default 600), then fuzz-atheris
	$(call fuzz_run,$(FUZZ_SECONDS))
	$(MAKE) --no-print-directory fuzz-atheris

fuzz-atheris: develop ## Native against pure on whole streams with atheris, for FUZZ_SECONDS
	$(VENV)/bin/pip install --quiet $(ATHERIS)
	mkdir -p $(FUZZ_DIR)/corpus/transport $(FUZZ_DIR)/artifacts
	$(PY) $(FUZZ_DIR)/atheris_transport.py $(FUZZ_FLAGS) -max_len=$(FUZZ_MAX_LEN_transport) \
		-max_total_time=$(FUZZ_SECONDS) -artifact_prefix=$(FUZZ_DIR)/artifacts/transport- \
		$(FUZZ_DIR)/corpus/transport $(FUZZ_SEEDS)/transport \
		2>$(FUZZ_DIR)/artifacts/transport.log || { tail -n 40 $(FUZZ_DIR)/artifacts/transport.log; exit 1; }
	@grep -E '^Done [0-9]+ runs' $(FUZZ_DIR)/artifacts/transport.log | tail -n 1

fuzz-lint: check-rust ## rustfmt and clippy on the fuzz targets
	cd $(FUZZ_DIR) && cargo fmt -- --check
	cd $(FUZZ_DIR) && CARGO_TARGET_DIR=target/lint cargo clippy --locked --quiet --all-targets -- -D warnings
