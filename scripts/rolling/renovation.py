#!/usr/bin/env python3
# The release before (old, :18081) and this one (new, :18082) side by side on one Redis and
# PostgreSQL through one token lifetime (scripts/rolling/up.sh first; down.sh after), for the
# renovation: the queue settings (now read and written through the settings table) travel
# both ways unchanged; buyers join through either instance, are admitted in order by
# whichever leads, order through the other; the sold-out flag (judged with a version by the
# new release, plainly by the old) ends right whichever instance sells the last unit or
# restocks. Prints one line per check and "ALL OK" or the failures; exit status 1 on a failure.
import json, sys, time, urllib.request
OLD, NEW = "http://127.0.0.1:18081", "http://127.0.0.1:18082"
ADM = "adm-roll27-token-0123456789"
NAMES = {OLD: "old", NEW: "new"}
fails = []


def req(base, method, path, body=None, headers=None):
    h = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    r = urllib.request.Request(base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            b = resp.read()
            return resp.status, (json.loads(b) if b[:1] in (b"{", b"[") else b)
    except urllib.error.HTTPError as e:
        b = e.read()
        return e.code, (json.loads(b) if b[:1] in (b"{", b"[") else b)


def admin(base, method, path, body=None):
    return req(base, method, path, body, {"Authorization": "Bearer " + ADM})


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (": " + str(detail) if detail != "" else ""))
    if not ok:
        fails.append(what)


def queue_of(base, name):
    st, s = admin(base, "GET", "/admin/api/stats")
    return next((q for q in s.get("queues", []) if q.get("name") == name), {}) if st == 200 else {}


def until(base, name, cond, secs=15):
    """The queue's stats on base once cond holds (each instance's stats come from a shared
    snapshot that follows a change within seconds), or the last seen after secs."""
    end = time.time() + secs
    while True:
        q = queue_of(base, name)
        if (q and cond(q)) or time.time() > end:
            return q
        time.sleep(0.25)


# 1. Settings written by one release read the same through the other (every key the old
# release answers), both ways.
knobs = {"rate_per_second": 2.5, "max_active": 40, "token_ttl_seconds": 45, "places_per_ip": 7,
         "max_active_share_per_ip": 0.25, "pow_difficulty": 0, "priority_share": 0.3,
         "allowed_origins": ["https://shop.example"], "auto_redirect": True, "brand_name": "Roll",
         "brand_color": "#1a5fb4", "brand_message": "Hello", "support_url": "/help", "rate_mode": "fixed",
         "auto_min": 2, "auto_max": 80, "auto_target_p95_ms": 700, "token_ttl_min_seconds": 20,
         "token_ttl_halve_at": 900, "method": "fifo", "paused": False, "closed": False}
for writer, reader in ((NEW, OLD), (OLD, NEW)):
    name = "set" + NAMES[writer]
    st, w = admin(writer, "PUT", "/admin/api/queues/" + name, knobs)
    check(f"PUT all settings on {NAMES[writer]}", st == 201, st)
    a = until(writer, name, lambda q: q.get("rate_per_second") == 2.5)
    b = until(reader, name, lambda q: q.get("rate_per_second") == 2.5)
    keys = sorted(set(a) & set(b) - {"waiting", "admit_rate", "tick_lag_ms", "leader", "admission_held",
                                       "token_ttl_effective_seconds", "active_tokens", "admitted_total"})
    diff = {k: (a[k], b[k]) for k in keys if a[k] != b[k]}
    check(f"stats of a queue {NAMES[writer]} wrote, read through {NAMES[reader]}: same {len(keys)} keys", not diff, diff)
    missing = sorted(set(a) ^ set(b))
    check(f"the two releases' stats keys", not missing, missing)
    for k, v in knobs.items():
        if a.get(k) != v:
            check(f"{k} as written", False, (a.get(k), v))
    # a change through the reader keeps what it does not name
    st, _ = admin(reader, "PUT", "/admin/api/queues/" + name, {"rate_per_second": 3})
    c = until(writer, name, lambda q: q.get("rate_per_second") == 3)
    check(f"a partial PUT on {NAMES[reader]} keeps the rest", st == 200 and c.get("rate_per_second") == 3 and
          c.get("token_ttl_halve_at") == 900 and c.get("brand_name") == "Roll", (st, c.get("rate_per_second")))

# 2. Buyers through either instance, admitted in order by whichever leads, ordering through
# the other; the last unit sold by one release, the restock by the other, both ways.
TTL = 20
admin(NEW, "PUT", "/admin/api/queues/roll", {"rate_per_second": 2, "token_ttl_seconds": TTL, "places_per_ip": 0, "paused": True})
admin(OLD, "PUT", "/admin/api/products/rollp", {"queue": "roll", "stock": 3, "name": "Roll tee", "price": 1000, "currency": "KRW"})
buyers = []
for i in range(6):
    base = OLD if i % 2 == 0 else NEW
    st, b = req(base, "POST", "/api/queues/roll/join", headers={"X-Forwarded-For": f"198.51.100.{i + 1}"})
    buyers.append({"i": i, "via": base, "ticket": b.get("ticket")})
    check(f"join {i} via {NAMES[base]}", st in (200, 201) and b.get("state") == "waiting", (st, b.get("state"), b.get("position")))
pos = []
for bu in buyers:
    other = NEW if bu["via"] == OLD else OLD
    st, b = req(other, "GET", "/api/queues/roll/status", headers={"Authorization": "Bearer " + bu["ticket"]})
    pos.append(b.get("position"))
check("positions read through the other instance are 1..6 in join order", pos == [1, 2, 3, 4, 5, 6], pos)
admin(OLD, "PUT", "/admin/api/queues/roll", {"paused": False})
order_of, deadline = [], time.time() + 30
while time.time() < deadline and len(order_of) < 6:
    for bu in buyers:
        if "token" in bu:
            continue
        st, b = req(NEW, "GET", "/api/queues/roll/status", headers={"Authorization": "Bearer " + bu["ticket"]})
        if b.get("state") == "admitted":
            bu["token"] = b.get("token")
            order_of.append(bu["i"])
    time.sleep(0.3)
check("admitted in join order (FIFO) across the two releases", order_of == sorted(order_of) and len(order_of) == 6, order_of)
sold = 0
for bu in buyers[:3]:
    base = NEW if bu["via"] == OLD else OLD
    st, b = req(base, "POST", "/api/orders", {"product_id": "rollp", "quantity": 1},
                {"X-Admission-Token": bu.get("token") or "", "Authorization": "Bearer " + bu["ticket"]})
    check(f"order {bu['i']} via {NAMES[base]}", st == 201, (st, b))
    sold += st == 201
last_by = NEW if buyers[2]["via"] == OLD else OLD
for base in (OLD, NEW):
    check(f"sold out after the last unit (sold by {NAMES[last_by]}), seen by {NAMES[base]}", until(base, "roll", lambda q: q.get("sold_out")).get("sold_out") is True)
st, b = req(buyers[3]["via"], "POST", "/api/orders", {"product_id": "rollp", "quantity": 1},
            {"X-Admission-Token": buyers[3].get("token") or "", "Authorization": "Bearer " + buyers[3]["ticket"]})
check("an order past the stock is refused (no oversell)", st == 409, (st, b))
for restocker, seller in ((OLD, NEW), (NEW, OLD)):
    admin(restocker, "PUT", "/admin/api/products/rollp", {"stock": 1})
    time.sleep(1.5)  # past the release before's own one-second re-check
    check(f"restocked by {NAMES[restocker]}: not sold out on both",
          all(until(b, "roll", lambda q: q.get("sold_out") is False).get("sold_out") is False for b in (OLD, NEW)))
    bu = next(b for b in buyers[3:] if not b.get("ordered"))
    st, _ = req(seller, "POST", "/api/orders", {"product_id": "rollp", "quantity": 1},
                {"X-Admission-Token": bu.get("token") or "", "Authorization": "Bearer " + bu["ticket"]})
    bu["ordered"] = st == 201
    sold += st == 201
    time.sleep(1.5)
    check(f"the restock's unit sold by {NAMES[seller]}: sold out on both", st == 201 and
          all(until(b, "roll", lambda q: q.get("sold_out") is True).get("sold_out") is True for b in (OLD, NEW)), st)
st, p = req(NEW, "GET", "/api/products/rollp")
check("orders + stock add up (3 + 1 + 1 units)", sold + p.get("stock", -1) == 5, (sold, p.get("stock")))
# 3. The nouns that left package queue (trust, branding, topology) read and write the same
# keys: invites made by one release are listed, spent and revoked through the other, a logo
# put through one is served by the other with the same ETag, each instance's admin stats
# list both instances.
import base64
for maker, user in ((OLD, NEW), (NEW, OLD)):
    admin(maker, "PUT", "/admin/api/queues/inv", {"rate_per_second": 0, "places_per_ip": 0})
    st, b = admin(maker, "POST", "/admin/api/queues/inv/invites", {"count": 2, "lane": "priority"})
    codes = [i["code"] for i in b.get("invites", [])] if st == 201 else []
    check(f"invites made by {NAMES[maker]}", st == 201 and len(codes) == 2, st)
    st, b = admin(user, "GET", "/admin/api/queues/inv/invites")
    listed = sorted(i["code"] for i in b.get("invites", [])) if st == 200 else []
    check(f"listed by {NAMES[user]}", set(codes) <= set(listed), (st, listed))
    st, b = req(user, "POST", "/api/queues/inv/join", {"invite": codes[0]} if codes else {},
                headers={"X-Forwarded-For": "203.0.113.9" if maker == OLD else "203.0.113.10"})
    check(f"an invite of {NAMES[maker]} spent at a join through {NAMES[user]}: the priority lane",
          st in (200, 201) and b.get("lane") == "priority", (st, b.get("lane"), b.get("error")))
    st, _ = admin(user, "DELETE", "/admin/api/queues/inv/invites/" + (codes[1] if codes else "x"))
    check(f"revoked through {NAMES[user]}", st == 204, st)
    st, b = admin(maker, "GET", "/admin/api/queues/inv/invites")
    left = [i["code"] for i in b.get("invites", [])] if st == 200 else None
    check(f"{NAMES[maker]} sees the revocation", left is not None and codes[1:] and codes[1] not in left, left)
    admin(maker, "POST", "/admin/api/queues/inv/invites", {"count": 0})  # a refusal, not a change

png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
for putter, getter in ((OLD, NEW), (NEW, OLD)):
    r = urllib.request.Request(putter + "/admin/api/queues/inv/logo", data=png, method="PUT",
                               headers={"Authorization": "Bearer " + ADM, "Content-Type": "image/png"})
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            put_st = resp.status
    except urllib.error.HTTPError as e:
        put_st = e.code
    st, b = req(getter, "GET", "/q/inv/logo")
    st2, b2 = req(putter, "GET", "/q/inv/logo")
    check(f"a logo put through {NAMES[putter]} is served by {NAMES[getter]} as put", put_st in (200, 201) and st == 200 and b == png and b2 == png, (put_st, st, st2))

for base in (OLD, NEW):
    ids = []
    for _ in range(30):
        st, b = admin(base, "GET", "/admin/api/stats")
        ids = sorted(i.get("id") for i in (b.get("instances") or [])) if st == 200 else []
        if ids == ["new", "old"]:
            break
        time.sleep(0.5)
    check(f"{NAMES[base]}'s admin stats list both instances", ids == ["new", "old"], ids)

print("ALL OK" if not fails else "FAILED: " + "; ".join(fails))
sys.exit(1 if fails else 0)
