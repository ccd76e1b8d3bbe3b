"""The slow-convolution advice (analysis/advice_conv.py, issue 21's "seed 003" case): a
convolution that falls to ATen's own kernels on a device is named, with the setting to
check; counted once per outermost call; nothing said for cuDNN convolutions or CPU-only
traces. Traces built in Kineto's format (test_idle's builder)."""
from __future__ import annotations

from test_idle import HOST, _Builder

from tb_profiler.analysis.overview import overview
from tb_profiler.analysis.recommendations import recommendations


def _conv_trace(tmp_path, inner: list[str], device: bool = True):
    b = _Builder()
    for k in range(2):
        t = 1000 * k
        b.step(k, t, 1000)
        b._x("cpu_op", "aten::conv2d", HOST, HOST, t + 10, 500)
        depth = 0
        for name in inner:          # each nested in the one before
            depth += 10
            b._x("cpu_op", name, HOST, HOST, t + 10 + depth, 500 - 2 * depth)
        if device:
            b.work(t + 100, [(t + 120, 300)])
    return b.load(tmp_path)


def test_slow_fallback_on_a_device_is_named_once_per_call(tmp_path):
    t = _conv_trace(tmp_path, ["aten::thnn_conv2d", "aten::_slow_conv2d_forward"])
    (r,) = [r for r in recommendations(t) if r["id"] == "slow_conv"]
    assert r["severity"] == "warning" and "cuDNN" in r["title"]
    assert r["evidence"]["calls"] == 2          # two steps, one outermost slow call each
    assert r["evidence"]["names"] == {"aten::_slow_conv2d_forward": 2, "aten::thnn_conv2d": 2}
    assert r["evidence"]["host_ns_per_step"] == 480_000   # thnn_conv2d's 480 us, its child not again
    assert "torch.backends.cudnn.enabled" in r["text"]
    assert r["link"] == {"view": "Operator", "q": "slow_conv"}
    assert any(x["id"] == "slow_conv" for x in overview(t)["recommendations"])


def test_cudnn_and_cpu_only_say_nothing(tmp_path):
    assert not [r for r in recommendations(_conv_trace(tmp_path / "a", ["aten::cudnn_convolution"]))
                if r["id"] == "slow_conv"]
    assert not [r for r in recommendations(_conv_trace(tmp_path / "b", ["aten::_slow_conv2d_forward"], device=False))
                if r["id"] == "slow_conv"]
