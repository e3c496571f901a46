//! The client-services grant: what a tool may ask of the caller's client.
//! Elicitation (a question for the user) is open to every tool, since the
//! user answers it; sampling spends the user's tokens, so it is off unless
//! the operator sets `allow_sampling = true`.

use std::sync::Arc;

use crate::call::ClientServices;

/// What the operator lets a tool ask of the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServicesGrant {
    /// Whether it may ask the client's model for completions.
    pub sampling: bool,
}

impl ServicesGrant {
    /// The access of one call, through `client` if the call has one.
    pub fn prepare(&self, client: Option<&Arc<dyn ClientServices>>) -> ClientAccess {
        ClientAccess {
            client: client.cloned(),
            sampling: self.sampling,
        }
    }
}

/// One call's access to its client's services.
#[derive(Clone, Default)]
pub struct ClientAccess {
    /// The client, if the call has one (a `toolcage call` has none).
    pub client: Option<Arc<dyn ClientServices>>,
    /// Whether sampling is allowed.
    pub sampling: bool,
}
