"""Writer benchmark: our handler vs torch's own, and the gzip level choice.

Default: profile a few training steps of a sample model once, then export that
same profile repeatedly through ``tb_profiler.tensorboard_trace_handler`` and
``torch.profiler.tensorboard_trace_handler``, plain and gzip, interleaved, and
print the median time and the file size of each with ratios.

``--levels``: compress the exported JSON in memory with zlib levels 1-9 and
python-isal igzip levels 0-3 (if installed) and print time and size: the
measurement behind ``ISAL_LEVEL`` / ``ZLIB_LEVEL`` in tb_profiler/writer.py.

    python benchmarks/bench_writer.py [--model cnn|transformer] [--repeat 5] [--levels] [--no-isal] [--json]
    python benchmarks/bench_writer.py --levels --trace some.pt.trace.json
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "samples")]


def _profile(model_name: str, cycles: int, on_ready) -> None:
    """Train a sample model with the samples' profiler options for ``cycles`` cycles.

    Kineto exports a cycle only once ("Trace is already saved"), so each case
    gets its own cycles of the same steps rather than re-exporting one profile.
    """
    import torch
    from torch import nn

    import _common

    _common.setup(seed=0)
    if model_name == "cnn":
        import cnn

        model, x = cnn.TinyResNet(), torch.randn(cnn.BATCH, 3, 32, 32)
        y = torch.randint(0, 10, (cnn.BATCH,))
    else:
        import transformer as tr

        model = tr.TinyEncoderLM()
        data = torch.randint(0, tr.VOCAB, (tr.BATCH, tr.SEQ + 1))
        x, y = data[:, :-1], data[:, 1:].reshape(-1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    sched = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=cycles)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                on_trace_ready=on_ready, record_shapes=True, profile_memory=True,
                                with_stack=True) as prof:
        for _ in range(3 * cycles):
            out = model(x)
            loss = loss_fn(out.reshape(-1, out.shape[-1]), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()


def bench_handlers(model_name: str, repeat: int) -> tuple[list[dict], bytes]:
    import torch

    from tb_profiler import tensorboard_trace_handler as ours

    with tempfile.TemporaryDirectory() as d:
        cases = []
        for gz in (False, True):
            for who, factory in (("tb_profiler", ours), ("torch", torch.profiler.tensorboard_trace_handler)):
                folder = os.path.join(d, f"{who}-{gz}")
                cases.append((f"{who} {'gzip' if gz else 'plain'}", who, gz, folder, factory(folder, "w", gz)))
        # Interleaved, reversed every other round, so drift hits every case alike.
        order = [c for i in range(repeat) for c in (cases if i % 2 == 0 else cases[::-1])]
        times: dict[str, list[float]] = {c[0]: [] for c in cases}
        sizes: dict[str, list[int]] = {c[0]: [] for c in cases}
        raw: list[bytes] = []

        def on_ready(prof) -> None:
            label, who, gz, folder, handler = order.pop(0)
            t0 = time.perf_counter()
            handler(prof)
            times[label].append(time.perf_counter() - t0)
            for f in os.listdir(folder):
                path = os.path.join(folder, f)
                sizes[label].append(os.path.getsize(path))
                if not raw and not gz and who == "torch":
                    with open(path, "rb") as fh:
                        raw.append(fh.read())
                os.remove(path)

        _profile(model_name, len(order), on_ready)
    results = [{"case": label, "writer": who, "gzip": gz, "ms": 1e3 * statistics.median(times[label]),
                "bytes": int(statistics.median(sizes[label]))} for label, who, gz, _, _ in cases]
    return results, raw[0]


def _median_ms(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def bench_levels(data: bytes, repeat: int) -> list[dict]:
    rows = []
    try:
        from isal import igzip
    except ImportError:
        igzip = None
    codecs = [("isal igzip", lvl, lambda b, lvl=lvl: igzip.compress(b, lvl)) for lvl in range(4)] if igzip else []
    codecs += [("zlib", lvl, lambda b, lvl=lvl: gzip.compress(b, lvl, mtime=0)) for lvl in range(1, 10)]
    for codec, level, fn in codecs:
        out = fn(data)
        assert zlib.decompress(out, 31) == data
        rows.append({"codec": codec, "level": level, "ms": _median_ms(lambda: fn(data), repeat),
                     "bytes": len(out), "ratio": len(data) / len(out)})
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["cnn", "transformer"], default="cnn")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--levels", action="store_true", help="also measure gzip levels")
    ap.add_argument("--trace", help="measure levels on this plain JSON trace instead (skips the handler run)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ap.add_argument("--no-isal", action="store_true", help="hide python-isal: measure the zlib fallback")
    args = ap.parse_args(argv)
    if args.no_isal:
        sys.modules["isal"] = None  # makes `from isal import igzip` raise ImportError

    from tb_profiler import writer

    try:
        from isal import igzip  # noqa: F401

        report: dict = {"our_gzip": f"isal igzip level {writer.ISAL_LEVEL}"}
    except ImportError:
        report = {"our_gzip": f"zlib level {writer.ZLIB_LEVEL}"}
    if args.trace:
        with open(args.trace, "rb") as f:
            data = f.read()
    else:
        report["handlers"], data = bench_handlers(args.model, args.repeat)
    report["trace_bytes"] = len(data)
    if args.levels or args.trace:
        report["levels"] = bench_levels(data, args.repeat)

    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"trace: {len(data) / 1e6:.2f} MB of JSON ({args.trace or args.model}), median of {args.repeat}; "
          f"our gzip: {report['our_gzip']}, torch's: zlib level 9")
    if "handlers" in report:
        by = {r["case"]: r for r in report["handlers"]}
        print(f"\n{'case':<20}{'ms':>9}{'KB':>9}{'time vs torch':>15}{'size vs torch':>15}")
        for r in report["handlers"]:
            t = by[f"torch {'gzip' if r['gzip'] else 'plain'}"]
            print(f"{r['case']:<20}{r['ms']:>9.1f}{r['bytes'] / 1e3:>9.0f}"
                  f"{r['ms'] / t['ms']:>14.2f}x{r['bytes'] / t['bytes']:>14.2f}x")
    if "levels" in report:
        print(f"\n{'codec':<12}{'level':>6}{'ms':>9}{'KB':>9}{'ratio':>8}")
        for r in report["levels"]:
            print(f"{r['codec']:<12}{r['level']:>6}{r['ms']:>9.1f}{r['bytes'] / 1e3:>9.0f}{r['ratio']:>7.1f}x")


if __name__ == "__main__":
    main()
