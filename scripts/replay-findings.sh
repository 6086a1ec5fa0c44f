#!/usr/bin/env bash
# scripts/replay-findings.sh BIN LABEL — replays the hostile review's findings (issue 14) against
# one server binary on loopback: a private redis-server, the binary's local PostgreSQL, then
# curl/python requests; prints each answer. Used to show before/after (BENCHMARKS.md).
# STALL=0 skips the 10 s Redis SIGSTOP. Needs redis-server, curl, python3. Stops what it starts.
set -u
BIN=$1; LABEL=$2
W=$(mktemp -d /tmp/wr-replay.XXXX); chmod 755 $W
RP=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
AP=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
redis-server --port $RP --save '' --appendonly no --dir $W --daemonize no >/dev/null 2>&1 & RPID=$!
sleep 0.3
WR_ADDR=127.0.0.1:$AP REDIS_URL=redis://127.0.0.1:$RP/0 WR_DATA_DIR=$W/pg WR_SECRET=s3cret-s3cret-s3cret WR_ADMIN_TOKEN=admin-token-1 WR_DEMO=false WR_LOG_LEVEL=error $BIN >$W/log 2>&1 & SPID=$!
U=http://127.0.0.1:$AP
for i in $(seq 1 200); do curl -fs $U/readyz >/dev/null 2>&1 && break; sleep 0.2; done
A=(-H 'Authorization: Bearer admin-token-1' -H 'Content-Type: application/json')
put() { curl -s -o /dev/null -w '%{http_code}' -X PUT "${A[@]}" "$U/admin/api/$1" -d "$2"; }
echo "== $LABEL"
put queues/fast '{"rate_per_second":1000}' >/dev/null; put queues/slow '{"paused":true}' >/dev/null
put products/pslow '{"stock":100,"queue":"slow"}' >/dev/null; put products/pfast '{"stock":100,"queue":"fast"}' >/dev/null
admitted() { # prints "ticket token" of a new user of queue fast once admitted
  local t tok=""; t=$(curl -s -X POST -H "X-Forwarded-For: 10.0.0.$1" $U/api/queues/fast/join | python3 -c 'import sys,json;print(json.load(sys.stdin)["ticket"])')
  for i in $(seq 1 50); do tok=$(curl -s -H "Authorization: Bearer $t" $U/api/queues/fast/status | python3 -c 'import sys,json;print(json.load(sys.stdin).get("token",""))'); [ -n "$tok" ] && break; sleep 0.1; done
  echo "$t $tok"
}
read T TOK < <(admitted 1)
echo "1. fast-queue token buys 5 of the paused queue's product:"
curl -s -w ' → %{http_code}\n' -X POST $U/api/orders -H "Authorization: Bearer $T" -H "X-Admission-Token: $TOK" -H 'Content-Type: application/json' -d '{"product_id":"pslow","quantity":5}'
read T2 TOK2 < <(admitted 2)
echo "2. quantity 100 against stock 100:"
curl -s -w ' → %{http_code}\n' -X POST $U/api/orders -H "Authorization: Bearer $T2" -H "X-Admission-Token: $TOK2" -H 'Content-Type: application/json' -d '{"product_id":"pfast","quantity":100}'
echo "3. one address, 300 joins of a paused queue in a burst (join limit 50/s burst 100 is on):"
put queues/hoard '{"paused":true}' >/dev/null
codes=$(for i in $(seq 1 300); do curl -s -o /dev/null -w '%{http_code}\n' -X POST $U/api/queues/hoard/join; done | sort | uniq -c | tr '\n' ' ')
echo "   $codes ; waiting now: $(curl -s "${A[@]}" $U/admin/api/stats | python3 -c 'import sys,json;print([q["waiting"] for q in json.load(sys.stdin)["queues"] if q["name"]=="hoard"][0])')"
echo "   30 status polls of one ticket at once:"
HT=$(curl -s -X POST -H 'X-Forwarded-For: 9.9.9.9' $U/api/queues/fast/join | python3 -c 'import sys,json;print(json.load(sys.stdin).get("ticket",""))')
echo "   $(for i in $(seq 1 30); do curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $HT" $U/api/queues/fast/status; done | sort | uniq -c | tr '\n' ' ')"
echo "4. one browser (cookie jar) joins qa then qb; status of qa:"
put queues/qa '{"paused":true}' >/dev/null; put queues/qb '{"paused":true}' >/dev/null
J=$W/jar; curl -s -c $J -b $J -o /dev/null -X POST -H 'X-Forwarded-For: 8.8.8.8' $U/api/queues/qa/join; curl -s -c $J -b $J -o /dev/null -X POST $U/api/queues/qb/join
curl -s -b $J -w ' → %{http_code}\n' $U/api/queues/qa/status | cut -c1-120
echo "5. admin product PUT price 2147483648 / 9223372036854775807 / name with NUL:"
for b in '{"price":2147483648}' '{"price":9223372036854775807}' '{"name":"a\u0000b"}'; do printf '   %s → ' "$b"; curl -s -w ' %{http_code}\n' -X PUT "${A[@]}" $U/admin/api/products/px -d "$b" | cut -c1-160; done
echo "7. framing: two Content-Length / CL+TE / garbage request line:"
python3 - $AP <<'PY'
import socket,sys
port=int(sys.argv[1])
def raw(req):
    s=socket.create_connection(("127.0.0.1",port),timeout=3); s.sendall(req)
    out=b""
    try:
        while True:
            d=s.recv(4096)
            if not d: out+=b"<closed>"; break
            out+=d
    except socket.timeout: out+=b"<open after 3 s>"
    s.close(); return out
for name,req in [("two Content-Length",b"POST /api/queues/fast/join HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello"),
 ("CL + TE",b"POST /api/queues/fast/join HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
 ("garbage line",b"HELLO\r\n\r\n")]:
    r=raw(req); first=r.split(b"\r\n")[0]; n=r.count(b"HTTP/1.1 ")
    print("   %-18s → %s; %d response(s); %s"%(name, first.decode(errors="replace"), n, "closed" if r.endswith(b"<closed>") else "left open"))
PY
echo "8. smaller:"
echo "   nosniff on /api/products: $(curl -s -D - -o /dev/null $U/api/products | grep -ci nosniff)"
echo "   Set-Cookie with X-Forwarded-Proto: https (no trusted proxy): $(curl -s -D - -o /dev/null -X POST -H 'X-Forwarded-Proto: https' -H 'X-Forwarded-For: 7.7.7.7' $U/api/queues/qa/join | grep -i set-cookie | grep -ci secure) Secure"
echo "   Origin https://127.0.0.1:$AP on http → $(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Origin: https://127.0.0.1:$AP" $U/api/queues/qa/join)"
put queues/hq '{"paused":true}' >/dev/null
HT=$(curl -s -X POST -H 'X-Forwarded-For: 6.6.6.6' $U/api/queues/hq/join | python3 -c 'import sys,json;print(json.load(sys.stdin)["ticket"])')
python3 - $AP "$HT" <<'PY'
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1])),timeout=2)
s.sendall(("HEAD /api/queues/hq/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"%sys.argv[2]).encode())
out=b""
try:
    while True:
        d=s.recv(4096)
        if not d: break
        out+=d
except socket.timeout: pass
head,_,body=out.partition(b"\r\n\r\n")
print("   HEAD stream: %s, %d body bytes: %r"%(head.split(b"\r\n")[0].decode(), len(body), body[:60]))
PY
read T3 TOK3 < <(admitted 3)
echo "   array order body: $(curl -s -X POST -H "X-Admission-Token: $TOK3" -H "Authorization: Bearer $T3" $U/api/orders -d '[1]')"
if [ "${STALL:-1}" = 1 ]; then
echo "6. Redis SIGSTOP 10 s: joins / status / orders during the stall (3 each, latency):"
kill -STOP $RPID
python3 - $U "$T" "$TOK" <<'PY' &
import sys,time,urllib.request,json,threading
U,T,TOK=sys.argv[1:4]
res=[]
def go(kind):
    t0=time.time()
    if kind=="join": req=urllib.request.Request(U+"/api/queues/fast/join",method="POST")
    elif kind=="status": req=urllib.request.Request(U+"/api/queues/fast/status",headers={"Authorization":"Bearer "+T})
    else: req=urllib.request.Request(U+"/api/orders",method="POST",data=b'{"product_id":"pfast","quantity":1}',headers={"Authorization":"Bearer "+T,"X-Admission-Token":TOK,"Content-Type":"application/json"})
    try:
        r=urllib.request.urlopen(req,timeout=30); code=r.status
    except urllib.error.HTTPError as e: code=e.code
    except Exception as e: code=str(e)
    res.append((kind,code,round(time.time()-t0,2)))
time.sleep(0.5)
th=[threading.Thread(target=go,args=(k,)) for k in ["join","status","order"]*3]
[t.start() for t in th]; [t.join() for t in th]
print("  ",sorted(res))
PY
PYP=$!
sleep 10; kill -CONT $RPID; wait $PYP
fi
kill $SPID; wait $SPID 2>/dev/null; kill $RPID; wait $RPID 2>/dev/null; rm -rf $W
