#!/usr/bin/env python3
"""Answers SignFleet's OAuth consent page (docs/rest-api.md, "The authorization code grant") in
headless Chromium (Selenium), for Tests/CoordinatorTests/OAuthConsentBrowserTests.swift.

    oauth_consent.py URL EMAIL PASSWORD REDIRECT_PREFIX

Opens URL (the SDK's authorization URI), reports the page's key name and axe-core's serious and
critical violations, submits a wrong password and reads the page's problem, then the right one
with Allow, waits until the browser is at REDIRECT_PREFIX and prints one JSON object:
  {"client_name", "axe", "problem", "after_wrong_url", "final_url"} or {"error", "current_url"}.
Every wait has a deadline; the whole run is bounded by the caller.
"""
import json
import sys
import traceback

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from captive_signing import WAIT, axe_violations, browser


def main():
    url, email, password, redirect = sys.argv[1:5]
    driver = browser()
    out = {}
    try:
        driver.get(url)
        out["client_name"] = driver.find_element(By.ID, "client-name").text
        out["axe"] = axe_violations(driver)
        driver.find_element(By.ID, "email").send_keys(email)
        driver.find_element(By.ID, "password").send_keys("not-" + password)
        driver.find_element(By.ID, "allow").click()
        WebDriverWait(driver, WAIT).until(lambda d: d.find_elements(By.ID, "problem"))
        out["problem"] = driver.find_element(By.ID, "problem").text
        out["after_wrong_url"] = driver.current_url
        driver.find_element(By.ID, "email").send_keys(email)
        driver.find_element(By.ID, "password").send_keys(password)
        driver.find_element(By.ID, "allow").click()
        WebDriverWait(driver, WAIT).until(lambda d: d.current_url.startswith(redirect))
        out["final_url"] = driver.current_url
    except Exception as e:  # reported, not raised: the Swift test says what failed
        out["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        out["current_url"] = driver.current_url
    finally:
        driver.quit()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
