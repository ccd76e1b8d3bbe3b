"""The TensorBoard plugin ``pytorch_profiler``, registered through the
``tensorboard_plugins`` entry point (pyproject.toml).

The entry point names ``ProfilerLoader`` (a TBLoader: it adds the
``--pytorch_profiler_memory_mb`` flag); ``ProfilerPlugin`` is the plugin itself. One
wildcard route hands everything under /data/plugin/pytorch_profiler/ to the shared WSGI
app (tb_profiler.plugin.app), so TensorBoard and ``tb-profiler serve`` answer alike.

TensorBoard's server does not look at the Host header; the plugin's routes do (DNS
rebinding, app.HostPolicy): the names of the address TensorBoard serves (its --host, or
every interface with --bind_all or --host 0.0.0.0), the loopback names, and those of
``--pytorch_profiler_allow_hosts`` / $TB_PROFILER_ALLOW_HOSTS.

SIGTERM and SIGHUP end the summary worker processes before TensorBoard's own handling
(its SIGTERM handler exits; SIGHUP ends the process): nothing is left running.
"""
from __future__ import annotations

import logging

from tensorboard.plugins import base_plugin

from tb_profiler.plugin import PLUGIN_NAME
from tb_profiler.plugin.app import HostPolicy, ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.summary.procs import stop_on_signals

logger = logging.getLogger("tb_profiler.plugin")
ALLOW_HINT = "--pytorch_profiler_allow_hosts or $TB_PROFILER_ALLOW_HOSTS"


def host_policy(flags) -> HostPolicy:
    """The Host headers the plugin answers, from TensorBoard's flags (None: TensorBoard's
    default, localhost)."""
    bind = getattr(flags, "host", None)
    if getattr(flags, "bind_all", False):
        bind = "::"
    allow = [a for a in (getattr(flags, "pytorch_profiler_allow_hosts", None) or "").split(",") if a.strip()]
    try:
        return HostPolicy(bind, allow, hint=ALLOW_HINT)
    except ValueError as exc:  # a bad name must not keep TensorBoard from starting: refuse more, not less
        logger.error("tb_profiler: %s; the allowed Host names are left out", exc)
        return HostPolicy(bind, (), env=False, hint=ALLOW_HINT)


class ProfilerPlugin(base_plugin.TBPlugin):
    """PyTorch profiler traces under the logdir: runs, views, timeline."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        super().__init__(context)
        flags = getattr(context, "flags", None)
        memory_mb = getattr(flags, "pytorch_profiler_memory_mb", None)
        reload_s = getattr(flags, "reload_interval", None)
        logdir = context.logdir or ""
        self._state = ProfilerState(
            logdir,
            memory_bytes=int(memory_mb) << 20 if memory_mb else None,
            reload_s=float(reload_s) if reload_s and reload_s > 0 else None,
        )
        self._app = ProfilerApp(self._state, hosts=host_policy(flags))
        stop_on_signals()  # SIGTERM (then TensorBoard's own exit), SIGHUP: the summary processes end too
        if logdir:
            self._state.start()
        else:
            self._state.disable("TensorBoard was started without --logdir: the profiler plugin reads one logdir")

    def get_plugin_apps(self):
        return {"/*": self._app}

    def is_active(self) -> bool:
        state = self._state
        if not state.logdir:
            return False
        if not state.wait_scanned(0):
            return True  # first scan still running: show the tab, it fills in
        return state.has_runs or state.loading

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", disable_reload=True)


class ProfilerLoader(base_plugin.TBLoader):
    """Adds the plugin's flags and builds the plugin."""

    def define_flags(self, parser):
        group = parser.add_argument_group("pytorch_profiler plugin")
        group.add_argument("--pytorch_profiler_memory_mb", type=int, default=None, metavar="MB",
                           help="memory for parsed traces kept by the PyTorch profiler plugin "
                                "(LRU; default $TB_PROFILER_MEMORY_MB or 2048)")
        group.add_argument("--pytorch_profiler_allow_hosts", default=None, metavar="NAMES",
                           help="comma-separated Host names the PyTorch profiler plugin answers besides "
                                "localhost and the address TensorBoard serves, e.g. a proxy's (name, "
                                "*.domain, or * for any; also $TB_PROFILER_ALLOW_HOSTS)")

    def load(self, context):
        return ProfilerPlugin(context)
