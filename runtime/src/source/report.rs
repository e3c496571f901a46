//! What an installed component could reach, in the operator's words: its
//! imports grouped by the capability they are, each with the config that
//! would grant it. Shown before `toolcage add` writes a file and, as a
//! difference, before `toolcage update` replaces one. Nothing here grants
//! anything.

use std::fmt::Write as _;

use super::install::Installed;

/// A capability a component may ask for, and how an operator grants it.
struct Capability {
    /// Import prefixes (unversioned) that are this capability.
    prefixes: &'static [&'static str],
    /// What it is.
    what: &'static str,
    /// How it is granted (`{tool}` is replaced by a tool's name).
    grant: &'static str,
}

const CAPABILITIES: &[Capability] = &[
    Capability {
        prefixes: &["wasi:filesystem/"],
        what: "files",
        grant: "`roots = [{ path = \"/path\", mode = \"ro\" }]` under [tools.{tool}] (or \
                `--root /path`)",
    },
    Capability {
        prefixes: &["wasi:http/outgoing-handler"],
        what: "network (outgoing HTTP)",
        grant: "`network = [\"api.example.com\"]` under [tools.{tool}]",
    },
    Capability {
        prefixes: &["wasi:sockets/"],
        what: "raw sockets",
        grant: "never granted: toolcage denies raw sockets and name lookup to every tool",
    },
    Capability {
        prefixes: &["wasi:cli/environment"],
        what: "environment variables",
        grant: "`env = { NAME = \"value\" }` under [tools.{tool}]",
    },
    Capability {
        prefixes: &["wasi:config/store"],
        what: "configuration values",
        grant: "`config = { key = \"value\" }` under [tools.{tool}]",
    },
    Capability {
        prefixes: &["toolcage:tool/host"],
        what: "the client (log, progress, asking the user; sampling a model)",
        grant: "logs, progress and questions need nothing; sampling needs `allow_sampling = true` \
                under [tools.{tool}]",
    },
];

/// The capability an import is, if it is one worth showing (streams,
/// clocks and random numbers are not).
fn capability_of(import: &str) -> Option<&'static Capability> {
    CAPABILITIES
        .iter()
        .find(|c| c.prefixes.iter().any(|p| import.starts_with(p)))
}

/// The lines of the capability report for `imports`, for a component
/// providing `tools`.
pub fn capability_lines(imports: &[String], tools: &[String]) -> Vec<String> {
    let tool = match tools {
        [one] => one.as_str(),
        _ => "TOOL",
    };
    let mut lines = Vec::new();
    for capability in CAPABILITIES {
        let names: Vec<&str> = imports
            .iter()
            .filter(|i| capability_of(i).is_some_and(|c| std::ptr::eq(c, capability)))
            .map(String::as_str)
            .collect();
        if names.is_empty() {
            continue;
        }
        lines.push(format!(
            "{} ({}): {}",
            capability.what,
            names.join(", "),
            capability.grant.replace("{tool}", tool)
        ));
    }
    lines
}

/// The report `toolcage add` prints before writing.
pub fn install_report(installed: &Installed) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "source     {}", installed.source);
    if let Some(manifest) = &installed.manifest {
        let _ = writeln!(out, "manifest   {manifest}");
    }
    let _ = writeln!(
        out,
        "component  {} ({} KiB)",
        installed.digest,
        installed.size.div_ceil(1024)
    );
    let _ = writeln!(out, "signature  {}", installed.signature);
    let _ = writeln!(out, "tools      {}", installed.tools.join(", "));
    let lines = capability_lines(&installed.imports, &installed.tools);
    if lines.is_empty() {
        let _ = writeln!(
            out,
            "imports    nothing beyond clocks, random numbers and its own output: it needs no grant"
        );
    } else {
        let _ = writeln!(
            out,
            "may use, only once the operator grants it (nothing is granted by installing):"
        );
        for line in lines {
            let _ = writeln!(out, "  - {line}");
        }
        if installed.tools.len() > 1 {
            let _ = writeln!(out, "  (TOOL: each of its tools that needs it)");
        }
    }
    out
}

/// The report `toolcage update` prints before replacing a file.
pub fn update_report(old_digest: &str, installed: &Installed, added: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", installed.name, installed.source);
    let _ = writeln!(out, "  old        {old_digest}");
    let _ = writeln!(out, "  new        {}", installed.digest);
    if let Some(manifest) = &installed.manifest {
        let _ = writeln!(out, "  manifest   {manifest}");
    }
    let _ = writeln!(out, "  signature  {}", installed.signature);
    let _ = writeln!(out, "  tools      {}", installed.tools.join(", "));
    if added.is_empty() {
        let _ = writeln!(out, "  imports    nothing new");
    } else {
        let _ = writeln!(out, "  NEW IMPORTS: {}", added.join(", "));
        for line in capability_lines(added, &installed.tools) {
            let _ = writeln!(out, "    - {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_become_the_grants_they_would_need() {
        let imports: Vec<String> = [
            "wasi:io/streams",
            "wasi:filesystem/types",
            "wasi:filesystem/preopens",
            "wasi:http/outgoing-handler",
            "wasi:http/types",
            "wasi:sockets/tcp",
            "wasi:cli/environment",
            "toolcage:tool/host",
        ]
        .map(String::from)
        .to_vec();
        let lines = capability_lines(&imports, &["fetch".to_owned()]);
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(
            lines[0].starts_with("files (wasi:filesystem/types, wasi:filesystem/preopens): `roots")
        );
        assert!(lines[0].contains("[tools.fetch]"));
        assert!(lines[1].contains("network") && lines[1].contains("`network = ["));
        assert!(lines[2].contains("never granted"));
        assert!(capability_lines(&["wasi:clocks/wall-clock".into()], &[]).is_empty());
    }

    #[test]
    fn every_suggested_grant_is_a_config_line_toolcage_accepts() {
        let dir = std::env::temp_dir().join(format!("toolcage-report-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("path")).expect("dir");
        for capability in CAPABILITIES {
            // The first backticked part is the line to put under [tools.x].
            let Some(line) = capability.grant.split('`').nth(1) else {
                continue;
            };
            if !line.contains('=') {
                continue;
            }
            let line = line.replace("/path", &dir.join("path").display().to_string());
            let text = format!("[tools.x]\n{line}\n");
            crate::config::Config::parse(&text, &dir.join("config.toml"))
                .unwrap_or_else(|e| panic!("{line}: {e}"));
        }
        std::fs::remove_dir_all(&dir).expect("cleaned");
    }
}
