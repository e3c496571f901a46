//! Resource reads, prompt gets and completions: one run of the serving
//! component each, under the operator's default limits, with no grants but
//! the `[resources] roots` for a read (read-only) and the client's services
//! for a prompt get (it may ask, as a call may), after a server-wide
//! permit. Not journalled (they are reads of what a component publishes,
//! not tool calls); each has an audit line.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::record::audit;
use super::{Dispatcher, ServeError, acquire_or_cancel};
use crate::call::{
    Arguments, CallFailure, ClientServices, Completion, CompletionRequest, CompletionTarget,
    PromptOutput, ResourceContent,
};

impl Dispatcher {
    /// Read resource `uri` from the component that lists it (or whose
    /// template it matches). Runs in a fresh instance under the operator's
    /// default limits (`[defaults]`), with only the `[resources] roots`
    /// (read-only) and no client services, after a server-wide permit.
    ///
    /// # Errors
    ///
    /// See [`ServeError`].
    pub async fn read_resource(
        &self,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<ResourceContent>, ServeError> {
        if uri.len() > crate::catalog::MAX_URI_BYTES {
            return Err(ServeError::Refused(format!(
                "the resource URI is {} bytes, over the limit of {}",
                uri.len(),
                crate::catalog::MAX_URI_BYTES
            )));
        }
        let Some(component) = self.registry.snapshot().resource_component(uri) else {
            return Err(ServeError::UnknownResource(uri.to_owned()));
        };
        let _in_flight = self.calls.token();
        let config = self.config();
        let limits = config.defaults.limits;
        let Some(permit) = acquire_or_cancel([&self.permits], cancel).await else {
            return Err(ServeError::Failed(format!("read of `{uri}` was cancelled")));
        };
        let started = Instant::now();
        let (sandbox, component_in, owned_uri, cancel_in) = (
            Arc::clone(&self.sandbox),
            Arc::clone(&component),
            uri.to_owned(),
            cancel.clone(),
        );
        // Off the thread that reads requests (`Lanes::pooled`); the permit
        // is the future's first local, so it outlives the store.
        let outcome = self
            .lanes
            .pooled(async move {
                let _permit = permit;
                sandbox
                    .read_resource(
                        &component_in.prepared,
                        &owned_uri,
                        &limits,
                        &config.resource_roots,
                        &cancel_in,
                    )
                    .await
            })
            .await;
        let result = match outcome {
            Ok(Ok(contents)) if contents.is_empty() => Err(ServeError::Failed(format!(
                "resource `{uri}`: the component returned no contents"
            ))),
            Ok(Ok(contents)) => Ok(contents),
            Ok(Err(message)) => Err(ServeError::Refused(format!("resource `{uri}`: {message}"))),
            Err(failure) => Err(ServeError::Failed(format!("resource `{uri}` {failure}"))),
        };
        audit("resource", uri, &component.digest, started, &result);
        result
    }

    /// Get prompt `name` with `arguments` (string values). Runs like
    /// [`Dispatcher::read_resource`], but with the client's `services`: a
    /// prompt may ask the user before it builds.
    ///
    /// # Errors
    ///
    /// See [`ServeError`].
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &Arguments,
        services: Option<Arc<dyn ClientServices>>,
        cancel: &CancellationToken,
    ) -> Result<PromptOutput, ServeError> {
        let served = {
            let catalog = self.registry.snapshot();
            catalog
                .prompts
                .get(name)
                .map(|p| (Arc::clone(&p.descriptor), Arc::clone(&p.component)))
        };
        let Some((descriptor, component)) = served else {
            return Err(ServeError::UnknownPrompt(name.to_owned()));
        };
        if let Some(missing) = descriptor
            .arguments
            .iter()
            .find(|a| a.required && arguments.value().get(&a.name).is_none())
        {
            return Err(ServeError::MissingArgument {
                prompt: name.to_owned(),
                argument: missing.name.clone(),
            });
        }
        let _in_flight = self.calls.token();
        let limits = self.config().defaults.limits;
        let Some(permit) = acquire_or_cancel([&self.permits], cancel).await else {
            return Err(ServeError::Failed(format!("prompt `{name}` was cancelled")));
        };
        let started = Instant::now();
        let arguments = crate::json::value_text(arguments.value());
        let (sandbox, component_in, owned_name, cancel_in) = (
            Arc::clone(&self.sandbox),
            Arc::clone(&component),
            name.to_owned(),
            cancel.clone(),
        );
        // As for a resource read.
        let outcome = self
            .lanes
            .pooled(async move {
                let _permit = permit;
                sandbox
                    .get_prompt(
                        &component_in.prepared,
                        &owned_name,
                        &arguments,
                        &limits,
                        services,
                        &cancel_in,
                    )
                    .await
            })
            .await;
        let result = match outcome {
            Ok(Ok(output)) => Ok(output),
            Err(CallFailure::InputRequired(pending)) => Err(ServeError::InputRequired(pending)),
            Ok(Err(message)) => Err(ServeError::Refused(format!("prompt `{name}`: {message}"))),
            Err(failure) => Err(ServeError::Failed(format!("prompt `{name}` {failure}"))),
        };
        audit("prompt", name, &component.digest, started, &result);
        result
    }

    /// Complete `request` with the component serving its prompt or
    /// template, after checking that the argument exists. Runs like
    /// [`Dispatcher::read_resource`].
    ///
    /// # Errors
    ///
    /// See [`ServeError`].
    pub async fn complete(
        &self,
        request: CompletionRequest,
        cancel: &CancellationToken,
    ) -> Result<Completion, ServeError> {
        let catalog = self.registry.snapshot();
        let (component, known): (_, Vec<String>) = match &request.target {
            CompletionTarget::Prompt(name) => {
                let Some(prompt) = catalog.prompts.get(name) else {
                    return Err(ServeError::UnknownPrompt(name.clone()));
                };
                (
                    Arc::clone(&prompt.component),
                    prompt
                        .descriptor
                        .arguments
                        .iter()
                        .map(|a| a.name.clone())
                        .collect(),
                )
            }
            CompletionTarget::ResourceTemplate(template) => {
                let Some(served) = catalog
                    .templates
                    .iter()
                    .find(|t| t.descriptor.raw.uri_template == *template)
                else {
                    return Err(ServeError::UnknownResource(template.clone()));
                };
                (
                    Arc::clone(&served.component),
                    served
                        .descriptor
                        .uri
                        .variables()
                        .map(str::to_owned)
                        .collect(),
                )
            }
        };
        drop(catalog);
        let what = match &request.target {
            CompletionTarget::Prompt(name) => format!("prompt `{name}`"),
            CompletionTarget::ResourceTemplate(template) => {
                format!("resource template `{template}`")
            }
        };
        if !known.contains(&request.argument) {
            return Err(ServeError::UnknownArgument(format!(
                "{what} has no argument `{}`; its arguments are: {}",
                crate::redact::truncate(&request.argument, 128),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
        if !component.prepared.has_completions() {
            return Ok(Completion::default());
        }
        let _in_flight = self.calls.token();
        let limits = self.config().defaults.limits;
        let Some(permit) = acquire_or_cancel([&self.permits], cancel).await else {
            return Err(ServeError::Failed(format!(
                "completion for {what} was cancelled"
            )));
        };
        let started = Instant::now();
        let (sandbox, component_in, cancel_in) = (
            Arc::clone(&self.sandbox),
            Arc::clone(&component),
            cancel.clone(),
        );
        let outcome = self
            .lanes
            .pooled(async move {
                let _permit = permit;
                sandbox
                    .complete(&component_in.prepared, &request, &limits, &cancel_in)
                    .await
            })
            .await;
        let result = match outcome {
            Ok(Ok(completion)) => Ok(completion),
            Ok(Err(message)) => Err(ServeError::Refused(format!(
                "completion for {what}: {message}"
            ))),
            Err(failure) => Err(ServeError::Failed(format!(
                "completion for {what} {failure}"
            ))),
        };
        audit("completion", &what, &component.digest, started, &result);
        result
    }
}
