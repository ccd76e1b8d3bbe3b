"""Device peaks for the roofline: dense TFLOP/s per data type and memory bandwidth (TB/s).

Why a table the project keeps: a trace records the device's name (deviceProperties) but
not what it can do, and a roofline without a roof is a scatter plot.  The figures are the
vendors' published dense (no sparsity) peaks for the SXM/OAM parts unless the name says
otherwise; a device or a data type that is not here has no roof, and the roofline says so
instead of guessing.  Users with another part (or clocks) give their own: a JSON file in
``$TB_PROFILER_PEAKS`` or the ``peaks`` argument, ``{"<word of the name>": {"tbps": 3.35,
"tflops": {"bf16": 989.4, ...}}}``, tried before this table.
"""
from __future__ import annotations

import json
import os
import re

__all__ = ["DTYPES", "PEAKS", "dtype_of", "peaks_for"]

# Data types a roof is given for; "tf32" is what float32 matmuls reach with TF32 enabled.
DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")

# (words of the device's name, all of which must appear as whole tokens; most specific first) -> peaks
PEAKS: list[tuple[tuple[str, ...], dict]] = [
    (("V100",), {"tbps": 0.9, "tflops": {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}}),
    (("A100", "80GB"), {"tbps": 2.039, "tflops": {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0,
                                                  "bf16": 312.0, "int8": 624.0}}),
    (("A100",), {"tbps": 1.555, "tflops": {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0,
                                           "int8": 624.0}}),
    (("H100", "PCIe"), {"tbps": 2.0, "tflops": {"fp64": 26.0, "fp32": 51.0, "tf32": 378.0, "fp16": 756.0,
                                                "bf16": 756.0, "fp8": 1513.0, "int8": 1513.0}}),
    (("H100",), {"tbps": 3.35, "tflops": {"fp64": 34.0, "fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
                                          "fp8": 1978.9, "int8": 1978.9}}),
    (("H200",), {"tbps": 4.8, "tflops": {"fp64": 34.0, "fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
                                         "fp8": 1978.9, "int8": 1978.9}}),
    (("B200",), {"tbps": 8.0, "tflops": {"tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0,
                                         "int8": 4500.0}}),
    (("L4",), {"tbps": 0.3, "tflops": {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5,
                                       "int8": 242.5}}),
    (("MI300X",), {"tbps": 5.3, "tflops": {"fp64": 81.7, "fp32": 163.4, "tf32": 653.7, "fp16": 1307.4,
                                           "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9}}),
    (("MI250X",), {"tbps": 3.2768, "tflops": {"fp64": 47.9, "fp32": 47.9, "fp16": 383.0, "bf16": 383.0,
                                              "int8": 383.0}}),
    (("MI250",), {"tbps": 3.2768, "tflops": {"fp64": 45.3, "fp32": 45.3, "fp16": 362.1, "bf16": 362.1,
                                             "int8": 362.1}}),
]

_TYPE_WORDS = {"double": "fp64", "float": "fp32", "c10::half": "fp16", "half": "fp16", "c10::bfloat16": "bf16",
               "bfloat16": "bf16", "c10::float8_e4m3fn": "fp8", "c10::float8_e5m2": "fp8",
               "c10::float8_e4m3fnuz": "fp8", "c10::float8_e5m2fnuz": "fp8", "signed char": "int8",
               "unsigned char": "int8"}
BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def dtype_of(type_name: str | None) -> str | None:
    """The roofline's data type for an "Input type" entry (c10::BFloat16 -> bf16), None for
    anything else (Scalar, long, bool, an empty entry)."""
    return _TYPE_WORDS.get((type_name or "").strip().lower())


def peaks_for(device_name: str | None, peaks: dict | None = None) -> tuple[dict | None, str]:
    """(the peaks of a device, where they come from), or (None, why there are none).
    ``peaks`` and ``$TB_PROFILER_PEAKS`` are tried before the table."""
    if not device_name:
        return None, "the trace names no device (no deviceProperties): no roof"
    for source, entries in (("given", _entries(peaks)), ("$TB_PROFILER_PEAKS", _entries(_env_peaks())),
                            ("the project's table", PEAKS)):
        for words, value in entries:
            if all(_has_word(device_name, w) for w in words):
                return value, f"{' '.join(words)} peaks from {source}"
    return None, (f"{device_name} is not in the table of device peaks: no roof (give one with $TB_PROFILER_PEAKS "
                  "or peaks=)")


def _has_word(name: str, word: str) -> bool:
    """word in name as a whole token ("L4" is not in "L40S", "A100" is in "A100-SXM4-80GB")."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])", name, re.IGNORECASE) is not None


def _entries(table: dict | None) -> list[tuple[tuple[str, ...], dict]]:
    return [((k,), v) for k, v in (table or {}).items()]


def _env_peaks() -> dict | None:
    path = os.environ.get("TB_PROFILER_PEAKS")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"$TB_PROFILER_PEAKS {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"$TB_PROFILER_PEAKS {path}: a JSON object of device name -> peaks is expected")
    return data
