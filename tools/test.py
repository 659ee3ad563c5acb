#!/usr/bin/env python3
"""`make test`: every test of the workspace, built once and run in two lanes at a time.

`cargo test --workspace` runs its test binaries one after another, and most of their time is
spent waiting (clusters starting, rollouts, verification windows), so two cores sit idle. This
builds every test target once, exactly as `cargo test --workspace` would (the same features:
one build, nothing rebuilt per lane), then runs the binaries in two lanes at once:

- the real-node lane: the binaries whose tests start a real kubelet and containerd (one real
  node per machine at a time: the test kit's lock refuses a second), one after another;
- the other lane: everything else, one after another, then the doc tests.

Each binary runs as cargo runs it (from its package's directory, with cargo's variables for
it, `--test-threads` passed on); its output is printed whole when it ends, with its time, and
the run ends with a table of every binary's time and outcome. Written by hand because cargo
has no parallelism across test binaries and cargo-nextest runs each test in a process of its
own, which would start a cluster per test instead of one per binary.
"""

import json
import os
import subprocess
import sys
import threading
import time

# (package, target) pairs whose tests take the machine's real node.
REAL_NODE = {
    ("kubenest-agent", "it"),
    ("kubenest-devenv", "it"),
    ("kubenest-testkit", "it"),
    ("kubenest-testkit", "real_node_cleanup"),
}

print_lock = threading.Lock()


def build():
    """Builds every test target; returns [(package, target, kind, executable, package dir)]."""
    command = [
        "cargo", "test", "--workspace", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    binaries = []
    for line in process.stdout:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message.get("profile", {}).get("test"):
            continue
        target = message["target"]
        package = message["package_id"]
        manifest = message["manifest_path"]
        name = package_name(package, manifest)
        binaries.append((name, target["name"], target["kind"][0], message["executable"],
                         os.path.dirname(manifest)))
    if process.wait() != 0:
        sys.exit(process.returncode)
    return binaries


def package_name(package_id, manifest):
    """The package's name: from its id (`path+file:///…#name@version` or `name version (…)`)."""
    if "#" in package_id:
        tail = package_id.rsplit("#", 1)[1]
        return tail.split("@", 1)[0] if "@" in tail else os.path.basename(os.path.dirname(manifest))
    return package_id.split(" ", 1)[0]


def run(binary, threads):
    """Runs one test binary as cargo would; returns (name, seconds, ok, output)."""
    package, target, kind, executable, directory = binary
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = directory
    env["CARGO_PKG_NAME"] = package
    env["CARGO_CRATE_NAME"] = target.replace("-", "_")
    started = time.monotonic()
    done = subprocess.run(
        [executable, f"--test-threads={threads}"],
        cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors="replace",
    )
    seconds = time.monotonic() - started
    name = f"{package} {kind} {target}"
    with print_lock:
        print(f"     Running {name} ({executable})", flush=True)
        sys.stdout.write(done.stdout)
        print(f"== {name}: {'ok' if done.returncode == 0 else 'FAILED'} in {seconds:.1f}s",
              flush=True)
    return name, seconds, done.returncode == 0


def doc_tests():
    """The doc tests, as `cargo test --workspace --doc` runs them."""
    started = time.monotonic()
    done = subprocess.run(["cargo", "test", "--workspace", "--doc"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    seconds = time.monotonic() - started
    with print_lock:
        sys.stdout.write(done.stdout)
        print(f"== doc tests: {'ok' if done.returncode == 0 else 'FAILED'} in {seconds:.1f}s",
              flush=True)
    return "doc tests", seconds, done.returncode == 0


def lane(binaries, threads, results, then=None):
    for binary in binaries:
        results.append(run(binary, threads))
    if then:
        results.append(then())


def main():
    threads = int(os.environ.get("TEST_THREADS", "2"))
    binaries = build()
    real = [b for b in binaries if (b[0], b[1]) in REAL_NODE and b[2] == "test"]
    other = [b for b in binaries if b not in real]
    results = []
    lanes = [
        threading.Thread(target=lane, args=(real, threads, results)),
        threading.Thread(target=lane, args=(other, threads, results, doc_tests)),
    ]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join()
    print("\ntest binaries (longest first):")
    for name, seconds, ok in sorted(results, key=lambda r: -r[1]):
        print(f"  {seconds:7.1f}s  {'ok    ' if ok else 'FAILED'}  {name}")
    failed = [name for name, _, ok in results if not ok]
    if failed:
        print(f"\n{len(failed)} test binaries failed: {', '.join(failed)}")
        sys.exit(101)


if __name__ == "__main__":
    main()
