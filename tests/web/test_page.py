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
typing the start of an item's name finds every item that starts with it
(item_prefix); B buys 25 arrows across two sellers at a max price with the
units form, and the store shows what moved (and a refused quantity moves
nothing); a click on the arrows charts their price history, which a trade
by another client redraws live; the charted item's book shows its bids and asks, and B's buy
order from the units form rests (escrowed, in the book, among B's orders) and is taken back with
its Cancel button; an auction C opens shows with a countdown that ticks, and B's click on
its Bid button leads it (escrowed, among B's auctions, and in the store), and another
client's bid shows at once, from the live feed; a listing that ends shows its time
left, counting down; B proposes a direct
trade to D with the form (in the store, nothing moved), and accepts E's with its Accept button
(the bow is B's in the store, E's funds paid); on a phone-sized
window nothing overflows sideways, the Buy buttons fit, and the token and player box come
before the market.
It prints cmocka's summary lines, which tests/run.sh counts.
"""
import json
import re
import os
import sys

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


def text(d, element_id):
    """The text of an element, read in one step (it may be redrawn meanwhile)."""
    return d.execute_script("const e = document.getElementById(arguments[0]); return e ? e.textContent : '';",
                            element_id)


def click(d, what, css):
    """Clicks the element css names, found again if it was redrawn before the click."""
    wait(d, what, lambda d: d.find_element(By.CSS_SELECTOR, css).click() or True)


def ticks(d, what, css, pattern):
    """The countdown in the element css reads as pattern, then changes."""
    wait(d, what, lambda d: d.find_elements(By.CSS_SELECTOR, css))
    left = lambda: d.execute_script(f"const e = document.querySelector(\"{css}\"); "
                                    "return e ? e.textContent.trim() : '';")
    first = left()
    assert re.fullmatch(pattern, first), first
    wait(d, what + " to tick", lambda d: left() not in ("", first))


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
        # the stream names no buyer or seller: trades are private to their parties
        wait(d, "the trade in the live feed",
             lambda d: any("sold 1 sword-2 at 1200" in t for t in texts(d, "#feed li")))
        assert not any(" E " in " " + t + " " or "from C" in t for t in texts(d, "#feed li"))
        wait(d, "the market refreshed by the event", lambda d: ("sword-2", "C") not in rows(d))

    def bids_on_an_auction():
        status, _, body = w.request("POST", "/auctions", {"seller": "C", "item": "sword-1", "start_bid": 100,
                                                          "duration_s": 120},
                                    {"Authorization": "Bearer " + w.token("C")})
        assert status == 201, body
        aid = json.loads(body)["auction"]["id"]
        funds = int(w.redis_cli("HGET", "users:{main}:B", "funds"))
        d.get(base)  # B stays signed in (the token is kept for the session)
        row = f"#auctions tbody tr[data-auction='{aid}']"
        ticks(d, "the auction's time left", f"{row} td.left", r"[12]:\d\d")
        wait(d, "B's funds", lambda d: text(d, "funds") == str(funds))
        click(d, "a click on the auction's Bid", f"{row} button.bid")
        wait(d, "the bid", lambda d: "Leading the auction of sword-1 at 100" in text(d, "message"))
        wait(d, "B's funds less the bid", lambda d: text(d, "funds") == str(funds - 100))
        wait(d, "the auction among B's", lambda d: f"#{aid} leading" in texts(d, "#my-auctions li"))
        assert text(d, "escrow") == "(+100 held by buy orders and bids)", text(d, "escrow")
        # the store: B leads, its bid escrowed
        assert w.redis_cli("HGET", f"auction:{{main}}:{aid}", "bidder") == "B"
        assert w.redis_cli("HGET", "users:{main}:B", "escrow") == "100"
        # another client's bid shows at once: the live feed's auction event, not the 30 s poll
        status, _, body = w.request("POST", f"/auctions/{aid}/bid", {"bidder": "E", "amount": 150},
                                    {"Authorization": "Bearer " + w.token("E")})
        assert status == 200, body
        cells = lambda: d.execute_script(f"return [...document.querySelectorAll(\"{row} td\")]"
                                         ".map(c => c.textContent);")
        wait(d, "E's bid on the page", lambda d: cells()[2:4] == ["150", "E"], timeout=8)
        wait(d, "E's bid in the live feed", lambda d: any("E bids 150 on sword-1" in t
                                                          for t in texts(d, "#feed li")))

    def shows_listing_ends():
        status, _, body = w.request("POST", "/list", {"seller": "C", "item": "potion-3", "price": 45,
                                                      "duration_s": 600},
                                    {"Authorization": "Bearer " + w.token("C")})
        assert status == 201, body
        d.get(base)
        ticks(d, "the listing's time left", "#listings tbody tr[data-item='potion-3'] .ends",
              r"(9|10):\d\d")
        status, _, body = w.request("POST", "/unlist", {"seller": "C", "item": "potion-3"},
                                    {"Authorization": "Bearer " + w.token("C")})
        assert status == 200, body

    def trades_directly():
        d_had = w.redis_cli("SMEMBERS", "inventory:{main}:D"), w.redis_cli("HGET", "users:{main}:B", "funds")
        d.get(base)
        wait(d, "B's player view", lambda d: d.find_element(By.ID, "player-view").is_displayed())
        d.find_element(By.ID, "d-to").send_keys("D")
        d.find_element(By.ID, "d-give-funds").send_keys("10")
        d.find_element(By.ID, "d-get").send_keys("shield-7")
        d.find_element(By.ID, "direct-go").click()
        wait(d, "the proposal", lambda d: re.search(r"Trade #\d+ proposed to D", text(d, "message")))
        tid = re.search(r"#(\d+)", text(d, "message")).group(1)
        assert w.redis_cli("HGET", f"direct:{{main}}:{tid}", "from") == "B", w.redis_cli("HGETALL", f"direct:{{main}}:{tid}")
        assert (w.redis_cli("SMEMBERS", "inventory:{main}:D"), w.redis_cli("HGET", "users:{main}:B", "funds")) \
            == d_had, "nothing moves at proposal"
        wait(d, "B's proposal listed", lambda d: any(f"#{tid} to D" in t for t in texts(d, "#my-direct li")))
        status, _, body = w.request("POST", "/trades/direct", {"from": "E", "to": "B", "give": {"items": ["bow-2"]},
                                                               "get": {"funds": 5}},
                                    {"Authorization": "Bearer " + w.token("E")})
        assert status == 201, body
        eid = json.loads(body)["trade"]["id"]
        e_funds = int(w.redis_cli("HGET", "users:{main}:E", "funds"))
        d.find_element(By.CSS_SELECTOR, "#signin button").click()  # shows B again
        item = f"#my-direct li[data-trade='{eid}']"
        wait(d, "E's offer listed", lambda d: d.find_elements(By.CSS_SELECTOR, item))
        click(d, "a click on Accept", f"{item} button.accept")
        wait(d, "the trade", lambda d: "Traded with E" in text(d, "message"))
        wait(d, "the bow in B's inventory", lambda d: "bow-2" in texts(d, "#inventory li"))
        assert w.redis_cli("SISMEMBER", "inventory:{main}:B", "bow-2") == "1", "B holds the bow"
        assert w.redis_cli("SISMEMBER", "inventory:{main}:E", "bow-2") == "0", "E does not"
        assert int(w.redis_cli("HGET", "users:{main}:E", "funds")) == e_funds + 5, w.redis_cli("HGET", "users:{main}:E", "funds")
        assert w.redis_cli("HGET", f"direct:{{main}}:{eid}", "state") == "done", "the trade is done"

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
    def searches_by_prefix():
        status, _, body = w.request("POST", "/list", {"seller": "D", "item": "shield-7", "price": 280},
                                    {"Authorization": "Bearer " + w.token("D")})
        assert status == 201, body
        d.find_element(By.ID, "q-item").clear()
        d.find_element(By.ID, "q-item").send_keys("shield")
        d.find_element(By.ID, "search-go").click()
        wait(d, "the items that start with shield, by name",
             lambda d: rows(d) == [("shield-7", "D"), ("shield-8", "D")])
        assert d.find_element(By.ID, "total").text == "2 listings", d.find_element(By.ID, "total").text
        d.find_element(By.ID, "q-max").send_keys("290")  # with a price: the box names one item
        d.find_element(By.ID, "search-go").click()
        wait(d, "no item named shield", lambda d: d.find_element(By.ID, "total").text == "0 listings")
        d.find_element(By.ID, "q-max").clear()
        d.find_element(By.ID, "q-item").clear()
        d.find_element(By.ID, "q-item").send_keys("sh")
        d.find_element(By.ID, "search-go").click()
        wait(d, "the items that start with sh", lambda d: rows(d) == [("shield-7", "D"), ("shield-8", "D")])

    def buys_units():
        for seller, units, price in (("A", 50, 3), ("C", 20, 2)):
            status, _, body = w.request("POST", "/list", {"seller": seller, "item": "arrow", "price": price,
                                                          "quantity": units},
                                        {"Authorization": "Bearer " + w.token(seller)})
            assert status == 201, body

        def units_form(qty, max_price):
            for field, value in (("u-item", "arrow"), ("u-qty", str(qty)), ("u-max", str(max_price))):
                d.find_element(By.ID, field).clear()
                d.find_element(By.ID, field).send_keys(value)
            d.find_element(By.ID, "units-go").click()

        units_form(71, 3)  # 20 at 2 and 50 at 3 are listed: one more is refused, all or nothing
        wait(d, "the refusal", lambda d: "not_enough_units" in d.find_element(By.ID, "message").text)
        assert "70 available" in d.find_element(By.ID, "message").text
        assert w.redis_cli("HGET", "users:{main}:B", "funds") == "300"  # the refusal moved nothing
        units_form(25, 3)
        wait(d, "the units bought", lambda d: "Bought 25 arrow for 55" in d.find_element(By.ID, "message").text)
        wait(d, "B's funds after them", lambda d: d.find_element(By.ID, "funds").text == "245")
        wait(d, "the arrows among B's goods", lambda d: "arrow ×25" in texts(d, "#stacks li"))
        # the store afterwards, through the API: B's stacks and funds, the sellers' listings
        status, _, body = w.request("GET", "/players/B")
        player = json.loads(body)
        assert status == 200 and player["funds"] == 245 and player["stacks"] == {"arrow": 25}, body
        status, _, body = w.request("GET", "/market?item=arrow")
        assert json.loads(body)["listings"] == [{"item": "arrow", "seller": "A", "price": 3, "quantity": 45}], body
        assert w.redis_cli("HGET", "stacks:{main}:B", "arrow") == "25"

    def charts_prices():
        d.find_element(By.ID, "q-item").clear()
        d.find_element(By.ID, "q-max").clear()
        d.find_element(By.ID, "q-item").send_keys("arrow")
        d.find_element(By.ID, "search-go").click()
        wait(d, "the arrows listed", lambda d: ("arrow", "A") in rows(d))
        # the listings are redrawn by the live feed: the row is found again if it was
        click(d, "a click on the arrows' row", "#listings tbody tr[data-item='arrow'] td.item")
        wait(d, "the chart of arrows", lambda d: "arrow:" in text(d, "h-note"))
        assert "last 3" in text(d, "h-note"), text(d, "h-note")
        candles = texts(d, "#chart rect.candle")
        assert 1 <= len(candles) <= 2, len(candles)  # B's 25 arrows: one minute, or two
        # another client sells arrows at 5: the chart follows the trade, without a click
        for how, path, body, tok in (("list", "/list", {"seller": "C", "item": "arrow", "price": 5,
                                                          "quantity": 10}, "C"),
                                     ("buy", "/purchase", {"buyer": "E", "seller": "C", "item": "arrow",
                                                           "quantity": 2}, "E")):
            status, _, answer = w.request("POST", path, body, {"Authorization": "Bearer " + w.token(tok)})
            assert status in (200, 201), (how, answer)
        wait(d, "the chart redrawn by the trade", lambda d: "last 5" in d.find_element(By.ID, "h-note").text)
        highs = texts(d, "#chart text.axis")
        assert "5" in highs, highs

    def book_and_orders():
        def book_rows():
            return d.execute_script("return [...document.querySelectorAll('#book tbody tr')]"
                                    ".map(r => [...r.cells].map(c => c.textContent));")
        # the charted arrows' book: D's order of 10 at 1 (the demo fixture's), A's and C's listings
        wait(d, "the book of arrows", lambda d: book_rows() == [["10", "1", "3", "45"], ["", "", "5", "8"]])
        for field, value in (("u-item", "arrow"), ("u-qty", "5"), ("u-max", "2")):
            d.find_element(By.ID, field).clear()
            d.find_element(By.ID, field).send_keys(value)
        d.find_element(By.ID, "order-go").click()  # nothing at 2 or less: all of it rests
        wait(d, "the order resting", lambda d: "5 resting at 2" in d.find_element(By.ID, "message").text)
        wait(d, "B's funds less the escrow", lambda d: d.find_element(By.ID, "funds").text == "235")
        assert d.find_element(By.ID, "escrow").text == "(+10 held by buy orders and bids)", d.find_element(By.ID, "escrow").text
        wait(d, "the order among B's", lambda d: any("arrow ×5 @2" in t for t in texts(d, "#my-orders li")))
        wait(d, "the best bid in the book", lambda d: book_rows()[:2] == [["5", "2", "3", "45"], ["10", "1", "5", "8"]])
        assert w.redis_cli("HGET", "users:{main}:B", "escrow") == "10"
        click(d, "a click on the order's Cancel", "#my-orders button.cancel")
        wait(d, "the cancel", lambda d: "Cancelled the order of arrow: 10 back" in d.find_element(By.ID, "message").text)
        wait(d, "B's funds back", lambda d: d.find_element(By.ID, "funds").text == "245")
        wait(d, "no order of B's", lambda d: texts(d, "#my-orders li") == [])
        assert w.redis_cli("HGET", "users:{main}:B", "escrow") == "0"
        wait(d, "the book without it", lambda d: book_rows()[0] == ["10", "1", "3", "45"])

    CHECKS.run("a trade by another client shows up live, without a reload", sees_live)
    CHECKS.run("the start of an item's name finds every item that starts with it", searches_by_prefix)
    CHECKS.run("the units form buys a quantity across sellers at a max price", buys_units)
    CHECKS.run("an item's price history is charted, and redrawn by its trades", charts_prices)
    CHECKS.run("the charted item's book shows; a buy order from the page rests and is taken back",
               book_and_orders)
    CHECKS.run("an open auction counts down, and a bid from the page leads it", bids_on_an_auction)
    CHECKS.run("a listing that ends shows its time left, counting down", shows_listing_ends)
    CHECKS.run("a direct trade proposed from the page, and one accepted there", trades_directly)
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
    def phone_puts_the_player_first():
        if d.get_window_size()["width"] > 420:
            d.set_window_size(390, 844)
            d.get(base)
        wait(d, "the page at phone width", lambda d: d.execute_script("return window.innerWidth") <= 390)
        top = d.execute_script(
            "const t = (id) => document.getElementById(id).getBoundingClientRect();"
            "return {player: t('player-panel').top, market: t('market-panel').top,"
            "        token: t('token').bottom, search: t('search').top, units: t('units').top,"
            "        width: t('player-panel').width};")
        assert top["player"] < top["market"], f"the market comes before the player box: {top}"
        assert top["token"] < top["search"] < top["units"], f"the token is not first: {top}"
        assert top["width"] <= 390, top

    CHECKS.run("on a phone-sized window the page fits and the Buy buttons are whole", fits_a_phone)
    CHECKS.run("on a phone-sized window the token and player box come first", phone_puts_the_player_first)


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
