"""The explorer: everything the Streamlit app computes, kept free of Streamlit.

Settings and their URL form, text formatting, the CPU limits, parameter sweeps,
the serving simulator, the kernel trace and the Plotly figures. It sits on top of
the kernel library (:mod:`paged_attention`) and under the Streamlit helpers
(``ui/``) and pages (``app_pages/``).
"""
