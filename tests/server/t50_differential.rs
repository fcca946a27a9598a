//! Differential test: the same redis-cli script against slotraft and a real
//! redis-server (installed by `cargo xtask ci`), outputs compared line by line.
//! Commands whose output depends on hash-table layout (KEYS, SCAN, RANDOMKEY) or on
//! the server build (COMMAND COUNT, DOCS) stay out of the script.

use slotraft_tests::support::{assert_cli_output_matches_redis, Server};

const SCRIPT: &str = "\
SET a 10
SET b hello EX 100 GET
SET b x NX
SET c 1 XX
SET a 5 KEEPTTL GET
SET d 1 EX 0
SET d 1 PX -5
SET d 1 EX 10 PX 10
GETEX b PERSIST
TTL b
INCRBYFLOAT a 0.1
INCRBYFLOAT a 1e400
INCRBY a 1
DECRBY b 1
SETRANGE e 5 hi
GET e
GETRANGE e -3 -1
GETRANGE e 10 2
APPEND e !
STRLEN e
MSETNX x 1 y 2
MSETNX x 1 z 2
SET k1 ohmytext
SET k2 mynewtext
LCS k1 k2
LCS k1 k2 LEN
LCS k1 k2 IDX MINMATCHLEN 4 WITHMATCHLEN
EXPIRE k1 100 XX
EXPIRE k1 50 GT
EXPIRE k1 200 GT
EXPIRE k1 10 NX XX
TTL k1
RENAMENX k1 k2
RENAME k1 k3
COPY k3 k4
COPY k3 k4
COPY k3 k4 REPLACE
OBJECT ENCODING k3
OBJECT ENCODING a
OBJECT ENCODING e
OBJECT FREQ k3
TYPE k3
EXISTS k3 k3 nope
TOUCH k3 nope
SCAN 0 COUNT 0
SCAN abc
MOVE k3 0
MOVE k3 99
SWAPDB 0 99
SELECT x
DEL nope
UNLINK k3 k4
SET big 9223372036854775807
INCR big
GETDEL k2
GETSET e new
SUBSTR e 0 1
SETEX s -1 v
PSETEX s 0 v
SETNX a 1
PING a b
CONFIG GET maxmemory-policy
CONFIG SET maxmemory nope
CONFIG SET nope 1
OBJECT nope k
OBJECT HELP
CLIENT nope
COMMAND GETKEYS SET a b
SET n 00
OBJECT ENCODING n
SET n 12345678901234567890
OBJECT ENCODING n
INCR n
SET f 1.5
INCRBYFLOAT f 1.5
INCRBYFLOAT f 5.0e3
INCRBYFLOAT g abc
SET sp \" 1\"
INCR sp
SETRANGE sp -1 x
GETRANGE nope 0 -1
MSET a 1 b
GETEX c EX 0
GETEX nope EX -1
SET k v
RENAME k k
COPY k k
PEXPIREAT k 100 NX
EXISTS k
TYPE nope
OBJECT IDLETIME nope
DUMP nope
RESTORE r 0 garbage
RESTORE r -1 garbage
RESTORE-ASKING r 0 garbage
REPLCONF
REPLCONF listening-port
REPLCONF listening-port x
REPLCONF listening-port 6380 capa eof capa psync2
REPLCONF ip-address 10.0.0.1
REPLCONF rdb-only 1
REPLCONF rdb-only 2
REPLCONF bogus 1
PFSELFTEST
PFSELFTEST x
DBSIZE
";

#[test]
fn replies_match_real_redis() {
    let slotraft = Server::start(&[]);
    assert_cli_output_matches_redis(slotraft.port, SCRIPT);
}
