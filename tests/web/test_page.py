#!/usr/bin/python3
"""test_page.py - the market page (web/) in a real browser: headless Chromium
driven by Selenium (Debian's chromium, chromium-driver, python3-selenium).

    tests/web/test_page.py          (from the repository root; make test runs it)
    MARKET_SCREENSHOT=docs/market-page.png tests/web/test_page.py   (also saves a screenshot)

Against a private redis-server and market-server (authentication on, the demo
world), it loads GET /, searches for the axe, pastes B's token, buys the axe,
sees B's funds go from 800 to 300 on the page, and checks the store afterwards
(B holds the axe, A got 500, the listing is gone); a purchase made by another
client then shows up in the page's live feed (GET /events) without a reload;
on a phone-sized window nothing overflows sideways and the Buy buttons fit.
It prints cmocka's summary lines, which tests/run.sh counts.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from market_world import ROOT, Checks, World  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SECRET = "page-secret"
CHECKS = Checks()


def browser():
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1200,900", "--disable-extensions", "--no-first-run"):
        opts.add_argument(a)
    opts.binary_location = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    service = Service(os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=opts)


def wait(d, what, fn, timeout=10):
    """Waits until fn(d) is truthy; fails naming what it waited for."""
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException,)).until(lambda _: fn(d))
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}; message: "
                             f"{d.find_element(By.ID, 'message').text!r}") from None


def rows(d):
    """The (item, seller) of each listing shown, read in one step (the table may be redrawn)."""
    return [tuple(r) for r in d.execute_script(
        "return [...document.querySelectorAll('#listings tbody tr')]"
        ".map(r => [r.dataset.item, r.dataset.seller]);")]


def texts(d, css):
    return d.execute_script("return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);", css)


def run(w, d):
    base = f"http://127.0.0.1:{w.http_port}/"

    def loads():
        d.get(base)
        wait(d, "the six demo listings", lambda d: len(rows(d)) == 6)
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, f"the browser reports errors: {errors}"
        assert d.title == "Game market", d.title
        wait(d, "the live feed to connect", lambda d: d.find_element(By.ID, "live").text == "live")

    def searches():
        d.find_element(By.ID, "q-item").send_keys("axe")
        d.find_element(By.ID, "search-go").click()
        wait(d, "the search for axe", lambda d: rows(d) == [("axe", "A")])
        assert d.find_element(By.ID, "total").text == "1 listing", d.find_element(By.ID, "total").text

    def signs_in():
        d.find_element(By.ID, "token").send_keys(w.token("B"))
        d.find_element(By.CSS_SELECTOR, "#signin button").click()
        wait(d, "B's funds", lambda d: d.find_element(By.ID, "funds").text == "800")
        assert d.find_element(By.ID, "player").get_attribute("value") == "B"

    def buys():
        d.find_element(By.CSS_SELECTOR, "#listings tbody tr[data-item='axe'] button.buy").click()
        wait(d, "the purchase", lambda d: "Bought 1 axe from A for 500" in d.find_element(By.ID, "message").text)
        wait(d, "B's funds after it", lambda d: d.find_element(By.ID, "funds").text == "300")
        wait(d, "the axe in B's inventory", lambda d: "axe" in texts(d, "#inventory li"))
        wait(d, "the axe gone from the market", lambda d: rows(d) == [])
        # the store afterwards, not only the page
        assert w.redis_cli("HGET", "users:{main}:B", "funds") == "300", w.redis_cli("HGETALL", "users:{main}:B")
        assert w.redis_cli("HGET", "users:{main}:A", "funds") == "600"
        assert w.redis_cli("SISMEMBER", "inventory:{main}:B", "axe") == "1"
        assert w.redis_cli("ZSCORE", "market:{main}", "axe.A") == ""

    def sees_live():
        d.find_element(By.ID, "q-item").clear()
        d.find_element(By.ID, "search-go").click()
        wait(d, "the whole market", lambda d: len(rows(d)) == 5)
        status, _, body = w.request("POST", "/purchase", {"buyer": "E", "seller": "C", "item": "sword-2"},
                                    {"Authorization": "Bearer " + w.token("E")})
        assert status == 200, body
        wait(d, "the trade in the live feed",
             lambda d: any("E bought 1 sword-2 from C" in t for t in texts(d, "#feed li")))
        wait(d, "the market refreshed by the event", lambda d: ("sword-2", "C") not in rows(d))

    def fits_a_phone():
        d.set_window_size(390, 844)
        d.get(base)
        wait(d, "the listings on a phone", lambda d: len(rows(d)) >= 4)
        over = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert over <= 0, f"the page is {over}px wider than the phone"
        for b in d.find_elements(By.CSS_SELECTOR, "button.buy"):
            r = d.execute_script("const r = arguments[0].getBoundingClientRect();"
                                 "return [r.left, r.right, r.height];", b)
            assert r[0] >= 0 and r[1] <= 390 and r[2] >= 28, f"a Buy button does not fit: {r}"

    CHECKS.run("the page loads the market and connects to its live feed", loads)
    CHECKS.run("a search narrows the listings", searches)
    CHECKS.run("a pasted token shows the player's funds", signs_in)
    CHECKS.run("buying the axe changes the balance on the page and in the store", buys)
    CHECKS.run("a trade by another client shows up live, without a reload", sees_live)
    shot = os.environ.get("MARKET_SCREENSHOT")
    if shot:  # the page as docs/ shows it: B signed in, a listing arriving live
        d.set_window_size(1200, 820)
        d.get(base)
        d.find_element(By.ID, "token").clear()
        d.find_element(By.ID, "token").send_keys(w.token("B"))
        d.find_element(By.CSS_SELECTOR, "#signin button").click()
        wait(d, "B's trades", lambda d: any("bought 1 axe" in t for t in texts(d, "#trades li")))
        wait(d, "the live feed to connect", lambda d: d.find_element(By.ID, "live").text == "live")
        status, _, body = w.request("POST", "/list", {"seller": "C", "item": "potion-3", "price": 40},
                                    {"Authorization": "Bearer " + w.token("C")})
        assert status == 201, body
        wait(d, "the listing in the feed", lambda d: any("potion-3" in t for t in texts(d, "#feed li")))
        wait(d, "the listing in the market", lambda d: ("potion-3", "C") in rows(d))
        d.save_screenshot(os.path.join(ROOT, shot) if not os.path.isabs(shot) else shot)
    CHECKS.run("on a phone-sized window the page fits and the Buy buttons are whole", fits_a_phone)


def main():
    world = d = None
    try:
        world = World(SECRET)
        d = browser()
        run(world, d)
    except Exception as e:  # the servers or the browser would not start
        CHECKS.fail("setup", f"cannot run the page checks: {e}")
    finally:
        if d:
            d.quit()
        if world:
            if CHECKS.failed:
                print("  market-server's log (end):\n" + world.server_log()[-2000:])
            world.close()
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
