"""bertlab.app_pages: the registry and the pages/ folder agree, and every page takes its title,
icon and heading from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bertlab.app_pages import APP_PAGES, HOME_FILE, app_page, page_titled

REPO = Path(__file__).resolve().parent.parent


def test_every_page_script_is_registered_once_in_streamlits_order():
    scripts = [p for p in (REPO / "pages").glob("*.py") if not p.name.startswith((".", "_"))]
    files = [p.file for p in APP_PAGES]
    assert files[0] == HOME_FILE
    assert sorted(files[1:]) == sorted(f"pages/{p.name}" for p in scripts)
    assert len({p.title for p in APP_PAGES}) == len(APP_PAGES) == len(set(files))

    def number(file: str) -> int:
        return int(re.match(r"\d+", Path(file).name).group())

    assert [number(f) for f in files[1:]] == sorted(number(f) for f in files[1:])  # the sidebar's order


def test_every_page_sets_itself_up_from_the_registry():
    for page in APP_PAGES:
        source = (REPO / page.file).read_text(encoding="utf-8")
        assert "PAGE = setup_page(__file__)" in source, page.file
        assert "st.title(PAGE.heading)" in source, page.file
        assert page.icon.startswith(":material/"), page.file  # the bundled font: draws offline
        assert page.blurb or page.file == HOME_FILE, page.file


def test_lookups():
    assert app_page("/anywhere/pages/1_Fill_mask.py") is page_titled("Fill-mask")
    fill = page_titled("Fill-mask")
    assert (fill.url_path, fill.label, fill.heading) == ("Fill_mask", "Fill mask", "Fill-mask")
    assert page_titled("Next sentence").heading == "Next sentence prediction"
    assert (app_page(HOME_FILE).url_path, app_page(HOME_FILE).label) == ("", "Home")
    with pytest.raises(KeyError, match="add an AppPage"):
        app_page("pages/99_New.py")
    with pytest.raises(KeyError, match="the titles are"):
        page_titled("Nope")
