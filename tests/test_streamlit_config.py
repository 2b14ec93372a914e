"""The app's Streamlit configuration: safe by default on a shared GPU host."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_app_listens_on_localhost_only_by_default():
    # `streamlit run app.py` on a shared GPU host must not let the network start GPU runs;
    # the README says how to serve a room on purpose.
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    assert "--server.address 0.0.0.0" in (ROOT / "README.md").read_text()
