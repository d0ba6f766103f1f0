#!/usr/bin/env python3
"""Drives SignFleet captive signing pages in headless Chromium (Selenium), for
Tests/CoordinatorTests/CaptiveBrowserTests.swift.

Reads a JSON list of scenarios from the file named by the first argument, runs them in order in one browser, and prints one
JSON line per scenario on stdout:
  {"name": ..., "final_url": ..., "event": ..., "texts": {...}, "alert": bool, "error": str?}

Scenario keys: name, url, action ("sign" | "decline" | "later" | "open"), pointer ("pen" |
"mouse" | "touch"), text (typed into text tabs), reason (decline), screenshot (a path, taken
before finishing), then ("reopen": open the same URL again afterwards), read (element ids
whose text to report). Every wait has a deadline; the whole run is bounded by the caller.
"""
import json
import math
import sys
import time
from urllib.parse import parse_qs, urlparse

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 20  # seconds per wait


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1000,1300", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(WAIT)
    driver.set_script_timeout(WAIT)
    return driver


def event_of(url):
    values = parse_qs(urlparse(url).query).get("event")
    return values[-1] if values else None


def wait_for_event(driver):
    WebDriverWait(driver, WAIT).until(lambda d: event_of(d.current_url) is not None)
    return driver.current_url


def draw_signature(driver, pointer):
    """A two-stroke signature on the pad with pointer actions (pressure for a pen)."""
    canvas = WebDriverWait(driver, WAIT).until(EC.visibility_of_element_located((By.ID, "pad-canvas")))
    kind = {"pen": interaction.POINTER_PEN, "touch": interaction.POINTER_TOUCH}.get(pointer, interaction.POINTER_MOUSE)
    device = PointerInput(kind, pointer)
    actions = ActionBuilder(driver, mouse=device, duration=15)
    act = actions.pointer_action
    # Offsets are from the canvas centre (W3C actions); the pad is 600x200.
    strokes = [
        [(-230 + 8 * i, int(30 * math.sin(i / 3.0))) for i in range(0, 30)],
        [(-40 + 9 * i, 40 - 3 * i) for i in range(0, 25)],
    ]
    for stroke in strokes:
        x, y = stroke[0]
        act.move_to(canvas, x, y)
        if pointer == "pen":
            act.pointer_down(pressure=0.35)
        else:
            act.pointer_down()
        for step, (x, y) in enumerate(stroke[1:]):
            if pointer == "pen":
                act.move_to(canvas, x, y, pressure=0.35 + 0.5 * step / len(stroke))
            else:
                act.move_to(canvas, x, y)
        act.pointer_up()
    actions.perform()


def run(driver, scenario):
    result = {"name": scenario["name"], "texts": {}, "alert": False}
    driver.get(scenario["url"])
    action = scenario.get("action", "open")
    for element in scenario.get("read", []):
        try:
            result["texts"][element] = driver.find_element(By.ID, element).text
        except Exception as error:  # noqa: BLE001 - reported to the test
            result["texts"][element] = "<missing: %s>" % type(error).__name__
    try:
        driver.switch_to.alert
        result["alert"] = True
    except NoAlertPresentException:
        pass
    if action == "sign":
        for button in driver.find_elements(By.CSS_SELECTOR, ".sign-tab"):
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
            button.click()
            draw_signature(driver, scenario.get("pointer", "mouse"))
            if scenario.get("screenshot"):
                driver.save_screenshot(scenario["screenshot"].replace(".png", "-pad.png"))
            driver.find_element(By.ID, "pad-adopt").click()
            WebDriverWait(driver, WAIT).until(EC.invisibility_of_element_located((By.ID, "pad")))
        for field in driver.find_elements(By.CSS_SELECTOR, ".tab input[type=text]"):
            field.clear()
            field.send_keys(scenario.get("text", "Bern"))
        for box in driver.find_elements(By.CSS_SELECTOR, ".tab input[type=checkbox]"):
            if not box.is_selected():
                box.click()
        if scenario.get("screenshot"):
            driver.execute_script("window.scrollTo(0, 0)")
            driver.save_screenshot(scenario["screenshot"])
            pages = driver.find_elements(By.CSS_SELECTOR, ".page")
            if len(pages) > 1:
                driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", pages[1])
                driver.save_screenshot(scenario["screenshot"].replace(".png", "-page2.png"))
        driver.find_element(By.ID, "finish").click()
        result["final_url"] = wait_for_event(driver)
    elif action == "decline":
        driver.find_element(By.ID, "decline").click()
        driver.find_element(By.ID, "decline-reason").send_keys(scenario.get("reason", "No thanks"))
        driver.find_element(By.ID, "confirm-decline").click()
        result["final_url"] = wait_for_event(driver)
    elif action == "later":
        driver.find_element(By.ID, "finish-later").click()
        result["final_url"] = wait_for_event(driver)
    else:
        try:
            result["final_url"] = wait_for_event(driver) if scenario.get("expect_redirect") else driver.current_url
        except TimeoutException:
            result["final_url"] = driver.current_url
    result["event"] = event_of(result.get("final_url") or "")
    if scenario.get("then") == "reopen":
        driver.get(scenario["url"])
        reopened = wait_for_event(driver)
        result["reopened_url"] = reopened
        result["reopened_event"] = event_of(reopened)
    return result


def main():
    with open(sys.argv[1], encoding="utf-8") as plan:
        scenarios = json.load(plan)
    driver = browser()
    try:
        for scenario in scenarios:
            started = time.monotonic()
            try:
                result = run(driver, scenario)
            except Exception as error:  # noqa: BLE001 - one scenario's failure is reported, the rest still run
                result = {"name": scenario["name"], "error": "%s: %s" % (type(error).__name__, error),
                          "current_url": driver.current_url}
            result["seconds"] = round(time.monotonic() - started, 2)
            print(json.dumps(result), flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
