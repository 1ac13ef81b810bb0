#!/usr/bin/env python3
"""The bounded-history soak (docs/PERFORMANCE.md, the "Bounded history" row).

Three `ferry run` daemons on loopback, each replicating with the other two, purging
their history every few seconds (retention and tombstone horizon of a minute or so).
`ferry put` processes make SAVES saves spread over the three stores: most update
one of a fixed pool of objects, some insert a new object, some delete one inserted
before, so the number of objects stays about the same while change sets and
tombstones keep coming. Every second the size of each store file (with its
write-ahead log) is sampled. At the end the script waits for the three stores to
hold the same vector and the same `ferry dump`, writes the samples as CSV and, when
matplotlib is there, a PNG plot of each file's size over time.

    scripts/soak_history.py --ferry .build/release/ferry --saves 1000000 --out docs/images/soak-history

Exits 1 if the replicas do not converge or a daemon dies.
"""
import argparse
import csv
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config", "models", "OrgChart.xcdatamodeld")
NAMES = ["a", "b", "c"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(ferry, *arguments, input_text=None):
    result = subprocess.run([ferry, *arguments], input=input_text, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ferry {' '.join(arguments)} failed: {result.stderr.strip()}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ferry", required=True, help="the ferry executable (a release build)")
    parser.add_argument("--saves", type=int, default=1_000_000)
    parser.add_argument("--pool", type=int, default=300, help="objects each store keeps updating")
    parser.add_argument("--rate", type=float, default=300, help="saves per second over the three stores (a sustained load)")
    parser.add_argument("--retention", type=float, default=10)
    parser.add_argument("--horizon", type=float, default=120)
    parser.add_argument("--purge-interval", type=float, default=2)
    parser.add_argument("--out", required=True, help="path without extension for the .csv and .png")
    options = parser.parse_args()
    ferry = os.path.abspath(options.ferry)
    work = tempfile.mkdtemp(prefix="ferry-soak-")
    ports = {name: free_port() for name in NAMES}
    tokens = {name: os.urandom(24).hex() for name in NAMES}
    daemons = {}
    try:
        for name in NAMES:
            folder = os.path.join(work, name)
            os.makedirs(folder)
            with open(os.path.join(folder, "tokens"), "w") as f:
                f.write(f"peer {tokens[name]}\nadmin {os.urandom(24).hex()}\n")
            peers = ""
            for other in NAMES:
                if other == name:
                    continue
                with open(os.path.join(folder, f"to-{other}.token"), "w") as f:
                    f.write(tokens[other])
                peers += f"  - name: {other}\n    url: http://127.0.0.1:{ports[other]}\n    token_file: to-{other}.token\n"
            with open(os.path.join(folder, "ferry.yaml"), "w") as f:
                f.write(f"""store:
  path: store.sqlite
  model: {MODEL}
server:
  host: 127.0.0.1
  port: {ports[name]}
  tokens_file: tokens
peers:
{peers}sync:
  pull_interval: 2
history:
  purge_interval: {options.purge_interval}
  retention: {options.retention}
  tombstone_horizon: {options.horizon}
""")
            run(ferry, "init", "--store", os.path.join(folder, "store.sqlite"), "--model", MODEL)
            log = open(os.path.join(folder, "daemon.log"), "w")
            daemons[name] = subprocess.Popen([ferry, "run", "--config", os.path.join(folder, "ferry.yaml")],
                                             stdout=subprocess.DEVNULL, stderr=log)
        time.sleep(1)

        def store(name):
            return os.path.join(work, name, "store.sqlite")

        def size(name, suffix=""):
            try:
                return os.path.getsize(store(name) + suffix)
            except FileNotFoundError:
                return 0

        samples = []
        start = time.time()
        done = threading.Event()

        def sample():
            while not done.is_set():
                samples.append([round(time.time() - start, 1)] + [size(name) for name in NAMES] + [size(name, "-wal") for name in NAMES])
                done.wait(1)

        sampler = threading.Thread(target=sample)
        sampler.start()

        # Each store's own pool of objects, made first; then the saves, in chunks of `chunk` saves
        # per `ferry put` (one save per JSON line), round-robin over the stores.
        pools = {}
        for name in NAMES:
            operations = [{"op": "insert", "entity": "Person", "ref": f"{name}{i}", "values": {"id": i, "name": f"{name} {i}"}}
                          for i in range(options.pool)]
            refs = json.loads(run(ferry, "put", "--store", store(name), "--model", MODEL, "-", input_text=json.dumps(operations)))
            pools[name] = [refs[f"{name}{i}"] for i in range(options.pool)]
        inserted = {name: [] for name in NAMES}
        made = 0
        chunk = max(1, min(2000, int(options.rate)))
        serial = 0
        saves_start = time.time()
        random.seed(7)
        print(f"saves start after {round(time.time() - start)} s", flush=True)
        while made < options.saves:
            for name in NAMES:
                if made >= options.saves:
                    break
                count = min(chunk, options.saves - made)
                lines = []
                refs_made = []
                for _ in range(count):
                    serial += 1
                    roll = random.random()
                    if roll < 0.1:
                        ref = f"n{serial}"
                        lines.append([{"op": "insert", "entity": "Person", "ref": ref, "values": {"id": serial, "name": f"new {serial}"}}])
                        refs_made.append(ref)
                    elif roll < 0.2 and inserted[name]:
                        lines.append([{"op": "delete", "object": inserted[name].pop(random.randrange(len(inserted[name])))}])
                    else:
                        lines.append([{"op": "update", "object": random.choice(pools[name]),
                                       "values": {"name": f"{name} {serial}"}}])
                refs = json.loads(run(ferry, "put", "--store", store(name), "--model", MODEL, "-",
                                      input_text="\n".join(json.dumps(line) for line in lines)))
                inserted[name].extend(refs[ref] for ref in refs_made)
                made += count
                # At the sustained rate: wait for the time these saves are due.
                ahead = saves_start + made / options.rate - time.time()
                if ahead > 0:
                    time.sleep(ahead)
                for other, process in daemons.items():
                    if process.poll() is not None:
                        raise RuntimeError(f"daemon {other} ended with {process.returncode}")
            if made % (chunk * 30) >= chunk * 3:
                continue
            print(f"{made} saves, {round(time.time() - start)} s, files: "
                  + ", ".join(f"{name} {size(name) / 1e6:.1f} MB" for name in NAMES), flush=True)

        # Convergence: the same vector everywhere, then the same dump.
        deadline = time.time() + 600
        converged = False
        while time.time() < deadline:
            vectors = [json.loads(run(ferry, "state", "--store", store(name)))["vector"] for name in NAMES]
            if vectors[0] == vectors[1] == vectors[2]:
                dumps = [run(ferry, "dump", "--store", store(name), "--model", MODEL) for name in NAMES]
                if dumps[0] == dumps[1] == dumps[2]:
                    converged = True
                    break
            time.sleep(2)
        # A few more purges, so the end of the plot shows the history after the last saves.
        time.sleep(max(options.retention, options.purge_interval) + 3 * options.purge_interval)
        done.set()
        sampler.join()
        statuses = [json.loads(run(ferry, "status", "--config", os.path.join(work, name, "ferry.yaml"))) for name in NAMES]
        objects = len(run(ferry, "dump", "--store", store("a"), "--model", MODEL).splitlines())

        os.makedirs(os.path.dirname(os.path.abspath(options.out)), exist_ok=True)
        with open(options.out + ".csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["seconds"] + [f"{name}_file_bytes" for name in NAMES] + [f"{name}_wal_bytes" for name in NAMES])
            writer.writerows(samples)
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plot
            figure, axes = plot.subplots(figsize=(9, 4.5))
            for index, name in enumerate(NAMES):
                line, = axes.plot([s[0] for s in samples], [s[index + 1] / 1e6 for s in samples], label=f"store {name}: file")
                axes.plot([s[0] for s in samples], [s[index + 1 + len(NAMES)] / 1e6 for s in samples], linestyle="--",
                          color=line.get_color(), label=f"store {name}: write-ahead log")
            axes.set_xlabel("seconds")
            axes.set_ylabel("MB")
            axes.set_title(f"{options.saves:,} saves over three daemons, purge every {options.purge_interval:g} s, "
                           f"retention {options.retention:g} s, horizon {options.horizon:g} s", fontsize=9)
            axes.set_ylim(bottom=0)
            axes.legend()
            figure.tight_layout()
            figure.savefig(options.out + ".png", dpi=100)
        except ImportError:
            print("matplotlib is not installed: wrote the CSV only", file=sys.stderr)
        files = [s[1:1 + len(NAMES)] for s in samples]
        print(json.dumps({
            "saves": options.saves, "seconds": round(time.time() - start), "converged": converged, "objects": objects,
            "peak_file_bytes": max(max(f) for f in files), "last_file_bytes": files[-1],
            "peak_wal_bytes": max(max(s[1 + len(NAMES):]) for s in samples),
            "history": {name: status.get("history") for name, status in zip(NAMES, statuses)},
        }, indent=1))
        return 0 if converged else 1
    finally:
        for process in daemons.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in daemons.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        if os.environ.get("FERRY_SOAK_KEEP"):
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
