//! The settings of MCP tasks and of a fleet's shared state: the bounds on
//! tasks (`[tasks]`), the shared task store (`store_url`,
//! `store_password_file`, `store_prefix`) and the keys that sign
//! request state (`server.state_key_file`).

/// The shared task store (`[tasks] store_url`, `store_password_file`,
/// `store_prefix`).
#[derive(Clone, PartialEq, Eq)]
pub struct TaskStore {
    /// `redis://HOST[:PORT][/DB]`, without a password.
    pub url: String,
    /// The password, from `store_password_file`.
    pub password: Option<String>,
    /// What every key starts with, so fleets can share a server.
    pub prefix: String,
}

impl std::fmt::Debug for TaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStore")
            .field("url", &self.url)
            .field("password", &self.password.as_ref().map(|_| "[secret]"))
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl TaskStore {
    /// `store_url` checked: `redis://`, a host, no password in it.
    ///
    /// # Errors
    ///
    /// What is wrong with it.
    pub fn check_url(url: &str) -> Result<(), String> {
        let Some(rest) = url.strip_prefix("redis://") else {
            return Err(if url.starts_with("rediss://") {
                "TLS (`rediss://`) is not supported; reach the store over a private network or a local TLS proxy".into()
            } else {
                "must be a `redis://HOST[:PORT][/DB]` URL".into()
            });
        };
        let authority = rest.split('/').next().unwrap_or("");
        if authority.contains('@') {
            return Err(
                "must not hold a user or password; put the password in `tasks.store_password_file`"
                    .into(),
            );
        }
        if authority.is_empty() {
            return Err("must name a host".into());
        }
        redis::IntoConnectionInfo::into_connection_info(url).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The URL as messages show it (it holds no secret).
    pub fn shown_url(&self) -> &str {
        &self.url
    }

    /// How to connect.
    ///
    /// # Errors
    ///
    /// The URL does not parse (it was checked when the config was read).
    pub fn connection_info(&self) -> Result<redis::ConnectionInfo, String> {
        let info = redis::IntoConnectionInfo::into_connection_info(self.url.as_str())
            .map_err(|e| format!("the task store `{}`: {e}", self.url))?;
        Ok(match &self.password {
            Some(password) => {
                let redis = info.redis_settings().clone().set_password(password);
                info.set_redis_settings(redis)
            }
            None => info,
        })
    }
}

/// Keys for `requestState` (`server.state_key_file`): the first signs,
/// every one checks, so a key can be rotated with an overlap (add the new
/// one first, keep the old one below it until states it signed have
/// expired, then remove it). `Debug` shows how many, never a key.
#[derive(Clone, PartialEq, Eq)]
pub struct StateKeys {
    keys: Vec<[u8; 32]>,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKeys({} keys)", self.keys.len())
    }
}

impl StateKeys {
    /// Most keys a file may hold.
    pub const MAX: usize = 8;

    /// Read `text`: one key a line, 64 hex digits (`openssl rand -hex 32`),
    /// blank lines and `#` comments ignored.
    ///
    /// # Errors
    ///
    /// No key, more than [`StateKeys::MAX`], or a line that is not 64 hex
    /// digits (named by its number, never shown).
    pub fn parse(text: &str) -> Result<StateKeys, String> {
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bytes: Option<Vec<u8>> = (line.len() == 64)
                .then(|| {
                    (0..64)
                        .step_by(2)
                        .map(|i| u8::from_str_radix(line.get(i..i + 2)?, 16).ok())
                        .collect()
                })
                .flatten();
            let Some(bytes) = bytes else {
                return Err(format!(
                    "line {} is not a key: each key is 64 hex digits (32 bytes; `openssl rand -hex 32` makes one)",
                    number + 1
                ));
            };
            let mut key = [0u8; 32];
            key.copy_from_slice(&bytes);
            keys.push(key);
        }
        if keys.is_empty() {
            return Err("holds no key: write one, 64 hex digits (`openssl rand -hex 32`)".into());
        }
        if keys.len() > StateKeys::MAX {
            return Err(format!(
                "holds {} keys, more than {}: keep the newest and the one it replaces",
                keys.len(),
                StateKeys::MAX
            ));
        }
        Ok(StateKeys { keys })
    }

    /// The key that signs.
    pub fn signing(&self) -> &[u8; 32] {
        // `parse` never makes an empty set.
        &self.keys[0]
    }

    /// Every key that checks, the signing one first.
    pub fn all(&self) -> &[[u8; 32]] {
        &self.keys
    }
}

/// The bounds on MCP tasks (`[tasks]`): calls that run on after their
/// request, whose state the server keeps until the client reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSettings {
    /// Tasks one client may hold at once (running or kept), past which a
    /// call that would start one is refused.
    pub max_per_client: usize,
    /// Tasks the server holds at once, across clients.
    pub max_total: usize,
    /// How long a task is kept from its creation, in milliseconds (its
    /// `ttlMs`): one still running then is cancelled.
    pub ttl_ms: u64,
    /// The polling interval suggested to clients, in milliseconds.
    pub poll_interval_ms: u64,
    /// Bytes of finished tasks' results kept at once; past it, the oldest
    /// finished tasks are dropped before their time.
    pub max_retained_bytes: u64,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            max_per_client: 64,
            max_total: 1024,
            ttl_ms: 3_600_000,
            poll_interval_ms: 500,
            max_retained_bytes: 256 * 1024 * 1024,
        }
    }
}
