"""Analyses: pure, vectorized functions from Traces to tables and small dicts.

They know nothing of HTTP or TensorBoard; the plugin, the CLI and notebooks call the same
functions.
"""
