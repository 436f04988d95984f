"""The page of `tf-transformer serve` in headless Chromium (Debian's `chromium` and
`chromium-driver`), driven by Selenium: type a sentence, read the translation and the
alternatives, save a screenshot.

The docs' screenshot comes from the demo run (`make demo` first)::

    .venv/bin/python -m tests.serve.browser runs/demo docs/images/serve.png
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
MISSING = (
    None
    if CHROMIUM and DRIVER
    else "no Chromium here: apt-get install chromium chromium-driver (.ci/run installs them)"
)


def use_page(url: str, sentence: str, screenshot: Path, *, alternatives: int = 2) -> dict:
    """Opens the page at `url`, translates `sentence` with `alternatives` asked, and returns
    what it shows: `{"model", "translation", "alternatives", "error", "attention"}` (the
    attention map's `ROWSxCOLUMNS`, None when the backend has none); saves `screenshot`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        driver.get(url + "/")
        wait = WebDriverWait(driver, 60)
        wait.until(lambda d: d.find_element(By.ID, "model").text != "loading…")
        count = driver.find_element(By.ID, "alternatives")
        count.clear()
        count.send_keys(str(alternatives))
        driver.find_element(By.ID, "live").click()  # off: the button translates
        driver.find_element(By.ID, "source").send_keys(sentence)
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_element(By.ID, "target").text.strip())
        if alternatives:
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#alternative-list li"))
        if driver.find_element(By.ID, "plot").is_displayed():
            driver.find_element(By.ID, "plot").click()
            wait.until(lambda d: d.find_element(By.ID, "attention").get_attribute("data-drawn"))
        shown = {
            "model": driver.find_element(By.ID, "model").text,
            "translation": driver.find_element(By.ID, "target").text,
            "alternatives": [
                li.text for li in driver.find_elements(By.CSS_SELECTOR, "#alternative-list li")
            ],
            "error": driver.find_element(By.ID, "error").text,
            "attention": driver.find_element(By.ID, "attention").get_attribute("data-drawn"),
        }
        driver.save_screenshot(str(screenshot))
        return shown
    finally:
        driver.quit()


def main(path: str, screenshot: str) -> None:
    from tests.serve.running import running
    from tf_transformer.backends import open_translator

    with running(open_translator(path)) as (url, _):
        shown = use_page(url, "O menino doente compra a minha porta.", Path(screenshot))
    print(shown)


if __name__ == "__main__":
    main(*sys.argv[1:])
