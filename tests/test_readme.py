"""The README says where everything is: its layout table names every module of the
packages, each where it is, and it stays short enough to read."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: The folders whose modules the layout table lists.
PACKAGES = ("paged_attention", "explorer", "ui", "app_pages", "benchmarks")


def layout_rows() -> dict[str, set[str]]:
    """``folder -> module file names`` from the README's layout table."""
    section = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and (m := re.fullmatch(r"`([\w/]+/)`", cells[0])):
            rows[m.group(1)] = set(re.findall(r"`(\w+\.py)`", cells[1]))
    return rows


def package_modules() -> dict[str, set[str]]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "__init__.py" and "__pycache__" not in path.parts:
                found.setdefault(f"{path.parent.relative_to(ROOT)}/", set()).add(path.name)
    return found


def test_layout_table_names_every_module_and_nothing_else():
    assert layout_rows() == package_modules()


def test_readme_is_short_and_opens_with_its_two_commands():
    assert len(README.splitlines()) <= 120
    blocks = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert blocks[0].endswith("streamlit run app.py")
    assert blocks[1].endswith("python -m pytest -n 2")


def test_readme_links_point_at_files():
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


DATA = ROOT / "docs" / "data"
#: What docs/data may hold (issue 22): the files cited today; the rest is in git history.
MAX_DATA_FILES = 45


def data_index() -> set[str]:
    """The files docs/data/README.md's table names, ``.txt`` after a name meaning
    the same stem's log."""
    named = set()
    for line in (DATA / "README.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        stem = None
        for name in re.findall(r"`([^`]+)`", line.split(" | ")[0]):
            if name.startswith("."):
                name = stem + name
            stem = name.rsplit(".", 1)[0]
            named.add(name)
    return named


def test_docs_data_holds_only_what_its_index_names_and_no_more_than_its_cap():
    files = {str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_file() and p.name != "README.md"}
    assert files == data_index()
    assert len(files) + 1 <= MAX_DATA_FILES
