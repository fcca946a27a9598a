// Everyday Redis usage through ioredis's cluster client (`Redis.Cluster`).
//
//     node scenario.js HOST:PORT
//         Runs every scenario against the cluster that HOST:PORT belongs to, printing one
//         line per scenario; exits 1 on the first wrong answer, saying what was expected.
//
//     node scenario.js HOST:PORT failover FIRST_SLOT LAST_SLOT SECONDS
//         SET/GET loop on keys of the slots FIRST_SLOT..=LAST_SLOT for SECONDS after
//         printing `ready` (the caller kills that shard's leader then). Prints one `error`
//         line per failed operation (time since `ready`, error) and a final
//         `summary ops=N errors=N last_error_s=T ok_after_last_error=N slowest_ok_s=T`
//         (the longest a successful operation took, retries included). Exits 1 if a
//         value read back is not one that was written.
//
// The shapes follow how people use Redis: API-call counters with EXPIRE, job queues,
// shopping carts in hashes, tag search with set algebra, leaderboards in sorted sets.
// Multi-key commands use `{tag}` keys so that their keys share a slot.
//
// Not covered yet because slotraft does not serve them: EVAL/Lua scripts
// (defineCommand), Pub/Sub, and ASK redirects during slot migrations.

"use strict";

const assert = require("node:assert/strict");
const Redis = require("ioredis");
// ioredis's own dependency for hash slots.
const keySlot = require("cluster-key-slot");

const CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot";

function connect(host, port, options = {}) {
  const cluster = new Redis.Cluster([{ host, port }], {
    redisOptions: { connectTimeout: 2000 },
    ...options,
  });
  // Node-level connection errors also reach the commands that hit them; the scenarios
  // judge those, so the events themselves are only noise here.
  cluster.on("error", () => {});
  return cluster;
}

function expect(actual, expected, what) {
  try {
    assert.deepStrictEqual(actual, expected);
  } catch {
    throw new ScenarioFailed(
      `${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`,
    );
  }
}

class ScenarioFailed extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function strings(rc) {
  expect(await rc.set("book:1", "{'title': 'Diving into Python'}"), "OK", "SET book:1");
  expect(await rc.get("book:1"), "{'title': 'Diving into Python'}", "GET book:1");
  expect(await rc.get("book:missing"), null, "GET of a missing key");
  expect(await rc.set("book:1", "other", "NX"), null, "SET NX on an existing key");
  // One user's session fields share a slot through the {user:1000} tag.
  expect(
    await rc.mset({
      "{user:1000}:name": "kim",
      "{user:1000}:email": "kim@example.com",
      "{user:1000}:lang": "ko",
    }),
    "OK",
    "MSET of {user:1000} keys",
  );
  expect(
    await rc.mget("{user:1000}:name", "{user:1000}:email", "{user:1000}:lang"),
    ["kim", "kim@example.com", "ko"],
    "MGET of {user:1000} keys",
  );
  expect(await rc.append("{user:1000}:name", "-sj"), 6, "APPEND");
  expect(await rc.strlen("{user:1000}:name"), 6, "STRLEN");
  expect(await rc.getrange("{user:1000}:name", 0, 2), "kim", "GETRANGE");
  expect(await rc.exists("{user:1000}:name", "{user:1000}:lang"), 2, "EXISTS");
  expect(await rc.del("{user:1000}:lang", "{user:1000}:email"), 2, "DEL of two keys");
  expect(await rc.get("{user:1000}:lang"), null, "GET after DEL");
}

async function counters(rc) {
  // Per-item, per-day visit counters.
  for (const item of ["item-0", "item-1", "item-2", "item-0"]) {
    await rc.incr(`item.${item}:20141225`);
  }
  expect(await rc.get("item.item-0:20141225"), "2", "visits of item-0");
  expect(await rc.get("item.item-1:20141225"), "1", "visits of item-1");
  // An API call limit: a counter that lives one day.
  const key = "apicall.user01:counter";
  expect(await rc.incr(key), 1, "first API call");
  expect(await rc.expire(key, 86400), 1, "EXPIRE on the API counter");
  expect(await rc.incrby(key, 10), 11, "INCRBY 10");
  expect(await rc.incr(key), 12, "INCR after INCRBY");
  const ttl = await rc.ttl(key);
  if (!(ttl >= 86390 && ttl <= 86400)) {
    throw new ScenarioFailed(`TTL of the API counter: expected about 86400, got ${ttl}`);
  }
  expect(await rc.decrby(key, 2), 10, "DECRBY 2");
  expect(await rc.ttl("apicall.user02:counter"), -2, "TTL of a missing key");
  await rc.set("apicall.user03:counter", 5);
  expect(await rc.ttl("apicall.user03:counter"), -1, "TTL of a key without expiry");
  expect(await rc.pexpire("apicall.user03:counter", 150), 1, "PEXPIRE 150");
  await sleep(400);
  expect(await rc.get("apicall.user03:counter"), null, "GET after the key expired");
}

async function queue(rc, host, port) {
  // A FIFO job queue: producers RPUSH, workers LPOP.
  expect(await rc.rpush("jobs:{mail}", "job-1", "job-2", "job-3"), 3, "RPUSH 3 jobs");
  expect(
    await rc.lrange("jobs:{mail}", 0, -1),
    ["job-1", "job-2", "job-3"],
    "LRANGE queue",
  );
  expect(await rc.lpop("jobs:{mail}"), "job-1", "LPOP first job");
  expect(await rc.llen("jobs:{mail}"), 2, "LLEN after LPOP");
  expect(await rc.lpop("jobs:{mail}", 5), ["job-2", "job-3"], "LPOP with a count");
  expect(await rc.lpop("jobs:{mail}"), null, "LPOP of an empty queue");
  // A capped message box: LPUSH then LTRIM to the newest three.
  for (let number = 1; number <= 5; number++) {
    await rc.lpush("message.box.user:1", `message-${number}`);
  }
  expect(await rc.ltrim("message.box.user:1", 0, 2), "OK", "LTRIM");
  expect(
    await rc.lrange("message.box.user:1", 0, -1),
    ["message-5", "message-4", "message-3"],
    "LRANGE of the capped box",
  );
  // A worker blocks on an empty queue: it times out with nil...
  const started = Date.now();
  expect(await rc.blpop("logging", 0.5), null, "BLPOP timing out");
  const waited = (Date.now() - started) / 1000;
  if (!(waited >= 0.4 && waited <= 3)) {
    throw new ScenarioFailed(`BLPOP with a 0.5 s timeout returned after ${waited} s`);
  }
  // ...and is woken by a producer on another connection.
  const producer = connect(host, port);
  try {
    const produced = sleep(300).then(() => producer.rpush("logging", "disk full"));
    expect(await rc.blpop("logging", 4), ["logging", "disk full"], "BLPOP woken");
    expect(await produced, 1, "RPUSH of the producer");
  } finally {
    producer.disconnect();
  }
  expect(await rc.blpop("jobs:{mail}", 0.1), null, "BLPOP on the drained queue");
  await rc.rpush("jobs:{mail}", "job-4");
  expect(await rc.blpop("jobs:{mail}", 1), ["jobs:{mail}", "job-4"], "BLPOP data");
}

async function cart(rc) {
  const key = "cart.user:1";
  expect(await rc.hset(key, "28", 1), 1, "HSET product 28");
  expect(await rc.hset(key, { 372: 2, 1280: 5 }), 2, "HSET two products");
  expect(await rc.hincrby(key, "372", 3), 5, "HINCRBY product 372");
  expect(await rc.hgetall(key), { 28: "1", 372: "5", 1280: "5" }, "HGETALL cart");
  expect(await rc.hdel(key, "28"), 1, "HDEL product 28");
  expect(await rc.hdel(key, "28"), 0, "HDEL a removed product");
  expect(await rc.hget(key, "372"), "5", "HGET product 372");
  expect(await rc.hexists(key, "28"), 0, "HEXISTS removed product");
  expect(await rc.hlen(key), 2, "HLEN");
  expect((await rc.hkeys(key)).sort(), ["1280", "372"], "HKEYS");
  // Carts expire with the session; each visit renews the expiry.
  expect(await rc.expire(key, 1800), 1, "EXPIRE cart");
  const ttl = await rc.ttl(key);
  if (!(ttl >= 1790 && ttl <= 1800)) {
    throw new ScenarioFailed(`TTL of the cart: expected about 1800, got ${ttl}`);
  }
  expect(await rc.hgetall("cart.user:2"), {}, "HGETALL of an empty cart");
}

async function tags(rc) {
  // Tag search: book ids per tag; every tag key carries {books} so they share a slot.
  const sorted = async (promise) => (await promise).sort();
  await rc.sadd("tag:{books}:python", "1");
  await rc.sadd("tag:{books}:erlang", "2");
  await rc.sadd("tag:{books}:haskell", "3");
  expect(await rc.sadd("tag:{books}:programming", "1", "2", "3"), 3, "SADD programming");
  await rc.sadd("tag:{books}:computing", "1", "2", "3");
  await rc.sadd("tag:{books}:FP", "2", "3");
  expect(await rc.sinter("tag:{books}:erlang", "tag:{books}:haskell"), [], "SINTER none");
  expect(
    await sorted(rc.sinter("tag:{books}:programming", "tag:{books}:computing")),
    ["1", "2", "3"],
    "SINTER programming computing",
  );
  expect(
    await sorted(rc.sunion("tag:{books}:erlang", "tag:{books}:haskell")),
    ["2", "3"],
    "SUNION",
  );
  expect(
    await sorted(rc.sdiff("tag:{books}:programming", "tag:{books}:haskell")),
    ["1", "2"],
    "SDIFF",
  );
  expect(
    await rc.sdiffstore("tag:{books}:not-fp", "tag:{books}:programming", "tag:{books}:FP"),
    1,
    "SDIFFSTORE",
  );
  expect(await rc.smembers("tag:{books}:not-fp"), ["1"], "SMEMBERS of SDIFFSTORE result");
  expect(
    await rc.sinterstore("tag:{books}:fp-erlang", "tag:{books}:FP", "tag:{books}:erlang"),
    1,
    "SINTERSTORE",
  );
  expect(
    await rc.sunionstore("tag:{books}:langs", "tag:{books}:python", "tag:{books}:FP"),
    3,
    "SUNIONSTORE",
  );
  expect(await rc.sismember("tag:{books}:FP", "3"), 1, "SISMEMBER");
  expect(await rc.scard("tag:{books}:langs"), 3, "SCARD");
  expect(await rc.srem("tag:{books}:langs", "1", "9"), 1, "SREM");
}

async function leaderboard(rc) {
  const key = "leaderboard:{game1}";
  expect(await rc.zadd(key, 100, "alice", 85, "bob", 120, "carol"), 3, "ZADD");
  expect(await rc.zincrby(key, 30, "bob"), "115", "ZINCRBY bob");
  expect(await rc.zadd(key, 90, "dave"), 1, "ZADD dave");
  expect(
    await rc.zrevrange(key, 0, 2, "WITHSCORES"),
    ["carol", "120", "bob", "115", "alice", "100"],
    "ZREVRANGE top three WITHSCORES",
  );
  expect(await rc.zrank(key, "dave"), 0, "ZRANK dave");
  expect(await rc.zrevrank(key, "carol"), 0, "ZREVRANK carol");
  expect(await rc.zrank(key, "nobody"), null, "ZRANK of a missing member");
  expect(await rc.zscore(key, "bob"), "115", "ZSCORE bob");
  expect(await rc.zcard(key), 4, "ZCARD");
  expect(await rc.zcount(key, 100, 120), 3, "ZCOUNT 100..120");
  expect(await rc.zremrangebyscore(key, "-inf", 95), 1, "ZREMRANGEBYSCORE below 95");
  expect(
    await rc.zrange(key, 0, -1, "WITHSCORES"),
    ["alice", "100", "bob", "115", "carol", "120"],
    "ZRANGE WITHSCORES",
  );
}

async function spread(rc, host, port) {
  const keys = Array.from({ length: 500 }, (_, number) => `user:${number}:profile`);
  const values = keys.map((_, number) => `profile-${number}`);
  // Concurrent writes: ioredis pipelines them on each node's connection.
  expect(
    await Promise.all(keys.map((key, number) => rc.set(key, values[number]))),
    keys.map(() => "OK"),
    "concurrent SETs",
  );
  for (let number = 0; number < keys.length; number++) {
    expect(await rc.get(keys[number]), values[number], `GET ${keys[number]}`);
  }
  // Auto-pipelining batches concurrent commands per node.
  const batched = connect(host, port, { enableAutoPipelining: true });
  try {
    expect(
      await Promise.all(keys.map((key) => batched.get(key))),
      values,
      "auto-pipelined GETs",
    );
  } finally {
    batched.disconnect();
  }
  const slots = new Set(keys.map((key) => keySlot(key)));
  expect(slots.size, 500, "distinct slots of 500 keys");
  // rc.slots[slot] lists the node keys serving the slot, the master first.
  // Every master: three, or fewer when an election under load left two
  // shards led by one node (leadership is not moved back).
  const masters = new Set([...slots].map((slot) => rc.slots[slot][0]));
  const allMasters = new Set(rc.slots.filter(Boolean).map((nodes) => nodes[0]));
  expect([...masters].sort(), [...allMasters].sort(), "the masters the 500 keys landed on");
  expect(allMasters.size === 2 || allMasters.size === 3, true, "two or three masters");
  let deleted = 0;
  for (const key of keys.slice(0, 100)) {
    deleted += await rc.del(key);
  }
  expect(deleted, 100, "DEL of 100 keys");
}

async function crossslot(rc) {
  // ioredis routes a command by its first key and leaves the slot check to the server.
  const attempts = [
    ["mset", "a", "1", "b", "2"],
    ["mget", "a", "b"],
    ["sinter", "a", "b"],
    ["rpoplpush", "a", "b"],
    ["del", "a", "b"],
  ];
  for (const [command, ...args] of attempts) {
    let error = null;
    try {
      await rc[command](...args);
    } catch (caught) {
      error = caught;
    }
    if (error === null) {
      throw new ScenarioFailed(`${command.toUpperCase()} across slots succeeded`);
    }
    expect(error.message, CROSSSLOT, `${command.toUpperCase()} across slots`);
  }
  // Same slot through a tag: fine.
  expect(await rc.mset("{a}", "1", "{a}:b", "2"), "OK", "MSET in one slot");
  expect(await rc.mget("{a}", "{a}:b"), ["1", "2"], "MGET in one slot");
}

async function transaction(rc) {
  // A transfer between two accounts of one slot as MULTI/EXEC (ioredis sends
  // the transaction to the node that serves the slot).
  await rc.set("{acct}:alice", "100");
  await rc.set("{acct}:bob", "0");
  const result = await rc
    .multi()
    .decrby("{acct}:alice", 30)
    .incrby("{acct}:bob", 30)
    .exec();
  expect(result, [[null, 70], [null, 30]], "transfer");
  expect(await rc.get("{acct}:alice"), "70", "balance after the transfer");
}

const SLIDING_WINDOW = `
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
`;

async function ratelimit(rc) {
  // The sliding-window limiter as a defined command: EVALSHA, falling back
  // to EVAL on NOSCRIPT.
  rc.defineCommand("slidingWindow", { numberOfKeys: 1, lua: SLIDING_WINDOW });
  await rc.del("{user:9}:window");
  let admitted = 0;
  for (let request = 0; request < 8; request++) {
    admitted += await rc.slidingWindow("{user:9}:window", 1000 + request, 1000, 5, `r${request}`);
  }
  expect(admitted, 5, "requests admitted within one window");
  expect(
    await rc.slidingWindow("{user:9}:window", 2500, 1000, 5, "late"),
    1,
    "a request once the window moved",
  );
  // Keys of two slots in one script: CROSSSLOT, as Redis Cluster.
  try {
    await rc.eval("return 1", 2, "{user:9}:a", "other");
    throw new Error("a script with keys of two slots ran");
  } catch (error) {
    if (!String(error.message).includes("CROSSSLOT")) {
      throw error;
    }
  }
}

async function runScenarios(host, port) {
  const rc = connect(host, port);
  const scenarios = [
    ["strings", () => strings(rc)],
    ["counters", () => counters(rc)],
    ["queue", () => queue(rc, host, port)],
    ["cart", () => cart(rc)],
    ["tags", () => tags(rc)],
    ["leaderboard", () => leaderboard(rc)],
    ["spread", () => spread(rc, host, port)],
    ["crossslot", () => crossslot(rc)],
    ["transaction", () => transaction(rc)],
    ["ratelimit", () => ratelimit(rc)],
  ];
  try {
    for (const [name, scenario] of scenarios) {
      const started = Date.now();
      try {
        await scenario();
      } catch (error) {
        console.log(`FAIL ${name}: ${error.name}: ${error.message}`);
        return 1;
      }
      console.log(`ok ${name} (${((Date.now() - started) / 1000).toFixed(2)}s)`);
    }
    return 0;
  } finally {
    rc.disconnect();
  }
}

async function runFailover(host, port, firstSlot, lastSlot, seconds) {
  // One attempt per operation from the application's side: the client's own retries
  // (retryDelayOnFailover on closed connections, retryDelayOnClusterDown, MOVED
  // following, up to maxRedirections) are what is measured.
  const rc = connect(host, port);
  const keys = [];
  for (let number = 0; keys.length < 16; number++) {
    const key = `failover:${number}`;
    const slot = keySlot(key);
    if (slot >= firstSlot && slot <= lastSlot) keys.push(key);
  }
  // What each key may hold: exactly one value once a SET was acknowledged, the old and
  // the new value while a failed SET may or may not have been applied.
  const possible = new Map(keys.map((key) => [key, new Set([null])]));
  for (const key of keys) await rc.del(key);
  console.log("ready");
  const started = Date.now();
  const elapsed = () => (Date.now() - started) / 1000;
  let ops = 0;
  let errors = 0;
  let okAfterLastError = 0;
  let lastError = null;
  let slowest = 0;
  let sequence = 0;
  try {
    while (elapsed() < seconds) {
      const key = keys[sequence % keys.length];
      sequence += 1;
      const value = `v${sequence}`;
      for (const operation of ["SET", "GET"]) {
        ops += 1;
        const operationStarted = Date.now();
        try {
          if (operation === "SET") {
            await rc.set(key, value);
            possible.set(key, new Set([value]));
          } else {
            const read = await rc.get(key);
            if (!possible.get(key).has(read)) {
              console.log(
                `FAIL GET ${key} returned ${JSON.stringify(read)}, expected one of ` +
                  JSON.stringify([...possible.get(key)]),
              );
              return 1;
            }
            possible.set(key, new Set([read]));
          }
          okAfterLastError += 1;
          slowest = Math.max(slowest, (Date.now() - operationStarted) / 1000);
        } catch (error) {
          errors += 1;
          okAfterLastError = 0;
          lastError = elapsed();
          if (operation === "SET") possible.get(key).add(value);
          if (errors <= 50) {
            console.log(
              `error t=${lastError.toFixed(3)} ${operation} ${key}: ${error.message}`,
            );
          }
          await sleep(10);
        }
      }
    }
  } finally {
    rc.disconnect();
  }
  const last = lastError === null ? "none" : lastError.toFixed(3);
  console.log(
    `summary ops=${ops} errors=${errors} last_error_s=${last} ` +
      `ok_after_last_error=${okAfterLastError} slowest_ok_s=${slowest.toFixed(3)}`,
  );
  return 0;
}

async function main(argv) {
  const address = argv[0] || "";
  const colon = address.lastIndexOf(":");
  if (colon < 0) {
    console.error("usage: node scenario.js HOST:PORT [failover FIRST LAST SECONDS]");
    return 2;
  }
  const host = address.slice(0, colon);
  const port = Number(address.slice(colon + 1));
  if (argv[1] === "failover") {
    return runFailover(host, port, Number(argv[2]), Number(argv[3]), Number(argv[4]));
  }
  return runScenarios(host, port);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.log(`FAIL ${error.stack || error}`);
    process.exit(1);
  },
);
