#!/usr/bin/env python3
# One token lifetime with the release before (old, :18081) and this one (new, :18082) side by
# side on one Redis and PostgreSQL: buyers join through either, get tokens, order through the
# other; an operator on the new instance revokes one token; the strict body and no-store
# differ; after the token lifetime, stock and orders add up and max_active is free again.
import json, time, urllib.request, http.cookiejar, uuid
OLD, NEW = "http://127.0.0.1:18081", "http://127.0.0.1:18082"
ADM = "adm-roll27-token-0123456789"
def req(base, method, path, body=None, headers=None, raw=None):
    h = dict(headers or {})
    data = None
    if raw is not None: data = raw.encode(); h.setdefault("Content-Type", "application/json")
    elif body is not None: data = json.dumps(body).encode(); h["Content-Type"] = "application/json"
    r = urllib.request.Request(base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            b = resp.read(); return resp.status, dict(resp.headers), (json.loads(b) if b[:1] in (b"{", b"[") else b)
    except urllib.error.HTTPError as e:
        b = e.read(); return e.code, dict(e.headers), (json.loads(b) if b[:1] in (b"{", b"[") else b)
def admin(base, method, path, body=None, raw=None):
    return req(base, method, path, body, {"Authorization": "Bearer " + ADM}, raw)
out = []
def say(*a):
    s = " ".join(str(x) for x in a); print(s); out.append(s)
TTL = 20
st, _, _ = admin(NEW, "PUT", "/admin/api/queues/roll", {"rate_per_second": 50, "max_active": 4, "token_ttl_seconds": TTL, "method": "passthrough", "places_per_ip": 0})
say("create queue on new:", st)
st, _, _ = admin(OLD, "PUT", "/admin/api/products/rollp", {"queue": "roll", "stock": 6, "name": "Roll tee", "price": 1000, "currency": "KRW"})
say("product on old:", st)
# strict body: old lenient, new strict
for name, base in (("old", OLD), ("new", NEW)):
    st, _, b = admin(base, "PUT", "/admin/api/queues/roll", raw='{"rate_per_second":50,"RATE_PER_SECOND":7}')
    say(f"PUT with a differently-cased key on {name}:", st, b.get("error", {}).get("code") if isinstance(b, dict) and "error" in b else "")
admin(NEW, "PUT", "/admin/api/queues/roll", {"rate_per_second": 50})
buyers = []
for i in range(8):
    base = OLD if i % 2 == 0 else NEW
    st, h, b = req(base, "POST", "/api/queues/roll/join", headers={"X-Forwarded-For": f"198.51.100.{i+1}"})
    buyers.append({"i": i, "via": base, "ticket": b.get("ticket"), "state": b.get("state"), "token": b.get("token")})
    say(f"join {i} via {'old' if base == OLD else 'new'}: {st} {b.get('state')} Cache-Control={h.get('Cache-Control')!r}")
def status(bu, base):
    st, _, b = req(base, "GET", "/api/queues/roll/status", headers={"Authorization": "Bearer " + bu["ticket"]})
    return b
adm = [b for b in buyers if b["state"] == "admitted"]
say("admitted at once:", len(adm), "(max_active 4)")
# revoke the first admitted buyer's token on the new instance
v = adm[0]
st, _, _ = admin(NEW, "POST", "/admin/api/queues/roll/revoke", {"ticket": v["ticket"]})
say("revoke on new:", st)
for name, base in (("old", OLD), ("new", NEW)):
    st, _, b = req(base, "GET", "/api/verify", headers={"X-Admission-Token": v["token"], "Authorization": "Bearer " + v["ticket"]})
    say(f"verify the revoked token on {name}:", st, b.get("error", {}).get("code") if isinstance(b, dict) else "")
st, _, _ = admin(OLD, "POST", "/admin/api/queues/roll/revoke", {"ticket": adm[1]["ticket"]})
say("revoke route on old:", st)
# order with the other admitted tokens, through the other instance than they joined
orders = 0
for bu in adm[1:]:
    base = NEW if bu["via"] == OLD else OLD
    st, _, b = req(base, "POST", "/api/orders", {"product_id": "rollp", "quantity": 1}, {"X-Admission-Token": bu["token"], "Authorization": "Bearer " + bu["ticket"]})
    say(f"order {bu['i']} via {'old' if base == OLD else 'new'}:", st)
    orders += st == 201
# the revoked buyer's status through each
for name, base in (("old", OLD), ("new", NEW)):
    say(f"revoked buyer's status on {name}:", status(v, base).get("state"))
# wait one token lifetime plus a tick, then everyone waiting gets admitted and orders
deadline = time.time() + TTL + 15
while time.time() < deadline:
    states = [status(b, NEW).get("state") for b in buyers]
    if states.count("waiting") == 0: break
    time.sleep(1)
say("after one token lifetime, states:", states)
for bu in buyers:
    s = status(bu, OLD if bu["i"] % 2 else NEW)
    if s.get("state") == "admitted" and bu not in adm:
        st, _, _ = req(NEW, "POST", "/api/orders", {"product_id": "rollp", "quantity": 1}, {"X-Admission-Token": s["token"], "Authorization": "Bearer " + bu["ticket"]})
        say(f"late order {bu['i']}:", st); orders += st == 201
st, _, p = req(NEW, "GET", "/api/products/rollp")
say("orders:", orders, "stock left:", p.get("stock"), "(6 at the start; no oversell: orders + stock = 6)", orders + (p.get("stock") or 0) == 6)
st, _, s = admin(NEW, "GET", "/admin/api/stats")
q = [x for x in s.get("queues", []) if x.get("name") == "roll"]
say("stats of roll on new:", json.dumps({k: q[0].get(k) for k in ("waiting", "active", "admitted_total") if q}))
open("/tmp/roll27/journey.out", "w").write("\n".join(out) + "\n")
