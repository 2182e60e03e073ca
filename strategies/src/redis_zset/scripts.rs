//! The Lua scripts of `redis-zset`. Each runs atomically on the server and
//! touches only the keys of one shard, which share a hash tag
//! (`dlb:{<prefix>:<k>}:...`), so each script is valid on Redis Cluster.
//!
//! Scores are microseconds since the Unix epoch; they stay below 2^53, so
//! Redis' double scores hold them exactly.

use redis::Script;

/// `schedule`: KEYS = [delay, processing]; ARGV = [deadline_us, order_id,
/// wake_channel, shard]. A member currently claimed is left alone (its claim ends
/// in an ack, a requeue or a reclaim). Returns 0 when nothing changed (a
/// duplicate), 1 when added, 2 when it also became the shard's earliest
/// member, in which case `<shard> <deadline_us>` was PUBLISHed on the wake
/// channel so sleeping workers (in any process) look at that shard again.
const SCHEDULE: &str = r"
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 0 end
if redis.call('ZADD', KEYS[1], 'CH', ARGV[1], ARGV[2]) == 0 then return 0 end
local first = redis.call('ZRANGE', KEYS[1], 0, 0)
if first[1] == ARGV[2] then
  redis.call('PUBLISH', ARGV[3], ARGV[4] .. ' ' .. ARGV[1])
  return 2
end
return 1
";

/// The atomic claim: KEYS = [delay, processing]; ARGV = [now_us, limit,
/// visible_until_us]. Moves up to `limit` members due at `now_us` from
/// delay to processing, scored with their visibility deadline, and returns
/// `{claimed members, next delay score or nil}`.
const CLAIM: &str = r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[2], ARGV[3], id)
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {ids, first[2] or false}
";

/// The reclaimer: KEYS = [delay, processing]; ARGV = [now_us, limit].
/// Moves up to `limit` claims whose visibility deadline passed back to the
/// delay set, due at once. Returns how many it moved.
const RECLAIM: &str = r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZADD', KEYS[1], ARGV[1], id)
end
return #ids
";

/// Conditional move: KEYS = [from, to]; ARGV = [score, member...]. Each
/// member still in `from` moves to `to` with `score`; a member no longer in
/// `from` (acked or reclaimed meanwhile) is left where it is. Used to give a
/// claim back for a retry (processing -> delay) and to bury a malformed
/// member (processing or delay -> dead). Returns how many moved.
const MOVE: &str = r"
local n = 0
for i = 2, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('ZADD', KEYS[2], ARGV[1], ARGV[i])
    n = n + 1
  end
end
return n
";

/// The scripts, hashed once (EVALSHA, loaded again after a Redis restart).
#[derive(Debug, Clone)]
pub(crate) struct Scripts {
    pub schedule: Script,
    pub claim: Script,
    pub reclaim: Script,
    pub move_members: Script,
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            schedule: Script::new(SCHEDULE),
            claim: Script::new(CLAIM),
            reclaim: Script::new(RECLAIM),
            move_members: Script::new(MOVE),
        }
    }
}
