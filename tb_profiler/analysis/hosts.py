"""Which host each rank ran on, and whether a collective stayed inside one node.

Why: Kineto now writes the machine's name as a top-level ``host_name`` (libkineto
``EnvMetadata.h`` ``getEnvMetadata``: ``gethostname()``, added to the trace's metadata by
``ChromeTraceLogger::addEnvVarsToMetadata``), beside the job's ``PT_PROFILER_JOB_NAME``,
``PT_PROFILER_JOB_VERSION`` and ``PT_PROFILER_JOB_ATTEMPT_INDEX`` when those environment
variables are set.  A collective whose ranks share one host moves its data over NVLink /
PCIe (intra-node); one spanning several hosts goes over the network (inter-node), which
is usually slower by an order of magnitude, so the Distributed view splits the two.

A process group's ranks are the ranks that recorded a collective under its name in this
run; its scope is "intra-node" when they all name one host, "inter-node" when they name
several, and unknown (null) when a rank's trace names none.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

JOB_KEYS = ("PT_PROFILER_JOB_NAME", "PT_PROFILER_JOB_VERSION", "PT_PROFILER_JOB_ATTEMPT_INDEX")
MAX_HOST = 256  # characters of a host name kept (gethostname's buffer in libkineto is 256)
INTRA, INTER = "intra-node", "inter-node"


def host_name(trace) -> str | None:
    """The trace's top-level ``host_name`` (None when absent, empty or not a string)."""
    value = trace.metadata.get("host_name") if isinstance(trace.metadata, dict) else None
    return value[:MAX_HOST] if isinstance(value, str) and value.strip() else None


def job_metadata(trace) -> dict | None:
    """The PT_PROFILER_JOB_* values the trace carries ({key: text}), None without any."""
    meta = trace.metadata if isinstance(trace.metadata, dict) else {}
    out = {k: str(meta[k])[:MAX_HOST] for k in JOB_KEYS
           if isinstance(meta.get(k), (str, int)) and not isinstance(meta.get(k), bool)}
    return out or None


def pg_scopes(recs: pd.DataFrame, hosts: dict[int, str | None]) -> pd.DataFrame:
    """Per process group (pg_name) of the run's collective records (with rank): ranks,
    hosts (distinct host names; null when a rank's host is unknown) and scope."""
    if recs.empty:
        return pd.DataFrame({"pg_name": pd.Series(dtype=object), "ranks": pd.Series(dtype="int64"),
                             "hosts": pd.Series(dtype="Int64"), "scope": pd.Series(dtype=object)})
    host = recs["rank"].map(hosts).astype(object)
    df = pd.DataFrame({"pg_name": recs["pg_name"].to_numpy(object), "rank": recs["rank"].to_numpy(np.int64),
                       "host": host.to_numpy(object), "unknown": host.isna().to_numpy(bool)})
    g = df.groupby("pg_name", sort=True).agg(ranks=("rank", "nunique"), n_hosts=("host", "nunique"),
                                            unknown=("unknown", "any")).reset_index()
    hosts_col = pd.array(np.where(g["unknown"], -1, g["n_hosts"]), dtype="Int64")
    g["hosts"] = hosts_col.copy()
    g.loc[g["unknown"].to_numpy(bool), "hosts"] = pd.NA
    g["scope"] = np.where(g["unknown"], None, np.where(g["n_hosts"] > 1, INTER, INTRA)).astype(object)
    return g[["pg_name", "ranks", "hosts", "scope"]]


def with_scope(table: pd.DataFrame, scopes: pd.DataFrame) -> pd.DataFrame:
    """``table`` (with pg_name) with its process group's ``hosts`` and ``scope`` columns."""
    order = [*[c for c in table.columns if c not in ("hosts", "scope")], "hosts", "scope"]
    base = table.drop(columns=["hosts", "scope"], errors="ignore")
    out = base.merge(scopes[["pg_name", "hosts", "scope"]], on="pg_name", how="left", sort=False)
    out["hosts"] = out["hosts"].astype("Int64")
    out["scope"] = out["scope"].astype(object).where(out["scope"].notna(), None)
    return out[[c for c in order if c in out.columns]]


def scope_split(collectives: pd.DataFrame) -> pd.DataFrame:
    """Per rank and scope: calls and total_ns of its collectives (the split of its
    communication time into intra- and inter-node; scope "unknown" where a host is)."""
    cols = ["rank", "worker", "scope", "calls", "total_ns"]
    if collectives.empty:
        return pd.DataFrame({c: [] for c in cols})
    df = collectives.assign(scope=collectives["scope"].fillna("unknown"))
    out = df.groupby(["rank", "worker", "scope"], sort=True).agg(calls=("calls", "sum"),
                                                                 total_ns=("total_ns", "sum")).reset_index()
    return out[cols]


__all__ = ["INTER", "INTRA", "JOB_KEYS", "host_name", "job_metadata", "pg_scopes", "scope_split", "with_scope"]
