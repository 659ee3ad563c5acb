# The README's two commands: `make dev` runs the local kubenest, `make test` runs every test.
# Both install what is missing first (tools/setup.sh); expensive builds are cached outside the
# clone, under $(KUBENEST_CACHE).

SHELL := /bin/bash
KUBENEST_CACHE ?= $(HOME)/.cache/kubenest
export KUBENEST_CACHE
export CARGO_TARGET_DIR ?= $(KUBENEST_CACHE)/cargo-target
# Tests that start clusters share them within a test binary; two test threads suit two cores.
TEST_THREADS ?= 2

.PHONY: dev tour test setup console images release bundle fmt lint bench fuzz

setup:
	@tools/setup.sh

# The kubenest programs the local environment runs, the user CLI, and `kubenest-dev` (devenv/)
# that starts them.
PROGRAMS := -p kubenest-cli -p kubenest-hub -p kubenest-controllers -p kubenest-apiserver -p kubenest-agent -p kubenest-devenv

# The web console: built (API types regenerated from apiserver/openapi.json, type-checked,
# bundle budget checked) into console/dist, which the API server serves; then its unit tests.
# Its browser test is devenv/tests/console.rs, part of `cargo test`.
console: setup
	cd console && npm run build && npm test

# Every image (images/), built by buildah without a Docker daemon into OCI archives under
# $(KUBENEST_CACHE)/images; unchanged images are skipped. `tools/build-images.sh --print-env`
# says where each archive is.
images: setup
	@tools/build-images.sh

# Publishes a release to the OCI registry REGISTRY (host:port): every image (or IMAGES="agent
# hub ..."), built at the release profile, and both charts as OCI artifacts under
# oci://REGISTRY/kubenest/charts. Credentials and a private CA come from environment variables
# (KUBENEST_REGISTRY_USER, KUBENEST_REGISTRY_PASSWORD_FILE, KUBENEST_REGISTRY_CA): see
# tools/release.sh.
release: setup
	@test -n "$(REGISTRY)" || { echo "make release: set REGISTRY=host:port" >&2; exit 2; }
	@tools/release.sh "$(REGISTRY)" $(IMAGES)

# The platform bundle: one archive under $(KUBENEST_CACHE)/bundle with everything a machine
# needs to join a cluster offline (Kubernetes binaries, etcd, containerd/runc/CNI as Debian
# packages, CoreDNS, the storage provisioner, every image, both charts) and a manifest of
# checksums; `tools/bundle.sh --verify FILE` checks one. See tools/bundle.sh.
bundle: setup
	@tools/bundle.sh

dev: setup
	cd console && npm run build
	cargo build $(PROGRAMS) --bins
	$(CARGO_TARGET_DIR)/debug/kubenest-dev up

# The scripted walk through the product, against a running `make dev` (reads .kubenest/dev.env).
tour:
	cargo build $(PROGRAMS) --bins
	$(CARGO_TARGET_DIR)/debug/kubenest-dev tour

# End-to-end tests run the programs' binaries as processes: every program's package has a test
# of its own (cli/tests/cli.rs for the `kubenest` CLI), so `cargo test` builds them all, with
# the same features as the tests (a separate `cargo build` would build them a second time).
# tools/test.py builds them as `cargo test --workspace` does and runs the test binaries in
# lanes at once (those taking the real node one after another, and the rest two at a time),
# ending with each binary's time.
test: setup console
	@start=$$SECONDS; \
	TEST_THREADS=$(TEST_THREADS) python3 tools/test.py; \
	status=$$?; echo "make test: finished in $$((SECONDS - start))s"; exit $$status

fmt:
	cargo fmt --all

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

bench:
	@bench/run $(BENCH)

# Fuzz the frame validator for FUZZ_SECONDS (needs the nightly toolchain; installs cargo-fuzz).
FUZZ_SECONDS ?= 60
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	cd contracts && cargo +nightly fuzz run frame -- -max_total_time=$(FUZZ_SECONDS) -max_len=65536
