#!/usr/bin/env python3
# The release before sharded pre-queues (old, :18081) and this one (new, :18082, started with
# NEW_ENV="WR_PREQUEUE_SHARDS=3") side by side on one Redis (scripts/rolling/up.sh first;
# down.sh after). Checks the rule of docs/UPGRADING.md: while an instance of the release before
# is alive, a new schedule keeps one shard (the old release's join.lua and admit.lua would
# freeze the queue's own slot alone), so a pre-queue started beside the old release is drawn
# by this one as before; once the old instance is gone, a new schedule is sharded, its entries
# spread, and this release draws them all (rate 0: nobody is admitted, positions are the drawn places). Every draw is verified as a buyer would (the
# published seed, commitment, participants hash and order: docs/DRAW.md).
# OLD_KNOWS_SHARDS=1: the release before already has sharded pre-queues (an upgrade from a
# release after 70d70bc): a schedule made through this release is then sharded at once, one
# made through the old one keeps the old one's setting (auto: one shard on one Redis), and the
# draws, by whichever release leads, are checked as before.
# Prints one line per check and "ALL OK" or the failures; exit status 1 on a failure.
import hashlib, json, os, signal, subprocess, sys, time, urllib.request
OLD, NEW = "http://127.0.0.1:18081", "http://127.0.0.1:18082"
ADM = "adm-roll27-token-0123456789"
RUN = "/tmp/roll27/run"
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


def rcli(*args):
    return subprocess.run(["redis-cli", "-p", "16479", *args], capture_output=True, text=True).stdout.strip()


def H(b):
    return hashlib.sha256(b).digest()


def verify(base, name, tickets):
    """The published draw verifies and every joined ticket has the drawn place of its id."""
    end = time.time() + 30
    while True:
        st, d = req(base, "GET", f"/api/queues/{name}/draw")
        if (st == 200 and d.get("seed")) or time.time() > end:
            break
        time.sleep(0.25)
    st, order = req(base, "GET", f"/api/queues/{name}/draw/order")
    ids = order.decode().split("\n")[:-1] if st == 200 else []
    ok = st == 200 and len(ids) == len(set(ids)) == d.get("participants")
    seed, ph = bytes.fromhex(d.get("seed", "")), d.get("participants_hash", "")
    ok = ok and H(seed).hex() == d["commitment"]
    ok = ok and H("".join(i + "\n" for i in sorted(ids)).encode()).hex() == ph
    key = H(seed + bytes.fromhex(ph)) if ok else b""
    ok = ok and ids == sorted(ids, key=lambda i: (H(key + bytes.fromhex(i)), i))
    check(f"{name}: the published draw verifies ({len(ids)} participants)", ok)
    places = []
    for tk in tickets:
        tid = tk.split(".")[1]
        want = ids.index(hashlib.sha256(tid.encode()).hexdigest()) + 1 if ids else -1
        s, p = req(base, "GET", f"/api/queues/{name}/status", headers={"Authorization": "Bearer " + tk})
        places.append((p.get("position") if s == 200 else None, want))
    check(f"{name}: every member at its drawn place", all(a == b for a, b in places), places[:5])


def joins(name, n, bases):
    out = []
    for i in range(n):
        base = bases[i % len(bases)]
        st, b = req(base, "POST", f"/api/queues/{name}/join", headers={"X-Forwarded-For": f"198.51.100.{i + 1}"})
        if st != 201 or b.get("state") != "prequeue":
            check(f"{name}: join {i}", False, (st, b))
        out.append(b.get("ticket", ""))
    return out


start_in_an_hour = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))

# 1. Beside the release before: a schedule set by either release keeps one shard.
for maker, name in ((OLD, "rolla"), (NEW, "rollb")):
    st, _ = admin(maker, "PUT", f"/admin/api/queues/{name}", {"rate_per_second": 0, "starts_at": start_in_an_hour})
    check(f"{name}: scheduled via {'old' if maker == OLD else 'new'}", st in (200, 201), st)
    tags = rcli("HGET", "wr:{q:" + name + "}:cfg", "pq_tags")
    if os.environ.get("OLD_KNOWS_SHARDS") == "1" and maker == NEW:
        check(f"{name}: sharded beside an old release that knows shards", tags == "1,2,3", tags)
    else:
        check(f"{name}: one shard while old is alive", tags == "", tags)
ta = joins("rolla", 12, [OLD, NEW])
tb = joins("rollb", 12, [OLD, NEW])
# rollb starts and is drawn with both releases running (whichever leads draws).
admin(NEW, "PUT", "/admin/api/queues/rollb", {"starts_at": None})
verify(NEW, "rollb", tb)

# 2. The old instance goes (SIGTERM: it leaves the registry at once); rolla, scheduled and
# joined beside it, is started and drawn by this release alone.
with open(RUN + "/old.pid") as f:
    os.kill(int(f.read()), signal.SIGTERM)
time.sleep(2)
admin(NEW, "PUT", "/admin/api/queues/rolla", {"starts_at": None})
verify(NEW, "rolla", ta)

# 3. This release alone: a new schedule is sharded, its entries spread, all drawn.
st, _ = admin(NEW, "PUT", "/admin/api/queues/rollc", {"rate_per_second": 0, "starts_at": start_in_an_hour})
tags = rcli("HGET", "wr:{q:rollc}:cfg", "pq_tags")
check("rollc: 3 shards once old is gone", len(tags.split(",")) == 3, tags)
tc = joins("rollc", 30, [NEW])
sizes = [int(rcli("ZCARD", "wr:{q:rollc~" + t + "}:pre") or 0) for t in tags.split(",")]
check("rollc: entries in every shard", sum(sizes) == 30 and all(s > 0 for s in sizes), sizes)
admin(NEW, "PUT", "/admin/api/queues/rollc", {"starts_at": None})
verify(NEW, "rollc", tc)

print("ALL OK" if not fails else f"FAILED: {fails}")
sys.exit(1 if fails else 0)
