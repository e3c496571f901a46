//! The commands of installing — `add`, `update`, `remove`, `publish` — and
//! the `[[sources]]` step of `serve`, as the binary runs them: settings
//! from the config and the flags, reports to the writer the binary hands
//! in (its stdout; never during `serve`, whose stdout is the protocol),
//! questions on the terminal. The work is `install`'s and `publish`'s.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::digest::Digest;
use super::fetch::Settings;
use super::install::{Installer, SignatureChange};
use super::keys::{PublicKey, SigningKey, read_public_key};
use super::reference::Source;
use super::report::{install_report, update_report};
use crate::Options;
use crate::sandbox::{Sandbox, SandboxSettings};

/// Flags every installing command shares.
#[derive(Debug, Default, Clone)]
pub struct Flags {
    /// Public keys given with `--key`, over `[install] keys`.
    pub keys: Vec<PathBuf>,
    /// `--require-signature`.
    pub require_signature: bool,
}

/// The installer `options` and `flags` describe.
///
/// # Errors
///
/// A key cannot be read, there is no lock file place, or the engine cannot
/// be created.
pub fn installer(options: &Options, flags: &Flags) -> Result<Installer, String> {
    let install = &options.config.install;
    let key_paths = if flags.keys.is_empty() {
        &install.keys
    } else {
        &flags.keys
    };
    let keys = key_paths
        .iter()
        .map(|p| read_public_key(p))
        .collect::<Result<Vec<PublicKey>, String>>()?;
    let lock_path = install.lock_file.clone().ok_or(
        "no place for the lock: set `[install] lock_file`, or HOME for the default beside the \
         config",
    )?;
    let sandbox = Sandbox::new(&SandboxSettings {
        max_concurrent_calls: 2,
        ready_instances: 0,
        cache_dir: options.cache_dir.clone(),
        fuel_metering: options.fuel_metering,
        memory_reset: options.config.server.memory_reset,
    })
    .map_err(|error| format!("cannot create the WebAssembly engine: {error:#}"))?;
    let timeout = Duration::from_millis(install.timeout_ms);
    Ok(Installer {
        tools_dir: options.tools_dir.clone(),
        lock_path,
        sandbox: Arc::new(sandbox),
        config: options.config.clone(),
        settings: Settings {
            max_bytes: install.max_component_bytes,
            timeout,
            // A whole download: generous, but not forever.
            deadline: timeout * 20,
            // And all of one source's requests together.
            fetch_deadline: Duration::from_millis(install.fetch_deadline_ms),
            keys,
            require_signature: flags.require_signature || install.require_signature,
        },
        signature_required_by_flag: flags.require_signature,
    })
}

/// `toolcage add`.
///
/// # Errors
///
/// Why nothing was installed.
pub async fn add(
    out: &mut Out,
    options: &Options,
    flags: &Flags,
    source: &str,
    name: Option<&str>,
    digest: Option<&str>,
) -> Result<(), String> {
    let installer = installer(options, flags)?;
    let digest = digest.map(Digest::parse).transpose()?;
    let installed = installer
        .add(source, name, digest, &mut |installed| {
            let _ = write!(out, "{}", install_report(installed));
        })
        .await?;
    writeln!(
        out,
        "installed {} as {} (locked in {})",
        installed.name,
        installer
            .tools_dir
            .join(format!("{}.wasm", installed.name))
            .display(),
        installer.lock_path.display()
    )
    .map_err(written)
}

/// What `toolcage update` may do without asking.
#[derive(Debug, Default, Clone, Copy)]
pub struct UpdateFlags {
    /// `--yes`: replace without asking.
    pub yes: bool,
    /// `--allow-signature-change`: replace a tool whose installed version
    /// a key signed by one that key did not sign.
    pub allow_signature_change: bool,
}

/// `toolcage update [NAME] [--yes] [--allow-signature-change]`: whether
/// every tool updated or was up to date.
///
/// # Errors
///
/// The name is not installed or the lock cannot be used.
pub async fn update(
    out: &mut Out,
    options: &Options,
    flags: &Flags,
    name: Option<&str>,
    update_flags: UpdateFlags,
) -> Result<bool, String> {
    let installer = installer(options, flags)?;
    let change = if update_flags.allow_signature_change {
        SignatureChange::Allow
    } else {
        SignatureChange::Refuse
    };
    let outcomes = installer
        .update(name, change, &mut |old, new, added| {
            let _ = write!(out, "{}", update_report(&old.digest, new, added));
            update_flags.yes || ask(out, "replace it?")
        })
        .await?;
    let mut all_ok = true;
    for outcome in outcomes {
        match outcome {
            Ok(line) => writeln!(out, "{line}").map_err(written)?,
            Err(why) => {
                all_ok = false;
                eprintln!("toolcage: {}", crate::terminal::escaped(&why));
            }
        }
    }
    Ok(all_ok)
}

/// `toolcage remove NAME`.
///
/// # Errors
///
/// It is not installed, or removing failed.
pub fn remove(out: &mut Out, options: &Options, name: &str) -> Result<(), String> {
    let installer = installer(options, &Flags::default())?;
    writeln!(out, "{}", installer.remove(name)?).map_err(written)
}

/// `toolcage publish FILE oci://… [--sign KEY]`.
///
/// # Errors
///
/// The file is not a tool toolcage can serve, the key cannot be read, or
/// the registry refused.
pub async fn publish(
    out: &mut Out,
    options: &Options,
    file: &Path,
    reference: &str,
    key: Option<&Path>,
) -> Result<(), String> {
    let Source::Oci(reference) = Source::parse(reference)? else {
        return Err(format!(
            "`{reference}`: publish pushes to an OCI registry: oci://REGISTRY/REPOSITORY:TAG"
        ));
    };
    let key = key
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
            SigningKey::from_pem(&text).map_err(|why| format!("`{}`: {why}", path.display()))
        })
        .transpose()?;
    let installer = installer(options, &Flags::default())?;
    // What is published is checked as an install would check it.
    let fetched = super::fetch::fetch(
        &Source::Path(file.to_owned()),
        None,
        None,
        &installer.settings,
    )
    .await?;
    let imports = installer.check(&fetched).await?;
    let published = super::publish::publish(
        fetched.bytes,
        &imports,
        &reference,
        key.as_ref(),
        installer.settings.timeout,
    )
    .await?;
    let signature = match &published.signature_tag {
        Some(tag) => tag.clone(),
        None => "none (pass --sign KEY to sign)".to_owned(),
    };
    writeln!(
        out,
        "published {reference}\n  manifest   {}\n  component  {}\n  signature  {signature}\n\
         install it with: toolcage add oci://{}/{}@{}",
        published.manifest,
        published.layer,
        reference.registry,
        reference.repository,
        published.manifest
    )
    .map_err(written)
}

/// The `[[sources]]` step of `serve`: fetch what is missing, log each.
pub async fn sync_sources(options: &Options) {
    if options.config.install.sources.is_empty() {
        return;
    }
    let installer = match installer(options, &Flags::default()) {
        Ok(installer) => installer,
        Err(why) => {
            tracing::error!(%why, "cannot fetch [[sources]]");
            return;
        }
    };
    for outcome in installer.sync().await {
        match outcome {
            Ok(line) => tracing::info!(source = %line, "[[sources]]"),
            Err(why) => tracing::error!(%why, "[[sources]]: not installed"),
        }
    }
}

/// Where the commands write their reports.
pub type Out = dyn std::io::Write + Send;

/// A failed write of a report, as an error.
fn written(error: std::io::Error) -> String {
    format!("cannot write the report: {error}")
}

/// Ask `question` on the terminal: yes only for `y`/`yes`; no without a
/// terminal.
fn ask(out: &mut Out, question: &str) -> bool {
    if !std::io::stdin().is_terminal() {
        let _ = writeln!(
            out,
            "not replaced: no terminal to ask on; pass --yes to replace without asking"
        );
        return false;
    }
    let _ = write!(out, "{question} [y/N] ");
    let _ = out.flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
