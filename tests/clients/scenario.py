"""Everyday Redis usage through redis-py's cluster client (`redis.cluster.RedisCluster`),
or, with `--plain` first, through a plain `redis.Redis` client talking to `slotraft
router` (no cluster support in the client: the router splits, routes and retries).

    python3 scenario.py [--plain] HOST:PORT
        Runs every scenario against the cluster that HOST:PORT belongs to, printing one
        line per scenario; exits 1 on the first wrong answer, saying what was expected.

    python3 scenario.py [--plain] HOST:PORT failover FIRST_SLOT LAST_SLOT SECONDS
        SET/GET loop on keys of the slots FIRST_SLOT..=LAST_SLOT for SECONDS after
        printing `ready` (the caller kills that shard's leader then). Prints one `error`
        line per failed operation (time since `ready`, exception) and a final
        `summary ops=N errors=N last_error_s=T ok_after_last_error=N slowest_ok_s=T`
        (the longest a successful operation took, retries included). Exits 1 if a value
        read back is not one that was written.

The shapes follow how people use Redis: API-call counters with EXPIRE, job queues,
shopping carts in hashes, tag search with set algebra, leaderboards in sorted sets.
Multi-key commands use `{tag}` keys so that their keys share a slot.

Not covered here: Pub/Sub and slot migrations (the Rust suites in tests/cluster
cover them).
"""

import sys
import threading
import time

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import (
    ClusterCrossSlotError,
    RedisClusterException,
    RedisError,
    ResponseError,
    WatchError,
)

CROSSSLOT_MESSAGE = "Keys in request don't hash to the same slot"

# Set by `--plain`: a plain client through the router instead of RedisCluster.
PLAIN = False


def keyslot(key):
    """Redis Cluster's hash slot of `key`: CRC16 (XMODEM) of it, or of its
    first non-empty {tag}, modulo 16384."""
    data = key.encode()
    start = data.find(b"{")
    if start != -1:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc % 16384


class ScenarioFailed(Exception):
    pass


def expect(actual, expected, what):
    if actual != expected:
        raise ScenarioFailed(f"{what}: expected {expected!r}, got {actual!r}")


def connect(host, port, **options):
    if PLAIN:
        return redis.Redis(host=host, port=port, decode_responses=True, socket_timeout=5)
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port)],
        decode_responses=True,
        socket_timeout=5,
        **options,
    )


def strings(rc):
    expect(rc.set("book:1", "{'title': 'Diving into Python'}"), True, "SET book:1")
    expect(rc.get("book:1"), "{'title': 'Diving into Python'}", "GET book:1")
    expect(rc.get("book:missing"), None, "GET of a missing key")
    expect(rc.set("book:1", "other", nx=True), None, "SET NX on an existing key")
    # One user's session fields share a slot through the {user:1000} tag.
    fields = {
        "{user:1000}:name": "kim",
        "{user:1000}:email": "kim@example.com",
        "{user:1000}:lang": "ko",
    }
    expect(rc.mset(fields), True, "MSET of {user:1000} keys")
    expect(
        rc.mget(list(fields)),
        ["kim", "kim@example.com", "ko"],
        "MGET of {user:1000} keys",
    )
    expect(rc.append("{user:1000}:name", "-sj"), 6, "APPEND")
    expect(rc.strlen("{user:1000}:name"), 6, "STRLEN")
    expect(rc.getrange("{user:1000}:name", 0, 2), "kim", "GETRANGE")
    expect(rc.exists("book:1", "{user:1000}:lang", "book:missing"), 2, "EXISTS")
    expect(rc.delete("book:1", "{user:1000}:lang"), 2, "DEL across slots")
    expect(rc.get("{user:1000}:lang"), None, "GET after DEL")


def counters(rc):
    # Per-item, per-day visit counters.
    for item in ["item-0", "item-1", "item-2", "item-0"]:
        rc.incr(f"item.{item}:20141225")
    expect(rc.get("item.item-0:20141225"), "2", "visits of item-0")
    expect(rc.get("item.item-1:20141225"), "1", "visits of item-1")
    # An API call limit: a counter that lives one day.
    key = "apicall.user01:counter"
    expect(rc.incr(key), 1, "first API call")
    expect(rc.expire(key, 86400), True, "EXPIRE on the API counter")
    expect(rc.incrby(key, 10), 11, "INCRBY 10")
    expect(rc.incr(key), 12, "INCR after INCRBY")
    ttl = rc.ttl(key)
    if not 86390 <= ttl <= 86400:
        raise ScenarioFailed(f"TTL of the API counter: expected about 86400, got {ttl}")
    expect(rc.decrby(key, 2), 10, "DECRBY 2")
    expect(rc.ttl("apicall.user02:counter"), -2, "TTL of a missing key")
    rc.set("apicall.user03:counter", 5)
    expect(rc.ttl("apicall.user03:counter"), -1, "TTL of a key without expiry")
    expect(rc.pexpire("apicall.user03:counter", 150), True, "PEXPIRE 150")
    time.sleep(0.4)
    expect(rc.get("apicall.user03:counter"), None, "GET after the key expired")


def queue(rc, host, port):
    # A FIFO job queue: producers RPUSH, workers LPOP.
    expect(rc.rpush("jobs:{mail}", "job-1", "job-2", "job-3"), 3, "RPUSH 3 jobs")
    expect(
        rc.lrange("jobs:{mail}", 0, -1), ["job-1", "job-2", "job-3"], "LRANGE queue"
    )
    expect(rc.lpop("jobs:{mail}"), "job-1", "LPOP first job")
    expect(rc.llen("jobs:{mail}"), 2, "LLEN after LPOP")
    expect(rc.lpop("jobs:{mail}", 5), ["job-2", "job-3"], "LPOP with a count")
    expect(rc.lpop("jobs:{mail}"), None, "LPOP of an empty queue")
    # A capped message box: LPUSH then LTRIM to the newest three.
    for number in range(1, 6):
        rc.lpush("message.box.user:1", f"message-{number}")
    expect(rc.ltrim("message.box.user:1", 0, 2), True, "LTRIM")
    expect(
        rc.lrange("message.box.user:1", 0, -1),
        ["message-5", "message-4", "message-3"],
        "LRANGE of the capped box",
    )
    # A worker blocks on an empty queue: it times out with nil...
    started = time.monotonic()
    expect(rc.blpop(["logging"], timeout=0.5), None, "BLPOP timing out")
    waited = time.monotonic() - started
    if not 0.4 <= waited <= 3.0:
        raise ScenarioFailed(f"BLPOP with a 0.5 s timeout returned after {waited:.2f} s")
    # ...and is woken by a producer on another connection.
    producer = connect(host, port)

    def produce():
        time.sleep(0.3)
        producer.rpush("logging", "disk full")

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        expect(rc.blpop(["logging"], timeout=4), ("logging", "disk full"), "BLPOP woken")
    finally:
        thread.join()
        producer.close()
    expect(rc.blpop(["jobs:{mail}"], timeout=0.1), None, "BLPOP on the drained queue")
    rc.rpush("jobs:{mail}", "job-4")
    expect(rc.blpop(["jobs:{mail}"], timeout=1), ("jobs:{mail}", "job-4"), "BLPOP data")


def cart(rc):
    key = "cart.user:1"
    expect(rc.hset(key, "28", 1), 1, "HSET product 28")
    expect(rc.hset(key, mapping={"372": 2, "1280": 5}), 2, "HSET two products")
    expect(rc.hincrby(key, "372", 3), 5, "HINCRBY product 372")
    expect(rc.hgetall(key), {"28": "1", "372": "5", "1280": "5"}, "HGETALL cart")
    expect(rc.hdel(key, "28"), 1, "HDEL product 28")
    expect(rc.hdel(key, "28"), 0, "HDEL a removed product")
    expect(rc.hget(key, "372"), "5", "HGET product 372")
    expect(rc.hexists(key, "28"), False, "HEXISTS removed product")
    expect(rc.hlen(key), 2, "HLEN")
    expect(sorted(rc.hkeys(key)), ["1280", "372"], "HKEYS")
    # Carts expire with the session; each visit renews the expiry.
    expect(rc.expire(key, 1800), True, "EXPIRE cart")
    ttl = rc.ttl(key)
    if not 1790 <= ttl <= 1800:
        raise ScenarioFailed(f"TTL of the cart: expected about 1800, got {ttl}")
    expect(rc.hgetall("cart.user:2"), {}, "HGETALL of an empty cart")


def tags(rc):
    # Tag search: book ids per tag; every tag key carries {books} so they share a slot.
    rc.sadd("tag:{books}:python", "1")
    rc.sadd("tag:{books}:erlang", "2")
    rc.sadd("tag:{books}:haskell", "3")
    expect(rc.sadd("tag:{books}:programming", "1", "2", "3"), 3, "SADD programming")
    rc.sadd("tag:{books}:computing", "1", "2", "3")
    rc.sadd("tag:{books}:FP", "2", "3")
    expect(rc.sinter("tag:{books}:erlang", "tag:{books}:haskell"), set(), "SINTER none")
    expect(
        rc.sinter("tag:{books}:programming", "tag:{books}:computing"),
        {"1", "2", "3"},
        "SINTER programming computing",
    )
    expect(
        rc.sunion("tag:{books}:erlang", "tag:{books}:haskell"), {"2", "3"}, "SUNION"
    )
    expect(
        rc.sdiff("tag:{books}:programming", "tag:{books}:haskell"), {"1", "2"}, "SDIFF"
    )
    expect(
        rc.sdiffstore(
            "tag:{books}:not-fp", ["tag:{books}:programming", "tag:{books}:FP"]
        ),
        1,
        "SDIFFSTORE",
    )
    expect(rc.smembers("tag:{books}:not-fp"), {"1"}, "SMEMBERS of the SDIFFSTORE result")
    expect(
        rc.sinterstore("tag:{books}:fp-erlang", ["tag:{books}:FP", "tag:{books}:erlang"]),
        1,
        "SINTERSTORE",
    )
    expect(
        rc.sunionstore("tag:{books}:langs", ["tag:{books}:python", "tag:{books}:FP"]),
        3,
        "SUNIONSTORE",
    )
    expect(rc.sismember("tag:{books}:FP", "3"), True, "SISMEMBER")
    expect(rc.scard("tag:{books}:langs"), 3, "SCARD")
    expect(rc.srem("tag:{books}:langs", "1", "9"), 1, "SREM")


def leaderboard(rc):
    key = "leaderboard:{game1}"
    expect(rc.zadd(key, {"alice": 100, "bob": 85, "carol": 120}), 3, "ZADD")
    expect(rc.zincrby(key, 30, "bob"), 115.0, "ZINCRBY bob")
    expect(rc.zadd(key, {"dave": 90}), 1, "ZADD dave")
    expect(
        rc.zrevrange(key, 0, 2, withscores=True),
        [("carol", 120.0), ("bob", 115.0), ("alice", 100.0)],
        "ZREVRANGE top three WITHSCORES",
    )
    expect(rc.zrank(key, "dave"), 0, "ZRANK dave")
    expect(rc.zrevrank(key, "carol"), 0, "ZREVRANK carol")
    expect(rc.zrank(key, "nobody"), None, "ZRANK of a missing member")
    expect(rc.zscore(key, "bob"), 115.0, "ZSCORE bob")
    expect(rc.zcard(key), 4, "ZCARD")
    expect(rc.zcount(key, 100, 120), 3, "ZCOUNT 100..120")
    expect(rc.zremrangebyscore(key, "-inf", 95), 1, "ZREMRANGEBYSCORE below 95")
    expect(
        rc.zrange(key, 0, -1, withscores=True),
        [("alice", 100.0), ("bob", 115.0), ("carol", 120.0)],
        "ZRANGE WITHSCORES",
    )


def spread(rc):
    keys = [f"user:{number}:profile" for number in range(500)]
    # The cluster pipeline groups the writes by node and sends each group in one go;
    # a plain pipeline (not a transaction) goes to the router, which does the same.
    pipe = rc.pipeline(transaction=False) if PLAIN else rc.pipeline()
    for number, key in enumerate(keys):
        pipe.set(key, f"profile-{number}")
    expect(pipe.execute(), [True] * 500, "pipelined SETs")
    for number, key in enumerate(keys):
        expect(rc.get(key), f"profile-{number}", f"GET {key}")
    mget = rc.mget if PLAIN else rc.mget_nonatomic
    expect(
        mget(keys[:50]),
        [f"profile-{n}" for n in range(50)],
        "MGET split by slot",
    )
    if not PLAIN:
        # Every master: three, or fewer when an election under load left two
        # shards led by one node (leadership is not moved back).
        primaries = {rc.get_node_from_key(key).name for key in keys}
        masters = {nodes[0].name for nodes in rc.nodes_manager.slots_cache.values() if nodes}
        expect(primaries, masters, "the masters the 500 keys landed on")
        expect(len(masters) in (2, 3), True, "two or three masters")
        expect({rc.keyslot(key) for key in keys}, {keyslot(key) for key in keys}, "slots")
    expect(len({keyslot(key) for key in keys}), 500, "distinct slots of 500 keys")
    expect(rc.delete(*keys[:100]), 100, "DEL of 100 keys across slots")


def crossslot_through_the_router(rc):
    # The router splits MSET/MGET/DEL/EXISTS by slot (MSET is then not atomic)...
    expect(rc.mset({"a": "1", "b": "2", "{a}x": "3"}), True, "MSET across slots")
    expect(rc.mget("a", "b", "{a}x"), ["1", "2", "3"], "MGET across slots")
    expect(rc.exists("a", "b", "missing"), 2, "EXISTS across slots")
    # ...and passes the server's CROSSSLOT on for everything else.
    for command in [("SINTER", "a", "b"), ("RPOPLPUSH", "a", "b"), ("RENAME", "a", "b")]:
        try:
            rc.execute_command(*command)
            raise ScenarioFailed(f"{command[0]} across slots succeeded")
        except ResponseError as error:
            # A plain client keeps the error code in the message.
            expect(str(error), f"CROSSSLOT {CROSSSLOT_MESSAGE}", f"{command[0]} across slots")


def crossslot(rc, host, port):
    if PLAIN:
        return crossslot_through_the_router(rc)
    # redis-py refuses MSET across slots itself...
    try:
        rc.mset({"a": "1", "b": "2"})
        raise ScenarioFailed("MSET across slots succeeded through RedisCluster")
    except RedisClusterException:
        pass
    # ...so send the raw commands to one node and let the server judge.
    node = rc.get_node(host, port)
    for command in [
        ("MSET", "a", "1", "b", "2"),
        ("MGET", "a", "b"),
        ("SINTER", "a", "b"),
        ("RPOPLPUSH", "a", "b"),
    ]:
        try:
            rc.execute_command(*command, target_nodes=node)
            raise ScenarioFailed(f"{command[0]} across slots succeeded")
        except ClusterCrossSlotError as error:
            expect(str(error), CROSSSLOT_MESSAGE, f"{command[0]} across slots")
    # Same slot through a tag: fine.
    expect(
        rc.mset_nonatomic({"a": "1", "b": "2", "{a}x": "3"}), [True, True], "MSET split"
    )
    expect(rc.mget_nonatomic(["a", "b", "{a}x"]), ["1", "2", "3"], "MGET split")


def transaction(rc):
    # A transfer between two accounts of one slot, with WATCH for optimistic
    # locking, on a plain connection to the node that serves the slot (the
    # cluster client's pipelines are not transactions).
    rc.set("{acct}:alice", 100)
    rc.set("{acct}:bob", 0)
    if PLAIN:
        # The router pins WATCH and MULTI to the slot's node itself.
        direct = rc
    else:
        node = rc.get_node_from_key("{acct}:alice")
        direct = redis.Redis(host=node.host, port=node.port, decode_responses=True)
    with direct.pipeline(transaction=True) as pipe:
        pipe.watch("{acct}:alice")
        balance = int(pipe.get("{acct}:alice"))
        expect(balance, 100, "balance read under WATCH")
        pipe.multi()
        pipe.decrby("{acct}:alice", 30)
        pipe.incrby("{acct}:bob", 30)
        expect(pipe.execute(), [70, 30], "transfer")
    # Another client changes the watched key: the transaction does not run.
    with direct.pipeline(transaction=True) as pipe:
        pipe.watch("{acct}:alice")
        rc.incr("{acct}:alice")
        pipe.multi()
        pipe.decrby("{acct}:alice", 1)
        try:
            pipe.execute()
            raise ScenarioFailed("a watched transaction ran after a conflicting write")
        except WatchError:
            pass
    expect(rc.get("{acct}:alice"), "71", "balance after the aborted transfer")
    if not PLAIN:
        direct.close()


SLIDING_WINDOW = """
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
  return 1
end
return 0
"""


def ratelimit(rc):
    # The sliding-window limiter as a registered script: EVALSHA, with the
    # client loading the script itself on NOSCRIPT.
    limiter = rc.register_script(SLIDING_WINDOW)
    rc.delete("{user:7}:window")
    admitted = sum(
        limiter(keys=["{user:7}:window"], args=[1000 + request, 1000, 5, f"r{request}"])
        for request in range(8)
    )
    expect(admitted, 5, "requests admitted within one window")
    expect(
        limiter(keys=["{user:7}:window"], args=[2500, 1000, 5, "late"]),
        1,
        "a request once the window moved",
    )
    expect(rc.zcard("{user:7}:window"), 1, "entries left in the window")
    # A key of another slot inside the script is refused, as Redis Cluster.
    try:
        rc.eval("return redis.call('GET', 'elsewhere')", 1, "{user:7}:window")
        raise ScenarioFailed("a script reached a key of another slot")
    except ResponseError as error:
        if "do not hash to the same slot" not in str(error):
            raise


def run_scenarios(host, port):
    rc = connect(host, port)
    scenarios = [
        ("strings", lambda: strings(rc)),
        ("counters", lambda: counters(rc)),
        ("queue", lambda: queue(rc, host, port)),
        ("cart", lambda: cart(rc)),
        ("tags", lambda: tags(rc)),
        ("leaderboard", lambda: leaderboard(rc)),
        ("spread", lambda: spread(rc)),
        ("crossslot", lambda: crossslot(rc, host, port)),
        ("transaction", lambda: transaction(rc)),
        ("ratelimit", lambda: ratelimit(rc)),
    ]
    for name, scenario in scenarios:
        started = time.monotonic()
        try:
            scenario()
        except (ScenarioFailed, RedisError) as error:
            print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
            return 1
        print(f"ok {name} ({time.monotonic() - started:.2f}s)", flush=True)
    rc.close()
    return 0


def run_failover(host, port, first_slot, last_slot, seconds):
    # One attempt per operation from the application's side: the client's own retries
    # (cluster_error_retry_attempts, refreshing CLUSTER SLOTS on connection errors) are
    # what is measured.
    rc = connect(host, port)
    keys = []
    number = 0
    while len(keys) < 16:
        key = f"failover:{number}"
        if first_slot <= keyslot(key) <= last_slot:
            keys.append(key)
        number += 1
    # What each key may hold: exactly one value once a SET was acknowledged, the old and
    # the new value while a failed SET may or may not have been applied.
    possible = {key: {None} for key in keys}
    for key in keys:
        rc.delete(key)
    print("ready", flush=True)
    started = time.monotonic()
    ops = errors = ok_after_last_error = 0
    last_error = None
    slowest = 0.0
    sequence = 0
    while time.monotonic() - started < seconds:
        key = keys[sequence % len(keys)]
        sequence += 1
        value = f"v{sequence}"
        for operation in ("SET", "GET"):
            ops += 1
            operation_started = time.monotonic()
            try:
                if operation == "SET":
                    rc.set(key, value)
                    possible[key] = {value}
                else:
                    read = rc.get(key)
                    if read not in possible[key]:
                        print(
                            f"FAIL GET {key} returned {read!r}, expected one of "
                            f"{sorted(map(repr, possible[key]))}",
                            flush=True,
                        )
                        return 1
                    possible[key] = {read}
                ok_after_last_error += 1
                slowest = max(slowest, time.monotonic() - operation_started)
            except RedisError as error:
                errors += 1
                ok_after_last_error = 0
                last_error = time.monotonic() - started
                if operation == "SET":
                    possible[key].add(value)
                if errors <= 50:
                    print(
                        f"error t={last_error:.3f} {operation} {key}: "
                        f"{type(error).__name__}: {error}",
                        flush=True,
                    )
                time.sleep(0.01)
    last = "none" if last_error is None else f"{last_error:.3f}"
    print(
        f"summary ops={ops} errors={errors} last_error_s={last} "
        f"ok_after_last_error={ok_after_last_error} slowest_ok_s={slowest:.3f}",
        flush=True,
    )
    rc.close()
    return 0


def main(argv):
    global PLAIN
    if argv[1:2] == ["--plain"]:
        PLAIN = True
        argv = argv[:1] + argv[2:]
    if len(argv) < 2 or ":" not in argv[1]:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[1].rsplit(":", 1)
    if argv[2:3] == ["failover"]:
        first_slot, last_slot, seconds = int(argv[3]), int(argv[4]), float(argv[5])
        return run_failover(host, int(port), first_slot, last_slot, seconds)
    return run_scenarios(host, int(port))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
