"""The dashboard's page list, in menu order: the one place it is kept.

``dashboard.py`` builds the navigation from it; shared links (:mod:`app.share.links`) name a page by its
``url_path``, the file's stem, which is also the path the page is served at ("/head_map"; the
first page is served at "/" too). The page scripts live in ``app_pages/``.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Page(NamedTuple):
    file: str          # the script, relative to the repository root
    title: str
    icon: str

    @property
    def url_path(self) -> str:
        return Path(self.file).stem


PAGES: tuple[Page, ...] = (
    Page("app_pages/model_data.py", "Model & data", ":material/dataset:"),
    Page("app_pages/head_map.py", "Head map", ":material/grid_on:"),
    Page("app_pages/curves.py", "Curves", ":material/show_chart:"),
    Page("app_pages/examples.py", "Per example", ":material/table_rows:"),
    Page("app_pages/attention.py", "Attention", ":material/visibility:"),
    Page("app_pages/speed.py", "Speed", ":material/speed:"),
    Page("app_pages/share.py", "Share", ":material/share:"),
    Page("app_pages/smp_compare.py", "SMP compare", ":material/compare_arrows:"),
    Page("app_pages/dynamics.py", "Dynamics", ":material/timeline:"),
    Page("app_pages/tour.py", "Tour", ":material/school:"),
)
URL_PATHS: tuple[str, ...] = tuple(p.url_path for p in PAGES)
