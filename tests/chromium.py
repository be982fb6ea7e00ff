"""Debian's headless chromium for the browser tests: one way to start it, whatever page a test looks at."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lanes import needs
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@contextmanager
def open_chromium(width: int, height: int) -> Iterator[WebDriver]:
    """A headless chromium of ``width`` × ``height`` that keeps its console messages; quit on leaving."""
    needs("chromium", "browser")
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        pytest.fail("Debian's chromium and chromium-driver are not installed: run `make browser`")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages, for tests that read them
    # An explicit driver path: selenium-manager (which would download one) never runs.
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: WebDriver, target: Path) -> Path:
    """Save a screenshot and check it is a real, non-empty picture."""
    assert driver.save_screenshot(str(target))
    blob = target.read_bytes()
    assert blob[:8] == PNG_MAGIC, "not a PNG"
    width, height = struct.unpack(">II", blob[16:24])  # the IHDR chunk
    assert width >= 800 and height >= 600, (width, height)
    assert len(blob) > 20_000, "a nearly empty picture"
    return target
