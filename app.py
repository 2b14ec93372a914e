"""Paged-attention explorer: the Streamlit entry point.

Run with ``streamlit run app.py``. Each page is a file in ``app_pages/``; add one to
``PAGES`` to extend the app. The sidebar (decode configuration, kept in the
URL) is drawn here, once, for every page; pages read it with
``ui.sidebar.current()``.

The folder is ``app_pages/``, not ``pages/``: Streamlit still treats a ``pages/``
folder as the old automatic multipage layout for the first session of a server
process, which then runs a page without this entry script (and its sidebar)
when that session opens a page's URL directly.
"""

import streamlit as st

import paged_attention  # noqa: F401  (first: sets TRITON_INTERPRET on a CPU-only machine)
from ui.charts import page_style
from ui.sidebar import render_sidebar

# The favicon is an emoji, drawn inline (a data: URL): a ``:material/...:`` page_icon is
# fetched from fonts.gstatic.com, which fails in a talk given offline. The other
# ``:material/...:`` icons (navigation, buttons, alerts) come from Streamlit's bundled font.
st.set_page_config(
    page_title="Paged-attention explorer",
    page_icon="🧱",
    layout="wide",
    initial_sidebar_state="expanded",
)

PAGES = [
    st.Page("app_pages/block_table.py", title="Block table", icon=":material/grid_view:", url_path="block_table"),
    st.Page("app_pages/decode_benchmark.py", title="Decode benchmark", icon=":material/speed:",
            url_path="decode_benchmark"),
    st.Page("app_pages/sweep.py", title="Sweep", icon=":material/show_chart:", url_path="sweep"),
    st.Page("app_pages/serving_simulation.py", title="Serving simulation", icon=":material/dns:",
            url_path="serving_simulation"),
    st.Page("app_pages/inside_the_kernel.py", title="Inside the kernel", icon=":material/memory:",
            url_path="inside_the_kernel"),
]


def _open_first_page() -> None:
    """The root URL opens the first page at its own path, with the same query."""
    st.switch_page(PAGES[0], query_params=st.query_params.to_dict())


# Every page answers at its own path. Streamlit 1.67 serves the default page only at
# the root ("/block_table" would be "Page not found"), so the default is this hidden
# page, which sends the root on to the first page's path.
ROOT = st.Page(_open_first_page, title="Paged-attention explorer", url_path="open", default=True,
               visibility="hidden")

page = st.navigation([ROOT, *PAGES])
render_sidebar(page.url_path)
with page_style():  # the page's figures are built at the sidebar's presentation scale
    page.run()
