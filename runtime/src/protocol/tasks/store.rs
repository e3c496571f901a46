//! The shared task store of a fleet (`[tasks] store_url`, Redis or Valkey):
//! a 2026-07-28 client polls `tasks/get` through a load balancer, and the
//! request may land on any replica, so every replica must answer for every
//! task. The call itself runs where it started (a running instance cannot
//! move); the store holds what the others need:
//!
//! - `PREFIX:task:ID`: the task's record ([`Record`]: owner digest, the
//!   replica running it, and the `tasks/get` answer as of its last change),
//!   written only by the replica running it, on every change (coalesced),
//!   expiring with the task's time to live.
//! - `PREFIX:inbox:REPLICA`: a list of [`Command`]s (`tasks/update`
//!   answers, `tasks/cancel`) that other replicas received for tasks this
//!   one runs; it takes them every [`INBOX_POLL`]. At most
//!   [`INBOX_MAX_COMMANDS`] and [`INBOX_MAX_BYTES`] wait at once
//!   (`PREFIX:inbox-bytes:REPLICA` counts the bytes; a script pushes and
//!   takes, so count and list agree): past them a command is refused, so
//!   clients flooding a replica that is slow or stopped cannot fill the
//!   store.
//! - `PREFIX:lease:REPLICA`: set from the replica's first task on, while
//!   it lives, refreshed every [`INBOX_POLL`], expiring after [`LEASE`]. A
//!   record whose replica has no lease is a task whose replica died: it
//!   reads as failed.
//!
//! `REPLICA` is a random id per process (a restarted replica is a new
//! one), so a record never outlives the process that could finish it
//! without saying so.
//!
//! Invariants: a record is written only by its task's replica, so no two
//! writers race; an inbox is bounded in commands and bytes; every key
//! expires (records with their task, inboxes and leases within seconds of
//! their replica's end); what a record holds is what `tasks/get` would
//! answer its owner, and no more (the owner is a digest); a record read
//! back is size-capped and parsed under a budget.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How often a replica takes its inbox and renews its lease.
pub const INBOX_POLL: Duration = Duration::from_millis(100);

/// How long a lease lasts unless renewed: a replica that stopped is known
/// dead this long after.
pub const LEASE: Duration = Duration::from_secs(5);

/// Most bytes of a record read back (a result is capped before it is
/// kept; this is the guard against a store that holds something else).
const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// Most commands taken from the inbox at once.
const INBOX_BATCH: usize = 256;

/// Most commands an inbox holds; past it, sending one is refused.
pub const INBOX_MAX_COMMANDS: usize = 1024;

/// Most bytes of commands an inbox holds (a command carries at most
/// `MAX_ANSWER_BYTES` of answers); past it, sending one is refused.
pub const INBOX_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Push `ARGV[1]` to the inbox `KEYS[1]` unless it holds `ARGV[2]`
/// commands or would hold more than `ARGV[3]` bytes (counted in
/// `KEYS[2]`); both keys expire after `ARGV[4]` ms. 1: pushed, 0: full.
const PUSH: &str = r"
local waiting = redis.call('LLEN', KEYS[1])
local bytes = tonumber(redis.call('GET', KEYS[2]) or '0')
if waiting >= tonumber(ARGV[2]) or bytes + string.len(ARGV[1]) > tonumber(ARGV[3]) then
  return 0
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('INCRBY', KEYS[2], string.len(ARGV[1]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
";

/// Renew the lease `KEYS[1]` for `ARGV[1]` ms and take up to `ARGV[2]`
/// commands from the inbox `KEYS[2]`, taking their bytes off its count
/// `KEYS[3]` (gone with the last command).
const TAKE: &str = r"
redis.call('SET', KEYS[1], 1, 'PX', ARGV[1])
local taken = redis.call('LPOP', KEYS[2], ARGV[2])
if not taken then
  redis.call('DEL', KEYS[3])
  return {}
end
local bytes = 0
for _, command in ipairs(taken) do
  bytes = bytes + string.len(command)
end
if redis.call('LLEN', KEYS[2]) == 0 or redis.call('DECRBY', KEYS[3], bytes) <= 0 then
  redis.call('DEL', KEYS[3])
end
return taken
";

/// A task as the store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// SHA-256 of the creator's identity (`Caller::key`), hex.
    pub owner: String,
    /// The replica running it.
    pub replica: String,
    /// The `tasks/get` answer (`DetailedTask`) as of the last change.
    pub task: Value,
}

impl Record {
    /// Whether the task had ended when its record was written: an end is
    /// final, so an answer or a cancel for it need not be sent.
    pub fn ended(&self) -> bool {
        self.task
            .get("status")
            .and_then(|status| serde_json::from_value(status.clone()).ok())
            .is_some_and(super::is_terminal)
    }
}

/// What another replica asks of the one running a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Command {
    /// `tasks/update`: answers to its questions.
    Update {
        /// The task.
        task: String,
        /// The answers, by key.
        responses: std::collections::BTreeMap<String, Value>,
    },
    /// `tasks/cancel`.
    Cancel {
        /// The task.
        task: String,
    },
}

/// A connection to the store, and this replica's name in it.
pub struct Store {
    connection: ConnectionManager,
    prefix: String,
    /// This process's id (random, per process).
    pub replica: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("prefix", &self.prefix)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A store at `settings` (connected lazily, and again whenever the
    /// connection drops); `replica` names this process in it.
    ///
    /// # Errors
    ///
    /// The URL is not one the client takes.
    pub fn open(settings: &crate::config::TaskStore, replica: String) -> Result<Store, String> {
        let client = redis::Client::open(settings.connection_info()?)
            .map_err(|e| format!("the task store `{}`: {e}", settings.shown_url()))?;
        let config = ConnectionManagerConfig::new()
            // While the store is down a request waits at most about
            // two connection attempts (and a pause) before its error.
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("the task store `{}`: {e}", settings.shown_url()))?;
        Ok(Store {
            connection,
            prefix: settings.prefix.clone(),
            replica,
        })
    }

    fn key(&self, kind: &str, id: &str) -> String {
        format!("{}:{kind}:{id}", self.prefix)
    }

    /// Keep `record` for task `id` for `ttl`.
    pub async fn put(&self, id: &str, record: &Record, ttl: Duration) -> Result<(), String> {
        let text = serde_json::to_string(record).map_err(|e| e.to_string())?;
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.query::<()>(
            redis::cmd("SET")
                .arg(self.key("task", id))
                .arg(text)
                .arg("PX")
                .arg(ms),
        )
        .await
    }

    /// The record of task `id`, if the store has one.
    pub async fn get(&self, id: &str) -> Result<Option<Record>, String> {
        let text: Option<Vec<u8>> = self
            .query(redis::cmd("GET").arg(self.key("task", id)))
            .await?;
        let Some(text) = text else {
            return Ok(None);
        };
        if text.len() > MAX_RECORD_BYTES {
            return Err(format!(
                "the task store holds {} bytes for this task, over {MAX_RECORD_BYTES}",
                text.len()
            ));
        }
        let text = std::str::from_utf8(&text)
            .map_err(|_| "the task store's record is not UTF-8".to_owned())?;
        // A record this server wrote holds a result whose structured
        // output parsed within 64 MiB (`dispatch::check`): room for that
        // and the text, whatever the record's shape.
        let value = crate::json::parse(text, text.len().saturating_mul(8).max(160 << 20))
            .map_err(|e| format!("the task store's record is not JSON: {e}"))?;
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| format!("the task store's record is not a task record: {e}"))
    }

    /// Send `command` to `replica`, the one running its task; refused
    /// while its inbox is full.
    pub async fn send(&self, replica: &str, command: &Command) -> Result<(), String> {
        let text = serde_json::to_string(command).map_err(|e| e.to_string())?;
        // The inbox dies with its replica (its lease's life, doubled). A
        // command sent twice (a retry after a dropped reply) is harmless:
        // answers to keys already answered and a second cancel change
        // nothing.
        let pushed: bool = self
            .query(
                redis::cmd("EVAL")
                    .arg(PUSH)
                    .arg(2)
                    .arg(self.key("inbox", replica))
                    .arg(self.key("inbox-bytes", replica))
                    .arg(text)
                    .arg(INBOX_MAX_COMMANDS)
                    .arg(INBOX_MAX_BYTES)
                    .arg(u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX) * 2),
            )
            .await?;
        if pushed {
            Ok(())
        } else {
            Err(format!(
                "the replica running this task has {INBOX_MAX_COMMANDS} commands or \
                 {} MiB waiting for it in the task store; retry shortly",
                INBOX_MAX_BYTES >> 20
            ))
        }
    }

    /// Whether `replica` is alive (holds its lease).
    pub async fn alive(&self, replica: &str) -> Result<bool, String> {
        self.query::<bool>(redis::cmd("EXISTS").arg(self.key("lease", replica)))
            .await
    }

    /// Renew this replica's lease.
    pub async fn renew(&self) -> Result<(), String> {
        self.query::<()>(
            redis::cmd("SET")
                .arg(self.key("lease", &self.replica))
                .arg(1)
                .arg("PX")
                .arg(u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX)),
        )
        .await
    }

    /// Run `command`. A connection found down makes the manager start
    /// reconnecting; the command is sent once more, on the new connection,
    /// so the first request after the store comes back succeeds. (Every
    /// command sent this way is idempotent.)
    async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, String> {
        let mut connection = self.connection.clone();
        match command.query_async(&mut connection).await {
            Err(error) if reconnecting(&error) => command
                .query_async(&mut connection)
                .await
                .map_err(unreachable),
            done => done.map_err(unreachable),
        }
    }

    /// Renew this replica's lease and take what its inbox holds (commands
    /// that do not parse are dropped, with a warning).
    pub async fn renew_and_take(&self) -> Result<Vec<Command>, String> {
        let taken: Vec<Vec<u8>> = redis::cmd("EVAL")
            .arg(TAKE)
            .arg(3)
            .arg(self.key("lease", &self.replica))
            .arg(self.key("inbox", &self.replica))
            .arg(self.key("inbox-bytes", &self.replica))
            .arg(u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX))
            .arg(INBOX_BATCH)
            .query_async(&mut self.connection.clone())
            .await
            .map_err(unreachable)?;
        Ok(taken
            .into_iter()
            .filter_map(|text| match serde_json::from_slice(&text) {
                Ok(command) => Some(command),
                Err(error) => {
                    tracing::warn!(%error, "a task command in the store does not parse; dropped");
                    None
                }
            })
            .collect())
    }

    /// Give up this replica's lease (it is stopping): its running tasks
    /// read as failed at once.
    pub async fn release(&self) {
        let _ = redis::cmd("DEL")
            .arg(self.key("lease", &self.replica))
            .query_async::<()>(&mut self.connection.clone())
            .await;
    }
}

/// Whether `error` means the connection is gone (and is being made anew).
fn reconnecting(error: &redis::RedisError) -> bool {
    error.is_io_error() || error.is_unrecoverable_error()
}

fn unreachable(error: redis::RedisError) -> String {
    format!("the task store cannot be reached: {error}")
}

/// SHA-256 of an owner key, hex: what a record says of its owner.
pub fn owner_digest(owner: &str) -> String {
    use sha2::{Digest as _, Sha256};
    crate::catalog::hex(&Sha256::digest(owner.as_bytes()))
}
