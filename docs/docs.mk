# The docs site, included from the Makefile: `make docs` builds it into site/ with `mkdocs build --strict`,
# so a warning (a link to a missing page or anchor, a docstring mkdocstrings cannot read) fails the build.
# It has its own venv, .venv-docs: MkDocs and its plugins stay out of .venv, and the build needs neither Rust
# nor the native module (mkdocstrings reads python/rpcwire and its stub _rpcwire.pyi as source).
DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.docs-installed
# Material for MkDocs prints a banner about its successor on every build; the build's own warnings still show.
DOCS_ENV := NO_MKDOCS_2_WARNING=1

.PHONY: docs docs-serve

$(DOCS_STAMP): requirements-docs.txt
	python3 -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet -r requirements-docs.txt
	touch $(DOCS_STAMP)

# Then the API reference is checked against the package (docs/tools/check_reference.py: each public name with its
# docstring, signature and members; tests/integrations/test_reference.py runs it too where .venv-docs exists).
docs: $(DOCS_STAMP) ## Build the docs site into site/ (mkdocs build --strict: a broken link fails) and check its API reference
	$(DOCS_ENV) $(DOCS_VENV)/bin/mkdocs build --strict --site-dir site
	$(DOCS_VENV)/bin/python docs/tools/check_reference.py site

docs-serve: $(DOCS_STAMP) ## Serve the docs on http://127.0.0.1:8000 with live reload and search
	$(DOCS_ENV) $(DOCS_VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000
