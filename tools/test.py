#!/usr/bin/env python3
"""`make test`: every test of the workspace, built once, its binaries run several at a time.

`cargo test --workspace` runs its test binaries one after another, and most of their time is
spent waiting (clusters starting, rollouts, verification windows), so the cores sit idle. This
builds every test target once, exactly as `cargo test --workspace` would (the same features:
one build, nothing rebuilt per lane), then runs the binaries in lanes at once:

- the real-node lane: the binaries whose tests start a real kubelet and containerd
  (`REAL_NODE`; one real node per machine at a time: the test kit's lock refuses a second),
  and those whose disk writes would disturb them (the platform bundle's), one after another;
- the other lanes: everything else and the doc tests, `OTHER_AT_ONCE` at a time.

`OTHER_AT_ONCE` is 2. The real-node lane is the critical path (the machine's one node, nothing
can share it), so the other binaries only need to end before it does, and one lane of them no
longer would once the agent's and devenv's kwok tests left the real-node lane (they are about a
fifth of the test time). The binaries mostly wait on clusters: devenv's real-node
binary alone kept 0.4 to 0.6 of a core busy on average (two runs; its process tree's cpuacct,
the pods' own containers aside), so three binaries at once still leave the real-node lane its share of the
two cores; with two other lanes they ended 2 minutes before it, on a machine loaded by other
work (load average 15 to 25). A third lane of them would only end them sooner, which nothing
waits for, and load the cores the real-node lane waits on (its verified-deployment tests judge
real pods' error ratio over a window: a starved demo pod fails them).

The other lanes run at a lower CPU priority (`OTHER_NICENESS`), so that under contention the
critical path gets the cores first; and the binaries that make local machines (`LOCAL_MACHINES`,
one set per host) never run at the same time, in any lane: a lane takes the next binary whose
group is free.

Each lane takes the longest binary left first (the times of the last run that passed, kept in
`test-times.json` of cargo's target directory; a binary never timed counts as longest), so the
short ones fill the end and no lane ends with a long binary started late. A binary outside
`REAL_NODE` that starts a real node fails with the lock's error naming the holder.

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

# (package, target) pairs run one after another in the real-node lane: those whose tests take
# the machine's real node, and those whose disk writes (the platform bundle: gigabytes packed,
# copied to machines and checksummed) would starve its timing-sensitive tests, whose verified
# deployments judge real pods' error ratio over a window (one failed at 0.103 against 0.05 with
# the bundle's copy beside it; the other lanes' niceness does not reach the disk).
REAL_NODE = {
    ("kubenest-agent", "real_node"),
    ("kubenest-agent", "builds"),
    ("kubenest-devenv", "real_node"),
    ("kubenest-testkit", "it"),
    ("kubenest-testkit", "real_node_cleanup"),
    ("kubenest-install", "stages"),
    ("kubenest-devenv", "bundle"),
}

# How many binaries of the other lanes run at once, beside the real-node lane (see above).
OTHER_AT_ONCE = 2

# How much lower the other lanes' CPU priority is (nice): when the cores are short, the
# real-node lane, which is the critical path and whose verified deployments judge real pods'
# error ratio over a window, gets them first.
OTHER_NICENESS = 10

# (package, target) pairs whose tests make local machines (tests/testkit/src/machines): one set
# per host (their bridge, subnet and lock are the host's), so they never run at the same time.
LOCAL_MACHINES = {
    ("kubenest-testkit", "machines_probe"),
    ("kubenest-install", "stages"),
    ("kubenest-devenv", "machines"),
}

DOC_TESTS = "doc tests"

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


def label(binary):
    """How the table names a binary: `package kind target`."""
    package, target, kind, _, _ = binary
    return f"{package} {kind} {target}"


def run(binary, threads, niceness=0):
    """Runs one test binary as cargo would; returns (name, seconds, ok)."""
    package, target, _, executable, directory = binary
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = directory
    env["CARGO_PKG_NAME"] = package
    env["CARGO_CRATE_NAME"] = target.replace("-", "_")
    return timed(label(binary), [executable, f"--test-threads={threads}"], directory, env,
                 niceness)


def timed(name, command, directory=None, env=None, niceness=0):
    """Runs `command`, prints its output whole when it ends; returns (name, seconds, ok)."""
    started = time.monotonic()
    done = subprocess.run(command, cwd=directory, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace",
                          preexec_fn=(lambda: os.nice(niceness)) if niceness else None)
    seconds = time.monotonic() - started
    ok = done.returncode == 0
    with print_lock:
        if directory:
            print(f"     Running {name} ({command[0]})", flush=True)
        sys.stdout.write(done.stdout)
        print(f"== {name}: {'ok' if ok else 'FAILED'} in {seconds:.1f}s", flush=True)
    return name, seconds, ok


def doc_tests(_threads):
    """The doc tests, as `cargo test --workspace --doc` runs them."""
    return timed(DOC_TESTS, ["cargo", "test", "--workspace", "--doc"], niceness=OTHER_NICENESS)


def times_file():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    return os.path.join(target, "test-times.json")


def last_times():
    """Each binary's seconds in the last run that passed it, by name ({} when never run)."""
    try:
        with open(times_file()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def keep_times(known, results):
    """Records the times of the binaries that passed, for the next run's order."""
    known.update({name: round(seconds, 1) for name, seconds, ok in results if ok})
    try:
        with open(times_file(), "w") as f:
            json.dump(known, f, indent=1, sort_keys=True)
    except OSError as e:
        print(f"(could not keep the times in {times_file()}: {e})")


# Where a never timed binary goes among the never timed (a first run): integration tests start
# clusters and take minutes, benchmarks at their tiny size under a minute, unit tests seconds.
KIND_ORDER = {"test": 0, "bench": 1}


def longest_first(jobs, known):
    """`jobs` ([(name, run function, exclusive group)]) ordered by their last time, the never timed first
    (integration tests, then benchmarks, then the rest)."""
    def key(job):
        name = job[0]
        kind = name.split(" ")[1] if " " in name else ""
        return -known.get(name, float("inf")), KIND_ORDER.get(kind, 2)
    return sorted(jobs, key=key)


class Lanes:
    """`count` threads running `jobs` ([(name, run function, exclusive group)]) in order, each
    taking the next job when it is free (and no other lane runs a job of its group);
    `results` gets (name, seconds, ok) of each, `seconds` the time until
    the last lane ended."""

    # The exclusive groups running now, across every Lanes, and the condition they wait on.
    lock = threading.Condition()
    busy = set()

    def __init__(self, title, jobs, count, threads):
        self.title, self.queue, self.threads = title, list(jobs), threads
        self.results, self.seconds = [], 0.0
        self.workers = [threading.Thread(target=self.lane) for _ in range(count)]

    def start(self, started):
        self.started = started
        for worker in self.workers:
            worker.start()

    def lane(self):
        while True:
            with self.lock:
                while True:
                    if not self.queue:
                        self.seconds = max(self.seconds, time.monotonic() - self.started)
                        self.lock.notify_all()
                        return
                    # The first job whose exclusive group (local machines) is free; else wait
                    # for a lane to end one.
                    free = [i for i, (_, _, group) in enumerate(self.queue)
                            if group is None or group not in self.busy]
                    if free:
                        break
                    self.lock.wait()
                _, job, group = self.queue.pop(free[0])
                if group:
                    self.busy.add(group)
            try:
                self.results.append(job(self.threads))
            finally:
                with self.lock:
                    self.busy.discard(group)
                    self.lock.notify_all()

    def join(self):
        for worker in self.workers:
            worker.join()

    def table(self):
        print(f"\n{self.title}: {self.seconds:.0f}s")
        for name, took, ok in sorted(self.results, key=lambda r: -r[1]):
            print(f"  {took:7.1f}s  {'ok    ' if ok else 'FAILED'}  {name}")


def main():
    threads = int(os.environ.get("TEST_THREADS", "2"))
    binaries = build()
    known = last_times()

    def job(binary, niceness=0):
        group = "local machines" if (binary[0], binary[1]) in LOCAL_MACHINES else None
        return label(binary), lambda t: run(binary, t, niceness), group

    real = [job(b) for b in binaries if (b[0], b[1]) in REAL_NODE and b[2] == "test"]
    other = [job(b, OTHER_NICENESS) for b in binaries
             if (b[0], b[1]) not in REAL_NODE or b[2] != "test"]
    other.append((DOC_TESTS, doc_tests, None))
    lanes = [
        Lanes("real-node lane", longest_first(real, known), 1, threads),
        Lanes(f"other lanes ({OTHER_AT_ONCE} at once)", longest_first(other, known),
              OTHER_AT_ONCE, threads),
    ]
    started = time.monotonic()
    for group in lanes:
        group.start(started)
    for group in lanes:
        group.join()
    print("\ntest binaries, longest first:")
    for group in lanes:
        group.table()
    results = [r for group in lanes for r in group.results]
    keep_times(known, results)
    failed = [name for name, _, ok in results if not ok]
    if failed:
        print(f"\n{len(failed)} test binaries failed: {', '.join(failed)}")
        sys.exit(101)


if __name__ == "__main__":
    main()
