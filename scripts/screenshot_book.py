"""Take a PNG screenshot of a built chapter page with headless Chromium, to look at the book.

    python scripts/screenshot_book.py            # chapter 7, or the last chapter built
    python scripts/screenshot_book.py 2 --out ch2.png --size 1280x4000
    python scripts/screenshot_book.py --html /tmp/mybook/_build/html

Build the book first (`make book`). Needs a Chromium binary (`apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = REPO_ROOT / "_build" / "book" / "src" / "_build" / "html"
DEFAULT_CHAPTER = 7
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chapter_page(html_dir: Path, chapter: int | None) -> Path:
    """The built page of ``chapter`` (``NN_name.html``); by default chapter 7, else the last."""
    if not (html_dir / "index.html").is_file():
        sys.exit(f"error: no built book in {html_dir}: build it with `make book`")
    pages = sorted(html_dir.glob("[0-9][0-9]_*.html"))
    if not pages:
        sys.exit(f"error: the book in {html_dir} has no chapter pages (NN_name.html)")
    wanted = DEFAULT_CHAPTER if chapter is None else chapter
    for page in pages:
        if page.name.startswith(f"{wanted:02d}_"):
            return page
    if chapter is None:
        return pages[-1]
    built = ", ".join(p.stem for p in pages)
    sys.exit(f"error: chapter {chapter} is not in the built book (it has: {built})")


def screenshot(page: Path, out: Path, width: int, height: int) -> None:
    browser = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if browser is None:
        sys.exit("error: no Chromium found: install it (Debian: `apt-get install chromium`)")
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        browser,
        "--headless",
        "--disable-gpu",
        "--hide-scrollbars",
        # Let the page's scripts (the theme, highlighting) finish before the picture is taken.
        "--virtual-time-budget=5000",
        f"--window-size={width},{height}",
        f"--screenshot={out}",
        page.resolve().as_uri(),
    ]
    # Chromium refuses to run as root inside its sandbox.
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not out.is_file():
        sys.exit(f"error: {Path(browser).name} failed ({result.returncode}):\n{result.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapter", nargs="?", type=int, help="chapter number (default: 7)")
    parser.add_argument("--html", type=Path, default=HTML_DIR, help="the built book's HTML")
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "_build" / "book" / "screenshot.png"
    )
    parser.add_argument("--size", default="1280x2400", help="window WIDTHxHEIGHT in pixels")
    args = parser.parse_args()
    try:
        width, height = (int(n) for n in args.size.split("x"))
    except ValueError:
        parser.error(f"--size must be WIDTHxHEIGHT, like 1280x2400, not {args.size!r}")
    page = chapter_page(args.html, args.chapter)
    screenshot(page, args.out, width, height)
    print(f"{args.out} ({page.name}, {width}x{height})")


if __name__ == "__main__":
    main()
