//! The settings of the Streamable HTTP transport (`[http]`): where
//! requests may come from, the caps on connections, requests and
//! sessions, authentication, the REST face and the metrics endpoint.

use super::OAuthConfig;

/// Settings of the Streamable HTTP transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Extra accepted `Host` values (loopback names are always accepted).
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values; requests with any other `Origin` get 403.
    pub allowed_origins: Vec<String>,
    /// The bearer token, read from `token_file` or `token_env`.
    pub token: Option<String>,
    /// OAuth access tokens instead of the one token (`[http.oauth]`).
    pub oauth: Option<OAuthConfig>,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Requests in progress at once.
    pub max_concurrent_requests: usize,
    /// How long shutdown waits for requests in flight, in milliseconds.
    pub shutdown_grace_ms: u64,
    /// How long a connection may take to send a request's head, and stay
    /// idle between requests, in milliseconds; then it is closed.
    pub idle_timeout_ms: u64,
    /// How long a client may take to send a request's body, in
    /// milliseconds (408 past it).
    pub body_timeout_ms: u64,
    /// Connections open at once; past it, new ones get a 503 and are closed.
    pub max_connections: usize,
    /// Sessions of initialize-era clients (2025-06-18, 2025-11-25) at once;
    /// past it, a new `initialize` gets a 503 until one ends (idle sessions
    /// end after 5 minutes, or by `DELETE`).
    pub max_sessions: usize,
    /// After SIGTERM/SIGINT, how long the server keeps serving with
    /// `/readyz` answering 503, so a load balancer stops sending before it
    /// stops accepting.
    pub drain_delay_ms: u64,
    /// Who may read `/metrics`.
    pub metrics: MetricsAccess,
    /// This replica's name (`http.replica_name`, or the environment
    /// variable `http.replica_name_env` names): the session ids and task
    /// ids it hands out start with `NAME.`, so a load balancer can route a
    /// 2025-era session, or a task, back to the replica that holds it.
    pub replica_name: Option<String>,
    /// The plain REST face (`[http.rest]`).
    pub rest: RestConfig,
}

/// The plain REST face beside `/mcp` (`[http.rest]`): `GET /capabilities`
/// and `POST /tool`, for programs that do not speak MCP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestConfig {
    /// Served at all (off by default).
    pub enabled: bool,
    /// Tools this face may run although they need the user's confirmation
    /// (no user is there to ask): the operator's explicit opt-in, by name,
    /// `"*"` for every tool.
    pub unconfirmed: Vec<String>,
}

impl RestConfig {
    /// Whether tool `name` may run here unconfirmed.
    pub fn may_skip_confirmation(&self, name: &str) -> bool {
        self.unconfirmed
            .iter()
            .any(|allowed| allowed == "*" || allowed == name)
    }
}

/// Who may read `/metrics` (`http.metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MetricsAccess {
    /// Whoever may call tools (the token, or an OAuth access token).
    #[default]
    Token,
    /// Anyone who can connect (a scraper inside a private network).
    Open,
    /// Nobody: not served.
    Off,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            token: None,
            oauth: None,
            // 4 MiB: tool arguments are small; a bigger body is a mistake
            // or an attack.
            max_body_bytes: 4 * 1024 * 1024,
            max_concurrent_requests: 256,
            shutdown_grace_ms: 10_000,
            idle_timeout_ms: 30_000,
            body_timeout_ms: 30_000,
            max_connections: 1024,
            max_sessions: 1024,
            drain_delay_ms: 0,
            metrics: MetricsAccess::Token,
            replica_name: None,
            rest: RestConfig::default(),
        }
    }
}
