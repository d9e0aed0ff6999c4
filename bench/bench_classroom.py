"""A class on one shared app: N students at once on a real `streamlit run app.py`, on 127.0.0.1 only.

    timeout 300 python -m bench.bench_classroom --users 5
    timeout 300 python -m bench.bench_classroom --users 30

Not part of the test suite. It starts its own server on --port (default 8631) with the shipped model
and an empty runs folder, and drives it through Streamlit's own websocket protocol (the BackMsg /
ForwardMsg protobufs a browser sends and reads), one light asyncio client per student, so the
machine's cores go to the server rather than to 30 browsers. Every student, for --rounds rounds:
opens Fill-mask and types a sentence with one [MASK], opens Next sentence and types A and B, opens
Attention and types a sentence. Every tenth student types the most work one request may ask for
instead of the one-mask sentence: 32 [MASK]s (inference.MAX_MASKS), one extra forward pass each;
the light answers are timed apart from those, so a slow request that stalls the others shows there.

An answer's time is from sending the changed widget to the server's script_finished, i.e. until the
page has been recomputed and every element sent. An error is an exception or an error box in the
page, a run that did not finish, or a dropped connection. The server's memory (RSS) is sampled
every 0.25 s: once idle, once one student has loaded the model, and its peak under load.

Bounded: at most 40 users, --rounds at most 5, --request-timeout per answer and --max-seconds for
the whole run; the server is stopped on the way out. Prints a table and writes
bench/results/classroom/users-N.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"  # never anything else: this drives a real server
MAX_USERS = 40
MAX_ROUNDS = 5
MAX_MASKS = 32  # bertlab.inference.MAX_MASKS, not imported: importing it would load torch here too

FILL_LABEL = "Sentence with one or more [MASK]"
SUBJECTS = ["The cat", "My brother", "The old man", "A young girl", "The teacher", "Our neighbour", "The dog"]
PLACES = ["the mat", "the park", "the river", "the station", "the garden", "the library", "the market"]


def one_mask(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} walked to {rng.choice(PLACES)} and bought a [MASK]."


def many_masks(rng: random.Random) -> str:
    words = " ".join("[MASK]" if i % 2 else rng.choice(["the", "a", "and", "of", "to"]) for i in range(2 * MAX_MASKS))
    return f"{rng.choice(SUBJECTS)} said {words}."


@dataclass
class RunResult:
    """One script run of one page, as the client saw it."""

    seconds: float
    finished: bool
    page: str | None = None  # the url path of the page the server ran
    errors: list[str] = field(default_factory=list)
    widgets: dict[str, int] = field(default_factory=dict)  # label -> index into `ids`
    ids: list[str] = field(default_factory=list)


class Student:
    """One browser tab, spoken to in Streamlit's protocol: rerun a page with widget values, read the answer."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.ws = None
        self.pages: dict[str, str] = {}  # url path (Fill_mask) -> page_script_hash
        self.cache: dict[str, ForwardMsg] = {}  # messages the server may send again by reference

    async def __aenter__(self) -> Student:
        ws_url = self.url.replace("http://", "ws://") + "/_stcore/stream"
        self.ws = await websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=60)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()

    async def run(self, page: str, values: dict[str, str] | None = None, known: RunResult | None = None) -> RunResult:
        """Run `page` (its url path); `values`: text widgets by label, their ids read from `known`."""
        msg = BackMsg()
        state = msg.rerun_script
        if page in self.pages:
            state.page_script_hash = self.pages[page]
        else:
            state.page_name = page
        for label, value in (values or {}).items():
            w = WidgetState(id=known.ids[known.widgets[label]], string_value=value)
            state.widget_states.widgets.append(w)
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        result = RunResult(0.0, finished=False)
        try:
            await asyncio.wait_for(self._read_until_finished(result), self.timeout)
        except TimeoutError:
            result.errors.append(f"{page}: no answer within {self.timeout:.0f} s")
        result.seconds = time.perf_counter() - start
        if result.finished and result.page != page:
            result.errors.append(f"asked for page {page!r}, the server ran {result.page!r}")
        return result

    async def _read_until_finished(self, result: RunResult) -> None:
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await self.ws.recv())
            if fwd.WhichOneof("type") == "ref_hash":
                fwd = self.cache.get(fwd.ref_hash, fwd)
            elif fwd.metadata.cacheable and fwd.hash:
                self.cache[fwd.hash] = fwd
            kind = fwd.WhichOneof("type")
            if kind == "navigation":  # the page list and the page this run is on
                for p in fwd.navigation.app_pages:
                    self.pages[p.url_pathname] = p.page_script_hash
                result.page = next(
                    (
                        p.url_pathname
                        for p in fwd.navigation.app_pages
                        if p.page_script_hash == fwd.navigation.page_script_hash
                    ),
                    None,
                )
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                self._read_element(fwd.delta.new_element, result)
            elif kind == "script_finished":
                status = ForwardMsg.ScriptFinishedStatus.Name(fwd.script_finished)
                if status == "FINISHED_SUCCESSFULLY":
                    result.finished = True
                    return
                if status != "FINISHED_EARLY_FOR_RERUN":
                    result.errors.append(f"script ended {status}")
                    return

    @staticmethod
    def _read_element(element, result: RunResult) -> None:
        kind = element.WhichOneof("type")
        if kind is None:
            return
        proto = getattr(element, kind)
        if kind == "exception":
            result.errors.append(f"exception: {proto.type}: {proto.message[:200]}")
        elif kind == "alert" and proto.format == Alert.ERROR:
            result.errors.append(f"error box: {proto.body[:200]}")
        elif "id" in proto.DESCRIPTOR.fields_by_name and "label" in proto.DESCRIPTOR.fields_by_name:
            result.widgets[proto.label] = len(result.ids)
            result.ids.append(proto.id)


@dataclass
class Timings:
    """Seconds per kind of request, and what went wrong."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, kind: str, result: RunResult) -> None:
        self.seconds.setdefault(kind, []).append(result.seconds)
        self.errors += [f"{kind}: {e}" for e in result.errors]
        if not result.finished and not result.errors:
            self.errors.append(f"{kind}: did not finish")


async def student_session(index: int, url: str, rounds: int, heavy: bool, timeout: float, timings: Timings) -> None:
    rng = random.Random(index)
    await asyncio.sleep(rng.uniform(0, 2.0))  # a class clicks within a couple of seconds, not in lockstep
    try:
        async with Student(url, timeout) as s:
            for _ in range(rounds):
                page = await s.run("Fill_mask")
                timings.add("open Fill-mask", page)
                if FILL_LABEL in page.widgets:
                    text = many_masks(rng) if heavy else one_mask(rng)
                    timings.add(
                        f"fill-mask, {MAX_MASKS} masks" if heavy else "fill-mask",
                        await s.run("Fill_mask", {FILL_LABEL: text}, page),
                    )
                page = await s.run("Next_sentence")
                timings.add("open Next sentence", page)
                if {"Sentence A", "Sentence B"} <= page.widgets.keys():
                    a = f"{rng.choice(SUBJECTS)} went to {rng.choice(PLACES)}."
                    b = f"There {rng.choice(['it', 'he', 'she'])} met an old friend."
                    timings.add("NSP", await s.run("Next_sentence", {"Sentence A": a, "Sentence B": b}, page))
                page = await s.run("Attention")
                timings.add("open Attention", page)
                if "Sentence A" in page.widgets:
                    a = f"{rng.choice(SUBJECTS)} sat on {rng.choice(PLACES)} because it was warm."
                    timings.add("attention", await s.run("Attention", {"Sentence A": a}, page))
    except (OSError, websockets.WebSocketException) as exc:
        timings.errors.append(f"student {index}: connection lost: {type(exc).__name__}: {exc}")


class MemorySampler:
    """The server's resident memory, sampled every 0.25 s in a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def now(self) -> int:
        return self.process.memory_info().rss

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.now())
            except psutil.Error:
                return
            self._stop.wait(0.25)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def start_server(port: int, runs: Path, log_path: Path) -> subprocess.Popen:
    with socket.socket() as s:
        if s.connect_ex((HOST, port)) == 0:
            raise SystemExit(f"port {port} on {HOST} is taken; pick another with --port")
    env = dict(os.environ, BERTLAB_RUNS=str(runs), HF_HUB_OFFLINE="1")
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    command += ["--server.port", str(port), "--server.address", HOST, "--browser.gatherUsageStats", "false"]
    command += ["--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"streamlit exited with {proc.returncode}: {log_path.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"streamlit did not answer on port {port} within 120 s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def drive(args: argparse.Namespace, url: str, memory: MemorySampler) -> tuple[Timings, dict[str, int], float]:
    # one student first, alone: the model loads once (st.cache_resource) before the class arrives
    warm = Timings()
    await student_session(-1, url, 1, False, args.request_timeout, warm)
    if warm.errors:
        raise SystemExit("the warm-up student failed: " + "; ".join(warm.errors[:5]))
    rss = {"one_student": memory.now()}
    timings = Timings()
    start = time.perf_counter()
    tasks = [
        student_session(i, url, args.rounds, i % 10 == 9, args.request_timeout, timings) for i in range(args.users)
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), args.max_seconds)
    except TimeoutError:
        timings.errors.append(f"the class did not finish within --max-seconds {args.max_seconds:.0f}")
    return timings, rss, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=5, help=f"students at once (at most {MAX_USERS})")
    parser.add_argument(
        "--rounds", type=int, default=2, help=f"times each student goes through the three pages (at most {MAX_ROUNDS})"
    )
    parser.add_argument("--port", type=int, default=8631)
    parser.add_argument("--request-timeout", type=float, default=120.0, help="seconds one answer may take")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="seconds the whole class may take")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "classroom")
    args = parser.parse_args(argv)
    if not 1 <= args.users <= MAX_USERS or not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--users 1..{MAX_USERS} and --rounds 1..{MAX_ROUNDS}")

    with tempfile.TemporaryDirectory(prefix="bench-classroom-") as tmp:
        runs = Path(tmp) / "runs"
        runs.mkdir()
        log_path = Path(tmp) / "streamlit.log"
        proc = start_server(args.port, runs, log_path)
        try:
            with MemorySampler(proc.pid) as memory:
                idle = memory.now()
                timings, rss, wall = asyncio.run(drive(args, f"http://{HOST}:{args.port}", memory))
                rss |= {"idle": idle, "end": memory.now()}
            rss["peak"] = memory.peak
            server_log = log_path.read_text(errors="replace")
        finally:
            stop_server(proc)

    load = os.getloadavg()
    print(
        f"{args.users} students x {args.rounds} rounds in {wall:.0f} s; load average {load[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"{'request':<22}{'n':>5}{'p50 s':>8}{'p95 s':>8}{'max s':>8}")
    rows = {}
    for kind, values in timings.seconds.items():
        rows[kind] = {
            "n": len(values),
            "p50_s": round(statistics.median(values), 3),
            "p95_s": round(percentile(values, 0.95), 3),
            "max_s": round(max(values), 3),
        }
        r = rows[kind]
        print(f"{kind:<22}{r['n']:>5}{r['p50_s']:>8.2f}{r['p95_s']:>8.2f}{r['max_s']:>8.2f}")
    mb = {k: round(v / 2**20) for k, v in rss.items()}
    print(
        f"server RSS: {mb['idle']} MB idle, {mb['one_student']} MB with the model loaded, "
        f"{mb['peak']} MB peak, {mb['end']} MB at the end"
    )
    tracebacks = server_log.count("Traceback")
    print(f"errors: {len(timings.errors)}; tracebacks in the server log: {tracebacks}")
    for e in timings.errors[:20]:
        print("  " + e)
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "users": args.users,
        "rounds": args.rounds,
        "wall_s": round(wall, 1),
        "load_average_1m": round(load[0], 2),
        "cpu_count": os.cpu_count(),
        "requests": rows,
        "rss_mb": mb,
        "errors": timings.errors,
        "server_tracebacks": tracebacks,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (args.out / f"users-{args.users}.json").write_text(json.dumps(record, indent=2) + "\n")
    return 1 if timings.errors or tracebacks else 0


if __name__ == "__main__":
    sys.exit(main())
