//! Where a command's tools, config and cache are: flags over the config
//! file over defaults (the XDG folders).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use toolcage::Options;
use toolcage::config::{Config, Root, expand_tilde};

use crate::args::Common;

/// Flags over the config file over defaults.
pub(crate) fn options(common: &Common) -> anyhow::Result<Options> {
    let config_path = match &common.config {
        // Absolute, so paths in it resolve against its folder whatever the
        // working directory is later.
        Some(path) => Some(std::path::absolute(expand_tilde(path))?),
        None => dirs_config()
            .map(|dir| dir.join("toolcage/config.toml"))
            .filter(|path| path.is_file()),
    };
    let mut config = match &config_path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if config.install.lock_file.is_none() {
        // No config file: the lock goes where the default config would.
        config.install.lock_file =
            dirs_config().map(|dir| dir.join("toolcage").join(toolcage::config::LOCK_FILE_NAME));
    }
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let mut cli_grants = Vec::new();
    for flag in &common.root {
        let grant =
            Root::parse_flag(flag, &cwd).map_err(|e| anyhow::anyhow!("--root {flag}: {e}"))?;
        config.grant_to_all(grant.clone());
        cli_grants.push(grant);
    }
    let tools_dir = match (&common.tools, &config.tools_dir) {
        // Absolute, as the config path: the watcher compares the absolute
        // paths of its events with it, and watches its parent (a relative
        // `--tools tools` has none), so a relative folder never reloaded.
        (Some(dir), _) => std::path::absolute(expand_tilde(dir))?,
        (None, Some(dir)) => dir.clone(),
        (None, None) => data_dir()
            .context("cannot find a home folder for the default tools folder; pass --tools DIR")?
            .join("toolcage/tools"),
    };
    let cache_dir = if common.no_cache {
        None
    } else {
        match (&common.cache_dir, &config.cache_dir) {
            (Some(dir), _) => Some(std::path::absolute(expand_tilde(dir))?),
            (None, Some(dir)) => Some(dir.clone()),
            (None, None) => cache_dir().map(|dir| dir.join("toolcage")),
        }
    };
    Ok(Options {
        tools_dir,
        cache_dir,
        config,
        cli_grants,
        fuel_metering: !common.no_fuel,
        spill: None,
    })
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn xdg(var: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(fallback)))
}

fn dirs_config() -> Option<PathBuf> {
    xdg("XDG_CONFIG_HOME", ".config")
}

fn data_dir() -> Option<PathBuf> {
    xdg("XDG_DATA_HOME", ".local/share")
}

fn cache_dir() -> Option<PathBuf> {
    xdg("XDG_CACHE_HOME", ".cache")
}
