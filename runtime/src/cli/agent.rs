//! `toolcage agent`: the loop around a model (`toolcage::agent::run`)
//! on the terminal.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use toolcage::Host;
use toolcage::call::ClientServices;
use toolcage::config::expand_tilde;

use crate::args::{AgentArgs, Common};
use crate::call::Terminal;
use crate::options::options;

/// The most a prompt read from stdin may be, in bytes.
const MAX_PROMPT_BYTES: u64 = 1024 * 1024;

/// `toolcage agent`: one prompt (an argument, or stdin when it is not a
/// terminal), or a conversation on the terminal. Exits 0 when the model
/// answered, 1 when a limit or the model ended the run.
pub(crate) async fn agent(
    common: &Common,
    args: &AgentArgs,
    prompt: Option<String>,
) -> anyhow::Result<ExitCode> {
    use std::io::{IsTerminal as _, Read as _};
    use toolcage::agent::run::{Agent, Settings};
    let api_key = match &args.api_key_file {
        Some(path) => {
            let path = expand_tilde(path);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the API key file `{}`", path.display()))?;
            let key = text.trim().to_owned();
            if key.is_empty() {
                bail!("the API key file `{}` is empty", path.display());
            }
            Some(key)
        }
        None => std::env::var(&args.api_key_env)
            .ok()
            .map(|key| key.trim().to_owned())
            .filter(|key| !key.is_empty()),
    };
    if api_key
        .as_deref()
        .is_some_and(|key| key.chars().any(|c| c.is_control()))
    {
        bail!("the API key holds a control character");
    }
    toolcage::outbound::check_url(&args.base_url)
        .map_err(|why| anyhow::anyhow!("--base-url `{}` {why}", args.base_url))?;
    let system =
        match &args.system_file {
            Some(path) => {
                let path = expand_tilde(path);
                Some(std::fs::read_to_string(&path).with_context(|| {
                    format!("cannot read the system prompt `{}`", path.display())
                })?)
            }
            None => args.system.clone(),
        };
    let interactive = prompt.is_none() && std::io::stdin().is_terminal();
    let prompt = match prompt {
        Some(prompt) => Some(prompt),
        None if interactive => None,
        None => {
            let mut text = String::new();
            std::io::stdin()
                .take(MAX_PROMPT_BYTES + 1)
                .read_to_string(&mut text)
                .context("cannot read the prompt from stdin")?;
            if text.len() as u64 > MAX_PROMPT_BYTES {
                bail!("the prompt on stdin is over {MAX_PROMPT_BYTES} bytes");
            }
            if text.trim().is_empty() {
                bail!("no prompt: pass one, or pipe it to stdin");
            }
            Some(text)
        }
    };
    let host = Host::load(options(common)?).await?;
    let max_duration = std::time::Duration::from_secs(args.max_seconds);
    let settings = Settings {
        base_url: args.base_url.clone(),
        model: args.model.clone(),
        api_key,
        system,
        max_steps: args.max_steps,
        max_duration,
        max_tokens: args.max_tokens,
        request_timeout: std::time::Duration::from_secs(120),
    };
    let services: Arc<dyn ClientServices> = Arc::new(Terminal::new(args.yes));
    let mut agent = Agent::new(Arc::clone(&host.dispatcher), settings, services);
    let mut answered = true;
    match prompt {
        Some(prompt) => answered = agent_turn(&mut agent, &prompt).await,
        None => loop {
            let line = tokio::task::spawn_blocking(|| {
                eprint!("> ");
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map(|read| (read, line))
            })
            .await??;
            match line {
                (0, _) => break,
                (_, line) if matches!(line.trim(), "exit" | "quit") => break,
                (_, line) if line.trim().is_empty() => {}
                (_, line) => answered = agent_turn(&mut agent, line.trim()).await,
            }
        },
    }
    // Every call's journal line, and the run's, are written before exiting.
    host.dispatcher.shutdown().await;
    Ok(if answered {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One prompt of `toolcage agent`: whether the model answered.
async fn agent_turn(agent: &mut toolcage::agent::run::Agent, prompt: &str) -> bool {
    let report = agent
        .ask(prompt, &mut std::io::stdout(), &mut std::io::stderr())
        .await;
    println!();
    if let Some(message) = report.ending.message() {
        eprintln!("toolcage: {message}");
    }
    report.ending == toolcage::agent::run::Ending::Answered
}
