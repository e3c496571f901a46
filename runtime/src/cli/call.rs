//! `toolcage call`, and the terminal as the client of a call (`call`
//! and `agent`): it can confirm a call, not answer a tool's questions.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolcage::Host;
use toolcage::call::{
    Answer, Ask, ClientServices, ElicitAnswer, GuestEvent, PendingInput, ServiceError,
    ServiceFuture,
};
use toolcage::dispatch::CallContext;
use toolcage::journal::ClientId;
use toolcage::terminal::{self, Form};

use crate::args::Common;
use crate::options::options;

/// `toolcage call TOOL ARGUMENTS`: the result as MCP `CallToolResult` JSON
/// on stdout, the tool's log and progress on stderr; exit 1 when the
/// result is an error.
pub(crate) async fn run(
    common: &Common,
    tool: &str,
    arguments: &str,
    yes: bool,
) -> anyhow::Result<ExitCode> {
    let arguments: Value = serde_json::from_str(arguments)
        .with_context(|| format!("the arguments `{arguments}` are not JSON"))?;
    let Value::Object(arguments) = arguments else {
        bail!("the arguments must be a JSON object, like '{{\"timezone\": \"UTC\"}}'");
    };
    let host = Host::load(options(common)?).await?;
    let events: toolcage::call::EventSink = Arc::new(|event| match event {
        // The tool's own words: shown, never obeyed by the terminal.
        GuestEvent::Log { level, message } => {
            let _ = writeln!(terminal::stderr(Form::Text), "[{level:?}] {message}");
        }
        GuestEvent::Progress {
            done,
            total,
            message,
        } => {
            let _ = writeln!(
                terminal::stderr(Form::Text),
                "[progress] {done}{} {}",
                total.map(|t| format!("/{t}")).unwrap_or_default(),
                message.unwrap_or_default()
            );
        }
        GuestEvent::BeginTask => {}
    });
    let cancel = CancellationToken::new();
    let services: Arc<dyn ClientServices> = Arc::new(Terminal::new(yes));
    let context = CallContext {
        events: Some(events),
        cancel: &cancel,
        client_roots: None,
        services: Some(services),
        client: &|| ClientId {
            transport: "cli",
            ..ClientId::default()
        },
        caller: None,
        lane: toolcage::dispatch::Lane::Pooled,
        declared: None,
        task: None,
    };
    let output = host.dispatcher.call(tool, arguments.into(), context).await;
    // The call's journal line is written before anything else happens.
    host.dispatcher.shutdown().await;
    let output = match output {
        Ok(output) => output,
        Err(error) => bail!("{error}; `toolcage list` shows the available tools"),
    };
    let is_error = output.is_error;
    let result = toolcage::protocol::to_mcp_result(output);
    let mut stdout = terminal::stdout(Form::Json);
    serde_json::to_writer_pretty(&mut stdout, &result)?;
    writeln!(stdout)?;
    Ok(if is_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `toolcage call`'s and `toolcage agent`'s client services: the terminal
/// can confirm a call (or `--yes` does), but cannot answer a tool's own
/// questions.
pub(crate) struct Terminal {
    yes: bool,
    /// One question on the terminal at a time (an agent's calls run
    /// together).
    asking: Arc<tokio::sync::Mutex<()>>,
}

impl Terminal {
    pub(crate) fn new(yes: bool) -> Terminal {
        Terminal {
            yes,
            asking: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

impl ClientServices for Terminal {
    fn ask(&self, questions: Vec<PendingInput>) -> ServiceFuture<Vec<Result<Answer, String>>> {
        let answers = questions
            .iter()
            .map(|question| {
                Err(match question.ask.kind() {
                    Ask::Sample => "`toolcage call` has no model to sample; use an MCP client",
                    Ask::Elicit | Ask::Roots => {
                        "`toolcage call` cannot answer a tool's questions; use an MCP client"
                    }
                }
                .to_owned())
            })
            .collect();
        Box::pin(async move { Ok(answers) })
    }

    fn confirm(
        &self,
        _key: String,
        message: String,
        _schema: Value,
    ) -> ServiceFuture<ElicitAnswer> {
        let yes = self.yes;
        let asking = Arc::clone(&self.asking);
        Box::pin(async move {
            use std::io::IsTerminal as _;
            if yes {
                return Ok(ElicitAnswer::Accept(json!({"confirm": true})));
            }
            if !std::io::stdin().is_terminal() {
                return Err(ServiceError::Refused(
                    "there is no terminal to ask on; pass --yes to confirm it".into(),
                ));
            }
            let _turn = asking.lock().await;
            // What the tool's arguments put in the message cannot move the
            // cursor, reorder or rewrite the question: it shows as escapes.
            let message = terminal::escaped(&message).into_owned();
            let answer = tokio::task::spawn_blocking(move || {
                eprint!("{message}\nRun it? [y/N] ");
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await;
            match answer {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes") => {
                    Ok(ElicitAnswer::Accept(json!({"confirm": true})))
                }
                _ => Ok(ElicitAnswer::Decline),
            }
        })
    }
}
