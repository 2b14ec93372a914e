"""The two floors hold: the kernel library under the explorer under the Streamlit helpers.

The import-linter contracts in ``pyproject.toml`` say which package may import
which; these tests run them, and check what the library itself pulls in.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]

#: What the kernel library may import besides the standard library.
LIBRARY_DEPENDENCIES = {"torch", "triton", "numpy"}
#: Imports only the benchmark's command line makes, inside ``main()``.
BENCH_CLI_ONLY = {"pandas", "tqdm"}


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_import_linter_contracts_are_kept():
    """``lint-imports`` on the contracts of pyproject.toml: on failure, its report
    names the broken contract and the import chain that breaks it."""
    run = _run("import sys; from importlinter.cli import lint_imports; "
               "sys.exit(lint_imports(no_cache=True, no_logo=True))")
    assert run.returncode == 0, f"an import-linter contract is broken:\n{run.stdout}\n{run.stderr}"
    assert "0 broken" in run.stdout


def test_contracts_cover_the_three_layers():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = [c["layers"] for c in contracts if c["type"] == "layers"]
    assert ["ui", "explorer", "paged_attention"] in layers
    forbidden = {tuple(c["source_modules"]): set(c["forbidden_modules"]) for c in contracts if c["type"] == "forbidden"}
    assert {"streamlit", "plotly", "pandas", "explorer"} <= forbidden[("paged_attention",)]
    assert "streamlit" in forbidden[("explorer",)]


def test_library_imports_only_torch_triton_and_numpy():
    graph = grimp.build_graph("paged_attention", include_external_packages=True, cache_dir=None)
    external = {}
    for module in graph.find_descendants("paged_attention") | {"paged_attention"}:
        for imported in graph.find_modules_directly_imported_by(module):
            top = imported.split(".")[0]
            if top != "paged_attention" and top not in sys.stdlib_module_names:
                external.setdefault(top, set()).add(module)
    allowed = {name: modules for name, modules in external.items()
               if name in LIBRARY_DEPENDENCIES or (name in BENCH_CLI_ONLY and modules == {"paged_attention.bench"})}
    assert external == allowed, f"the library imports {sorted(set(external) - set(allowed))}"


def test_importing_the_library_loads_no_app_dependencies():
    """Every library module imports without pandas, Plotly, Streamlit or the explorer
    (the benchmark CLI imports pandas inside ``main()`` only)."""
    run = _run(
        "import importlib, pkgutil, sys, paged_attention\n"
        "for m in pkgutil.iter_modules(paged_attention.__path__):\n"
        "    importlib.import_module('paged_attention.' + m.name)\n"
        "print(sorted(n for n in ('pandas', 'plotly', 'streamlit', 'explorer', 'ui') if n in sys.modules))\n"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_only_the_library_is_shipped():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["packages"] == ["paged_attention"]


def test_every_chart_goes_through_show_chart():
    # Presentation mode enlarges a chart only when the page draws it with
    # ui.charts.show_chart; a direct st.plotly_chart would stay small in a talk.
    direct = [f"{path.relative_to(ROOT)}:{n}" for path in [ROOT / "app.py", *(ROOT / "app_pages").glob("*.py"),
                                                          *(ROOT / "ui").glob("*.py")]
              if path.name != "charts.py"
              for n, line in enumerate(path.read_text().splitlines(), 1) if "plotly_chart(" in line]
    assert direct == []


def test_every_segmented_control_goes_through_choice():
    # A click on a segmented control's selected option empties it, and a page then
    # fell back to the default (issue 27: Ragged became 128 tokens for all);
    # ui.inputs.choice keeps the choice, so no page builds one directly.
    direct = [f"{path.relative_to(ROOT)}:{n}" for path in [ROOT / "app.py", *(ROOT / "app_pages").glob("*.py"),
                                                          *(ROOT / "ui").glob("*.py")]
              for n, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"\.(segmented_control|pills)\(", line) and path.name != "inputs.py"]
    assert direct == []


def _imports_plotly(path: Path) -> bool:
    return any(line.startswith(("import plotly", "from plotly")) for line in
               (line.strip() for line in path.read_text().splitlines()))


def test_every_explorer_logic_module_is_under_the_no_figures_contract():
    """The contract "Explorer logic never imports figures" names every explorer module
    that does not draw (draw = imports Plotly itself), and no drawing module."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "forbidden" and c["forbidden_modules"] == ["plotly"]]
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in (ROOT / "explorer").rglob("*.py")
               if p.name != "__init__.py"}
    logic = {name for name, path in modules.items() if not _imports_plotly(path)}
    assert set(contract["source_modules"]) == logic


def test_explorer_folders_are_concepts_of_bounded_size():
    """Issue 22's size rules: no folder of the explorer or of ui/ holds more than 12
    modules, and no source file of the project, tests included, passes 500 lines."""
    for folder in [ROOT / "explorer", *(p for p in (ROOT / "explorer").iterdir() if p.is_dir()), ROOT / "ui"]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 12, f"{folder.relative_to(ROOT)} holds {len(modules)} modules"
    long = {str(p.relative_to(ROOT)): n for p in ROOT.glob("**/*.py")
            if not {".venv", "venv", "docs", ".git"} & set(p.parts)
            and (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


#: A Python format spec that rounds or picks a notation (``{x:.1f}``, ``{x:g}``, ``{x:.3g}``,
#: ``{x:.0%}``): on screen every such number goes through ``explorer.formatting``
#: (issue 22: "every number on screen through formatting"). Thousands separators alone
#: (``{n:,}``) are exact and allowed; Plotly's ``%{...}`` templates are d3's, named there.
INLINE_FORMAT = re.compile(r"(?<!%)\{[^{}]*:[,.0-9]*[fegdn%]\}")


def test_numbers_on_screen_are_formatted_in_one_place():
    found = []
    for folder in ("app_pages", "ui", "explorer"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "explorer" / "formatting.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if INLINE_FORMAT.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_no_private_name_is_imported_across_modules():
    """Issue 22: a helper two modules share is public where it lives (a private one
    imported elsewhere is a rule written for one module and used by another)."""
    import ast

    found = []
    for folder in ("paged_attention", "explorer", "ui", "app_pages", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                    found += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
