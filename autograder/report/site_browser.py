"""The cohort report in a real browser: Debian's chromium, headless, driven by its chromedriver.

    python -m autograder.report.site_browser OUT/report/index.html screenshot.png

takes a screenshot of a page (`make report-screenshot` makes docs/term.md's). The browser starts with a
fresh profile and every network feature off (no updates, no sync, no background requests), so it runs on
a machine without network; the report's tests use the same launcher.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")
WINDOW = (1400, 1000)


def missing() -> str:
    """Why no browser can be started here ("" when one can)."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.is_file():
            return f"{path} is missing: install Debian's {package} (`make browser-tools`, as root)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install the instructor extras of pyproject.toml"
    return ""


@contextmanager
def browser(window: tuple[int, int] = WINDOW) -> Iterator["object"]:
    """A headless chromium under selenium, its console log kept; quit and its profile removed on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="report-browser-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS + (f"--user-data-dir={profile}", f"--window-size={window[0]},{window[1]}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(page: Path, png: Path) -> None:
    with browser() as driver:
        driver.get(Path(page).resolve().as_uri())
        png.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(png))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshot a page of the cohort report in headless chromium.")
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    args = parser.parse_args(argv)
    reason = missing()
    if reason:
        parser.exit(2, f"no browser: {reason}\n")
    screenshot(args.page, args.png)
    print(args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
