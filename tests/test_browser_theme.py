"""Dark mode in a real browser (fixtures: browser_support.py): standalone, the app follows
the system's color scheme, live; inside TensorBoard, TensorBoard's own dark mode (its
body's ``dark-mode`` class, which itself follows the system by default), live."""
from __future__ import annotations

from browser_support import V100_RUN, hash_state, plugin_frame, wait_js


def _theme(frame) -> str:
    return frame.evaluate("document.documentElement.dataset.theme")


def _background(frame) -> str:
    return frame.evaluate("getComputedStyle(document.body).backgroundColor")


def test_standalone_follows_the_system_color_scheme(serve_url, watch):
    watch.page.emulate_media(color_scheme="dark")
    watch.open(f"{serve_url}/{hash_state(view='Overview', run=V100_RUN)}")
    watch.settle()
    assert _theme(watch.page) == "dark"
    dark_bg = _background(watch.page)
    watch.shot("theme-serve-overview-dark")
    watch.page.emulate_media(color_scheme="light")  # changed while the page is open
    wait_js(watch.page, "document.documentElement.dataset.theme === 'light'")
    assert _background(watch.page) != dark_bg
    assert watch.errors == [] and watch.outside == [], (watch.errors, watch.outside)


def test_inside_tensorboard_follows_its_dark_mode(tensorboard_url, watch):
    watch.page.emulate_media(color_scheme="dark")
    watch.open(f"{tensorboard_url}/#pytorch_profiler")
    frame = plugin_frame(watch.page)
    tb_dark = watch.page.evaluate("document.body.classList.contains('dark-mode')")
    assert tb_dark, "TensorBoard did not turn dark with the system"
    wait_js(frame, "document.documentElement.dataset.theme === 'dark'")
    watch.shot("theme-tensorboard-dark")
    # TensorBoard's setting changed (what its toggle does to its page): the plugin follows
    watch.page.evaluate("document.body.classList.remove('dark-mode')")
    wait_js(frame, "document.documentElement.dataset.theme === 'light'")
    assert watch.outside == [], watch.outside
