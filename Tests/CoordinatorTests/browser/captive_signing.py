#!/usr/bin/env python3
"""Drives SignFleet captive signing pages in headless Chromium (Selenium), for
Tests/CoordinatorTests/CaptiveBrowserTests.swift.

Reads a JSON list of scenarios from the file named by the first argument, runs them in order in one browser, and prints one
JSON line per scenario on stdout:
  {"name": ..., "final_url": ..., "event": ..., "texts": {...}, "alert": bool, "error": str?}

Scenario keys: name, url, action ("sign" | "decline" | "later" | "open" | "render" |
"keyboard" | "fallback"), pointer ("pen" | "mouse" | "touch"), text (typed into text tabs),
reason (decline), screenshot (a path, taken before finishing), then ("reopen": open the same
URL again afterwards), read (element ids whose text to report), axe (true: run axe-core on the
page as opened and report its serious and critical violations), pages (render: which PDF page
each .page shows, compared with pdftoppm's drawing of it), typed (keyboard: the name to type).
Every wait has a deadline; the whole run is bounded by the caller.
"""
import io
import json
import math
import subprocess
import sys
import time
import traceback
from urllib.parse import parse_qs, urlparse

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 20  # seconds per wait


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1500", "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions"):
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


def axe_violations(driver):
    """axe-core's serious and critical violations on the current page (id, impact, first targets)."""
    from axe_selenium_python import Axe  # ships axe.min.js (PyPI axe-selenium-python)
    axe = Axe(driver)
    axe.inject()
    results = axe.run()
    return [{"id": v["id"], "impact": v["impact"], "targets": [n["target"] for n in v["nodes"][:3]]}
            for v in results["violations"] if v.get("impact") in ("serious", "critical")]


def wait_for_image(driver, page):
    """Scrolls a .page into view and waits (with a deadline) until its image has loaded or failed."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", page)
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script(
        "var i=arguments[0].querySelector('.page-image');return !i||(i.complete&&(i.naturalWidth>0||i.classList.contains('hidden')))",
        page))


def reference(pdf, number):
    """pdftoppm's own drawing of one page at 96 dpi (what a viewer shows: CropBox, /Rotate)."""
    png = subprocess.run(["pdftoppm", "-png", "-r", "96", "-cropbox", "-singlefile", "-f", str(number), "-l", str(number), pdf],
                         check=True, capture_output=True, timeout=60).stdout
    return png


def compare(shot_png, reference_png):
    """Mean absolute difference (0-255) and share of pixels off by more than 64, over the common area;
    also the same figures for a blank white page against the reference (what a failure looks like)."""
    from PIL import Image, ImageChops, ImageStat
    shot = Image.open(io.BytesIO(shot_png)).convert("RGB")
    ref = Image.open(io.BytesIO(reference_png)).convert("RGB")
    w, h = min(shot.width, ref.width), min(shot.height, ref.height)

    def figures(a, b):
        diff = ImageChops.difference(a, b).convert("L")
        mean = ImageStat.Stat(diff).mean[0]
        off = sum(diff.histogram()[65:]) / float(w * h)
        return round(mean, 3), round(off, 5)

    sizes = {"shot_size": [shot.width, shot.height], "reference_size": [ref.width, ref.height]}
    shot, ref = shot.crop((0, 0, w, h)), ref.crop((0, 0, w, h))
    mean, off = figures(shot, ref)
    blank_mean, blank_off = figures(Image.new("RGB", (w, h), "white"), ref)
    sizes.update({"mean": mean, "off": off, "blank_mean": blank_mean, "blank_off": blank_off})
    return sizes


def marker_box(reference_png):
    """The bounding box (x, y, w, h in pixels) of the solid magenta marker in a reference drawing."""
    from PIL import Image, ImageChops
    r, g, b = Image.open(io.BytesIO(reference_png)).convert("RGB").split()
    mask = ImageChops.multiply(ImageChops.multiply(r.point(lambda v: 255 if v > 200 else 0), g.point(lambda v: 255 if v < 60 else 0)),
                               b.point(lambda v: 255 if v > 200 else 0))
    box = mask.getbbox()
    return [box[0], box[1], box[2] - box[0], box[3] - box[1]] if box else None


def render_pages(driver, plan):
    """Each .page against pdftoppm's drawing of the same PDF page, and where its tab sits."""
    pages = driver.find_elements(By.CSS_SELECTOR, ".page")
    report = []
    driver.execute_script("document.querySelector('footer').style.visibility='hidden'")
    for index, entry in enumerate(plan):
        page = pages[index]
        wait_for_image(driver, page)
        geometry = driver.execute_script(
            "var p=arguments[0],r=p.getBoundingClientRect(),t=p.querySelector('.tab-signHere');"
            "var q=t?t.getBoundingClientRect():null;"
            "return {width:r.width,height:r.height,tab:q?[q.left-r.left,q.top-r.top,q.width,q.height]:null,"
            "loaded:!!(p.querySelector('.page-image')&&p.querySelector('.page-image').naturalWidth)}", page)
        driver.execute_script("arguments[0].querySelectorAll('.tab').forEach(function(t){t.style.visibility='hidden'})", page)
        shot = page.screenshot_as_png
        driver.execute_script("arguments[0].querySelectorAll('.tab').forEach(function(t){t.style.visibility=''})", page)
        ref = reference(entry["pdf"], entry["page"])
        item = {"pdf": entry["pdf"], "page": entry["page"], "css": [geometry["width"], geometry["height"]],
                "tab": geometry["tab"], "marker": marker_box(ref), "loaded": geometry["loaded"]}
        item.update(compare(shot, ref))
        report.append(item)
    driver.execute_script("document.querySelector('footer').style.visibility=''")
    return report


def preview_shapes(driver):
    """For each signed preview: its pixel ratio against its box's, and its ink's aspect against the pad's."""
    return driver.execute_script("""
        var out=[];document.querySelectorAll('.sig-preview').forEach(function(c){if(c.classList.contains('hidden'))return;
        var r=c.getBoundingClientRect(),d=c.getContext('2d').getImageData(0,0,c.width,c.height).data,x0=1e9,y0=1e9,x1=-1,y1=-1;
        for(var y=0;y<c.height;y++)for(var x=0;x<c.width;x++)if(d[(y*c.width+x)*4+3]>40){x0=Math.min(x0,x);x1=Math.max(x1,x);y0=Math.min(y0,y);y1=Math.max(y1,y);}
        var v=JSON.parse(document.getElementById('sig-'+c.id.replace('preview-','')).value),px0=1e9,py0=1e9,px1=-1e9,py1=-1e9;
        (v.points||[]).forEach(function(p){px0=Math.min(px0,p[0]);px1=Math.max(px1,p[0]);py0=Math.min(py0,p[1]);py1=Math.max(py1,p[1]);});
        out.push({canvas:c.width/c.height,box:r.width/r.height,ink:(x1-x0+1)/(y1-y0+1),pad:(px1-px0)/(py1-py0)});});return out;""")


def keyboard_sign(driver, scenario, result):
    """Signs with the keyboard alone: Finish first (the error must show and focus the first unsigned
    field), then Tab through the page from the top, Enter on each signature field, type the name,
    Tab to Adopt, Space on the checkbox, text into the text field, and Enter on Finish. The error
    must be gone once every field is signed."""

    def press(*keys):
        ActionChains(driver).send_keys(*keys).perform()

    def active():
        return driver.switch_to.active_element

    def ident(element):
        return element.get_attribute("id") or element.tag_name

    def from_the_top():
        driver.execute_script("window.scrollTo(0,0);document.body.tabIndex=-1;document.body.focus();")

    from_the_top()
    for _ in range(80):
        press(Keys.TAB)
        element = active()
        if ident(element) == "finish":
            break
        # The browser's own check of required text comes first; fill them so the page's check speaks.
        if element.get_attribute("type") == "text" and ident(element).startswith("tab-"):
            press(scenario.get("text", "Bern"))
    else:
        raise TimeoutException("Finish was not reached with Tab")
    press(Keys.ENTER)
    WebDriverWait(driver, WAIT).until(lambda d: "hidden" not in d.find_element(By.ID, "error").get_attribute("class"))
    result["error_shown"] = driver.find_element(By.ID, "error").text
    result["focus_after_error"] = ident(active())
    from_the_top()
    order = []
    signed = 0
    for _ in range(80):
        press(Keys.TAB)
        element = active()
        name = ident(element)
        if name == "finish":
            break
        order.append(name)
        if name.startswith("sign-"):
            press(Keys.ENTER)
            WebDriverWait(driver, WAIT).until(EC.visibility_of_element_located((By.ID, "pad")))
            result.setdefault("focus_in_pad", ident(active()))
            press(scenario.get("typed", "Bea Buyer"))
            for _ in range(6):
                press(Keys.TAB)
                if ident(active()) == "pad-adopt":
                    break
            else:
                raise TimeoutException("Adopt was not reached with Tab")
            press(Keys.ENTER)
            WebDriverWait(driver, WAIT).until(EC.invisibility_of_element_located((By.ID, "pad")))
            result.setdefault("focus_after_adopt", ident(active()))
            signed += 1
        elif element.get_attribute("type") == "checkbox":
            press(Keys.SPACE)
        elif element.get_attribute("type") == "text" and name.startswith("tab-") and not element.get_attribute("value"):
            press(scenario.get("text", "Bern"))
    else:
        raise TimeoutException("Finish was not reached with Tab after signing")
    result["focus_order"] = order
    result["signed"] = signed
    result["error_after"] = "hidden" not in driver.find_element(By.ID, "error").get_attribute("class")
    press(Keys.ENTER)  # on Finish
    result["final_url"] = wait_for_event(driver)


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
    if scenario.get("axe"):
        result["axe"] = axe_violations(driver)
    if action == "render":
        result["pages"] = render_pages(driver, scenario["pages"])
        if "sign_page" in scenario:
            # One field drawn with the mouse: its preview must keep the drawing's aspect in a field of another shape.
            page = driver.find_elements(By.CSS_SELECTOR, ".page")[scenario["sign_page"]]
            button = page.find_element(By.CSS_SELECTOR, ".sign-tab")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
            button.click()
            draw_signature(driver, "mouse")
            driver.find_element(By.ID, "pad-adopt").click()
            WebDriverWait(driver, WAIT).until(EC.invisibility_of_element_located((By.ID, "pad")))
            result["previews"] = preview_shapes(driver)
    elif action == "keyboard":
        keyboard_sign(driver, scenario, result)
    elif action == "fallback":
        pages = driver.find_elements(By.CSS_SELECTOR, ".page")
        for page in pages:
            wait_for_image(driver, page)
        result["notes_shown"] = driver.execute_script(
            "return Array.from(document.querySelectorAll('.render-note')).filter(function(n){return n.offsetParent!==null}).length")
        result["page_count"] = len(pages)
        result["texts"]["note"] = driver.find_element(By.CSS_SELECTOR, ".render-note").text
    elif action == "sign":
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
        result["previews"] = preview_shapes(driver)
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
                frames = traceback.extract_tb(error.__traceback__)
                where = ([f for f in frames if f.filename == __file__] or frames)[-1]
                result = {"name": scenario["name"], "error": "%s: %s (line %d: %s)" % (type(error).__name__, error, where.lineno, where.line),
                          "current_url": driver.current_url}
            result["seconds"] = round(time.monotonic() - started, 2)
            print(json.dumps(result), flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
