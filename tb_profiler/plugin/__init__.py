"""The plugin backend: the HTTP API (docs/api.md) over the logdir, in TensorBoard
(``tb_plugin.ProfilerPlugin``, plugin name ``pytorch_profiler``) or standalone
(``serve``, ``tb-profiler serve LOGDIR``).

    state.py    discovery thread, background loading with progress, per-file summaries
                (runs of several workers), LRU of parsed traces
    app.py      the WSGI app (ProfilerApp): its route table, lookups and compute path
    wsgi.py / params.py / hosts.py  HTTP machinery: WSGI entry, JSON/errors, CSP headers,
                response cache; query parameters; the Host/Origin policy
    routes_*.py the routes' handlers, by view (query -> a views.py / timeline.py function)
    views.py    route bodies: analyses (or a run's summaries) -> JSON data (relative timestamps)
    views_*.py  newer views: route bodies and their handlers together
    timeline.py the trace view's windowed, pixel-bounded events per track (timeline_*.py)
    static.py   the frontend bundle (static/), or a page saying it is not built
    tb_plugin.py / serve.py  the two ways to serve the app

Importing this package imports neither TensorBoard nor pandas.
"""
PLUGIN_NAME = "pytorch_profiler"
ROUTE_PREFIX = f"/data/plugin/{PLUGIN_NAME}/"
