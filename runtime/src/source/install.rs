//! Installing tools: `toolcage add`, `update`, `remove`, and the
//! `[[sources]]` `serve` fetches at start-up.
//!
//! One install is: hold the lock's guard; fetch (every byte checked,
//! `fetch`); write the bytes into a private staging folder inside the tools
//! folder (so the final step is a rename on one filesystem); load the staged
//! file exactly as the server would (compiled, linked, `describe`d in the
//! sandbox, under the load limits); refuse it if it does not load or if a
//! tool it provides is already served by another file; report what it
//! imports and which grants it would need; record it in the lock; then
//! move it into place (hot reload picks it up).
//!
//! Invariants:
//! - Nothing half-written ever appears in the tools folder: the staging
//!   folder is hidden and not a `.wasm` file, the move is a rename (or, for
//!   a new name, a hard link that fails if the name was taken meanwhile).
//! - A tool file's name is checked by [`check_name`]: it never names a
//!   path outside the tools folder.
//! - No grant is ever added: the report says what the operator would add.
//! - The lock is written before the file moves in, so a server reloading
//!   between the two refuses nothing it should serve for long: it sees
//!   the new lock and the new file in one debounced rescan.
//! - A tool's fetch settings are built in one place, [`Installer::settings_for`]
//!   (its `[[sources]]` entry's keys and signature rule, by name), for
//!   `add`, `update` and `sync` alike.
//! - An update never silently loses a signature: a tool whose lock entry
//!   says which key signed it is replaced only by a version that key
//!   signed, unless the operator passes `--allow-signature-change`
//!   ([`signature_change`]).
//! - An installed file is only ever hashed through
//!   [`capped::digest_file`]: a regular file, not a link, within the
//!   component cap; anything else there is an error, and nothing is
//!   replaced.
//! - A staging folder whose process died (a signal skips `Drop`) is
//!   removed by the next holder of the lock: named
//!   `.toolcage-staging-PID-N`, it is only ever written under the lock, so
//!   one whose PID is not a live process is no one's ([`sweep_staging`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::capped::{self, Links};
use super::digest::Digest;
use super::fetch::{Fetched, Settings, Signature, fetch};
use super::lock::{self, Entry, Lock};
use super::reference::{Source, check_name};
use crate::catalog::{LoadRules, LoadedFile, load_dir, load_file};
use crate::config::Config;
use crate::sandbox::Sandbox;

/// Everything an install needs.
pub struct Installer {
    /// The tools folder.
    pub tools_dir: PathBuf,
    /// The lock file.
    pub lock_path: PathBuf,
    /// The sandbox staged files load in.
    pub sandbox: Arc<Sandbox>,
    /// The configuration (load rules, `[[sources]]`).
    pub config: Config,
    /// How fetching goes, before a tool's own `[[sources]]` entry is
    /// applied ([`Installer::settings_for`]).
    pub settings: Settings,
    /// `--require-signature` was given: a signature is required even of a
    /// source whose entry says `require_signature = false`.
    pub signature_required_by_flag: bool,
}

/// Whether `update` may replace a tool whose installed version was signed
/// by one that is not signed by the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignatureChange {
    /// Refused, with why (the default).
    #[default]
    Refuse,
    /// Allowed: `--allow-signature-change`.
    Allow,
}

/// What an install or update did, for the report.
pub struct Installed {
    /// The tool file's name.
    pub name: String,
    /// The source.
    pub source: String,
    /// What was fetched.
    pub digest: Digest,
    /// The OCI manifest digest.
    pub manifest: Option<Digest>,
    /// The signature check.
    pub signature: Signature,
    /// Its size in bytes.
    pub size: usize,
    /// The tools it provides.
    pub tools: Vec<String>,
    /// What it imports (unversioned).
    pub imports: Vec<String>,
}

/// A staged file: removed with its folder when dropped.
struct Staged {
    dir: PathBuf,
    path: PathBuf,
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The prefix of a staging folder's name: `.toolcage-staging-PID-N`.
const STAGING_PREFIX: &str = ".toolcage-staging-";

impl Installer {
    /// Hold the lock (a bounded wait), then clear what installs that died
    /// left in the tools folder.
    fn hold(&self) -> Result<lock::Guard, String> {
        let guard = lock::hold(&self.lock_path)?;
        sweep_staging(&self.tools_dir, process_is_alive);
        Ok(guard)
    }

    /// `toolcage add SOURCE [--name NAME] [--digest D]`: `report` is called
    /// with what was fetched before anything is written.
    ///
    /// # Errors
    ///
    /// Why nothing was installed.
    pub async fn add(
        &self,
        source_text: &str,
        name: Option<&str>,
        digest: Option<Digest>,
        report: &mut dyn FnMut(&Installed),
    ) -> Result<Installed, String> {
        let source = Source::parse(source_text)?;
        let name = match name {
            Some(name) => name.to_owned(),
            None => source.default_name().ok_or_else(|| {
                format!("`{source_text}` gives no usable file name: pass --name NAME")
            })?,
        };
        check_name(&name)?;
        let target = self.tools_dir.join(format!("{name}.wasm"));
        let settings = self.settings_for(&name)?;
        let _guard = self.hold()?;
        let mut lock = Lock::read(&self.lock_path)?;
        if let Some(entry) = lock.tools.get(&name)
            && present(&target)
        {
            return Err(format!(
                "`{name}` is already installed (from {}); `toolcage update {name}` fetches it \
                 again, `toolcage remove {name}` uninstalls it",
                entry.source
            ));
        }
        if present(&target) {
            return Err(format!(
                "`{}` is already in the tools folder (not installed by `toolcage add`); choose \
                 another --name, or remove that file first",
                target.display()
            ));
        }
        let fetched = fetch(&source, None, digest, &settings).await?;
        let (staged, installed) = self.prepare(&name, source_text, &fetched, None).await?;
        report(&installed);
        lock.tools.insert(name.clone(), entry_of(&installed));
        lock.write(&self.lock_path)?;
        // A hard link creates the name only if it is free: a file that
        // appeared meanwhile is never replaced.
        if let Err(error) = std::fs::hard_link(&staged.path, &target) {
            lock.tools.remove(&name);
            let _ = lock.write(&self.lock_path);
            return Err(format!("cannot write `{}`: {error}", target.display()));
        }
        Ok(installed)
    }

    /// `toolcage update [NAME]`: for each locked tool (or `name`), fetch
    /// its source again (with the tool's own settings); where the bytes
    /// changed, a version that loses the signature the lock records is
    /// refused (unless `change` allows it), and `confirm` sees the old
    /// entry and the new install (with its new imports) and decides.
    /// Returns one line per tool.
    ///
    /// # Errors
    ///
    /// `name` is not installed, or the lock cannot be read or written.
    pub async fn update(
        &self,
        name: Option<&str>,
        change: SignatureChange,
        confirm: &mut dyn FnMut(&Entry, &Installed, &[String]) -> bool,
    ) -> Result<Vec<Result<String, String>>, String> {
        let _guard = self.hold()?;
        let lock = Lock::read(&self.lock_path)?;
        let names: Vec<String> = match name {
            Some(name) if lock.tools.contains_key(name) => vec![name.to_owned()],
            Some(name) => {
                return Err(format!(
                    "`{name}` is not in the lock (`{}`): only tools installed by `toolcage add` \
                     are updated",
                    self.lock_path.display()
                ));
            }
            None => lock.tools.keys().cloned().collect(),
        };
        let mut outcomes = Vec::new();
        for name in names {
            let outcome = self.update_one(&name, change, confirm).await;
            outcomes.push(outcome.map_err(|why| format!("{name}: {why}")));
        }
        Ok(outcomes)
    }

    async fn update_one(
        &self,
        name: &str,
        change: SignatureChange,
        confirm: &mut dyn FnMut(&Entry, &Installed, &[String]) -> bool,
    ) -> Result<String, String> {
        let mut lock = Lock::read(&self.lock_path)?;
        let Some(old) = lock.tools.get(name).cloned() else {
            return Err("no longer in the lock".into());
        };
        let source = Source::parse(&old.source)?;
        let target = self.tools_dir.join(format!("{name}.wasm"));
        // An https:// source keeps the digest it was installed with: only a
        // new --digest (a new `add`) changes what it may be.
        let digest = match &source {
            Source::Url { .. } => old.file_digest(),
            _ => None,
        };
        // What is installed is looked at first: nothing is fetched for a
        // file that is not toolcage's to replace.
        let on_disk = self.installed_digest(&target)?;
        let settings = self.settings_for(name)?;
        let fetched = fetch(&source, None, digest, &settings).await?;
        let same_bytes = old.file_digest() == Some(fetched.digest);
        if same_bytes && on_disk == Some(fetched.digest) {
            return Ok(format!("{name}: up to date ({})", fetched.digest));
        }
        if change == SignatureChange::Refuse
            && let Some(why) = signature_change(&old, &fetched.signature)
        {
            return Err(format!(
                "{why}; nothing was replaced (pass --allow-signature-change to accept it)"
            ));
        }
        let (staged, new) = self
            .prepare(name, &old.source, &fetched, Some(&target))
            .await?;
        let added: Vec<String> = new
            .imports
            .iter()
            .filter(|i| !old.imports.contains(i))
            .cloned()
            .collect();
        if !confirm(&old, &new, &added) {
            return Ok(format!("{name}: left as it is ({})", old.digest));
        }
        lock.tools.insert(name.to_owned(), entry_of(&new));
        lock.write(&self.lock_path)?;
        std::fs::rename(&staged.path, &target)
            .map_err(|error| format!("cannot write `{}`: {error}", target.display()))?;
        Ok(format!("{name}: {} -> {}", old.digest, new.digest))
    }

    /// `toolcage remove NAME`: the file and its lock entry.
    ///
    /// # Errors
    ///
    /// `name` is neither locked nor a file in the tools folder, or a step
    /// failed.
    pub fn remove(&self, name: &str) -> Result<String, String> {
        check_name(name)?;
        let _guard = self.hold()?;
        let mut lock = Lock::read(&self.lock_path)?;
        let target = self.tools_dir.join(format!("{name}.wasm"));
        let entry = lock.tools.remove(name);
        let had_file = match std::fs::remove_file(&target) {
            Ok(()) => true,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
            Err(error) => return Err(format!("cannot remove `{}`: {error}", target.display())),
        };
        if entry.is_none() && !had_file {
            return Err(format!(
                "`{name}` is not installed: no `{}` and no lock entry",
                target.display()
            ));
        }
        if entry.is_some() {
            lock.write(&self.lock_path)?;
        }
        Ok(format!(
            "removed {name}{}",
            if had_file {
                ""
            } else {
                " (its file was already gone)"
            }
        ))
    }

    /// The `[[sources]]` of the config, before serving: each one whose
    /// file is missing or differs from its lock entry is fetched (by the
    /// locked manifest digest, when locked) and installed. One line per
    /// source; errors do not stop the others.
    pub async fn sync(&self) -> Vec<Result<String, String>> {
        let mut outcomes = Vec::new();
        for entry in &self.config.install.sources {
            let outcome = self.sync_one(entry).await;
            outcomes.push(outcome.map_err(|why| format!("source {}: {why}", entry.text)));
        }
        outcomes
    }

    async fn sync_one(&self, entry: &crate::config::SourceEntry) -> Result<String, String> {
        let _guard = self.hold()?;
        let mut lock = Lock::read(&self.lock_path)?;
        let name = &entry.name;
        let target = self.tools_dir.join(format!("{name}.wasm"));
        let locked = lock
            .tools
            .get(name)
            .filter(|e| e.source == entry.text)
            .cloned();
        let on_disk = self.installed_digest(&target)?;
        if let Some(locked) = &locked
            && on_disk.is_some()
            && locked.file_digest() == on_disk
        {
            return Ok(format!("{name}: present ({})", locked.digest));
        }
        if locked.is_none() && lock.tools.contains_key(name) {
            return Err(format!(
                "the lock has `{name}` from another source; `toolcage remove {name}` first"
            ));
        }
        if locked.is_none() && on_disk.is_some() {
            return Err(format!(
                "`{}` is already in the tools folder and not locked; remove it or rename the \
                 source",
                target.display()
            ));
        }
        let settings = self.settings_for(name)?;
        let fetched = fetch(
            &entry.source,
            locked.as_ref().and_then(Entry::manifest_digest),
            entry
                .digest
                .or(locked.as_ref().and_then(Entry::file_digest)),
            &settings,
        )
        .await?;
        if let Some(locked) = &locked
            && locked.file_digest() != Some(fetched.digest)
        {
            return Err(format!(
                "fetched {}, but the lock says {}; refused",
                fetched.digest, locked.digest
            ));
        }
        let (staged, new) = self
            .prepare(name, &entry.text, &fetched, Some(&target))
            .await?;
        if locked.is_none() {
            lock.tools.insert(name.clone(), entry_of(&new));
            lock.write(&self.lock_path)?;
        }
        std::fs::rename(&staged.path, &target)
            .map_err(|error| format!("cannot write `{}`: {error}", target.display()))?;
        Ok(format!(
            "{name}: installed {} (signature: {})",
            new.digest, new.signature
        ))
    }

    /// The fetch settings for the tool file `name`, the one place they are
    /// built: its `[[sources]]` entry's keys (over `--key` and `[install]
    /// keys`) and signature rule (over `[install] require_signature`;
    /// `--require-signature` holds whatever the entry says), else the
    /// installer's own. `add`, `update` and `sync` all fetch with these,
    /// so a tool's rule holds however it is fetched.
    ///
    /// # Errors
    ///
    /// A key of the entry cannot be read.
    pub fn settings_for(&self, name: &str) -> Result<Settings, String> {
        let Some(entry) = self.config.install.sources.iter().find(|e| e.name == name) else {
            return Ok(self.settings.clone());
        };
        let keys = match &entry.keys {
            Some(paths) => paths
                .iter()
                .map(|p| super::keys::read_public_key(p))
                .collect::<Result<Vec<_>, _>>()?,
            None => self.settings.keys.clone(),
        };
        Ok(Settings {
            keys,
            require_signature: signature_required(
                entry.require_signature,
                self.settings.require_signature,
                self.signature_required_by_flag,
            ),
            ..self.settings.clone()
        })
    }

    /// The digest of the installed file `target`, if there is one.
    ///
    /// # Errors
    ///
    /// It is not a regular file (a link, a FIFO, a device), it is larger
    /// than a component may be, or it cannot be read: what is there is not
    /// what toolcage installed, and it is left for the operator.
    fn installed_digest(&self, target: &Path) -> Result<Option<Digest>, String> {
        capped::digest_file(target, self.settings.max_bytes, Links::Refuse).map_err(|error| {
            format!(
                "{error}; toolcage installs a regular file there: remove it, then run this \
                 again"
            )
        })
    }

    /// Stage `fetched` as tool file `name`, load it as the server would,
    /// and refuse it if another file (than `replacing`) serves one of its
    /// tools: the staged file and what it is.
    async fn prepare(
        &self,
        name: &str,
        source: &str,
        fetched: &Fetched,
        replacing: Option<&Path>,
    ) -> Result<(Staged, Installed), String> {
        let (staged, file) = self.stage(name, fetched).await?;
        self.refuse_clashes(&file, replacing).await?;
        Ok((staged, installed(name, source, fetched, &file)))
    }

    /// Load `fetched` as the server would (staged in the temporary folder,
    /// never placed): what it imports.
    ///
    /// # Errors
    ///
    /// It is not a tool toolcage can serve (why).
    pub async fn check(&self, fetched: &Fetched) -> Result<Vec<String>, String> {
        let (_staged, file) = self
            .stage_in(&std::env::temp_dir(), "checked", fetched)
            .await?;
        Ok(file.component.imports.clone())
    }

    /// Write `fetched` into a private staging folder in the tools folder
    /// and load it as the server would.
    async fn stage(&self, name: &str, fetched: &Fetched) -> Result<(Staged, LoadedFile), String> {
        std::fs::create_dir_all(&self.tools_dir)
            .map_err(|error| format!("cannot create `{}`: {error}", self.tools_dir.display()))?;
        self.stage_in(&self.tools_dir, name, fetched).await
    }

    /// Write `fetched` as `NAME.wasm` into a new private folder in `base`
    /// and load it as the server would.
    async fn stage_in(
        &self,
        base: &Path,
        name: &str,
        fetched: &Fetched,
    ) -> Result<(Staged, LoadedFile), String> {
        use std::os::unix::fs::DirBuilderExt as _;
        let dir = base.join(format!(
            "{STAGING_PREFIX}{}-{}",
            std::process::id(),
            lock::unique()
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|error| format!("cannot create `{}`: {error}", dir.display()))?;
        let staged = Staged {
            path: dir.join(format!("{name}.wasm")),
            dir,
        };
        lock::write_atomically(&staged.path, &fetched.bytes)?;
        let mut rules = LoadRules::from_config(&self.config);
        // The lock is what this install is about to write.
        rules.locked = Ok(Default::default());
        let loaded = load_file(&self.sandbox, &staged.path, None, &rules).await;
        match loaded.map(|load| load.result) {
            Some(Ok(file)) => Ok((staged, file)),
            Some(Err(reason)) => Err(format!("it is not a tool toolcage can serve: {reason}")),
            None => Err("the staged file vanished".into()),
        }
    }

    /// Refuse `file` if a tool it provides is served by another file of the
    /// folder (`replacing` is the file it replaces, if any).
    async fn refuse_clashes(
        &self,
        file: &LoadedFile,
        replacing: Option<&Path>,
    ) -> Result<(), String> {
        let catalog = load_dir(&self.sandbox, &self.tools_dir, &self.config, None).await;
        for spec in &file.tools {
            let tool = &spec.descriptor.name;
            if let Some(existing) = catalog.tools.get(tool)
                && Some(existing.component.path.as_path()) != replacing
            {
                return Err(format!(
                    "it provides the tool `{tool}`, which `{}` already provides; remove one of \
                     them first",
                    existing.component.path.display()
                ));
            }
        }
        Ok(())
    }
}

/// Why replacing the version `old` locks with one whose signature check
/// found `new` loses the signature the lock records, if it does: the lock
/// says a key signed the installed version, and the new one is not signed
/// by that key (unsigned, unchecked, invalid, or another key).
pub fn signature_change(old: &Entry, new: &Signature) -> Option<String> {
    let key = old.signed_by.as_deref()?;
    match new {
        Signature::Verified { key: signer, .. } if signer == key => None,
        Signature::Verified { key: signer, .. } => Some(format!(
            "the installed version was signed by key {key}, and the new one by another key \
             ({signer})"
        )),
        Signature::Unchecked => Some(format!(
            "the installed version was signed by key {key}, and the new one's signature was not \
             checked (no key configured: pass --key with the public key {key} is, or set it \
             in `keys`)"
        )),
        other => Some(format!(
            "the installed version was signed by key {key}, and the new one's signature is: \
             {other}"
        )),
    }
}

/// Whether a tool's fetch requires a signature: its `[[sources]]` entry's
/// rule when it has one, else `configured` (`[install] require_signature`
/// or the flag); `--require-signature` (`by_flag`) holds in every case.
fn signature_required(entry: Option<bool>, configured: bool, by_flag: bool) -> bool {
    by_flag || entry.unwrap_or(configured)
}

/// Remove the staging folders in `tools_dir` that no live process owns:
/// named `.toolcage-staging-PID-N`, a real folder (not a link), and `PID`
/// neither this process nor one `alive` says runs. Called with the lock
/// held: staging happens only under it, so such a folder's install can
/// never finish. Failures are logged and left (it is tidying, not the
/// install); a reused PID leaves a stale folder for a later run, never
/// removes a live one.
fn sweep_staging(tools_dir: &Path, alive: impl Fn(u32) -> bool) {
    let Ok(entries) = std::fs::read_dir(tools_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(staging_pid) else {
            continue;
        };
        let is_folder = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_folder || pid == std::process::id() || alive(pid) {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                tracing::info!(folder = %path.display(), "removed an interrupted install's staging folder")
            }
            Err(error) => {
                tracing::warn!(folder = %path.display(), %error, "cannot remove an interrupted install's staging folder")
            }
        }
    }
}

/// The PID in a staging folder's name `.toolcage-staging-PID-N`.
fn staging_pid(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix(STAGING_PREFIX)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(n) {
        return None;
    }
    pid.parse().ok().filter(|pid| *pid > 0)
}

/// Whether a process `pid` runs on this machine (signal 0: no such
/// process is the only "no"; one of another user's is alive).
fn process_is_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return true;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// Whether anything is at `path` (a dangling link included).
fn present(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

fn installed(name: &str, source: &str, fetched: &Fetched, file: &LoadedFile) -> Installed {
    Installed {
        name: name.to_owned(),
        source: source.to_owned(),
        digest: fetched.digest,
        manifest: fetched.manifest,
        signature: fetched.signature.clone(),
        size: fetched.bytes.len(),
        tools: file
            .tools
            .iter()
            .map(|spec| spec.descriptor.name.clone())
            .collect(),
        imports: file.component.imports.clone(),
    }
}

fn entry_of(installed: &Installed) -> Entry {
    Entry {
        source: installed.source.clone(),
        digest: installed.digest.to_string(),
        manifest: installed.manifest.map(|m| m.to_string()),
        signed_by: match &installed.signature {
            Signature::Verified { key, .. } => Some(key.clone()),
            _ => None,
        },
        imports: installed.imports.clone(),
        installed: Some(jiff::Timestamp::now().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed_by(key: Option<&str>) -> Entry {
        Entry {
            source: "oci://registry.example/tools/greet:1".into(),
            digest: Digest::of(b"old").to_string(),
            manifest: None,
            imports: Vec::new(),
            signed_by: key.map(str::to_owned),
            installed: None,
        }
    }

    fn verified(key: &str) -> Signature {
        Signature::Verified {
            key: key.into(),
            elsewhere: None,
        }
    }

    #[test]
    fn an_update_keeps_the_signature_the_lock_records() {
        let unsigned = signed_by(None);
        let acme = signed_by(Some("sha256:acme"));
        // (installed, new, refused because of)
        let cases = [
            (&unsigned, Signature::Unsigned, None),
            (&unsigned, verified("sha256:other"), None),
            (&unsigned, Signature::NotApplicable, None),
            (&acme, verified("sha256:acme"), None),
            (
                &acme,
                verified("sha256:other"),
                Some("by another key (sha256:other)"),
            ),
            (&acme, Signature::Unsigned, Some("signature is: UNSIGNED")),
            (&acme, Signature::Unchecked, Some("was not checked")),
            (
                &acme,
                Signature::Invalid("no key verifies it".into()),
                Some("INVALID: no key verifies it"),
            ),
            (&acme, Signature::NotApplicable, Some("not an OCI artifact")),
        ];
        for (old, new, expect) in cases {
            let why = signature_change(old, &new);
            match (expect, &why) {
                (None, None) => {}
                (Some(part), Some(why)) => {
                    assert!(why.contains(part), "{new:?}: {why}");
                    assert!(why.contains("signed by key sha256:acme"), "{why}");
                }
                _ => panic!("{old:?} -> {new:?}: {why:?}"),
            }
        }
    }

    #[test]
    fn staging_folders_of_dead_processes_are_swept_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("toolcage-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let own = format!("{STAGING_PREFIX}{}-0", std::process::id());
        let kept = [
            own.as_str(),
            ".toolcage-staging-7-1",      // alive (as `alive` says)
            ".toolcage-staging-x-1",      // not a PID
            ".toolcage-staging-99",       // no counter
            ".toolcage-staging-99-1-tmp", // not the pattern
            "toolcage-staging-99-1",      // not hidden: not ours
            ".toolcage-staging-0-1",      // PID 0
        ];
        for name in kept.iter().chain(&[".toolcage-staging-99-3"]) {
            std::fs::create_dir(dir.join(name)).expect("folder");
            std::fs::write(dir.join(name).join("x.wasm"), b"x").expect("file");
        }
        // A file and a link with a stale name are not folders to remove.
        std::fs::write(dir.join(".toolcage-staging-98-1"), b"file").expect("file");
        std::os::unix::fs::symlink(dir.join(&own), dir.join(".toolcage-staging-97-1"))
            .expect("link");
        sweep_staging(&dir, |pid| pid == 7);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expect: Vec<String> = kept.iter().map(|s| (*s).to_owned()).collect();
        expect.extend([
            ".toolcage-staging-97-1".into(),
            ".toolcage-staging-98-1".into(),
        ]);
        expect.sort();
        assert_eq!(left, expect);
        assert!(dir.join(&own).join("x.wasm").exists());
        std::fs::remove_dir_all(&dir).expect("cleaned");
    }

    #[test]
    fn only_a_missing_process_is_dead() {
        assert!(process_is_alive(std::process::id()));
        assert!(process_is_alive(1)); // init: another user's, still alive
        // Beyond the kernel's PID range: no such process.
        assert!(!process_is_alive(i32::MAX as u32));
        // Not a PID at all: treated as alive, so nothing is removed.
        assert!(process_is_alive(u32::MAX));
    }

    #[test]
    fn a_sources_entry_decides_its_signature_rule_and_the_flag_holds_always() {
        // (entry's rule, configured, flag) -> required
        let cases = [
            (None, false, false, false),
            (None, true, false, true),
            (Some(true), false, false, true),
            (Some(false), true, false, false),
            (Some(false), true, true, true),
            (Some(false), false, true, true),
        ];
        for (entry, configured, flag, expect) in cases {
            assert_eq!(
                signature_required(entry, configured, flag),
                expect,
                "{entry:?} {configured} {flag}"
            );
        }
    }
}
