"""Every real trace in tests/data/traces loads, with concrete facts checked per file.

The facts were computed independently (json.loads of each file with Decimal timestamps,
in a scratch script) and hardcoded here: phase and category counts, ProfilerStep#N
numbers, device names, process/thread names, and exact ns times of specific events.
"""
from __future__ import annotations

import numpy as np
import pytest
from datafiles import TRACES, real_traces

from tb_profiler.trace import KIND_NAMES, Kind, load

# Old Kineto spellings -> modern category (independent of tb_profiler's own table).
MODERN = {"Operator": "cpu_op", "Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset",
          "Runtime": "cuda_runtime"}

FACTS = {
    'kineto-resnet50-v100/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz': dict(
        phases={'X': 44666, 'i': 12840, 'f': 9096, 's': 9096, 'M': 20},
        cats={'Operator': 23646, 'Memcpy': 12, 'Runtime': 11923, 'Kernel': 8772, 'Memset': 312, 'Trace': 1},
        steps=[5, 6, 7, 8, 9, 10],
        first_step=(5, 1623142623460172000, 1623142623636250000),
        devices=['Tesla V100-DGXS-32GB'] * 4,
        kernel_devices=[0],
        memory=12838,
        flows={'async': 18192},
        first=('aten::empty', 1623142623460111000, 25000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1623142623623994000, 1017000, [18, 25, 32], 42063),
        process_names={25738: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(25738, 25772): 'thread 25772 (python)', (25738, 25738): 'thread 25738 (python)'},
        span=(1623142623460016000, 1623142624633484000),
        top={'schemaVersion': 1},
    ),
    'kineto-resnet50-v100/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz': dict(
        phases={'X': 44666, 'i': 12840, 'f': 9096, 's': 9096, 'M': 20},
        cats={'Operator': 23646, 'Runtime': 11923, 'Kernel': 8772, 'Memset': 312, 'Memcpy': 12, 'Trace': 1},
        steps=[16, 17, 18, 19, 20, 21],
        first_step=(16, 1623143093496582000, 1623143093655945000),
        devices=['Tesla V100-DGXS-32GB'] * 4,
        kernel_devices=[0],
        memory=12838,
        flows={'async': 18192},
        first=('aten::empty', 1623143093496523000, 21000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1623143094401957000, 1016000, [18, 25, 32], 225575),
        process_names={25738: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(25738, 25772): 'thread 25772 (python)', (25738, 25738): 'thread 25738 (python)'},
        span=(1623143093496439000, 1623143094534181000),
        top={'schemaVersion': 1},
    ),
    'kineto-resnet50-v100/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz': dict(
        phases={'X': 41906, 'i': 10982, 'f': 9258, 's': 9258, 'M': 20},
        cats={'Operator': 20562, 'Memcpy': 12, 'Runtime': 12085, 'Kernel': 8868, 'Memset': 378, 'Trace': 1},
        steps=[5, 6, 7, 8, 9, 10],
        first_step=(5, 1623212388426996000, 1623212388608561000),
        devices=['Tesla V100-DGXS-32GB'] * 4,
        kernel_devices=[0],
        memory=10980,
        flows={'async': 18516},
        first=('aten::empty', 1623212388426902000, 35000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1623212388838485000, 1023000, [18, 25, 32], 65139),
        process_names={5555: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(5555, 5786): 'thread 5786 (python)', (5555, 5555): 'thread 5555 (python)'},
        span=(1623212388426602000, 1623212389365930000),
        top={'schemaVersion': 1},
    ),
    'kineto-resnet50-v100/resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz': dict(
        phases={'X': 41906, 'i': 10982, 'f': 9258, 's': 9258, 'M': 20},
        cats={'Operator': 20562, 'Memcpy': 12, 'Runtime': 12085, 'Kernel': 8868, 'Memset': 378, 'Trace': 1},
        steps=[16, 17, 18, 19, 20, 21],
        first_step=(16, 1623212760127888000, 1623212760287964000),
        devices=['Tesla V100-DGXS-32GB'] * 4,
        kernel_devices=[0],
        memory=10980,
        flows={'async': 18516},
        first=('aten::empty', 1623212760127829000, 21000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1623212760273863000, 1029000, [18, 25, 32], 168575),
        process_names={5555: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(5555, 5786): 'thread 5786 (python)', (5555, 5555): 'thread 5555 (python)'},
        span=(1623212760127679000, 1623212761074882000),
        top={'schemaVersion': 1},
    ),
    'legacy-formats/2021-01-13_eebfef30/resnet50_num_workers_0/worker0.pt.trace.json.gz': dict(
        phases={'X': 63166, 'f': 9927, 's': 9162, 'M': 20, 'i': 1},
        cats={'Operator': 42438, 'Memset': 377, 'Kernel': 9538, 'Memcpy': 12, 'Runtime': 10800, 'Trace': 1},
        steps=[5, 6, 7, 8, 9, 10],
        first_step=(5, 1606910596297094000, 1606910596508300000),
        devices=[],
        kernel_devices=[0],
        memory=0,
        flows={'async': 19089},
        first=('aten::empty', 1606910596297023000, 13000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1606910596304314000, 1082000, [18, 25, 32], 61457),
        process_names={67844: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(67844, 2662278912): 'thread 0 (python)', (67844, 4093687616): 'thread 1 (python)'},
        span=(1606910596288053000, 1606910597580318000),
        top={},
    ),
    'legacy-formats/2021-01-13_eebfef30/resnet50_num_workers_4/worker0.pt.trace.json.gz': dict(
        phases={'X': 57975, 'f': 9848, 's': 9054, 'M': 20, 'i': 1},
        cats={'Operator': 37434, 'Kernel': 9484, 'Memset': 352, 'Memcpy': 12, 'Runtime': 10692, 'Trace': 1},
        steps=[5, 6, 7, 8, 9, 10],
        first_step=(5, 1606911006433311000, 1606911006648529000),
        devices=[],
        kernel_devices=[0],
        memory=0,
        flows={'async': 18902},
        first=('aten::empty', 1606911006433250000, 10000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1606911006455524000, 1184000, [18, 25, 32], 61451),
        process_names={68753: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(68753, 1902835456): 'thread 0 (python)', (68753, 3340707648): 'thread 1 (python)'},
        span=(1606911006433120000, 1606911007519758000),
        top={},
    ),
    'legacy-formats/2021-01-24_02522842/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz': dict(
        phases={'X': 59423, 'f': 10133, 's': 10133, 'M': 20, 'i': 2},
        cats={'Operator': 33535, 'Runtime': 15754, 'Memcpy': 338, 'Memset': 466, 'Kernel': 9329, 'Trace': 1},
        steps=[],
        first_step=None,
        devices=[],
        kernel_devices=[0],
        memory=0,
        flows={'async': 20266},
        first=('aten::empty', 1610366387140599000, 14000),
        longest_kernel=('void cudnn::detail::dgrad_alg1_engine<float, 128, 6, 8, 3, 3',
                        1610366391475093000, 3219000, [1568, 1, 1], 14598),
        process_names={118664: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(118664, 4290336512): 'thread 0 (python)', (118664, 1441273664): 'thread 1 (python)'},
        span=(1610366387140419000, 1610366392473637000),
        top={'schemaVersion': 1},
    ),
    'legacy-formats/2021-01-24_02522842/resnet50_autograd_api_num_workers_4/worker0.pt.trace.json.gz': dict(
        phases={'X': 54377, 'f': 10103, 's': 10103, 'M': 20, 'i': 2},
        cats={'Operator': 28549, 'Runtime': 15724, 'Memcpy': 338, 'Memset': 466, 'Kernel': 9299, 'Trace': 1},
        steps=[],
        first_step=None,
        devices=[],
        kernel_devices=[0],
        memory=0,
        flows={'async': 20206},
        first=('aten::empty', 1610366575727954000, 13000),
        longest_kernel=('void cudnn::detail::dgrad_alg1_engine<float, 128, 6, 8, 3, 3',
                        1610366580862405000, 3245000, [1568, 1, 1], 14598),
        process_names={119376: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(119376, 763746048): 'thread 0 (python)', (119376, 2248185664): 'thread 1 (python)'},
        span=(1610366575727755000, 1610366581666386000),
        top={'schemaVersion': 1},
    ),
    'legacy-formats/2021-01-24_02522842/resnet50_profiler_api_num_workers_0/worker0.pt.trace.json.gz': dict(
        phases={'X': 54320, 'f': 10015, 's': 9282, 'M': 20, 'i': 2},
        cats={'Operator': 33384, 'Memset': 439, 'Kernel': 9564, 'Memcpy': 12, 'Runtime': 10920, 'Trace': 1},
        steps=[5, 6, 7, 8, 9, 10],
        first_step=(5, 1610366662254410000, 1610366662413584000),
        devices=[],
        kernel_devices=[0],
        memory=0,
        flows={'async': 19297},
        first=('aten::empty', 1610366662254362000, 4000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1610366662266201000, 1084000, [18, 25, 32], 32214),
        process_names={119771: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(119771, 509646592): 'thread 0 (python)', (119771, 1890023232): 'thread 1 (python)'},
        span=(1610366662254282000, 1610366663225855000),
        top={'schemaVersion': 1},
    ),
    'legacy-formats/2021-01-24_02522842/resnet50_profiler_api_num_workers_4/worker0.pt.trace.json.gz': dict(
        phases={'X': 48892, 'f': 9819, 's': 9048, 'M': 20, 'i': 2},
        cats={'Operator': 28386, 'Kernel': 9456, 'Memset': 351, 'Memcpy': 12, 'Runtime': 10686, 'Trace': 1},
        steps=[5, 6, 7, 8, 9, 10],
        first_step=(5, 1610366728298138000, 1610366728449866000),
        devices=[],
        kernel_devices=[0],
        memory=0,
        flows={'async': 18867},
        first=('aten::empty', 1610366728298088000, 5000),
        longest_kernel=('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, ',
                        1610366728317157000, 1092000, [18, 25, 32], 32164),
        process_names={120018: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(120018, 1616066304): 'thread 0 (python)', (120018, 3004819264): 'thread 1 (python)'},
        span=(1610366728297910000, 1610366729106361000),
        top={'schemaVersion': 1},
    ),
    'tensorlist_ops.pt.trace.json.gz': dict(
        phases={'M': 8, 'X': 24, 'i': 2},
        cats={'cpu_op': 23, 'Trace': 1},
        steps=[],
        first_step=None,
        devices=[],
        kernel_devices=[],
        memory=0,
        flows={},
        first=('aten::cat', 4432774345250361, 65741),
        longest_kernel=None,
        process_names={4656: 'python'},
        thread_names={(4656, 4656): 'thread 4656 (python)'},
        span=(4432774344865960, 4432774361220035),
        top={'schemaVersion': 1, 'trace_id': 'AB251DC8E52B485BBF0E1ED86975E20F', 'displayTimeUnit': 'ms',
             'baseTimeNanoseconds': 1790857026000000000, 'traceName': '/tmp/tl.json'},
    ),
    'tiny-h100/after_fix_trace.json.gz': dict(
        phases={'M': 60, 'X': 9, 's': 1, 'f': 3, 'i': 2},
        cats={'cpu_op': 4, 'cuda_runtime': 1, 'kernel': 1, 'cuda_sync': 2, 'Trace': 1},
        steps=[],
        first_step=None,
        devices=['NVIDIA H100'] * 8,
        kernel_devices=[0],
        memory=0,
        flows={'ac2g': 4},
        first=('op1', 88511388202765, 40),
        longest_kernel=('Kernel',
                        88511388202785, 20, [1, 1, 1], 1),
        process_names={514683: 'CuptiActivityProfilerTest', **dict.fromkeys(range(16), 'CuptiActivityProfilerTest')},
        thread_names={(0, 1): 'stream 1 ', (514683, 514683): 'thread 514683 (CuptiActivityPr)'},
        span=(88511388202755, 88511388203055),
        top={'schemaVersion': 1, 'displayTimeUnit': 'ms', 'baseTimeNanoseconds': 1775078550000000000,
             'traceName': '/tmp/libkineto_out_of_order_bRBgXf.json'},
    ),
    'tiny-h100/before_fix_trace.json.gz': dict(
        phases={'M': 60, 'X': 9, 's': 1, 'f': 3, 'i': 2},
        cats={'cpu_op': 4, 'cuda_runtime': 1, 'kernel': 1, 'cuda_sync': 2, 'Trace': 1},
        steps=[],
        first_step=None,
        devices=['NVIDIA H100'] * 8,
        kernel_devices=[0],
        memory=0,
        flows={'ac2g': 4},
        first=('op1', 88437691101729, 40),
        longest_kernel=('Kernel',
                        88437691101749, 20, [1, 1, 1], 1),
        process_names={392793: 'CuptiActivityProfilerTest', **dict.fromkeys(range(16), 'CuptiActivityProfilerTest')},
        thread_names={(0, 1): 'stream 1 ', (392793, 392793): 'thread 392793 (CuptiActivityPr)'},
        span=(88437691101719, 88437691102019),
        top={'schemaVersion': 1, 'displayTimeUnit': 'ms', 'baseTimeNanoseconds': 1775078550000000000,
             'traceName': '/tmp/libkineto_out_of_order_kwjg69.json'},
    ),
    'tiny-h100/v100x4_gpu_metrics_input.json.gz': dict(
        phases={'X': 254, 'f': 32, 's': 32, 'M': 20, 'i': 2},
        cats={'Operator': 179, 'Memcpy': 2, 'Runtime': 42, 'Kernel': 30, 'Trace': 1},
        steps=[2],
        first_step=(2, 1621401187223358000, 1621401187236768000),
        devices=['Tesla V100-DGXS-32GB'] * 4,
        kernel_devices=[0],
        memory=0,
        flows={'async': 64},
        first=('aten::empty', 1621401187223197000, 21000),
        longest_kernel=('void at::native::reduce_kernel<256, 2, at::native::ReduceOp<',
                        1621401187229711000, 4000, [1, 1, 1], 460),
        process_names={24572: 'python', **dict.fromkeys(range(8), 'python')},
        thread_names={(24572, 24610): 'thread 24610 (python)', (24572, 24572): 'thread 24572 (python)'},
        span=(1621401187223005000, 1621401187237108000),
        top={'schemaVersion': 1},
    ),
}


@pytest.fixture(scope="module")
def traces():
    """Each file loaded once, without the cache."""
    loaded = {}

    def get(rel):
        if rel not in loaded:
            loaded[rel] = load(TRACES / rel, cache=False)
        return loaded[rel]

    return get


def test_every_real_trace_is_covered():
    found = sorted(str(p.relative_to(TRACES)) for p in real_traces())
    assert len(found) == 14 and found == sorted(FACTS)


@pytest.mark.parametrize("rel", sorted(FACTS))
def test_counts(traces, rel):
    t, f = traces(rel), FACTS[rel]
    assert t.phase_counts == f["phases"]
    assert len(t.events) == f["phases"]["X"]
    assert len(t.flows) == f["phases"].get("s", 0) + f["phases"].get("f", 0)
    assert len(t.meta_events) == f["phases"].get("M", 0)
    assert len(t.instants) == f["phases"].get("i", 0) and len(t.memory_records) == f["memory"]
    assert t.category_counts(raw=True) == f["cats"]
    modern: dict[str, int] = {}
    for cat, n in f["cats"].items():
        modern[MODERN.get(cat, cat)] = modern.get(MODERN.get(cat, cat), 0) + n
    assert t.category_counts() == modern
    flows = {KIND_NAMES[k]: int(n) for k, n in enumerate(np.bincount(t.flows["kind"], minlength=len(KIND_NAMES))) if n}
    assert flows == ({"ac2g": sum(f["flows"].values())} if f["flows"] else {})


@pytest.mark.parametrize("rel", sorted(FACTS))
def test_steps_and_times(traces, rel):
    t, f = traces(rel), FACTS[rel]
    assert list(t.steps["number"]) == f["steps"]
    if f["first_step"]:
        n, start, end = f["first_step"]
        assert (t.steps["number"][0], t.steps["start"][0], t.steps["end"][0]) == (n, start, end)
    ev = t.events
    first = int(np.argmin(ev["row"]))
    assert (t.str(ev["name"][first]), ev["ts"][first], ev["dur"][first]) == f["first"]
    assert t.span == f["span"]
    assert np.all(np.diff(ev["ts"]) >= 0)
    if f["longest_kernel"]:
        name, ts, dur, grid, corr = f["longest_kernel"]
        kernels = np.flatnonzero(ev["kind"] == Kind.KERNEL)
        k = kernels[np.argmax(ev["dur"][kernels])]
        assert t.str(ev["name"][k]).startswith(name)
        assert (ev["ts"][k], ev["dur"][k], ev["correlation"][k]) == (ts, dur, corr)
        assert [ev["grid_x"][k], ev["grid_y"][k], ev["grid_z"][k]] == grid
        assert t.args(k)["grid"] == grid


@pytest.mark.parametrize("rel", sorted(FACTS))
def test_devices_and_metadata(traces, rel):
    t, f = traces(rel), FACTS[rel]
    listed = [d for d in t.devices if d.name is not None]
    assert [d.name for d in listed] == f["devices"]
    assert sorted(d.id for d in t.devices if d.seen_in_events) == f["kernel_devices"]
    assert t.device_kinds == (("CUDA",) if f["kernel_devices"] else ())
    assert t.device_word == ("GPU" if f["kernel_devices"] else "CPU")
    if f["devices"]:
        assert listed[0].compute_capability in ("7.0", "9.0") and listed[0].num_sms in (80, 132)
    assert t.process_names == f["process_names"]
    assert t.thread_names == f["thread_names"]
    for key, value in f["top"].items():
        assert t.metadata[key] == value
