#!/usr/bin/env python3
"""Screenshots of the `relaytrace view` page for the docs: PREFIX-overview.png (the whole trace),
PREFIX-zoomed.png (zoomed in, a frame selected: its JSON in the detail pane), PREFIX-filtered.png
(the list narrowed by a filter). Usage: screenshot.py URL PREFIX [FILTER]"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


def wait(driver, js, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if driver.execute_script("return " + js):
            return True
        time.sleep(0.05)
    raise SystemExit("screenshot: the page never got to: " + js)


def settle(driver):
    wait(driver, "__viewer.pendingRefresh() === false && document.querySelectorAll('#rows .row.loading').length === 0")
    time.sleep(0.3)


url, prefix = sys.argv[1], sys.argv[2]
query = sys.argv[3] if len(sys.argv) > 3 else "type:rpc.request,rpc.response"
options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,860", "--hide-scrollbars"]:
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
try:
    driver.get(url)
    wait(driver, "window.__viewer && __viewer.ready")
    settle(driver)
    driver.save_screenshot(prefix + "-overview.png")
    body = driver.find_element(By.TAG_NAME, "body")
    for _ in range(5):
        body.send_keys("+")
    settle(driver)
    spot = driver.execute_script("return __viewer.locateMark()")
    if spot:
        driver.execute_script("__viewer.select(%d)" % spot["record"])
    settle(driver)
    driver.save_screenshot(prefix + "-zoomed.png")
    body.send_keys("0")
    box = driver.find_element(By.ID, "filter")
    box.send_keys(query + Keys.ENTER)
    wait(driver, "__viewer.matchCount() > 0")
    body.send_keys("j")
    settle(driver)
    driver.save_screenshot(prefix + "-filtered.png")
    print("\n".join(prefix + s for s in ["-overview.png", "-zoomed.png", "-filtered.png"]))
finally:
    driver.quit()
